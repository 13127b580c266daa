"""`tool_call`: matched expected calls / expected calls, read from an episode's messages or from text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_finetuning.rewards._text import completion_text
from llm_finetuning.rewards.tool_call import ToolCall, episode_calls

SCHEMA = {"type": "object", "required": ["a", "b"], "properties": {"a": {"enum": [3, 4]}, "b": {"enum": [3, 4]}}}


def episode(*calls: tuple[str, Any], answer: str = "12") -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    for name, args in calls:
        msgs.append({"role": "assistant", "content": "",
                     "tool_calls": [{"type": "function", "function": {"name": name, "arguments": args}}]})
        msgs.append({"role": "tool", "name": name, "content": "12"})
    return msgs + [{"role": "assistant", "content": answer}]


def test_the_expected_call_with_valid_arguments_scores_one_and_says_why() -> None:
    reward = ToolCall(expected_field="calls")
    rows = [episode(("multiply", {"a": 3, "b": 4})), episode(("multiply", {"a": 3, "b": 5})),
            episode(("add", {"a": 3, "b": 4})), [{"role": "assistant", "content": "12"}]]
    out = reward.explained(prompts=[""] * 4, completions=rows,
                           calls=[[{"name": "multiply", "arguments": SCHEMA}]] * 4)
    assert [v for v, _ in out] == [1.0, 0.0, 0.0, 0.0]
    assert out[0][1] == "1/1 expected call(s) made with valid arguments; made: multiply"
    assert "$.b: 5 is not one of [3, 4]" in str(out[1][1])
    assert out[3][1] == "0/1 expected call(s) made with valid arguments; made: no tool call"


def test_each_expected_call_is_matched_once_and_a_row_expecting_none_is_not_scored() -> None:
    reward = ToolCall(expected=["multiply", "multiply"])
    assert reward(prompts=[""], completions=[episode(("multiply", {}))]) == [0.5]
    assert ToolCall(expected_field="calls")(prompts=[""], completions=[episode()], calls=[[]]) == [None]


def test_text_completions_are_read_for_tool_call_blocks() -> None:
    text = '<tool_call>\n{"name": "multiply", "arguments": {"a": 4, "b": 3}}\n</tool_call>'
    assert episode_calls(text) == [("multiply", {"a": 4, "b": 3})]
    assert ToolCall(expected=[{"name": "multiply", "arguments": SCHEMA}])(prompts=[""], completions=[text]) == [1.0]


def test_other_rewards_read_an_episode_for_its_final_answer_only() -> None:
    assert completion_text(episode(("multiply", {"a": 3, "b": 4}), answer="the product is 12")) == "the product is 12"
    assert completion_text([{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]) == "a\nb"


def calls_text(*calls: tuple[str, Any]) -> str:
    return "\n".join(f'<tool_call>\n{json.dumps({"name": n, "arguments": a})}\n</tool_call>' for n, a in calls)


MULTIPLY = [{"name": "multiply", "arguments": SCHEMA}]


def test_extra_and_repeated_calls_lower_the_value_and_the_explanation_says_so() -> None:
    reward = ToolCall(expected=MULTIPLY)
    texts = [calls_text(("multiply", {"a": 3, "b": 4})), calls_text(("multiply", {"a": 3, "b": 4}), ("multiply", {"a": 3, "b": 4})),
             calls_text(("multiply", {"a": 3, "b": 4}), ("add", {"a": 1}), ("add", {"a": 2}))]
    out = reward.explained([""] * 3, texts)
    assert [v for v, _ in out] == [1.0, 0.5, 1 / 3]
    assert "1 call(s) more than expected: the value is 1/2" in str(out[1][1])
    assert "2 call(s) more than expected: the value is 1/3" in str(out[2][1])
    ignoring = ToolCall(expected=MULTIPLY, extra_calls="ignore").explained([""] * 3, texts)
    assert [v for v, _ in ignoring] == [1.0, 1.0, 1.0]
    assert "ignored (extra_calls: ignore)" in str(ignoring[2][1])


def test_parallel_calls_pair_up_in_any_order_with_a_maximum_matching() -> None:
    # A greedy pairing gives the first expected call (x or y) the call with x, and then finds nothing for
    # the second (x only); the maximum matching pairs x with x and y with y, in either order.
    either = {"type": "object", "properties": {"v": {"enum": ["x", "y"]}}}
    only_x = {"type": "object", "properties": {"v": {"const": "x"}}}
    reward = ToolCall(expected=[{"name": "f", "arguments": either}, {"name": "f", "arguments": only_x}])
    for order in ((("f", {"v": "x"}), ("f", {"v": "y"})), (("f", {"v": "y"}), ("f", {"v": "x"}))):
        assert reward([""], [calls_text(*order)]) == [1.0]
    assert reward([""], [calls_text(("f", {"v": "y"}), ("f", {"v": "y"}))]) == [0.5]


def test_string_modes_strict_integers_and_empty_optional_arguments() -> None:
    schema = {"type": "object", "required": ["city", "days"], "additionalProperties": False,
              "properties": {"city": {"type": "string", "enum": ["New York, NY"]}, "days": {"type": "integer", "enum": [5]},
                             "unit": {"type": "string", "enum": ["celsius"]}}}
    expected = [{"name": "weather", "arguments": schema}]
    loose = calls_text(("weather", {"city": "new york ny", "days": 5}))
    as_float = calls_text(("weather", {"city": "New York, NY", "days": 5.0}))
    empty = calls_text(("weather", {"city": "New York, NY", "days": 5, "unit": ""}))
    assert ToolCall(expected=expected)([""] * 3, [loose, as_float, empty]) == [0.0, 1.0, 0.0]
    bfcl = ToolCall(expected=expected, strings="normalised", integers="strict", empty_is_omitted=True)
    out = bfcl.explained([""] * 3, [loose, as_float, empty])
    assert [v for v, _ in out] == [1.0, 0.0, 1.0]
    assert "$.days: 5.0 is not of type 'integer'" in str(out[1][1])
    # "" stands for "left out" only where the argument is optional and may be a string
    required_empty = calls_text(("weather", {"city": "", "days": 5}))
    assert bfcl([""], [required_empty]) == [0.0]


ODD_COMPLETIONS: list[tuple[Any, str]] = [
    ("<tool_call>" + "[" * 1000 + "]" * 1000 + "</tool_call>", "JSON nested too deeply"),
    ('<tool_call>{"name": "multiply", "arguments": "' + "[" * 1000 + "]" * 1000 + '"}</tool_call>', "arguments are JSON nested too deeply"),
    ("<tool_call>{not json}</tool_call>", "block is not JSON"),
    ("<tool_call>[1, 2]</tool_call>", "not a JSON object"),
    ('<tool_call>{"name": 5, "arguments": {}}</tool_call>', "no name"),
    ('<tool_call>{"name": "multiply", "arguments": "{bad"}</tool_call>', "arguments are not JSON"),
    ([{"role": "assistant", "tool_calls": [{"type": "function", "function": "multiply"}]}], "function is str"),
    ([{"role": "assistant", "tool_calls": [{"type": "function", "function": None}]}], "function is NoneType"),
    ([{"role": "assistant", "tool_calls": 3}], "tool_calls is int"),
    ([{"role": "assistant", "tool_calls": [7]}], "function is int"),
    ([{"role": "assistant", "tool_calls": [{"function": {"name": "multiply", "arguments": [1, 2]}}]}], "is not of type 'object'"),
    ([{"role": "assistant", "tool_calls": [{"function": {"name": ["multiply"], "arguments": {}}}]}], "no name"),
]


@pytest.mark.parametrize(("completion", "reason"), ODD_COMPLETIONS, ids=[r for _, r in ODD_COMPLETIONS])
def test_odd_completions_score_zero_with_a_reason(completion: Any, reason: str) -> None:
    [(value, why)] = ToolCall(expected=MULTIPLY).explained([""], [completion])
    assert value == 0.0
    assert reason in str(why)


def test_odd_completions_of_other_types_score_zero() -> None:
    reward = ToolCall(expected=MULTIPLY)
    assert reward([""] * 5, [None, 5, 2.5, {"role": "assistant"}, [None, "x", 3]]) == [0.0] * 5


def test_expected_calls_that_cannot_be_used_are_not_scored_and_say_why() -> None:
    reward = ToolCall(expected_field="calls")
    rows = [[{"name": "f", "arguments": {"type": "integr"}}], [{"name": "f", "arguments": {"enum": "x"}}],
            {"name": "f"}, 5, "[" * 1000 + "]" * 1000, json.dumps(MULTIPLY)]
    out = reward.explained([""] * len(rows), [calls_text(("multiply", {"a": 3, "b": 4}))] * len(rows), calls=rows)
    assert [v for v, _ in out] == [None, None, None, None, None, 1.0]
    assert "does not compile" in str(out[0][1]) and "integer" in str(out[0][1])
    assert "not a list" in str(out[2][1])


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=12)
CALL = st.fixed_dictionaries({"type": st.just("function"), "function": st.one_of(
    JSON, st.fixed_dictionaries({"name": st.one_of(st.just("multiply"), JSON), "arguments": st.one_of(JSON, JSON.map(json.dumps))}))})
MESSAGE = st.one_of(JSON, st.fixed_dictionaries({"role": st.sampled_from(["assistant", "tool", "user"]),
                                                  "content": JSON, "tool_calls": st.one_of(JSON, st.lists(st.one_of(CALL, JSON), max_size=3))}))
COMPLETION = st.one_of(JSON, st.lists(MESSAGE, max_size=4),
                       st.lists(st.one_of(JSON.map(json.dumps), st.text(max_size=20)), max_size=3).map(
                           lambda blocks: "".join(f"<tool_call>{b}</tool_call>" for b in blocks)))


@settings(max_examples=300, deadline=None)
@given(completion=COMPLETION, expected=st.one_of(JSON, st.just(MULTIPLY)), extra=st.sampled_from(["penalise", "ignore"]))
def test_no_completion_and_no_expected_value_makes_the_reward_raise(completion: Any, expected: Any, extra: str) -> None:
    reward = ToolCall(expected_field="calls", extra_calls=extra, strings="normalised", integers="strict", empty_is_omitted=True)
    [(value, why)] = reward.explained([""], [completion], calls=[expected])
    assert value is None or 0.0 <= value <= 1.0
    assert isinstance(why, str) and why


def test_the_reward_pickles_after_compiling_its_schemas() -> None:
    import pickle

    reward = ToolCall(expected=MULTIPLY, strings="normalised")
    text = calls_text(("multiply", {"a": 3, "b": 4}))
    assert reward([""], [text]) == [1.0]
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.__name__ == "tool_call" and copy([""], [text]) == [1.0]
