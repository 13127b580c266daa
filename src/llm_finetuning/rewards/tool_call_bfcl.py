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
from typing import Any

BFCL_ARGS: dict[str, Any] = {"strings": "normalised", "integers": "strict", "empty_is_omitted": True}

_TYPES = {"string": "string", "any": "string", "integer": "integer", "float": "number", "boolean": "boolean",
          "array": "array", "tuple": "array", "dict": "object"}
_PYTHON = {"string": str, "any": str, "integer": int, "float": float, "boolean": bool, "array": list,
           "tuple": list, "dict": dict}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    return {int: "integer", float: "number", str: "string", list: "array", dict: "object"}.get(type(value), "null")


def _exact(strings: list[str]) -> str:
    return "^(?:" + "|".join(re.escape(s) for s in strings) + ")$"


def _dict_schema(answer: dict[str, list[Any]]) -> dict[str, Any]:
    """One acceptable object: BFCL compares its values without types, `""` marking a key that may be left
    out (or given as "")."""
    return {"type": "object", "additionalProperties": False,
            "properties": {k: {"enum": [v for v in vals if v != ""] + ([""] if "" in vals else [])}
                           for k, vals in answer.items()},
            "required": [k for k, vals in answer.items() if "" not in vals]}


def _any_of(schemas: list[dict[str, Any]]) -> dict[str, Any]:
    return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}


def argument_schema(doc: dict[str, Any] | None, values: list[Any], required: bool) -> dict[str, Any] | bool:
    """The JSON Schema of one argument: its documentation `doc`, BFCL's acceptable `values`, and whether
    the function requires it."""
    if doc is None:
        return False  # BFCL refuses an argument its function does not document
    kind = str(doc.get("type"))
    if kind not in _TYPES:
        raise ValueError(f"BFCL type {kind!r} is not one of {', '.join(_TYPES)}")
    given = [v for v in values if v != ""]
    optional = "" in values
    empty = [""] if optional and required else []  # required, yet "" listed: "" is a value then
    if given and type(given[0]) is not _PYTHON[kind]:
        types = sorted({_TYPES[kind], _json_type(given[0])})
        schema: dict[str, Any] = {"type": types, "enum": given + empty}
        strings = [v for v in given + empty if isinstance(v, str)]
        if strings:
            schema["pattern"] = _exact(strings)
        return schema
    base: dict[str, Any] = {"type": _TYPES[kind]}
    if kind in ("array", "tuple"):
        item_kind = str(doc.get("items", {}).get("type", "any"))
        # BFCL also takes an item of the type its acceptable list starts with (a list of lists, mostly)
        firsts = {_json_type(answer[0]) for answer in given if isinstance(answer, list) and answer and answer[0] != ""}
        item_types = sorted({_TYPES.get(item_kind, "string")} | firsts)
        base["items"] = {"type": item_types[0] if len(item_types) == 1 else item_types}
        if item_kind == "dict":
            choices = [{"prefixItems": [_dict_schema(d) for d in answer], "minItems": len(answer),
                        "maxItems": len(answer)} if answer else {"maxItems": 0} for answer in given]
            choices += [{"maxItems": 0}] if optional else []
            return {**base, **_any_of(choices)} if choices else {**base, "enum": []}
        return {**base, "enum": given + ([[]] if optional else [])}
    if kind == "dict":
        choices = [_dict_schema(d) for d in given if isinstance(d, dict)]
        return {**base, **_any_of(choices)} if choices else {**base, "enum": []}
    if not given and kind in ("string", "any"):
        return {**base, "enum": [""]}  # only "" listed: BFCL accepts an empty string, after normalising
    return {**base, "enum": given + empty}


def expected_calls(functions: list[dict[str, Any]], ground_truth: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An entry's possible answer (`ground_truth`: one `{name: {argument: [acceptable values]}}` per
    expected call) as `tool_call`'s expected calls."""
    docs = {f["name"]: f for f in functions}
    out = []
    for call in ground_truth:
        for name, answers in call.items():
            params = docs[name].get("parameters", {})
            documented, doc_required = params.get("properties", {}), list(params.get("required", []))
            properties = {p: argument_schema(documented.get(p), list(vals), p in doc_required)
                          for p, vals in answers.items()}
            required = doc_required + [p for p, vals in answers.items() if "" not in vals and p not in doc_required]
            out.append({"name": name, "arguments": {"type": "object", "properties": properties,
                                                    "required": required, "additionalProperties": False}})
    return out


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def rows(questions: list[dict[str, Any]], answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One `tool_call` row per entry that has a possible answer. `functions` and `expected_calls` are JSON
    strings: they stay exactly as written through any data format, and the reward caches its compiled
    schemas by the string."""
    by_id = {a["id"]: a["ground_truth"] for a in answers}
    return [{"id": q["id"], "prompt": q["question"][0], "functions": json.dumps(q["function"]),
             "expected_calls": json.dumps(expected_calls(q["function"], by_id[q["id"]]))}
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
