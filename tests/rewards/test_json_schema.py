"""json_schema on a table of tricky cases: strict JSON, schema validation with formats, partial credit."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_finetuning.rewards.json_schema import JsonSchema, StrictJSONError, parse_strict

PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
          "properties": {"name": {"type": "string", "minLength": 1}, "age": {"type": "integer", "minimum": 0}}}
CONTACT = {"type": "object", "required": ["email", "born"],
           "properties": {"email": {"type": "string", "format": "email"}, "born": {"type": "string", "format": "date"}}}

# (id, schema, completion, expected strict, expected partial)
CASES: list[tuple[str, dict[str, Any], Any, float, float]] = [
    ("valid object", PERSON, '{"name": "Ada", "age": 36}', 1.0, 1.0),
    ("valid with surrounding whitespace", PERSON, '\n  {"name": "Ada", "age": 36}\n', 1.0, 1.0),
    ("valid in a json fence", PERSON, 'Here:\n```json\n{"name": "Ada", "age": 36}\n```\nDone.', 1.0, 1.0),
    ("last fence counts", PERSON, '```json\n{"name": "Ada", "age": 36}\n```\n```\n{"name": 1}\n```', 0.0, 0.0),
    ("prose around bare json", PERSON, 'Sure! {"name": "Ada", "age": 36}', 0.0, 0.0),
    ("trailing garbage", PERSON, '{"name": "Ada", "age": 36} and more', 0.0, 0.0),
    ("two values", PERSON, '{"name": "Ada", "age": 36}{"name": "Bob", "age": 1}', 0.0, 0.0),
    ("duplicate keys", PERSON, '{"name": "Ada", "age": -1, "age": 36}', 0.0, 0.0),
    ("NaN", {"type": "object"}, '{"x": NaN}', 0.0, 0.0),
    ("Infinity", {"type": "object"}, '{"x": -Infinity}', 0.0, 0.0),
    ("single quotes", PERSON, "{'name': 'Ada', 'age': 36}", 0.0, 0.0),
    ("trailing comma", PERSON, '{"name": "Ada", "age": 36,}', 0.0, 0.0),
    ("truncated", PERSON, '{"name": "Ada", "age": 3', 0.0, 0.0),
    ("empty output", PERSON, "", 0.0, 0.0),
    ("wrong type of a field", PERSON, '{"name": "Ada", "age": "36"}', 0.0, 0.25),
    ("float where integer", PERSON, '{"name": "Ada", "age": 36.5}', 0.0, 0.25),
    ("missing required", PERSON, '{"name": "Ada"}', 0.0, 0.25),
    ("extra key refused", PERSON, '{"name": "Ada", "age": 36, "x": 1}', 0.0, 0.25),
    ("array instead of object", PERSON, '[{"name": "Ada", "age": 36}]', 0.0, 0.0),
    ("json in a think block only", PERSON, '<think>{"name": "Ada", "age": 36}</think>', 0.0, 0.0),
    ("think block then json", PERSON, '<think>{"name": 1}</think>{"name": "Ada", "age": 36}', 1.0, 1.0),
    ("email format checked", CONTACT, '{"email": "not-an-email", "born": "1990-01-02"}', 0.0, 0.25),
    ("date format checked", CONTACT, '{"email": "a@b.org", "born": "02/01/1990"}', 0.0, 0.25),
    ("formats valid", CONTACT, '{"email": "a@b.org", "born": "1990-01-02"}', 1.0, 1.0),
    ("conversational completion", PERSON, [{"role": "assistant", "content": '{"name": "Ada", "age": 36}'}], 1.0, 1.0),
]


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 15


@pytest.mark.parametrize(("schema", "completion", "strict", "partial"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_tricky_case(schema: dict[str, Any], completion: Any, strict: float, partial: float) -> None:
    assert JsonSchema(schema=schema)(prompts=["p"], completions=[completion]) == [strict]
    assert JsonSchema(schema=schema, mode="partial")(prompts=["p"], completions=[completion]) == [partial]


def test_fence_ignored_when_fenced_is_off() -> None:
    reward = JsonSchema(schema=PERSON, fenced=False)
    assert reward(prompts=["p"], completions=['```json\n{"name": "Ada", "age": 36}\n```']) == [0.0]


def test_schema_from_a_column_as_mapping_or_string() -> None:
    reward = JsonSchema(schema_field="schema")
    got = reward(prompts=["p"] * 4, completions=['{"name": "Ada", "age": 36}'] * 4,
                 schema=[PERSON, json.dumps(PERSON), {"type": "array"}, None])
    assert got == [1.0, 1.0, 0.0, None]
    assert reward.stats["bad_schema"] == 1


def test_invalid_schema_in_a_row_is_not_applicable() -> None:
    reward = JsonSchema(schema_field="schema")
    assert reward(prompts=["p"], completions=["{}"], schema=[{"type": "no-such-type"}]) == [None]


def test_invalid_inline_schema_fails_at_build_time() -> None:
    with pytest.raises(Exception, match="no-such-type"):
        JsonSchema(schema={"type": "no-such-type"})


def test_missing_schema_column_names_the_fix() -> None:
    with pytest.raises(KeyError, match="args.schema_field"):
        JsonSchema(schema_field="schema")(prompts=["p"], completions=["{}"])


def test_strict_parser_rejects_what_python_accepts() -> None:
    for text in ('{"a": 1, "a": 2}', "NaN", "[1, Infinity]", "1 2"):
        with pytest.raises(StrictJSONError):
            parse_strict(text)
    assert parse_strict('{"a": [1, 2.5, null, true]}') == {"a": [1, 2.5, None, True]}


def test_pickles_with_its_name() -> None:
    copy = pickle.loads(pickle.dumps(JsonSchema(schema=PERSON, name="json_schema#2")))
    assert copy.__name__ == "json_schema#2"
    assert copy(prompts=["p"], completions=['{"name": "A", "age": 1}']) == [1.0]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES)
def test_strict_parser_round_trips_every_json_value(value: Any) -> None:
    assert parse_strict(json.dumps(value)) == value
    assert parse_strict(json.dumps(value, indent=2)) == value
