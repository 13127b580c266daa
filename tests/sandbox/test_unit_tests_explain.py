"""`unit_tests` explains each value: the first failing test (or stdin case) and its error, or all passed.

The code runs in the real sandbox (the `ns_pool` fixture), as it does when scoring.
"""

from __future__ import annotations

import pytest

from llm_finetuning.rewards.explain import call_explained
from llm_finetuning.rewards.unit_tests import UnitTests
from llm_finetuning.sandbox import SandboxPool

TESTS = ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(0, 0) == 0"]


@pytest.fixture
def reward(ns_pool: SandboxPool) -> UnitTests:
    r = UnitTests(timeout_s=5.0)
    r.pool = ns_pool
    return r


def _explain(reward: UnitTests, completions: list[str], **columns: list[object]) -> list[tuple[float | None, str | None]]:
    pairs = reward.explained(prompts=[""] * len(completions), completions=completions, **columns)
    values = reward(prompts=[""] * len(completions), completions=completions, **columns)
    assert [v for v, _ in pairs] == values  # the explained values are the values training sees
    return pairs


def test_each_outcome_is_explained(reward: UnitTests) -> None:
    completions = [
        "```python\ndef add(a, b):\n    return a + b\n```",
        "```python\ndef add(a, b):\n    return a * b if a == b else a + b\n```",  # 2+2 passes, 1+2 and 0+0 pass
        "```python\ndef add(a, b):\n    return a - b\n```",
        "```python\ndef add(a, b):\n    return 1 / 0\n```",
        "```python\ndef add(a, b)\n    return a + b\n```",
        "```python\nimport sys\nsys.exit(0)\n```",
    ]
    out = _explain(reward, completions, tests=[TESTS] * len(completions))
    assert out[0] == (1.0, "all 3 passed")
    assert out[1] == (1.0, "all 3 passed")
    assert out[2][0] == pytest.approx(1 / 3)
    assert out[2][1] == "1/3 passed; first failure: test 1 'assert add(1, 2) == 3': assertion false: add(1, 2) gave -1"
    assert out[3] == (0.0, "0/3 passed; first failure: test 1 'assert add(1, 2) == 3': add(1, 2) raised "
                           "ZeroDivisionError")
    assert out[4][0] == 0.0
    assert out[4][1] is not None and out[4][1].startswith("0/3 passed: the solution does not compile (SyntaxError:")
    assert out[5][0] == 0.0
    assert out[5][1] is not None and out[5][1].startswith("0/3 passed; first failure: test 1")
    assert "the solution raised SystemExit when it was run, before any test" in out[5][1]


def test_a_hang_names_the_time_limit(ns_pool: SandboxPool) -> None:
    reward = UnitTests(timeout_s=1.0)
    reward.pool = ns_pool
    code = "```python\ndef add(a, b):\n    if a == 2:\n        while True: pass\n    return a + b\n```"
    (value, why), = _explain(reward, [code], tests=[TESTS])
    assert value == pytest.approx(1 / 3)
    assert why == ("1/3 passed; first failure: test 2 'assert add(2, 2) == 4': did not finish; the run hit the "
                   "1 s limit")


def test_io_cases_show_the_first_differing_line(ns_pool: SandboxPool) -> None:
    reward = UnitTests(io_field="cases", timeout_s=5.0)
    reward.pool = ns_pool
    cases = [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "5 5\n", "stdout": "10\n"}]
    good = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    bad = "```python\na, b = map(int, input().split())\nprint(a + b if a < 5 else a * b)\n```"
    out = _explain(reward, [good, bad], cases=[cases, cases])
    assert out[0] == (1.0, "all 2 passed")
    assert out[1] == (0.5, "1/2 passed; first failure: case 2 (stdin '5 5\\n'): stdout line 1: expected '10', "
                           "got '25'")


def test_rows_without_tests_say_why_they_are_not_scored(reward: UnitTests) -> None:
    out = _explain(reward, ["def add(a, b): return a + b"] * 2, tests=[None, []])
    assert out == [(None, "column 'tests' holds no tests in the expected shape: not scored"),
                   (None, "column 'tests' holds no tests: not scored")]


def test_explanations_from_the_code_under_test_are_tidied(reward: UnitTests) -> None:
    """A solution picks the values it returns: they reach the reviewer's terminal only as printable text."""
    code = "```python\ndef add(a, b):\n    return '\\x1b[2J\\x1b[31mfake\\n' * 50\n```"
    values, [why] = call_explained(reward, [""], [code], {"tests": [TESTS]})
    assert values == [0.0]
    assert why is not None and "fake" in why
    assert "\x1b" not in why and "\n" not in why and len(why) <= 400
