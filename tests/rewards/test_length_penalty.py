"""length_penalty: DAPO's soft overlong punishment, in tokens or characters, as a term or a wrapper."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from llm_finetuning.rewards import build_reward
from llm_finetuning.rewards.exact_match import ExactMatch
from llm_finetuning.rewards.length_penalty import LengthPenalty, SoftOverlong, overlong_penalty


@pytest.mark.parametrize(("length", "expected"), [
    (0, 0.0), (75, 0.0), (76, -0.04), (88, -0.52), (100, -1.0), (101, -1.0), (10_000, -1.0),
])
def test_dapo_formula(length: int, expected: float) -> None:
    assert overlong_penalty(length, max_length=100, buffer=25) == pytest.approx(expected)


def test_counts_token_ids_when_trl_passes_them() -> None:
    reward = LengthPenalty(max_length=8, buffer=4)
    got = reward(prompts=["p", "p"], completions=["x" * 100, "x"], completion_ids=[[1, 2, 3], list(range(7))])
    assert got == [0.0, pytest.approx(-0.75)]


def test_counts_tokens_with_a_tokenizer(tiny_model_dir: Path) -> None:
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(tiny_model_dir)
    text = "The answer is \\boxed{42}. #### 42"
    n = len(tok(text, add_special_tokens=False)["input_ids"])
    reward = LengthPenalty(max_length=n, buffer=1, tokenizer=tok)
    assert reward(prompts=["p"], completions=[text]) == [pytest.approx(-1.0)]
    assert n < len(text)  # so characters would have given a different answer
    assert LengthPenalty(max_length=n, buffer=1, unit="chars")(prompts=["p"], completions=[text]) == [-1.0]


def test_falls_back_to_characters_without_tokens() -> None:
    reward = LengthPenalty(max_length=10, buffer=5)
    assert reward(prompts=["p"] * 2, completions=["x" * 5, [{"role": "assistant", "content": "x" * 8}]]) == \
        [0.0, pytest.approx(-0.6)]


def test_defaults_from_the_brief_max_completion_length() -> None:
    reward = build_reward({"fn": "length_penalty", "args": {}}, Path("."), max_completion_length=64)
    assert isinstance(reward, LengthPenalty)
    assert (reward.max_length, reward.buffer, reward.__name__) == (64, 16, "length_penalty")
    with pytest.raises(ValueError, match="max_length"):
        build_reward({"fn": "length_penalty", "args": {}}, Path("."))
    with pytest.raises(ValueError, match="buffer"):
        LengthPenalty(max_length=10, buffer=11)


def test_wrapping_equals_the_additive_term() -> None:
    completions = ["\\boxed{4}", "\\boxed{4}" + " pad" * 10, "\\boxed{5}" + " pad" * 30, "nothing"]
    answers = ["4", "4", "4", None]
    em, pen = ExactMatch(math_verify=False), LengthPenalty(max_length=60, buffer=40, unit="chars")
    wrapped = SoftOverlong([em], pen, weights=[2.0], penalty_weight=0.5)(
        prompts=["p"] * 4, completions=completions, answer=answers)
    inner = em(prompts=["p"] * 4, completions=completions, answer=answers)
    term = pen(prompts=["p"] * 4, completions=completions)
    assert wrapped[:3] == [pytest.approx(2.0 * r + 0.5 * t) for r, t in zip(inner[:3], term[:3], strict=True)]
    assert wrapped[3] is None  # every wrapped reward was None: the row stays unscored
    assert pickle.loads(pickle.dumps(pen)).max_length == 60
