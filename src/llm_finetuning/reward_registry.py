"""Names and argument schemas of the built-in rewards, and resolution of custom `module:function` rewards.

Pure: importing this module loads no reward implementation and no ML library, so `finetune check` and
`finetune gate` can validate reward specs in milliseconds. `build_reward` (used by score, inspect and
launch) imports a built-in lazily and runs a custom one in a confined child (`sandbox.project_code`).
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

# Rewards whose value is computed by code from the completion and the data: a verifiable signal.
VERIFIERS = ("exact_match", "json_schema", "unit_tests", "tool_call")
# The values each built-in scores in, [low, high] (a judge's scale is its rubric's: not listed).
VALUE_RANGES: dict[str, tuple[float, float]] = {"exact_match": (0.0, 1.0), "json_schema": (0.0, 1.0),
                                                "unit_tests": (0.0, 1.0), "tool_call": (0.0, 1.0),
                                                "length_penalty": (-1.0, 0.0)}


def total_range(weighted: list[tuple[str, float]]) -> tuple[float, float] | None:
    """The range of a weighted sum of rewards given as (fn, weight); None when one of them has no known range
    (a custom reward, a judge)."""
    low = high = 0.0
    for fn, weight in weighted:
        if fn not in VALUE_RANGES:
            return None
        a, b = (weight * v for v in VALUE_RANGES[fn])
        low, high = low + min(a, b), high + max(a, b)
    return low, high


# The value of unit_tests' `prepend` that names the row's prompt; any other value names a data column.
PREPEND_PROMPT = "prompt"

# The types a JSON Schema may name (an argument schema of tool_call's expected calls).
JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")

# name -> (implementation "module:Class", JSON Schema of `args`). The schema is a JsonObject, and the brief reads
# it as one; its values are left untyped here because this module, the bottom of the package, may not import
# llm_finetuning.jsonvalue (tests/structure/test_layers.py).
BUILTINS: dict[str, tuple[str, dict[str, Any]]] = {
    "exact_match": (
        "llm_finetuning.rewards.exact_match:ExactMatch",
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "answer_field": {"description": "Column holding the reference answer (a worked solution is reduced to its #### or boxed answer).", "type": "string", "minLength": 1, "default": "answer"},
                "extract": {"description": "Where the answer is read: auto (last boxed/fbox outside think blocks, else ####, else the last number), boxed, hash, last_number, or regex:<pattern> (last match; group 1 if the pattern has groups).",
                    "type": "string",
                    "pattern": r"^(auto|boxed|hash|last_number|regex:.+)$",
                    "default": "auto",
                },
                "math_verify": {"description": "Compare through math-verify in a worker process; false compares normalised strings and exact fractions only.", "type": "boolean", "default": True},
                "timeout_s": {"description": "Wall-clock limit of one math-verify comparison; past it the worker is killed and the row scores 0.", "type": "number", "exclusiveMinimum": 0, "maximum": 600, "default": 5.0},
            },
        },
    ),
    "json_schema": (
        "llm_finetuning.rewards.json_schema:JsonSchema",
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "schema": {"description": "The JSON Schema, inline.", "type": "object"},
                "schema_field": {"description": "Column holding each row's JSON Schema (a mapping or a JSON string).", "type": "string", "minLength": 1},
                "mode": {"description": "strict: 1 or 0. partial: 0.5 x the share of top-level properties that are right when the object is invalid.", "enum": ["strict", "partial"], "default": "strict"},
                "fenced": {"description": "Read the JSON from the last fenced code block when there is one.", "type": "boolean", "default": True},
            },
            "oneOf": [{"required": ["schema"]}, {"required": ["schema_field"]}],
        },
    ),
    "unit_tests": (
        "llm_finetuning.rewards.unit_tests:UnitTests",
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "tests_field": {"description": "Column holding each row's tests: a list of strings (or one string), each run after the program in its namespace, e.g. an assert. The default when io_field is not given: `tests`.", "type": "string", "minLength": 1},
                "io_field": {"description": "Column holding each row's `{stdin, stdout}` cases instead: the program runs as a script once per case, and its stdout is compared.", "type": "string", "minLength": 1},
                "prepend": {"description": "What is joined before the completion's code, as it is, to make the program: `prompt` (the row's prompt; a chat prompt gives its last message) or the name of a column holding code; null joins nothing. Set `prompt` for continuation-style data such as HumanEval and MBPP, where the prompt holds the signature and docstring.", "type": ["string", "null"], "minLength": 1, "default": None},
                "timeout_s": {"description": "Wall-clock limit of one completion: its program and all its tests or cases together.", "type": "number", "exclusiveMinimum": 0, "maximum": 600, "default": 10.0},
                "memory_mb": {"description": "Address space of each sandboxed process, the interpreter's ~20 MB included.", "type": "integer", "minimum": 16, "maximum": 65536, "default": 512},
            },
            "not": {"required": ["tests_field", "io_field"]},
        },
    ),
    "tool_call": (
        "llm_finetuning.rewards.tool_call:ToolCall",
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "expected": {"description": "The expected calls, inline: tool names, or {name, arguments: JSON Schema of the arguments}.", "type": "array", "minItems": 1,
                             "items": {"anyOf": [{"type": "string", "minLength": 1},
                                                 {"type": "object", "required": ["name"], "additionalProperties": False,
                                                  "properties": {"name": {"type": "string", "minLength": 1}, "arguments": {"type": "object"}}}]}},
                "expected_field": {"description": "Column holding each row's expected calls (that list, or a JSON string of it).", "type": "string", "minLength": 1},
                "extra_calls": {"description": "penalise: the value is matched / the larger of expected and made calls, so an extra or repeated call lowers it. ignore: matched / expected, calls beyond the expected ones cost nothing (a policy can learn to call everything).", "enum": ["penalise", "ignore"], "default": "penalise"},
                "strings": {"description": "How strings in an argument schema's enum and const compare: exact, or normalised as the Berkeley Function Calling Leaderboard does (case, spaces and , . / - _ * ^ ignored, ' read as \").", "enum": ["exact", "normalised"], "default": "exact"},
                "integers": {"description": "json_schema: 5.0 is an integer, as JSON Schema says. strict: only a number written without a fraction is (5.0 fails type integer).", "enum": ["json_schema", "strict"], "default": "json_schema"},
                "empty_is_omitted": {"description": "An optional argument (not in required) whose schema admits a string, given as \"\", counts as left out (BFCL's marker of an optional argument).", "type": "boolean", "default": False},
            },
            "oneOf": [{"required": ["expected"]}, {"required": ["expected_field"]}],
        },
    ),
    "length_penalty": (
        "llm_finetuning.rewards.length_penalty:LengthPenalty",
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "max_length": {"description": "Length at which the penalty reaches -1; null takes grpo.max_completion_length.", "type": ["integer", "null"], "minimum": 1, "default": None},
                "buffer": {"description": "Length before max_length over which the penalty falls from 0 to -1; null takes a quarter of max_length.", "type": ["integer", "null"], "minimum": 1, "default": None},
                "unit": {"description": "tokens (the completion's token ids, or the policy's tokenizer) or chars; tokens fall back to chars when neither is available.", "enum": ["tokens", "chars"], "default": "tokens"},
            },
        },
    ),
    "judge": (
        "llm_finetuning.rewards.judge:Judge",
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["endpoint", "model", "rubric"],
            "properties": {
                "endpoint": {"description": "Base URL of an OpenAI-compatible API (http://host:8000/v1) or the full chat completions URL.", "type": "string", "pattern": "^https?://"},
                "model": {"description": "Model name sent to the endpoint.", "type": "string", "minLength": 1},
                "rubric": {"description": "What the judge scores against, in plain words.", "type": "string", "minLength": 1},
                "min_agreement": {"description": "Agreement with human labels the calibration record must show before the gate accepts this judge.", "type": "number", "minimum": 0, "maximum": 1, "default": 0.8},
                "timeout_s": {"description": "Wall-clock limit of one request.", "type": "number", "exclusiveMinimum": 0, "maximum": 600, "default": 30.0},
                "max_retries": {"description": "Retries after a failed request or a malformed answer (exponential backoff with jitter).", "type": "integer", "minimum": 0, "maximum": 20, "default": 3},
                "concurrency": {"description": "Requests in flight at once.", "type": "integer", "minimum": 1, "maximum": 256, "default": 8},
                "api_key_env": {"description": "Environment variable holding the API key, sent as a Bearer token; null sends none.", "type": ["string", "null"], "default": None},
                "backoff_s": {"description": "First retry delay; doubles on each retry (at most 30 s).", "type": "number", "minimum": 0, "maximum": 60, "default": 1.0},
                "max_score": {"description": "The judge answers SCORE: 0..max_score; the reward is the score divided by max_score.", "type": "integer", "minimum": 1, "maximum": 100, "default": 10},
                "temperature": {"description": "Sampling temperature of the judge.", "type": "number", "minimum": 0, "maximum": 2, "default": 0.0},
                "max_tokens": {"description": "Token limit of the judge's reply.", "type": "integer", "minimum": 1, "maximum": 32768, "default": 512},
            },
        },
    ),
}


def data_columns(fn: str, args: Mapping[str, object]) -> list[tuple[str, str]]:
    """(argument, column) for every dataset column a built-in reward reads from each row, defaults
    applied; [] for rewards that read none and for custom rewards (their columns are their own)."""
    if fn == "exact_match":
        return [("answer_field", str(args.get("answer_field") or "answer"))]
    if fn == "json_schema":
        return [("schema_field", str(args["schema_field"]))] if args.get("schema_field") else []
    if fn == "tool_call":
        return [("expected_field", str(args["expected_field"]))] if args.get("expected_field") else []
    if fn == "unit_tests":
        tests = [("io_field", str(args["io_field"]))] if args.get("io_field") else \
            [("tests_field", str(args.get("tests_field") or "tests"))]
        prepend = args.get("prepend")
        named = isinstance(prepend, str) and prepend not in ("", PREPEND_PROMPT)
        return tests + ([("prepend", str(prepend))] if named else [])
    return []


def tool_call_schema_problems(expected: object) -> list[tuple[str, str, str]]:
    """(path below the expected list, what is wrong, the fix) for each argument schema of `tool_call`'s
    expected calls that cannot be used: not a JSON Schema of draft 2020-12 (an unknown type, an enum that is
    not a list, a pattern that is not a regular expression, ...). `finetune check` refuses them up front;
    the reward scores a row holding one `None`, with this reason."""
    from jsonschema import Draft202012Validator

    meta = Draft202012Validator(Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)
    out = []
    for i, item in enumerate(expected if isinstance(expected, list) else []):
        if not isinstance(item, dict) or "arguments" not in item:
            continue
        schema, where = item["arguments"], f"[{i}].arguments"
        if not isinstance(schema, (dict, bool)):
            out.append((where, f"is {type(schema).__name__}, not a JSON Schema object",
                        "write the arguments' JSON Schema as a mapping, e.g. {type: object, properties: {...}}"))
            continue
        try:
            errors = sorted(meta.iter_errors(schema), key=lambda e: [str(p) for p in e.absolute_path])
        except RecursionError:
            out.append((where, "is nested too deeply to check", "flatten the schema"))
            continue
        for err in errors:
            path = where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
            is_type = [str(p) for p in err.absolute_path][-1:] == ["type"]
            message = f"found {err.instance!r}, which is not a JSON Schema type" if is_type else err.message
            out.append((path, message, _schema_fix(str(err.validator), err.absolute_path, err.instance)))
    return out


def _schema_fix(keyword: str, path: Iterable[str | int], found: object) -> str:
    parts = [str(p) for p in path]
    if "type" in parts[-1:]:
        close = difflib.get_close_matches(str(found), JSON_TYPES, n=1) if isinstance(found, str) else []
        return (f"did you mean `{close[0]}`? " if close else "") + \
            f"use a JSON Schema type: {', '.join(JSON_TYPES)} (or a list of them)"
    if keyword == "format":
        return "write a valid regular expression (Python's re syntax)"
    if parts[-1:] in (["enum"], ["required"]):
        return f"write {parts[-1]} as a list, e.g. {parts[-1]}: [value]"
    return "write it as JSON Schema draft 2020-12 says (https://json-schema.org/draft/2020-12/json-schema-validation)"


def arg_defaults(fn: str) -> dict[str, Any]:
    """The default of every argument of built-in `fn` that has one: the one source of reward defaults
    (the reward classes' keyword defaults, through `arg_default`, and `build_reward` both read it). Each is
    a JSON value (`argument_defaults`); the judge calibration record still reads this mapping's values
    without narrowing them."""
    return dict(argument_defaults(fn))


def argument_defaults(fn: str) -> dict[str, object]:
    """`arg_defaults` as the JSON values the argument schema holds."""
    props = BUILTINS[fn][1].get("properties", {})
    if not isinstance(props, dict):
        return {}
    return {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}


Default = TypeVar("Default", str, int, float, bool)


def arg_default(fn: str, arg: str, kind: type[Default]) -> Default:
    """The default of argument `arg` of built-in `fn`, which the schema declares of type `kind`: a reward
    class's keyword default, read from the one source of them."""
    value = argument_defaults(fn)[arg]
    if not isinstance(value, kind):
        raise TypeError(f"the default of {fn}.args.{arg} is {value!r}, not a {kind.__name__}")
    return value


def optional_arg_default(fn: str, arg: str, kind: type[Default]) -> Default | None:
    """`arg_default` for an argument whose default may be null."""
    return None if argument_defaults(fn)[arg] is None else arg_default(fn, arg, kind)


def reward_name(fn: str, occurrence: int = 1) -> str:
    """The metric name of the `occurrence`-th reward `fn` of a brief (TRL's `__name__`, logged as
    `rewards/<name>/mean`): `fn` for the first (0 counts as 1), then `fn#2`, `fn#3`."""
    return fn if occurrence <= 1 else f"{fn}#{occurrence}"


def reward_occurrences(specs: Sequence[Mapping[str, object]]) -> list[int]:
    """For each reward spec: how many specs up to and including it name the same `fn` (1, 2, ...)."""
    seen: dict[str, int] = {}
    out = []
    for spec in specs:
        fn = str(spec.get("fn"))
        seen[fn] = seen.get(fn, 0) + 1
        out.append(seen[fn])
    return out


def reward_names(specs: Sequence[Mapping[str, object]]) -> list[str]:
    """The metric name of each reward spec, in order: its `fn`, suffixed `#2`, `#3` where a name repeats."""
    return [reward_name(str(spec.get("fn")), k) for spec, k in zip(specs, reward_occurrences(specs), strict=True)]


def name_occurrence(name: str) -> int:
    """The occurrence a metric name stands for: 1 for `fn`, 2 for `fn#2` (the inverse of `reward_name`)."""
    return int(name.rpartition("#")[2]) if "#" in name else 1


def builtin_names() -> list[str]:
    return sorted(BUILTINS)


def is_custom(fn: str) -> bool:
    return ":" in fn


@dataclass(frozen=True)
class CustomLocation:
    module: str
    function: str
    file: Path | None


def locate_custom(fn: str, search_dir: Path) -> tuple[CustomLocation | None, str]:
    """Find `module:function` without importing it. Returns (location, problem)."""
    module, _, function = fn.partition(":")
    if not module or not function or not all(p.isidentifier() for p in module.split(".")) or not function.isidentifier():
        return None, f"'{fn}' is not of the form module:function"
    candidate = search_dir / Path(*module.split(".")).with_suffix(".py")
    file: Path | None = candidate if candidate.is_file() else None
    if file is None:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            return None, f"module '{module}' was not found next to the brief nor on the Python path"
        file = Path(spec.origin)
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        return None, f"module '{module}' ({file}) cannot be parsed: {exc}"
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.ImportFrom, ast.Import)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    if function not in names:
        return None, f"module '{module}' ({file}) defines no top-level '{function}'"
    return CustomLocation(module, function, file), ""
