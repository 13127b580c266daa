"""The compiled argument checks of `tool_call` give jsonschema's verdicts (rewards/call_schema.py): on
generated schemas and values, with the default options and with BFCL's."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from llm_finetuning.reward_registry import tool_call_schema_problems
from llm_finetuning.rewards.call_schema import (
    Options,
    SchemaProblem,
    _jsonschema_check,
    _needs_jsonschema,
    compile_schema,
    normalise,
)

SCALAR = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, 1.0, 2.5, -1.0]) | \
    st.sampled_from(["", "a", "A b", "a-b", "x'y", "New York, NY", "new york ny"])
VALUE = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3) |
                     st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3), max_leaves=8)
TYPES = st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "null"])


def schemas() -> st.SearchStrategy[Any]:
    leaf = st.one_of(
        st.booleans(),
        st.fixed_dictionaries({"type": st.one_of(TYPES, st.lists(TYPES, min_size=1, max_size=3, unique=True))}),
        st.fixed_dictionaries({"enum": st.lists(VALUE, max_size=3)}),
        st.fixed_dictionaries({"const": VALUE}),
        st.fixed_dictionaries({"minimum": st.integers(-2, 2)}, optional={"exclusiveMaximum": st.integers(-2, 3)}),
        st.fixed_dictionaries({"minLength": st.integers(0, 3)}, optional={"pattern": st.sampled_from(["^a", "b$", "[A-Z]"])}),
    )

    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.fixed_dictionaries({}, optional={
                "type": st.just("object"),
                "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
                "required": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
                "additionalProperties": st.one_of(st.booleans(), inner),
                "patternProperties": st.dictionaries(st.sampled_from(["^a", "c"]), inner, max_size=1),
                "minProperties": st.integers(0, 2), "maxProperties": st.integers(0, 3)}),
            st.fixed_dictionaries({}, optional={
                "type": st.just("array"), "items": inner, "prefixItems": st.lists(inner, min_size=1, max_size=2),
                "minItems": st.integers(0, 2), "maxItems": st.integers(0, 3), "uniqueItems": st.booleans()}),
            st.fixed_dictionaries({"anyOf": st.lists(inner, min_size=1, max_size=3)}),
            st.fixed_dictionaries({"oneOf": st.lists(inner, min_size=1, max_size=3)}),
            st.fixed_dictionaries({"allOf": st.lists(inner, min_size=1, max_size=2)}),
            st.fixed_dictionaries({"not": inner}),
        )
    return st.recursive(leaf, extend, max_leaves=6)


@settings(max_examples=400, deadline=None)
@given(schema=schemas(), value=VALUE)
def test_compiled_checks_give_jsonschemas_verdict(schema: Any, value: Any) -> None:
    assert not _needs_jsonschema(schema)
    expected = Draft202012Validator(schema).is_valid(value)
    assert (compile_schema(schema)(value) is None) == expected, (schema, value)


@settings(max_examples=300, deadline=None)
@given(schema=schemas(), value=VALUE, strings=st.sampled_from(["exact", "normalised"]),
       integers=st.sampled_from(["json_schema", "strict"]), empty=st.booleans())
def test_compiled_checks_and_jsonschema_agree_under_every_option(schema: Any, value: Any, strings: str,
                                                                  integers: str, empty: bool) -> None:
    options = Options(strings=strings, integers=integers, empty_is_omitted=empty)
    assert (compile_schema(schema, options)(value) is None) == (_jsonschema_check(schema, options)(value) is None)


def test_normalising_is_bfcls() -> None:
    assert normalise("New York, NY") == normalise("new_york-ny") == "newyorkny"
    assert normalise("1/2 * 3^2") == "1232"
    assert normalise("it's") == 'it"s'


def test_keywords_it_does_not_compile_go_to_jsonschema_with_the_same_options() -> None:
    schema = {"$defs": {"n": {"type": "integer"}}, "type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}}
    assert _needs_jsonschema(schema)
    check = compile_schema(schema, Options(integers="strict"))
    assert check({"n": 5}) is None
    assert check({"n": 5.0}) == (".n", "5.0 is not of type 'integer'")
    normalised = compile_schema({"if": {"type": "string"}, "then": {"enum": ["A b"]}}, Options(strings="normalised"))
    assert normalised("a-b") is None and normalised("ab c") is not None


@pytest.mark.parametrize(("schema", "path"), [({"type": "integr"}, ".type"), ({"pattern": "("}, ".pattern"),
                                               ({"enum": "x"}, ".enum"), ([1], "")])
def test_a_schema_that_does_not_compile_is_a_problem_with_its_path(schema: Any, path: str) -> None:
    with pytest.raises(SchemaProblem, match=rf"^{path}: "):
        compile_schema(schema)


MALFORMED = [{"type": "integr"}, {"type": ["string", "dict"]}, {"enum": "x"}, {"required": "a"}, {"minItems": -1},
             {"maxLength": 1.5}, {"minimum": "3"}, {"pattern": "("}, {"patternProperties": {"(": {}}}, {"anyOf": []},
             {"properties": {"a": 3}}, {"items": [1]}, {"not": "x"}, {"properties": {"a": {"oneOf": [{"type": "x"}]}}}]


@pytest.mark.parametrize("schema", MALFORMED, ids=[str(s) for s in MALFORMED])
def test_the_fast_schema_check_refuses_what_the_metaschema_refuses(schema: Any) -> None:
    assert tool_call_schema_problems([{"name": "f", "arguments": schema}])  # what `finetune check` says
    with pytest.raises(SchemaProblem):
        compile_schema(schema)


@settings(max_examples=60, deadline=None)
@given(schema=schemas())
def test_the_metaschema_accepts_every_generated_schema(schema: Any) -> None:
    assert tool_call_schema_problems([{"name": "f", "arguments": schema}]) == []
