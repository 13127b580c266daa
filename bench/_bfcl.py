"""The Berkeley Function Calling Leaderboard (PyPI `bfcl-eval` 2026.3.23) against the `tool_call` reward:
its data, its own AST checker, and candidate replies of 27 families built from each entry's possible
answer. Shared by bench/bfcl_agreement.py and tests/rewards/test_tool_call_bfcl.py.

bfcl-eval is installed without its dependencies (`pip install --no-deps bfcl-eval==2026.3.23`, what
.ci/run does): its checker module imports BFCL's table of models, which imports every model vendor's
SDK, only to read one flag (`underscore_to_dot`, whether a model's function names had their dots
replaced). When that table cannot be imported, `checker()` loads the checker with a table holding the
one model it names, with that flag False, as BFCL's own entry for Qwen3-8B in function-calling mode has
it. The checker's code is BFCL's, unchanged.
"""

from __future__ import annotations

import copy
import importlib.resources
import json
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple",
              "live_parallel", "live_parallel_multiple")
MODEL = "Qwen/Qwen3-8B-FC"  # BFCL's model entry whose flags the checker reads (underscore_to_dot False)
FAMILIES = ("canonical", "each_value", "reordered_args", "optional_omitted", "optional_given",
            "optional_empty", "wrong_value", "wrong_type", "null_value", "missing_arg", "extra_arg",
            "undocumented_answer_arg", "wrong_name", "other_function", "no_call", "missing_call",
            "duplicated_call", "extra_call", "reordered_calls", "case_swapped", "case_in_list",
            "punctuation", "spacing", "quote_swapped", "int_as_float", "int_in_list_as_float",
            "float_as_int")

Calls = list[tuple[str, dict[str, Any]]]


@dataclass(frozen=True)
class Entry:
    category: str
    id: str
    functions: list[dict[str, Any]]
    answer: list[dict[str, Any]]  # BFCL's possible answer: one {name: {argument: [acceptable values]}} per call


@dataclass(frozen=True)
class Candidate:
    entry: Entry
    family: str
    calls: Calls


def entries(categories: tuple[str, ...] = CATEGORIES) -> list[Entry]:
    """Every entry of `categories` that has a possible answer, in BFCL's order."""
    data = importlib.resources.files("bfcl_eval") / "data"
    out = []
    for category in categories:
        answers = {a["id"]: a["ground_truth"] for a in _lines(data / "possible_answer" / f"BFCL_v4_{category}.json")}
        for q in _lines(data / f"BFCL_v4_{category}.json"):
            if q["id"] in answers:
                out.append(Entry(category, q["id"], q["function"], answers[q["id"]]))
    return out


def _lines(path: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def checker() -> Callable[[Entry, Calls], bool]:
    """BFCL's `ast_checker`: whether it finds `calls` valid for the entry."""
    try:
        import bfcl_eval.constants.model_config  # noqa: F401 - the whole table, where its SDKs are installed
    except ImportError:
        table = types.ModuleType("bfcl_eval.constants.model_config")
        table.MODEL_CONFIG_MAPPING = {MODEL: types.SimpleNamespace(underscore_to_dot=False)}  # type: ignore[attr-defined]
        sys.modules["bfcl_eval.constants.model_config"] = table
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    def valid(entry: Entry, calls: Calls) -> bool:
        output = [{name: args} for name, args in calls]
        try:
            return bool(ast_checker(entry.functions, output, entry.answer, Language.PYTHON, entry.category,
                                    MODEL.replace("/", "_"))["valid"])
        except Exception:  # noqa: BLE001 - BFCL's checker raising on a candidate counts as its "invalid"
            return False
    return valid


def decoder() -> Callable[[str], list[dict[str, Any]]] | None:
    """BFCL's decoding of `<tool_call>` text (its Qwen function-calling handler), or None where the
    handler's imports (openai, overrides, tenacity, filelock, tree_sitter) are not installed."""
    try:
        from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler
    except ImportError:
        return None
    handler = object.__new__(QwenFCHandler)  # decode_ast reads no state of the handler

    def decode(text: str) -> list[dict[str, Any]]:
        return list(handler.decode_ast(text, "python", False))
    return decode


def as_text(calls: Calls) -> str:
    """A reply as a model with a Qwen/Hermes chat template writes it."""
    return "\n".join(f"<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>" for n, a in calls)


def as_messages(calls: Calls) -> list[dict[str, Any]]:
    """The same reply as chat messages, as TRL's `parse_response` returns them."""
    return [{"role": "assistant", "content": "",
             "tool_calls": [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls]}]


# ---- candidate families -------------------------------------------------------------------------------

def _first(values: list[Any]) -> tuple[bool, Any]:
    given = [v for v in values if v != ""]
    return (True, given[0]) if given else (False, None)


def canonical(entry: Entry) -> Calls:
    """Each expected call with every argument at its first acceptable value (arguments with none left out)."""
    calls = []
    for call in entry.answer:
        for name, answers in call.items():
            args = {}
            for p, values in answers.items():
                ok, value = _first(values)
                if ok:
                    args[p] = value
            calls.append((name, args))
    return calls


def _replace(calls: Calls, k: int, args: dict[str, Any], name: str | None = None) -> Calls:
    out = copy.deepcopy(calls)
    out[k] = (name or out[k][0], args)
    return out


def _wrong(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, float):
        return value + 1.5
    if isinstance(value, str):
        return value + "zq"
    if isinstance(value, list):
        return [*value, value[0]] if value else ["zq"]
    if isinstance(value, dict):
        return {**value, "zq_key": "zq"}
    return "zq"


def _retyped(value: Any) -> Any:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return 0


def _documented(entry: Entry, name: str) -> dict[str, Any]:
    for f in entry.functions:
        if f["name"] == name:
            return dict(f.get("parameters", {}).get("properties", {}))
    return {}


def _sample_value(doc: dict[str, Any]) -> Any:
    return {"string": "zq", "integer": 3, "float": 2.5, "boolean": True, "array": ["zq"], "tuple": ["zq"],
            "dict": {"zq": 1}, "any": "zq"}.get(str(doc.get("type")), "zq")


def _string_variants(calls: Calls, make: Callable[[str], str], in_lists: bool = False) -> Iterator[Calls]:
    for k, (_name, args) in enumerate(calls):
        for p, v in args.items():
            if not in_lists and isinstance(v, str) and make(v) != v:
                yield _replace(calls, k, {**args, p: make(v)})
            if in_lists and isinstance(v, list) and any(isinstance(x, str) and make(x) != x for x in v):
                yield _replace(calls, k, {**args, p: [make(x) if isinstance(x, str) else x for x in v]})


def _number_variants(calls: Calls, convert: Callable[[Any], Any], in_lists: bool) -> Iterator[Calls]:
    for k, (_name, args) in enumerate(calls):
        for p, v in args.items():
            if not in_lists and convert(v) is not None:
                yield _replace(calls, k, {**args, p: convert(v)})
            if in_lists and isinstance(v, list) and any(convert(x) is not None for x in v):
                yield _replace(calls, k, {**args, p: [convert(x) if convert(x) is not None else x for x in v]})


def _int_to_float(v: Any) -> float | None:
    return float(v) if isinstance(v, int) and not isinstance(v, bool) else None


def _float_to_int(v: Any) -> int | None:
    return int(v) if isinstance(v, float) and v.is_integer() else None


def family_calls(entry: Entry, family: str) -> Iterator[Calls]:
    """The candidate replies of one family for one entry (none where the family does not apply)."""
    base = canonical(entry)
    answers = [next(iter(c.values())) for c in entry.answer]
    if family == "canonical":
        yield base
    elif family == "each_value":
        for k, (_name, args) in enumerate(base):
            for p, values in answers[k].items():
                for v in [v for v in values if v != ""][1:]:
                    yield _replace(base, k, {**args, p: v})
    elif family == "reordered_args":
        if any(len(args) > 1 for _, args in base):
            yield [(n, dict(reversed(list(a.items())))) for n, a in base]
    elif family in ("optional_omitted", "optional_given", "optional_empty"):
        for k, (name, args) in enumerate(base):
            for p, values in answers[k].items():
                if "" not in values:
                    continue
                if family == "optional_omitted" and p in args:
                    yield _replace(base, k, {q: v for q, v in args.items() if q != p})
                elif family == "optional_given" and p not in args:  # "" alone: the answer leaves it out
                    doc = _documented(entry, name).get(p)
                    yield _replace(base, k, {**args, p: _sample_value(doc or {})})
                elif family == "optional_empty":
                    yield _replace(base, k, {**args, p: ""})
    elif family in ("wrong_value", "wrong_type", "null_value"):
        change = {"wrong_value": _wrong, "wrong_type": _retyped, "null_value": lambda v: None}[family]
        for k, (_name, args) in enumerate(base):
            for p, v in args.items():
                yield _replace(base, k, {**args, p: change(v)})
    elif family == "missing_arg":
        for k, (_name, args) in enumerate(base):
            for p in args:
                if "" not in answers[k].get(p, []):
                    yield _replace(base, k, {q: v for q, v in args.items() if q != p})
    elif family == "extra_arg":
        for k, (_name, args) in enumerate(base):
            yield _replace(base, k, {**args, "zq_unexpected": "zq"})
    elif family == "undocumented_answer_arg":
        for k, (name, args) in enumerate(base):
            for p, doc in _documented(entry, name).items():
                if p not in answers[k]:
                    yield _replace(base, k, {**args, p: _sample_value(doc)})
                    break
    elif family == "wrong_name":
        for k, (name, args) in enumerate(base):
            yield _replace(base, k, args, name + "_v2")
    elif family == "other_function":
        for k, (name, args) in enumerate(base):
            others = [f["name"] for f in entry.functions if f["name"] != name]
            if others:
                yield _replace(base, k, args, others[0])
    elif family == "no_call":
        yield []
    elif family == "missing_call":
        if len(base) > 1:
            for k in range(len(base)):
                yield base[:k] + base[k + 1:]
    elif family == "duplicated_call":
        for k in range(len(base)):
            yield base[: k + 1] + copy.deepcopy(base[k:])
    elif family == "extra_call":
        others = [f["name"] for f in entry.functions if f["name"] not in {n for n, _ in base}]
        extra = (others[0], {}) if others else (base[0][0], {p: _wrong(v) for p, v in base[0][1].items()})
        yield [*copy.deepcopy(base), extra]
    elif family == "reordered_calls":
        if len(base) > 1:
            yield list(reversed(copy.deepcopy(base)))
    elif family == "case_swapped":
        yield from _string_variants(base, str.swapcase)
    elif family == "case_in_list":
        yield from _string_variants(base, str.upper, in_lists=True)
    elif family == "punctuation":
        yield from _string_variants(base, lambda s: s.replace(" ", "_").replace(",", "-") if " " in s or "," in s
                                    else s + ".")
    elif family == "spacing":
        yield from _string_variants(base, lambda s: s.replace(" ", "") if " " in s else " ".join(s))
    elif family == "quote_swapped":
        yield from _string_variants(base, lambda s: s.replace("'", '"') if "'" in s else s.replace('"', "'"))
    elif family in ("int_as_float", "int_in_list_as_float"):
        yield from _number_variants(base, _int_to_float, in_lists=family == "int_in_list_as_float")
    elif family == "float_as_int":
        yield from _number_variants(base, _float_to_int, in_lists=False)
    else:
        raise ValueError(f"unknown family {family!r}")


def candidates(selected: list[Entry], families: tuple[str, ...] = FAMILIES) -> list[Candidate]:
    return [Candidate(e, f, calls) for e in selected for f in families for calls in family_calls(e, f)]
