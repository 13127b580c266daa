"""`tool_call`: matched expected calls / expected calls, read from an episode's messages or from text."""

from __future__ import annotations

from typing import Any

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
