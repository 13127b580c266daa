"""The diagnosis as JSON, as text, and as the RUN_DIR/diagnosis.json record the gate reads.

`diagnosis.json` (format 1) lets the gate accept `grpo.deviation: RUN_DIR` only for a run of the same
brief that was diagnosed healthy, from the metrics as they are now. Pure: json, hashlib, os.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from llm_finetuning.diagnose.context import RunContext
from llm_finetuning.diagnose.rules import Finding
from llm_finetuning.diagnose.stats import step_ranges
from llm_finetuning.diagnose.trajectory import Trajectory
from llm_finetuning.fileio import atomic_write_text, sha256_file

DIAGNOSIS_FILE = "diagnosis.json"
DIAGNOSIS_FORMAT = 1


def diagnosis_json(findings: list[Finding]) -> dict[str, Any]:
    """The `--json` object of DESIGN.md: `{"healthy", "findings": [{"id", "severity", "steps", ...}]}`."""
    return {"healthy": not findings, "findings": [f.to_json() for f in findings]}


def diagnosis_record(traj: Trajectory, findings: list[Finding], ctx: RunContext, run_dir: Path) -> dict[str, Any]:
    """The `--json` object plus what binds it to the run: the brief and the exact metrics diagnosed
    (`source` relative to RUN_DIR, e.g. `metrics.jsonl` or `checkpoints/checkpoint-40/trainer_state.json`)."""
    from llm_finetuning import __version__

    try:
        source = traj.source.resolve().relative_to(run_dir.resolve()).as_posix()
    except ValueError:
        source = str(traj.source.resolve())

    return {
        **diagnosis_json(findings),
        "format": DIAGNOSIS_FORMAT,
        "brief_name": ctx.brief_name,
        "brief_sha256": ctx.brief_sha256,
        "source": source,
        "source_sha256": traj.source_sha256(),
        "steps_logged": len(traj.steps),
        "last_step": traj.last_step,
        "ended": traj.ended,
        "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "llm_finetuning_version": __version__,
    }


def write_diagnosis(run_dir: Path, record: dict[str, Any]) -> Path:
    """Write RUN_DIR/diagnosis.json atomically (temp file, fsync, rename, folder fsync)."""
    path = run_dir / DIAGNOSIS_FILE
    atomic_write_text(path, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path


def verify_diagnosis(run_dir: str | Path, brief_name: str | None = None) -> list[str]:
    """Problems that keep RUN_DIR from justifying a `grpo.deviation` (empty list: it does).

    The run must have been diagnosed (diagnosis.json of this format), healthy, to its end marker, from the
    metrics file as it is now (sha256), and be a run of the brief named `brief_name` when given.
    """
    root = Path(run_dir)
    path = root / DIAGNOSIS_FILE
    if not path.is_file():
        return [f"{path} does not exist: run `finetune diagnose {root}` after the run ends"]
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"{path} is not readable JSON ({exc}): run `finetune diagnose {root}` again"]
    if not isinstance(record, dict) or record.get("format") != DIAGNOSIS_FORMAT:
        return [f"{path} is not a diagnosis of format {DIAGNOSIS_FORMAT}: run `finetune diagnose {root}` again"]
    problems = []
    if record.get("healthy") is not True:
        ids = ", ".join(str(f.get("id")) for f in record.get("findings", []) if isinstance(f, dict))
        problems.append(f"{path}: the run was not diagnosed healthy (findings: {ids or 'unknown'})")
    if record.get("ended") is not True:
        problems.append(f"{path}: the run had not ended when diagnosed; diagnose it again after it finishes")
    if brief_name is not None and record.get("brief_name") != brief_name:
        problems.append(f"{path}: diagnosed run belongs to brief {record.get('brief_name')!r}, not {brief_name!r}")
    source = root / str(record.get("source", ""))
    if not record.get("source") or not source.is_file():
        problems.append(f"{path}: the diagnosed metrics file {record.get('source')!r} is gone")
    else:
        if sha256_file(source) != record.get("source_sha256"):
            problems.append(f"{source} changed since it was diagnosed: run `finetune diagnose {root}` again")
    return problems


def render_text(traj: Trajectory, findings: list[Finding], run_label: str) -> str:
    """Human output: a verdict line, then per finding its evidence, variant, fix and brief edit."""
    span = f"{len(traj.steps)} logged steps to step {traj.last_step}, from {traj.source.name}"
    span += "" if traj.ended else ", run not ended"
    if not findings:
        return (f"{run_label}: healthy ({span}). No failure mode found: keep plain GRPO "
                "(switch variant only when a symptom shows).")
    lines = [f"{run_label}: {len(findings)} finding(s) ({span})"]
    for f in findings:
        lines.append("")
        lines.append(f"{f.severity:<7} {f.id}  steps {step_ranges(f.steps, traj.steps)}")
        lines.append(f"        {f.evidence.get('message', '')}")
        lines.append(f"        variant: {f.variant or '(none: fix the cause, keep the variant)'}")
        lines.append(f"        fix: {f.fix}")
        if f.brief_edit:
            lines.append("        brief edit:")
            lines.extend(f"          {line}" for line in f.brief_edit.rstrip("\n").splitlines())
    return "\n".join(lines)


def finding_line(f: Finding, traj: Trajectory) -> str:
    """One line for --follow when a finding first appears."""
    return (f"[step {traj.last_step}] {f.severity} {f.id}: {f.evidence.get('message', '')}"
            + (f" -> try {f.variant}" if f.variant else ""))
