"""What a model card states about a run, read from the run directory, the brief and its records.

Every piece is read defensively: a piece that is missing or cannot be trusted becomes a sentence saying
so, never a guess. Pure: no ML library is imported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_finetuning.brief import Brief
from llm_finetuning.errors import UnusableInput
from llm_finetuning.fileio import read_json_or_none
from llm_finetuning.rundir import metrics_rows, read_diagnosis, read_evaluation


@dataclass
class Evidence:
    brief: Brief
    label: str  # "final" or "checkpoint-<step>"
    step: int | None
    checkpoint_sha256: str
    adapter: bool
    merged: bool
    dtype: str
    base_model: str
    baseline: dict[str, Any] | None = None
    inspection_review: dict[str, Any] | None = None
    gate_lines: list[str] = field(default_factory=list)
    gate_passed: bool | None = None
    training: dict[str, Any] = field(default_factory=dict)
    evaluation: dict[str, Any] | None = None
    evaluation_note: str = ""
    diagnosis: dict[str, Any] | None = None
    diagnosis_note: str = ""
    run_manifest: bool = True  # False: not a run directory, so trained outside `finetune launch`




def training_figures(run_dir: Path) -> dict[str, Any]:
    """Steps, reward at the start and the end, KL at the end and wall time, from metrics.jsonl."""
    rows = [row for row in metrics_rows(run_dir) if "reward" in row]
    if not rows:
        return {}
    return {"steps": rows[-1].get("step"), "reward_first": rows[0].get("reward"), "reward_last": rows[-1].get("reward"),
            "kl_last": rows[-1].get("kl"), "elapsed_s": rows[-1].get("elapsed_s")}


def gather(brief: Brief, run_dir: Path, label: str, step: int | None, checkpoint_sha256: str, adapter: bool,
           merged: bool, dtype: str, base_model: str, run_manifest: bool = True) -> Evidence:
    """Everything the card states, each piece verified where the project can verify it."""
    from llm_finetuning.gate import gate_brief
    from llm_finetuning.records.baseline import load_baseline

    ev = Evidence(brief, label, step, checkpoint_sha256, adapter, merged, dtype, base_model, run_manifest=run_manifest)
    try:
        ev.baseline = load_baseline(brief.resolve(brief.records.baseline))
    except UnusableInput:
        ev.baseline = None
    inspection = read_json_or_none(brief.resolve(brief.records.inspection))
    review = inspection.get("review") if inspection is not None else None
    if isinstance(review, dict):
        ev.inspection_review = review
    try:
        report = gate_brief(brief)
        ev.gate_passed = report.passed
        ev.gate_lines = [c.line() for c in report.checks if c.verdict != "pass"]
    except UnusableInput as exc:
        ev.gate_lines = [f"the gate could not run: {exc.message}"]
    ev.training = training_figures(run_dir)
    evaluation = read_evaluation(run_dir)
    if evaluation is None:
        ev.evaluation_note = f"not evaluated: run `finetune eval {run_dir}` before exporting"
    elif evaluation.get("checkpoint_sha256") != checkpoint_sha256:
        ev.evaluation_note = (f"RUN_DIR/eval.json scored another checkpoint ({evaluation.get('checkpoint')}); run "
                              f"`finetune eval {run_dir} --checkpoint {step if label != 'final' else 'final'}`")
    else:
        ev.evaluation = evaluation
    diagnosis = read_diagnosis(run_dir)
    if diagnosis is None:
        try:
            from llm_finetuning.diagnose import diagnose_run

            diagnosis = diagnose_run(run_dir, brief)
        except UnusableInput as exc:
            ev.diagnosis_note = f"no diagnosis: {exc.message}"
    ev.diagnosis = diagnosis
    return ev
