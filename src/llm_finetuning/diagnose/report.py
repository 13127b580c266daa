"""The diagnosis as JSON, as text, and as the content of the RUN_DIR/diagnosis.json record the gate reads.

The record's format, its write and its verification live in the records layer (records/diagnosis.py), where
the gate checks a `grpo.deviation` without importing the diagnosis. Nothing here writes a file.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from llm_finetuning.diagnose.context import RunContext
from llm_finetuning.diagnose.rules import Finding, failure_modes, task_findings
from llm_finetuning.diagnose.stats import step_ranges
from llm_finetuning.diagnose.trajectory import Trajectory
from llm_finetuning.rundir.diagnosis import DiagnosedFinding, Diagnosis


def diagnosis_json(findings: list[Finding]) -> dict[str, object]:
    """The `--json` object of docs/diagnose.md: `{"healthy", "findings": [{"id", "kind", "severity", ...}], "task"}`;
    healthy when no finding is a failure mode of the run (an `info` finding such as `converged` says what happened;
    a `task` finding, listed in "task", what the run should reduce)."""
    return {"healthy": not failure_modes(findings), "findings": [f.to_json() for f in findings],
            "task": [f.id for f in task_findings(findings)]}


def diagnosis_record(traj: Trajectory, findings: list[Finding], ctx: RunContext, run_dir: Path) -> Diagnosis:
    """The `--json` object plus what binds it to the run: the brief and the exact metrics diagnosed
    (`source` relative to RUN_DIR, e.g. `metrics.jsonl` or `checkpoints/checkpoint-40/trainer_state.json`)."""
    from llm_finetuning import __version__

    try:
        source = traj.source.resolve().relative_to(run_dir.resolve()).as_posix()
    except ValueError:
        source = str(traj.source.resolve())

    return Diagnosis(
        healthy=not failure_modes(findings),
        findings=tuple(DiagnosedFinding(f.id, f.kind, str(f.severity), tuple(f.steps), f.evidence, f.variant, f.fix,
                                        f.brief_edit, f.cost, f.settings) for f in findings),
        task=tuple(f.id for f in task_findings(findings)),
        brief_name=ctx.brief_name,
        brief_sha256=ctx.brief_sha256,
        source=source,
        source_sha256=traj.source_sha256(),
        steps_logged=len(traj.steps),
        last_step=traj.last_step,
        ended=traj.ended,
        created_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        llm_finetuning_version=__version__,
    )


def render_text(traj: Trajectory, findings: list[Finding], run_label: str, run_dir: str = "RUN_DIR") -> str:
    """Human output: a verdict line, then per finding its evidence, variant, fix and brief edit (with its cost);
    `run_dir` is the run as `grpo.deviation` would name it."""
    span = f"{len(traj.steps)} logged steps to step {traj.last_step}, from {traj.source.name}"
    span += "" if traj.ended else ", run not ended"
    problems = failure_modes(findings)
    task = task_findings(findings)
    if not problems:
        lines = [f"{run_label}: healthy ({span}). No failure mode of the run found: keep plain GRPO "
                 "(switch variant only when a symptom shows)."]
        if task:
            lines.append(f"The task's findings ({', '.join(f.id for f in task)}) are what the base model cannot do "
                         "yet, what training should reduce: this run can justify a learning run "
                         f"(`grpo.deviation: {run_dir}`, the path from the brief's folder).")
    else:
        lines = [f"{run_label}: {len(problems)} finding(s) of the run ({span})"
                 + (f", and the task's: {', '.join(f.id for f in task)}" if task else "")]
    for f in findings:
        lines.append("")
        whose = "  (the task's: what training should reduce)" if f in task else ""
        lines.append(f"{f.severity:<7} {f.id}  steps {step_ranges(f.steps, traj.steps)}{whose}")
        lines.append(f"        {f.evidence.get('message', '')}")
        if f in problems:
            lines.append(f"        variant: {f.variant or '(none: fix the cause, keep the variant)'}")
        lines.append(f"        {'fix' if f in problems or f in task else 'note'}: {f.fix}")
        if f.brief_edit:
            lines.append(f"        brief edit ({f.cost}):")
            lines.extend(f"          {line}" for line in f.brief_edit.rstrip("\n").splitlines())
    return "\n".join(lines)


def finding_line(f: Finding, traj: Trajectory) -> str:
    """One line for --follow when a finding first appears."""
    return (f"[step {traj.last_step}] {f.severity} {f.id}: {f.evidence.get('message', '')}"
            + (f" -> try {f.variant}" if f.variant else ""))
