"""Every built-in reward explains its values, a custom reward may too, and training's call is unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.rewards import build_reward
from llm_finetuning.rewards.exact_match import ExactMatch
from llm_finetuning.rewards.explain import call_explained, tidy
from llm_finetuning.rewards.json_schema import JsonSchema
from llm_finetuning.rewards.judge import Judge, rationale_of
from llm_finetuning.rewards.length_penalty import LengthPenalty


def explained(reward: Any, prompts: list[Any] | None, completions: list[Any], **columns: Any) -> list[Any]:
    """The reward's (value, why) pairs, after checking that the values are those of a plain call."""
    pairs = reward.explained(prompts=prompts, completions=completions, **columns)
    assert [v for v, _ in pairs] == reward(prompts=prompts, completions=completions, **columns)
    return pairs  # type: ignore[no-any-return]


def test_exact_match_names_the_answer_the_method_and_the_reference() -> None:
    reward = ExactMatch()
    try:
        got = explained(reward, ["What is 6 x 7?"] * 6, [
            "Six sevens... \\boxed{42}",
            "<think>maybe \\boxed{42}</think> It is 41.",
            "So 40 + 2.\n#### 42",
            "I cannot say.",
            "It is \\frac{84}{2}.",
            "Anything",
        ], answer=["42", "42", "The answer.\n#### 42", "42", "42", None])
    finally:
        reward.close()
    assert got[0] == (1.0, "extracted '42' by the last \\boxed{}; reference '42': equal (normalised)")
    assert got[1][0] == 0.0  # the answer inside the reasoning does not count; the last number does
    assert got[1][1].startswith("extracted '41' by the last number; reference '42': not equal (")
    assert got[2] == (1.0, "extracted '42' by the #### answer; reference '42': equal (normalised)")
    assert got[3] == (0.0, "no answer found (no \\boxed{}, no ####, no number); reference '42'")
    # Unboxed LaTeX: the last number is the denominator, and the explanation shows the reviewer exactly that.
    assert got[4][1].startswith("extracted '2' by the last number; reference '42': not equal (")
    assert got[5] == (None, "no reference in column 'answer': not scored")


def test_exact_match_regex_and_math_verify_are_named() -> None:
    reward = ExactMatch(extract="regex:ANSWER: (\\S+)", timeout_s=60.0)
    try:
        got = explained(reward, ["q", "q"], ["ANSWER: 1/2", "no marker 0.5"], answer=["0.5", "0.5"])
    finally:
        reward.close()
    assert got[0] == (1.0, "extracted '1/2' by the regex; reference '0.5': equal (normalised)")
    assert got[1] == (0.0, "no answer found (the regex did not match); reference '0.5'")
    reward = ExactMatch(timeout_s=60.0)
    try:
        (value, why), = explained(reward, ["q"], ["\\boxed{\\sqrt{4}}"], answer=["2"])
        how = "math-verify" if reward._worker is not None and reward._worker.available else "plain"
    finally:
        reward.close()
    assert why == f"extracted '\\\\sqrt{{4}}' by the last \\boxed{{}}; reference '2': {'equal' if value else 'not equal'} ({how})"


SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
          "required": ["name", "age"], "additionalProperties": False}


def test_json_schema_names_the_parse_error_or_the_first_schema_path() -> None:
    reward = JsonSchema(schema=SCHEMA)
    got = explained(reward, None, [
        '{"name": "Ada", "age": 36}',
        '{"name": "Ada", "age": -1}',
        '{"name": "Ada"}',
        'Sure! {"name": "Ada", "age": 36}',
        '{"name": "Ada", "name": "Bob", "age": 3}',
        'Here:\n```json\n{"name": "Ada", "age": "36", "extra": 1}\n```',
    ])
    assert got[0] == (1.0, "the completion is strict JSON and valid against the schema")
    assert got[1] == (0.0, "schema error at $.age: -1 is less than the minimum of 0")
    assert got[2] == (0.0, "schema error at $: 'age' is a required property")
    assert got[3] == (0.0, "the completion is not strict JSON: Expecting value: line 1 column 1 (char 0)")
    assert got[4] == (0.0, "the completion is not strict JSON: duplicate key 'name'")
    assert got[5][0] == 0.0
    assert got[5][1].startswith("schema error at $: Additional properties are not allowed ('extra' was unexpected) "
                                "(and 1 more error)")


def test_json_schema_partial_credit_and_row_schemas_are_explained() -> None:
    reward = JsonSchema(schema_field="schema", mode="partial")
    got = explained(reward, None, ['{"name": "Ada", "age": "x"}', '{}', '{}'],
                    schema=[json.dumps(SCHEMA), "not json", {"type": "nonsense"}])
    assert got[0] == (0.25, "schema error at $.age: 'x' is not of type 'integer'; partial credit 0.25")
    assert got[1] == (None, "column 'schema' holds no JSON Schema object: not scored")
    assert got[2][0] is None and got[2][1].startswith("the row's schema is invalid (")


def test_length_penalty_gives_the_length_and_the_penalty() -> None:
    reward = LengthPenalty(max_length=8, buffer=4)
    got = explained(reward, None, ["a", "b", "c"], completion_ids=[[1] * 3, [1] * 6, [1] * 9])
    assert got == [(0.0, "3 tokens, within 4 (no penalty): penalty 0"),
                   (-0.5, "6 tokens, past 4, in the buffer up to 8: penalty -0.5"),
                   (-1.0, "9 tokens, past max_length 8: penalty -1")]
    chars = LengthPenalty(max_length=8, buffer=4, unit="chars")
    assert explained(chars, None, ["x" * 5]) == [(-0.25, "5 chars, past 4, in the buffer up to 8: penalty -0.25")]


def test_judge_rationale_is_its_reply_without_the_score_line() -> None:
    assert rationale_of("The answer is correct and short.\n\nSCORE: 9") == "The answer is correct and short."
    assert rationale_of("SCORE: 3") is None
    assert rationale_of("Too long.\nIt rambles.\n**Score:** 4/10") == "Too long. It rambles."


def test_judge_explains_through_a_real_server(judge_server) -> None:  # type: ignore[no-untyped-def]
    reward = Judge(endpoint=judge_server.url("ok"), model="tiny", rubric="Short and right.", timeout_s=10.0,
                   max_retries=1, backoff_s=0.01)
    got = explained(reward, ["What is 2 + 2?"], ["4"])
    assert isinstance(got[0][0], float)
    assert got[0][1] == "the judge gave no reasoning" or got[0][1].startswith("judge: ")
    failing = Judge(endpoint=judge_server.url("garbage"), model="tiny", rubric="r", timeout_s=10.0,
                    max_retries=1, backoff_s=0.0)
    assert failing.explained(prompts=["p"], completions=["c"]) == [
        (None, "the judge gave no valid score after 2 attempts (last failure: malformed): not scored")]


def test_tidy_keeps_explanations_printable_and_short() -> None:
    assert tidy("a\x1b[31mred\x07\nline") == "a [31mred  line"
    assert tidy("  ") is None and tidy(None) is None
    long = tidy("x" * 1000)
    assert long is not None and len(long) == 400 and long.endswith("...")


CUSTOM = '''
def has_word(prompts, completions, word="yes", **columns):
    return [1.0 if word in c else 0.0 for c in completions]


def explain_has_word(prompts, completions, word="yes", **columns):
    return [f"{word!r} found" if word in c else f"{word!r} missing from {len(c)} chars" for c in completions]


has_word.explain = explain_has_word


class Scored:
    """A reward that explains in the same pass (the built-ins' form)."""

    __name__ = "scored"

    def __call__(self, prompts, completions, **columns):
        return [v for v, _ in self.explained(prompts, completions, **columns)]

    def explained(self, prompts, completions, **columns):
        return [(float(len(c) > 3), f"{len(c)} chars") for c in completions]


scored = Scored()


def plain(prompts, completions, **columns):
    return [0.5 for _ in completions]


def wrong_count(prompts, completions, **columns):
    return [1.0 for _ in completions]


wrong_count.explain = lambda prompts, completions, **columns: ["only one"]
'''


def _custom_brief(folder: Path, rewards: list[dict[str, Any]]) -> Path:
    (folder / "train.jsonl").write_text('{"prompt": "p"}\n')
    (folder / "mine.py").write_text(CUSTOM)
    brief = {"brief": 1, "name": "explain-test", "method": "grpo", "task": {"summary": "s"},
             "model": {"id": "Qwen/Qwen2.5-0.5B-Instruct"}, "data": {"train": "train.jsonl"},
             "rewards": rewards, "grpo": {"max_completion_length": 20}}
    path = folder / "brief.yaml"
    path.write_text(json.dumps(brief))
    return path


def test_custom_rewards_explain_through_either_form_and_train_unchanged(tmp_path: Path) -> None:
    rewards = [{"fn": "mine:has_word", "args": {"word": "yes"}}, {"fn": "mine:scored"}, {"fn": "mine:plain"},
               {"fn": "length_penalty", "args": {"unit": "chars", "max_length": 8, "buffer": 2}}]
    brief = _custom_brief(tmp_path, rewards)
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": "p", "completion": c}) + "\n" for c in ["yes", "no way at all"]))
    result = CliRunner().invoke(cli, ["score", str(brief), "--completions", str(rows), "--json", "--explain"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)["rows"]
    assert [r["rewards"] for r in out] == [
        {"mine:has_word": 1.0, "mine:scored": 0.0, "mine:plain": 0.5, "length_penalty": 0.0},
        {"mine:has_word": 0.0, "mine:scored": 1.0, "mine:plain": 0.5, "length_penalty": -1.0}]
    assert out[1]["explanations"] == {"mine:has_word": "'yes' missing from 13 chars", "mine:scored": "13 chars",
                                      "mine:plain": None,
                                      "length_penalty": "13 chars, past max_length 8: penalty -1"}
    assert set(out[0]) == {"index", "rewards", "total", "explanations"}
    # Without --explain the documented keys only, and the same values.
    plain = CliRunner().invoke(cli, ["score", str(brief), "--completions", str(rows), "--json"])
    assert [{k: r[k] for k in ("index", "rewards", "total")} for r in out] == json.loads(plain.output)["rows"]
    assert all(set(r) == {"index", "rewards", "total"} for r in json.loads(plain.output)["rows"])
    # The table form prints one line per explanation under the table.
    table = CliRunner().invoke(cli, ["score", str(brief), "--completions", str(rows), "--explain"])
    assert "    1  mine:has_word: 'yes' missing from 13 chars" in table.output
    # TRL's call of the same reward is untouched: a plain list of floats.
    reward = build_reward(rewards[0], tmp_path)
    assert reward(prompts=["p"], completions=["yes"]) == [1.0]
    assert call_explained(reward, ["p"], ["nope"], {}) == ([0.0], ["'yes' missing from 4 chars"])


def test_a_custom_explanation_of_the_wrong_length_is_refused(tmp_path: Path) -> None:
    brief = _custom_brief(tmp_path, [{"fn": "mine:wrong_count"}])
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": "p", "completion": c}) + "\n" for c in ["a", "b"]))
    result = CliRunner().invoke(cli, ["score", str(brief), "--completions", str(rows), "--explain"])
    assert result.exit_code == 2
    assert "reward mine:wrong_count: its explanations are 1 items; expected a list of 2 strings or None" in result.output


@pytest.mark.parametrize("fn", ["exact_match", "json_schema", "unit_tests", "length_penalty", "judge"])
def test_every_builtin_explains(fn: str) -> None:
    from llm_finetuning import reward_registry as registry

    module, _, cls = registry.BUILTINS[fn][0].partition(":")
    import importlib

    assert callable(getattr(getattr(importlib.import_module(module), cls), "explained", None))
