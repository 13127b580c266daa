"""The `unit_tests` reward: the fraction of a row's tests that the completion's code passes, run in the
sandbox (llm_finetuning.sandbox; what it guards against is in references/sandbox.md).

Args: `tests_field` (default `tests`: a list of strings, each one test, e.g. an assert, run after the
solution) or `io_field` (a list of `{stdin, stdout}` cases: the solution runs once per case with that
stdin, and the parent compares its stdout, ignoring trailing whitespace on lines and trailing blank
lines); `timeout_s` (wall clock for one completion: the solution and all its tests); `memory_mb` (address
space of each sandboxed process, the interpreter's ~20 MB included).

The solution is the last fenced python block of the completion (```python, ```py, ```python3, or a bare
```), else the whole completion. A row without the tests column scores None (no signal). Imports no ML
library; the sandbox pool starts on the first call, as a fresh interpreter.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any

from llm_finetuning.reward_registry import arg_defaults
from llm_finetuning.rewards.explain import quoted
from llm_finetuning.sandbox import JobResult, Limits, SandboxPool, get_pool
from llm_finetuning.sandbox.verdicts import (
    PreparedTest,
    failed_case_reasons,
    failed_test_reasons,
    prepare_test,
)

_DEFAULTS = arg_defaults("unit_tests")  # the registry's schema holds every default

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PYTHON_TAGS = {"python", "py", "python3", "py3"}
MAX_SOLUTION_CHARS = 200_000
log = logging.getLogger(__name__)


def extract_solution(text: str) -> str:
    """The last fenced python block (a bare fence counts), else the whole text."""
    blocks: list[tuple[str, str]] = [(tag.lower(), body) for tag, body in _FENCE.findall(text)]
    for wanted in (lambda t: t in _PYTHON_TAGS, lambda t: t == ""):
        chosen = [body for tag, body in blocks if wanted(tag)]
        if chosen:
            return chosen[-1]
    return text


def completion_code(completion: Any) -> str:
    """The code of one completion: standard (a string) or conversational (the last assistant message)."""
    if isinstance(completion, list):
        msgs = [m for m in completion if isinstance(m, dict)]
        assistant = [m for m in msgs if m.get("role", "assistant") == "assistant"] or msgs
        content = assistant[-1].get("content") if assistant else ""
        if isinstance(content, list):
            content = "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
        text = "" if content is None else str(content)
    elif isinstance(completion, dict):
        text = str(completion.get("content") or "")
    else:
        text = "" if completion is None else str(completion)
    return extract_solution(text)


class UnitTests:
    """Reward = fraction of tests passed; 0 for code that does not compile, hangs, crashes or cheats."""

    __name__ = "unit_tests"

    def __init__(self, tests_field: str | None = None, io_field: str | None = None,
                 timeout_s: float = _DEFAULTS["timeout_s"], memory_mb: int = _DEFAULTS["memory_mb"],
                 name: str = "unit_tests") -> None:
        if tests_field and io_field:
            raise ValueError("give tests_field or io_field, not both")
        self.__name__ = name
        self.io_field = io_field
        self.tests_field = None if io_field else (tests_field or "tests")
        self.timeout_s = float(timeout_s)
        self.memory_mb = int(memory_mb)
        self._prepared: OrderedDict[tuple[str, ...], list[PreparedTest | None]] = OrderedDict()
        self._warned = False
        self.pool: SandboxPool | None = None  # None: the process-wide pool (tests set their own)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_prepared"] = OrderedDict()
        state["pool"] = None
        return state

    def _pool(self) -> SandboxPool:
        return self.pool if self.pool is not None else get_pool()

    @property
    def limits(self) -> Limits:
        return Limits(timeout_s=self.timeout_s, memory_mb=self.memory_mb)

    def _prepare(self, tests: tuple[str, ...]) -> list[PreparedTest | None]:
        cached = self._prepared.get(tests)
        if cached is None:
            cached = []
            for source in tests:
                try:
                    cached.append(prepare_test(source))
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    cached.append(None)
            self._prepared[tests] = cached
            if not self._warned and any(p is not None and p.judged_in_job for p in cached):
                self._warned = True
                log.warning("%s: some tests check results inside loops, functions or other statements; those "
                            "checks run inside the sandbox, where a solution that forges completion markers "
                            "could pass them. Top-level `assert <expr> == <literal>` tests are judged by the "
                            "parent and cannot be forged (references/sandbox.md).", self.__name__)
            while len(self._prepared) > 512:
                self._prepared.popitem(last=False)
        return cached

    def _plan(self, completions: list[Any], columns: dict[str, Any]) -> tuple[list[dict[str, Any] | None],
                                                                             list[Any]]:
        """One job per scorable completion (None where the score is already known) and what judges it."""
        field = self.io_field or self.tests_field
        assert field is not None
        if field not in columns:
            raise KeyError(f"{self.__name__}: no column {field!r} in the data; set args.tests_field or "
                           f"args.io_field to the column that holds the tests")
        jobs: list[dict[str, Any] | None] = []
        judges: list[Any] = []
        for i, completion in enumerate(completions):
            spec = columns[field][i]
            code = completion_code(completion)
            if self.io_field:
                cases = _io_cases(spec)
                judges.append(cases)
                if cases is None:
                    jobs.append(None)
                    continue
                jobs.append({"mode": "io", "solution": code, "inputs": [c[0] for c in cases]}
                            if _compiles(code) else None)
            else:
                tests = _test_list(spec)
                if tests is None:
                    judges.append(None)
                    jobs.append(None)
                    continue
                prepared = self._prepare(tests)
                judges.append(prepared)
                runnable = [p.steps if p is not None else [] for p in prepared]
                jobs.append({"mode": "tests", "solution": code, "tests": runnable} if _compiles(code) else None)
        return jobs, judges

    def _score(self, judge: Any, result: Any) -> float | None:
        return self._score_explained(judge, result, None, "")[0]

    def _score_explained(self, judge: Any, result: Any, tests: tuple[str, ...] | None,
                         code: str) -> tuple[float | None, str]:
        """(the fraction passed, why: the first failing test or case and its error, or all passed)."""
        field = self.io_field or self.tests_field
        if judge is None:
            return None, f"column {field!r} holds no {'cases' if self.io_field else 'tests'} in the expected shape: not scored"
        n = len(judge)
        if n == 0:
            return None, f"column {field!r} holds no {'cases' if self.io_field else 'tests'}: not scored"
        if result is None:
            return 0.0, f"0/{n} passed: the solution does not compile ({_compile_error(code)})"
        # After a timeout or an overflow the job was killed: tests whose records all arrived still count.
        if self.io_field:
            failures = failed_case_reasons([c[1] for c in judge], result.records)
        else:
            failures = failed_test_reasons(judge, result.records)
        passed = sum(1 for f in failures if f is None)
        if passed == n:
            return 1.0, f"all {n} passed"
        first = next(i for i, f in enumerate(failures) if f is not None)
        what = (f"case {first + 1} (stdin {quoted(judge[first][0], 40)})" if self.io_field
                else f"test {first + 1} {quoted(tests[first], 60)}" if tests is not None else f"test {first + 1}")
        stopped = {"timeout": f"; the run hit the {self.timeout_s:g} s limit",
                   "overflow": "; the run's output went over the limit"}.get(result.status, "")
        return passed / n, f"{passed}/{n} passed; first failure: {what}: {failures[first]}{stopped}"

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float | None]:
        jobs, judges = self._plan(completions, columns)
        futures = self._submit(jobs)
        return [self._score(j, f.result() if f is not None else None) for j, f in zip(judges, futures, strict=True)]

    def explained(self, prompts: list[Any], completions: list[Any],
                  **columns: Any) -> list[tuple[float | None, str | None]]:
        """Each value with the first failing test (or case) and its error, or "all N passed"."""
        jobs, judges = self._plan(completions, columns)
        futures = self._submit(jobs)
        field = self.io_field or self.tests_field
        assert field is not None
        out: list[tuple[float | None, str | None]] = []
        for i, (judge, future) in enumerate(zip(judges, futures, strict=True)):
            tests = None if self.io_field else _test_list(columns[field][i])
            out.append(self._score_explained(judge, future.result() if future is not None else None, tests,
                                             completion_code(completions[i])))
        return out

    def _submit(self, jobs: list[dict[str, Any] | None]) -> list[Future[JobResult] | None]:
        runnable = [job for job in jobs if job is not None]
        sent = iter(self._pool().submit_many(runnable, self.limits) if runnable else [])
        return [next(sent) if job is not None else None for job in jobs]

    async def acall(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float | None]:
        """The same reward, awaitable: the sandbox runs while the event loop serves other rewards."""
        jobs, judges = self._plan(completions, columns)
        await asyncio.to_thread(self._pool().start)
        futures = [asyncio.wrap_future(f) if f is not None else None for f in self._submit(jobs)]
        results = [await f if f is not None else None for f in futures]
        return [self._score(j, r) for j, r in zip(judges, results, strict=True)]


class AsyncUnitTests(UnitTests):
    """`UnitTests` with an async `__call__`, which TRL (>= 1.16) awaits alongside other async rewards."""

    async def __call__(self, prompts: list[Any], completions: list[Any],  # type: ignore[override]
                       **columns: Any) -> list[float | None]:
        return await self.acall(prompts, completions, **columns)


def _compiles(code: str) -> bool:
    """Compile (never run) the solution here: code that cannot compile scores 0 without a sandbox job."""
    return _compile_error(code) is None


def _compile_error(code: str) -> str | None:
    """None when the solution compiles (compiled, never run), else the error in a few words."""
    if len(code) > MAX_SOLUTION_CHARS:
        return f"over {MAX_SOLUTION_CHARS} characters"
    try:
        compile(code, "<solution>", "exec")
        return None
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        return type(exc).__name__


def _test_list(spec: Any) -> tuple[str, ...] | None:
    if isinstance(spec, str):
        return (spec,)
    if isinstance(spec, (list, tuple)) and all(isinstance(t, str) for t in spec):
        return tuple(spec)
    return None


def _io_cases(spec: Any) -> list[tuple[str, str]] | None:
    if not isinstance(spec, (list, tuple)):
        return None
    cases = []
    for case in spec:
        if not isinstance(case, dict) or not isinstance(case.get("stdin", ""), str) \
                or not isinstance(case.get("stdout"), str):
            return None
        cases.append((case.get("stdin", ""), case["stdout"]))
    return cases
