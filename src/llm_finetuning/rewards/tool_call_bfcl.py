"""Berkeley Function Calling Leaderboard (BFCL) entries as `tool_call` rows: the documented way of writing
one of its possible answers as `expected_calls`.

A BFCL entry lists functions (its own dialect of JSON Schema: `dict`, `float`, `tuple`, `any`) and a
possible answer: for each expected call, every argument's acceptable values, where `""` marks an argument
that may be left out. `expected_calls(functions, ground_truth)` writes each expected call as
`{"name", "arguments": <JSON Schema>}`:

- every answered argument becomes a property whose `enum` lists its acceptable values, typed from the
  function's documentation (`float` -> number, `dict` -> object, `tuple` -> array, `any` -> string);
  arrays also type their items, objects become an object schema per acceptable value (`anyOf` when
  there are several), lists of objects a `prefixItems` schema per acceptable list;
- an argument with `""` among its values is left out of `required` (for an array, `[]` is accepted too,
  as BFCL does); the function's own `required` stays required; every other property is refused
  (`additionalProperties: false`), so is one the function does not document;
- where BFCL's first acceptable value has another type than the documentation says (null, mostly), BFCL
  compares that argument exactly and accepts either type: the schema lists both types and a `pattern`
  that keeps its strings exact under `strings: normalised`.

Score such rows with the reward args in `BFCL_ARGS` (`extra_calls` keeps its default, `penalise`): on all
2,351 entries of the categories BFCL checks by AST, and 27 families of candidate replies, the verdicts
equal those of BFCL's own checker (bench/bfcl_agreement.py; the differences left, and why, are in
docs/rewards.md).

`python -m llm_finetuning.rewards.tool_call_bfcl QUESTIONS.json ANSWERS.json -o rows.jsonl` writes one
row per entry: `id`, `prompt` (the entry's first turn), and `functions` and `expected_calls` as JSON
strings (see `rows`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TypedDict

from llm_finetuning.jsonvalue import JsonObject, JsonValue


class ToolCallArgs(TypedDict):
    """The `tool_call` args that compare as BFCL's checker does."""

    strings: str
    integers: str
    empty_is_omitted: bool


BFCL_ARGS: ToolCallArgs = {"strings": "normalised", "integers": "strict", "empty_is_omitted": True}

_TYPES = {"string": "string", "any": "string", "integer": "integer", "float": "number", "boolean": "boolean",
          "array": "array", "tuple": "array", "dict": "object"}
_PYTHON = {"string": str, "any": str, "integer": int, "float": float, "boolean": bool, "array": list,
           "tuple": list, "dict": dict}


def _json_type(value: JsonValue) -> str:
    if isinstance(value, bool):
        return "boolean"
    return {int: "integer", float: "number", str: "string", list: "array", dict: "object"}.get(type(value), "null")


def _exact(strings: list[str]) -> str:
    return "^(?:" + "|".join(re.escape(s) for s in strings) + ")$"


def _object(value: JsonValue, what: str) -> JsonObject:
    """`value`, a JSON object, or ValueError naming `what` (an entry that is not in BFCL's format)."""
    if not isinstance(value, dict):
        raise ValueError(f"{what} is {type(value).__name__}, not a JSON object")
    return value


def _list(value: JsonValue, what: str) -> list[JsonValue]:
    if not isinstance(value, list):
        raise ValueError(f"{what} is {type(value).__name__}, not a list")
    return value


def _dict_schema(answer: JsonValue) -> JsonObject:
    """One acceptable object: BFCL compares its values without types, `""` marking a key that may be left
    out (or given as "")."""
    values = {k: _list(vals, f"the acceptable values of {k!r}") for k, vals in _object(answer, "an answer").items()}
    return {"type": "object", "additionalProperties": False,
            "properties": {k: {"enum": [v for v in vals if v != ""] + ([""] if "" in vals else [])}
                           for k, vals in values.items()},
            "required": [k for k, vals in values.items() if "" not in vals]}


def _any_of(schemas: list[JsonValue]) -> JsonObject:
    first = schemas[0]
    return first if len(schemas) == 1 and isinstance(first, dict) else {"anyOf": schemas}


def argument_schema(doc: JsonObject | None, values: list[JsonValue], required: bool) -> JsonObject | bool:
    """The JSON Schema of one argument: its documentation `doc`, BFCL's acceptable `values`, and whether
    the function requires it."""
    if doc is None:
        return False  # BFCL refuses an argument its function does not document
    kind = str(doc.get("type"))
    if kind not in _TYPES:
        raise ValueError(f"BFCL type {kind!r} is not one of {', '.join(_TYPES)}")
    given = [v for v in values if v != ""]
    optional = "" in values
    empty: list[JsonValue] = [""] if optional and required else []  # required, yet "" listed: "" is a value then
    if given and type(given[0]) is not _PYTHON[kind]:
        types: list[JsonValue] = [*sorted({_TYPES[kind], _json_type(given[0])})]
        schema: JsonObject = {"type": types, "enum": given + empty}
        strings = [v for v in given + empty if isinstance(v, str)]
        if strings:
            schema["pattern"] = _exact(strings)
        return schema
    base: JsonObject = {"type": _TYPES[kind]}
    if kind in ("array", "tuple"):
        items = doc.get("items", {})
        item_kind = str(_object(items, "an array's items").get("type", "any"))
        # BFCL also takes an item of the type its acceptable list starts with (a list of lists, mostly)
        firsts = {_json_type(answer[0]) for answer in given if isinstance(answer, list) and answer and answer[0] != ""}
        item_types: list[JsonValue] = [*sorted({_TYPES.get(item_kind, "string")} | firsts)]
        base["items"] = {"type": item_types[0] if len(item_types) == 1 else item_types}
        if item_kind == "dict":
            choices: list[JsonValue] = [
                {"prefixItems": [_dict_schema(d) for d in answer], "minItems": len(answer), "maxItems": len(answer)}
                if answer else {"maxItems": 0} for answer in (_list(a, "an acceptable list") for a in given)]
            choices += [{"maxItems": 0}] if optional else []
            return {**base, **_any_of(choices)} if choices else {**base, "enum": []}
        return {**base, "enum": given + ([[]] if optional else [])}
    if kind == "dict":
        objects: list[JsonValue] = [_dict_schema(d) for d in given if isinstance(d, dict)]
        return {**base, **_any_of(objects)} if objects else {**base, "enum": []}
    if not given and kind in ("string", "any"):
        return {**base, "enum": [""]}  # only "" listed: BFCL accepts an empty string, after normalising
    return {**base, "enum": given + empty}


def expected_calls(functions: list[JsonObject], ground_truth: list[JsonObject]) -> list[JsonValue]:
    """An entry's possible answer (`ground_truth`: one `{name: {argument: [acceptable values]}}` per
    expected call) as `tool_call`'s expected calls."""
    docs = {str(f["name"]): f for f in functions}
    out: list[JsonValue] = []
    for call in ground_truth:
        for name, answers in call.items():
            params = _object(docs[name].get("parameters", {}), f"{name}'s parameters")
            documented = _object(params.get("properties", {}), f"{name}'s properties")
            doc_required: list[JsonValue] = list(_list(params.get("required", []), f"{name}'s required"))
            acceptable = {p: _list(vals, f"the acceptable values of {name}.{p}")
                          for p, vals in _object(answers, f"the answer for {name}").items()}
            properties: JsonObject = {
                p: argument_schema(_documented(documented.get(p), f"{name}.{p}"), list(vals), p in doc_required)
                for p, vals in acceptable.items()}
            required = doc_required + [p for p, vals in acceptable.items() if "" not in vals and p not in doc_required]
            out.append({"name": name, "arguments": {"type": "object", "properties": properties,
                                                    "required": required, "additionalProperties": False}})
    return out


def _documented(doc: JsonValue, what: str) -> JsonObject | None:
    return None if doc is None else _object(doc, f"the documentation of {what}")


def _objects(value: JsonValue, what: str) -> list[JsonObject]:
    return [_object(v, what) for v in _list(value, what)]


def _lines(path: Path) -> list[JsonObject]:
    return [_object(json.loads(line), f"a line of {path}")
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def rows(questions: list[JsonObject], answers: list[JsonObject]) -> list[JsonObject]:
    """One `tool_call` row per entry that has a possible answer. `functions` and `expected_calls` are JSON
    strings: they stay exactly as written through any data format, and the reward caches its compiled
    schemas by the string."""
    by_id = {a["id"]: a["ground_truth"] for a in answers}
    return [{"id": q["id"], "prompt": _list(q["question"], "a question")[0], "functions": json.dumps(q["function"]),
             "expected_calls": json.dumps(expected_calls(_objects(q["function"], "a function"),
                                                         _objects(by_id[q["id"]], "a ground truth")))}
            for q in questions if q["id"] in by_id]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write BFCL entries as tool_call rows (JSON Lines).")
    parser.add_argument("questions", type=Path, help="a BFCL data file, e.g. BFCL_v4_simple_python.json")
    parser.add_argument("answers", type=Path, help="its possible_answer file")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    out = rows(_lines(args.questions), _lines(args.answers))
    args.output.write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    print(f"{len(out)} rows -> {args.output}; score them with tool_call args "
          f"{json.dumps({'expected_field': 'expected_calls', **BFCL_ARGS})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
