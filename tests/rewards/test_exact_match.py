"""exact_match on a table of tricky cases, through the real math-verify worker."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_finetuning.rewards.exact_match import ExactMatch, extract_boxed, extract_last_number, normalise

HINT = "What is 6 x 7? (Hint: the answer is 42, written as \\boxed{42}.)"

# (id, gold, completion, expected, extract, prompt)
CASES: list[tuple[str, Any, Any, float | None, str, str]] = [
    ("boxed frac vs decimal gold", "0.5", r"so \boxed{\frac{1}{2}}", 1.0, "auto", "p"),
    ("decimal vs frac gold", r"\frac{1}{2}", "The answer is 0.5", 1.0, "auto", "p"),
    ("slash fraction gold", "1/2", r"\boxed{0.5}", 1.0, "auto", "p"),
    ("dfrac", "0.5", r"\boxed{\dfrac{1}{2}}", 1.0, "auto", "p"),
    ("rounded is not equal", "1/3", r"\boxed{0.33}", 0.0, "auto", "p"),
    ("nested braces", r"\frac{1}{2}", r"\boxed{\frac{1}{\sqrt{4}}}", 1.0, "boxed", "p"),
    ("escaped braces in a set", r"\{1, 2\}", r"\boxed{\{1,2\}}", 1.0, "boxed", "p"),
    ("last of several boxes", "5", r"first \boxed{3}, then \boxed{5}", 1.0, "boxed", "p"),
    ("earlier box does not count", "3", r"first \boxed{3}, then \boxed{5}", 0.0, "boxed", "p"),
    ("box inside a box", "7", r"\boxed{\boxed{7}}", 1.0, "boxed", "p"),
    ("fbox", "12", r"\fbox{12}", 1.0, "boxed", "p"),
    ("bare boxed", "5", r"so \boxed 5", 1.0, "boxed", "p"),
    ("unclosed box: no answer", "12", r"\boxed{12", 0.0, "boxed", "p"),
    ("unclosed box: auto falls back", "12", r"\boxed{12", 1.0, "auto", "p"),
    ("unit in text", "5", r"\boxed{5\text{ cm}}", 1.0, "auto", "p"),
    ("unit after last number", "5", "The side is 5 cm.", 1.0, "auto", "p"),
    ("unit in the gold", "5 cm", r"\boxed{5}", 1.0, "auto", "p"),
    ("thousands separator", "1000", r"\boxed{1,000}", 1.0, "auto", "p"),
    ("thousands separator after ####", "1234567", "so\n#### 1,234,567", 1.0, "hash", "p"),
    ("thousands as last number", "1000", "It costs $1,000.", 1.0, "last_number", "p"),
    ("substring in a box", "4", r"\boxed{42}", 0.0, "auto", "p"),
    ("superstring in a box", "42", r"\boxed{4}", 0.0, "auto", "p"),
    ("substring of the last number", "42", "The answer is 142", 0.0, "last_number", "p"),
    ("gold only in the text, box wrong", "42", r"42 is tempting, but \boxed{41}", 0.0, "auto", "p"),
    ("echoed prompt holds the answer", "42", HINT, 0.0, "auto", HINT),
    ("echoed prompt, then an answer", "42", HINT + " Working it out: \\boxed{42}", 1.0, "auto", HINT),
    ("answer in a think block only", "8", r"<think>\boxed{8}</think> The answer is \boxed{9}", 0.0, "auto", "p"),
    ("answer after the think block", "9", r"<think>\boxed{8}</think> The answer is \boxed{9}", 1.0, "auto", "p"),
    ("unclosed think block hides all", "8", "<think> I guess 8", 0.0, "auto", "p"),
    ("reasoning before a lone close tag", "8", "maybe 8 </think> final: 9", 0.0, "auto", "p"),
    ("answer after a lone close tag", "9", "maybe 8 </think> final: 9", 1.0, "auto", "p"),
    ("empty output", "8", "", 0.0, "auto", "p"),
    ("whitespace output", "8", " \n\t ", 0.0, "auto", "p"),
    ("hash answer", "72", "48 + 24 = 72\n#### 72", 1.0, "hash", "p"),
    ("gold is a worked solution", "Natalia sold 48/2 = 24 more.\n#### 72", r"\boxed{72}", 1.0, "auto", "p"),
    ("negative number", "-3", "It drops to -3.", 1.0, "last_number", "p"),
    ("minus after a digit is subtraction", "3", "10-3", 1.0, "last_number", "p"),
    ("integer vs decimal", "3", r"\boxed{3.0}", 1.0, "auto", "p"),
    ("algebra reordered", "x+1", r"\boxed{1+x}", 1.0, "auto", "p"),
    ("pi is not its rounding", r"\pi", r"\boxed{3.14159}", 0.0, "auto", "p"),
    ("percent sign", "50", r"\boxed{50\%}", 1.0, "auto", "p"),
    ("word answer, other case", "Paris", r"\boxed{paris}", 1.0, "boxed", "p"),
    ("regex takes the last match", "18", "Answer: 17\nAnswer: 18", 1.0, r"regex:Answer:\s*(\S+)", "p"),
    ("regex without a match", "18", "I think 18", 0.0, r"regex:Answer:\s*(\S+)", "p"),
    ("integer gold", 5, r"\boxed{5}", 1.0, "auto", "p"),
    ("no reference: not applicable", None, r"\boxed{5}", None, "auto", "p"),
    ("conversational completion", "5", [{"role": "assistant", "content": r"\boxed{5}"}], 1.0, "auto", "p"),
    ("content parts", "5", [{"role": "assistant", "content": [{"type": "text", "text": "= 5"}]}], 1.0, "auto", "p"),
    ("conversational prompt echoed", "42", [{"role": "assistant", "content": HINT}], 0.0, "auto",
     [{"role": "user", "content": HINT}]),  # type: ignore[list-item]
]


@pytest.fixture(scope="module")
def rewards() -> Iterator[dict[str, ExactMatch]]:
    made: dict[str, ExactMatch] = {}
    yield made
    for r in made.values():
        r.close()


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 30


@pytest.mark.parametrize(("gold", "completion", "expected", "extract", "prompt"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_tricky_case(rewards: dict[str, ExactMatch], gold: Any, completion: Any, expected: float | None,
                     extract: str, prompt: Any) -> None:
    reward = rewards.setdefault(extract, ExactMatch(extract=extract))
    assert reward(prompts=[prompt], completions=[completion], answer=[gold]) == [expected]


def test_plain_comparison_without_math_verify() -> None:
    reward = ExactMatch(math_verify=False)
    got = reward(prompts=["p"] * 4, completions=[r"\boxed{0.5}", r"\boxed{1+x}", r"\boxed{1,000}", "\\boxed{41}"],
                 answer=["1/2", "x+1", "1000", "4"])
    assert got == [1.0, 0.0, 1.0, 0.0]
    assert reward._worker is None  # no worker process was started


def test_a_slow_comparison_times_out_and_scores_zero() -> None:
    reward = ExactMatch(timeout_s=0.5)
    metrics: dict[str, float] = {}
    try:
        got = reward(prompts=["p", "p"], completions=[r"\boxed{9^{9^{9^{9}}}}", r"\boxed{\frac{4}{2}}"],
                     answer=["2", "2"], log_metric=metrics.__setitem__)
    finally:
        reward.close()
    assert got == [0.0, 1.0]  # the worker restarts after the kill
    assert reward.stats["timeouts"] == 1
    assert metrics == {"rewards/exact_match/timeouts": 1.0}


def test_pickles_with_its_name_and_without_the_worker() -> None:
    reward = ExactMatch(extract="hash", name="exact_match#2")
    reward(prompts=["p"], completions=["#### x+1"], answer=["1+x"])
    copy = pickle.loads(pickle.dumps(reward))
    reward.close()
    assert copy.__name__ == "exact_match#2"
    assert copy(prompts=["p"], completions=["#### 7"], answer=["7"]) == [1.0]
    copy.close()


def test_missing_answer_column_names_the_fix() -> None:
    with pytest.raises(KeyError, match="args.answer_field"):
        ExactMatch()(prompts=["p"], completions=["1"], solution=["1"])


def test_bad_regex_is_refused_at_build_time() -> None:
    with pytest.raises(ValueError, match="not a valid regular expression"):
        ExactMatch(extract="regex:(")


def test_extraction_helpers() -> None:
    assert extract_boxed(r"a \boxed{\frac{a}{b}} b \boxed{x^{2}}") == "x^{2}"
    assert extract_last_number("v2 has 3 parts and 1,250.5 units") == "1,250.5"
    assert normalise(r"$\dfrac{2}{4}$") == "1/2"
    assert normalise("1,000 km") == "1000"


def test_degenerate_output_is_read_in_one_pass() -> None:
    # A collapsing policy repeats itself; brace matching must stay linear in the text.
    text = "\\boxed{" * 50_000 + "7"
    assert extract_boxed(text) is None
    assert extract_boxed(text + "}" * 50_000) == "7"
    assert ExactMatch(math_verify=False)(prompts=["p"], completions=["\\boxed{1} " * 20_000], answer=["1"]) == [1.0]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("\\boxed{}fbx#<>/think 0123456789.,-$")), max_size=80))
def test_any_text_gets_a_zero_or_one_and_never_raises(text: str) -> None:
    reward = ExactMatch(math_verify=False)
    assert reward(prompts=["p"], completions=[text], answer=["12"]) in ([0.0], [1.0])
    boxed = extract_boxed(text)
    assert boxed is None or boxed in text
