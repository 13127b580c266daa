"""What a model card states about a run, read from the run directory, the brief and its records.

Every piece is read defensively: a piece that is missing or cannot be trusted becomes a sentence saying
so, never a guess. Pure: no ML library is imported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from llm_finetuning.brief import Brief
from llm_finetuning.errors import UnusableInput
from llm_finetuning.fileio import read_json_or_none
from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.rundir import metrics_rows, read_diagnosis, read_evaluation
from llm_finetuning.rundir.diagnosis import Diagnosis

if TYPE_CHECKING:
    from llm_finetuning.records.baseline import Baseline


def _number(value: JsonValue) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class PassRates:
    pass_at_1: float | None
    pass_at_k: float | None

    @classmethod
    def of(cls, value: JsonValue) -> PassRates:
        data = value if isinstance(value, dict) else {}
        return cls(_number(data.get("pass_at_1")), _number(data.get("pass_at_k")))


@dataclass(frozen=True)
class Evaluation:
    """What the card quotes of RUN_DIR/eval.json (`finetune eval`'s result for the exported checkpoint)."""

    prompts: int
    k: int
    split: str
    temperature: float | None
    greedy: bool
    base: PassRates
    trained: PassRates
    delta_pass_at_1: float
    ci95: tuple[float, float]
    beyond_noise: bool

    @classmethod
    def of(cls, data: JsonObject) -> Evaluation | None:
        """The result in `data`; None when it lacks a field the card states."""
        prompts, k, delta, ci95 = data.get("prompts"), data.get("k"), _number(data.get("delta_pass_at_1")), data.get("ci95")
        found = data.get("settings")
        settings = found if isinstance(found, dict) else {}
        if not (isinstance(prompts, int) and isinstance(k, int) and delta is not None and isinstance(ci95, list)
                and len(ci95) == 2):
            return None
        lo, hi = _number(ci95[0]), _number(ci95[1])
        if lo is None or hi is None:
            return None
        split = data.get("split")
        return cls(prompts, k, split if isinstance(split, str) else "held-out", _number(settings.get("temperature")),
                   settings.get("greedy") is True, PassRates.of(data.get("base")), PassRates.of(data.get("trained")),
                   delta, (lo, hi), data.get("beyond_noise") is True)


@dataclass(frozen=True)
class Review:
    """Who sealed the inspection record's review, when, and the verdict counts it holds (as written)."""

    reviewer: str | None
    sealed_at: str | None
    counts: dict[str, int]

    @classmethod
    def of(cls, data: JsonObject) -> Review:
        reviewer, sealed_at, counts = data.get("reviewer"), data.get("sealed_at"), data.get("counts")
        return cls(reviewer if isinstance(reviewer, str) else None, sealed_at if isinstance(sealed_at, str) else None,
                   {k: v for k, v in counts.items() if isinstance(v, int)} if isinstance(counts, dict) else {})


@dataclass(frozen=True)
class TrainingFigures:
    """Steps, reward at the first and last logged step, KL at the end and wall time, from metrics.jsonl."""

    steps: JsonValue
    reward_first: JsonValue
    reward_last: JsonValue
    kl_last: JsonValue
    elapsed_s: JsonValue


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
    baseline: Baseline | None = None
    inspection_review: Review | None = None
    gate_lines: list[str] = field(default_factory=list)
    gate_passed: bool | None = None
    training: TrainingFigures | None = None
    evaluation: Evaluation | None = None
    evaluation_note: str = ""
    diagnosis: Diagnosis | None = None
    diagnosis_note: str = ""
    run_manifest: bool = True  # False: not a run directory, so trained outside `finetune launch`


def training_figures(run_dir: Path) -> TrainingFigures | None:
    """Steps, reward at the start and the end, KL at the end and wall time, from metrics.jsonl."""
    rows = [row for row in metrics_rows(run_dir) if "reward" in row]
    if not rows:
        return None
    return TrainingFigures(rows[-1].get("step"), rows[0].get("reward"), rows[-1].get("reward"), rows[-1].get("kl"),
                           rows[-1].get("elapsed_s"))


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
        ev.inspection_review = Review.of(review)
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
        ev.evaluation = Evaluation.of(evaluation)
        if ev.evaluation is None:
            ev.evaluation_note = (f"RUN_DIR/eval.json is not a result `finetune eval` writes; run `finetune eval "
                                  f"{run_dir} --checkpoint {step if label != 'final' else 'final'}` again")
    try:
        ev.diagnosis = read_diagnosis(run_dir)
        if ev.diagnosis is None:
            from llm_finetuning.diagnose import diagnosis_of

            ev.diagnosis = diagnosis_of(run_dir, brief)
    except UnusableInput as exc:
        ev.diagnosis_note = f"no diagnosis: {exc.message}"
    return ev
