"""`finetune diagnose`: name a GRPO run's failure mode from its logs and the variant (or fix) to try.

Reads RUN_DIR/metrics.jsonl (from `finetune launch`) or TRL's trainer_state.json, plus what the run
directory says about the brief, the model and logged completions; applies pure rules (rules.py) whose
finding ids are the contract of docs/diagnose.md; writes RUN_DIR/diagnosis.json for the gate
(records/diagnosis.py).

Pure at import: no torch, transformers, trl, numpy or matplotlib (the plot imports matplotlib inside).
"""

from __future__ import annotations

from pathlib import Path

from llm_finetuning.brief import Brief
from llm_finetuning.diagnose.context import RunContext, load_context
from llm_finetuning.diagnose.report import diagnosis_json, diagnosis_record, render_text
from llm_finetuning.diagnose.rules import FINDING_IDS, RULES, Finding, diagnose, failure_modes, task_findings
from llm_finetuning.diagnose.trajectory import Series, Trajectory, load_trajectory
from llm_finetuning.rundir.diagnosis import Diagnosis


def diagnose_run(run_dir: str | Path, brief: Brief | str | Path | None = None) -> dict[str, object]:
    """The `--json` object for RUN_DIR (no file written); `brief` a loaded brief or its path. Raises
    `UnusableInput` when it cannot be read."""
    return diagnosis_json(diagnose(load_trajectory(run_dir), load_context(run_dir, brief)))


def diagnosis_of(run_dir: str | Path, brief: Brief | str | Path | None = None) -> Diagnosis:
    """The diagnosis record `finetune diagnose` would write for RUN_DIR, as a value (no file written). Raises
    `UnusableInput` when the run cannot be read."""
    traj, ctx = load_trajectory(run_dir), load_context(run_dir, brief)
    return diagnosis_record(traj, diagnose(traj, ctx), ctx, Path(run_dir))


__all__ = [
    "diagnose_run",
    "diagnosis_of",
    "FINDING_IDS",
    "RULES",
    "Finding",
    "RunContext",
    "Series",
    "Trajectory",
    "diagnose",
    "diagnosis_json",
    "diagnosis_record",
    "failure_modes",
    "task_findings",
    "load_context",
    "load_trajectory",
    "render_text",
]
