"""The gate's verdicts as values: one `CheckResult` per finding, gathered into a `GateReport`.

A failed or warning result is also a `Problem` (id = the check's id, severity error or warning), so the
gate's JSON carries the one error shape every verb prints (`problems`) beside its table of `checks`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from llm_finetuning.errors import EXIT_OK, EXIT_REJECTED, Problem, Severity, TextEnum, problems_json

if TYPE_CHECKING:
    from llm_finetuning.memory import Estimate

class Verdict(TextEnum):
    """A check result's verdict, as the gate's table and JSON spell it (docs/gate.md)."""

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"


# The checks (gate/checks/*) name the verdicts bare, one import for their many results.
PASS, FAIL, WARN = Verdict.PASS, Verdict.FAIL, Verdict.WARN


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict on one thing: id, pass/fail/warn, the YAML path, the message, and the fix."""

    id: str
    verdict: Verdict
    path: str
    message: str
    fix: str = ""

    def line(self) -> str:
        """One row of the gate's table: verdict, check id, then the path, message and (unless passed) fix."""
        fix = f" Fix: {self.fix}" if self.fix and self.verdict != Verdict.PASS else ""
        return f"{self.verdict.upper():4}  {self.id:<20}  {self.path or '(brief)'}: {self.message}{fix}"

    @property
    def problem(self) -> Problem | None:
        """A failure (severity error) or warning as a Problem; None for a pass."""
        if self.verdict == Verdict.PASS:
            return None
        return Problem(self.id, self.path, self.message, self.fix,
                       Severity.ERROR if self.verdict == Verdict.FAIL else Severity.WARNING)

    def to_json(self) -> dict[str, str]:
        """The documented row of `checks` (docs/gate.md: id, verdict, path, reason, fix)."""
        return {"id": self.id, "verdict": self.verdict, "path": self.path, "reason": self.message, "fix": self.fix}


@dataclass
class GateReport:
    """Every check's results, in the registered order. Passed when nothing failed."""

    brief_path: str
    name: str | None
    checks: list[CheckResult] = field(default_factory=list)
    fingerprint: str | None = None
    # sha256 of each record file the fingerprint binds (gate.record_files), for the manifest; not in the JSON.
    record_sha256: dict[str, str | None] = field(default_factory=dict)
    # The memory estimate the gate judged, handed to render for its advice, or why none could be made; not
    # part of the JSON report (`finetune memory --json` prints it).
    memory: Estimate | None = None
    memory_problem: str = ""

    @property
    def passed(self) -> bool:
        return not self.failures

    def render_advice(self) -> tuple[dict[str, object], str]:
        """The memory estimate's advice that render takes (vLLM share, sleep mode, distribution), or ({}, why
        not): `finetune render` and `finetune launch`'s re-render take it from the same place."""
        if self.memory is None:
            return {}, (f"memory estimate unavailable ({self.memory_problem or 'not made'}): vLLM memory share 0.3, "
                        "sleep mode off")
        return dict(self.memory.recommend or {}), ""

    @property
    def failures(self) -> list[CheckResult]:
        return [c for c in self.checks if c.verdict == Verdict.FAIL]

    @property
    def warnings(self) -> list[CheckResult]:
        return [c for c in self.checks if c.verdict == Verdict.WARN]

    @property
    def problems(self) -> list[Problem]:
        """Every failure and warning, in the registered order of the checks."""
        return [p for c in self.checks if (p := c.problem) is not None]

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.passed else EXIT_REJECTED

    def to_json(self) -> dict[str, object]:
        """The error shape (`ok`, `problems`), then the gate's own keys."""
        return problems_json(
            self.problems,
            passed=self.passed,
            brief=self.brief_path,
            name=self.name,
            fingerprint=self.fingerprint,
            summary={"failed": len(self.failures), "warnings": len(self.warnings),
                     "passed": sum(1 for c in self.checks if c.verdict == Verdict.PASS)},
            checks=[c.to_json() for c in self.checks],
        )

    def render(self) -> str:
        """Human output: one line per result, then the verdict."""
        lines = [f"finetune gate {self.brief_path}"]
        lines += [c.line() for c in self.checks]
        failed, warned = len(self.failures), len(self.warnings)
        if self.passed:
            tail = f" ({warned} warning(s))" if warned else ""
            lines.append(f"gate: passed{tail}; next: finetune render {self.brief_path} -o RUN_DIR")
        else:
            lines.append(f"gate: rejected: {failed} check result(s) failed, {warned} warning(s); fix them and run the gate again")
        return "\n".join(lines)
