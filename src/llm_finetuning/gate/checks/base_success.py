"""Base success is nonzero: the baseline record for this model and these rewards saw some group succeed.

GRPO learns from differences within a group; a model that never succeeds gives every group the same
reward and no gradient. Warns when almost every group ties or most completions are cut off, and when
the record was measured under sampling settings other than the brief's (each difference named) or does
not say which settings it was measured under: its figures may then not describe this brief's run.
Fails a record measured at an evaluation setting (`finetune baseline --temperature T` or `--greedy`):
the learning signal is judged at the training temperature, where GRPO samples its groups.

At zero success the fix is the baseline's own advice (the record's `verdict`), with `finetune inspect`
first while no sealed inspection has checked the reward: a reward that never matches the model's answers
(its extraction, pattern or answer field) gives the same figures as a task out of reach, and costs minutes
to rule out where SFT costs a training run.
"""

from __future__ import annotations

from llm_finetuning.brief import Brief
from llm_finetuning.fileio import shown
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, WARN, CheckResult
from llm_finetuning.records.baseline import Baseline, Setting, settings_drift

ID = "base_success_nonzero"
PATH = "records.baseline"
TIE_WARN = 0.9
TRUNCATED_WARN = 0.5


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    if ctx.baseline_problems:
        return [CheckResult(ID, FAIL, PATH, f"{p.id}: {p.message}", p.fix) for p in ctx.baseline_problems]
    b = ctx.baseline
    assert b is not None  # load_context loads the record whenever it has no problem
    if b.for_evaluation:
        return [evaluation_setting_failure(brief, b)]
    n = "?" if b.prompts.count is None else b.prompts.count
    figures = f"pass@1 {b.pass_at_1:.2f}, pass@{b.k} {b.pass_at_k:.2f} over {n} prompts"
    if b.pass_at_k <= 0:
        return [zero_success_failure(brief, b, figures, reward_checked=not ctx.inspection_problems)] + \
            settings_warnings(brief, b)
    results = [CheckResult(ID, PASS, PATH, f"base success is nonzero: {figures}")]
    tie = b.frac_groups_all_tie
    if tie >= TIE_WARN:
        results.append(CheckResult(
            ID, WARN, PATH, f"{tie:.0%} of groups have all-equal rewards: little learning signal",
            "use easier prompts, a finer-grained reward (partial credit), or a larger grpo.num_generations"))
    truncated = b.frac_truncated
    if truncated >= TRUNCATED_WARN:
        measured = b.sampling.max_completion_length if b.sampling is not None else None
        cap = measured if measured is not None else brief.grpo.max_completion_length
        results.append(CheckResult(
            ID, WARN, "grpo.max_completion_length", f"{truncated:.0%} of baseline completions were cut at "
            f"max_completion_length ({cap} tokens, the baseline's setting)",
            "raise grpo.max_completion_length or ask for a shorter answer in the prompt, then run "
            f"`finetune baseline {shown(brief.path)}` again"))
    return results + settings_warnings(brief, b)


def zero_success_failure(brief: Brief, record: Baseline, figures: str, reward_checked: bool) -> CheckResult:
    """pass@k is 0: the baseline's own advice, with `finetune inspect` first while no inspection checked the
    reward and left out once one has (`reward_checked`)."""
    advice = list(record.advice) or [
        "train on demonstrations first with SFT (the lora-qlora-recipes skill), point model.id at the SFT "
        f"model, then run `finetune baseline {shown(brief.path)}` again"]
    message = f"the base model never succeeded ({figures}): every group ties at zero and GRPO has nothing to learn from"
    advice = [a for a in advice if "finetune inspect" not in a] or advice
    if not reward_checked:
        inspection = shown(brief.resolve(brief.records.inspection))
        advice.insert(0, f"check the reward first: `finetune inspect {shown(brief.path)}` then `finetune review "
                         f"{inspection}` shows whether it scores right answers as right")
        message += ("; no inspection has checked the reward yet, and a reward that never matches the model's "
                    "answers (its extraction, pattern or answer field) gives these same figures")
    fix = " ".join(f"({i}) {a}" for i, a in enumerate(advice, 1)) if len(advice) > 1 else advice[0]
    return CheckResult(ID, FAIL, PATH, message, fix)


def evaluation_setting_failure(brief: Brief, record: Baseline) -> CheckResult:
    """The record at records.baseline measures an evaluation setting, not the training temperature."""
    decoding = record.decoding
    setting = decoding.label if decoding is not None else "an evaluation setting"
    temperature = float(brief.grpo.temperature)
    return CheckResult(
        ID, FAIL, PATH, f"the baseline record was measured at {setting} (`finetune baseline --temperature/--greedy`), "
        f"an evaluation setting: the learning signal is judged at the training temperature (grpo.temperature "
        f"{temperature:g})",
        f"run `finetune baseline {shown(brief.path)}` without --temperature or --greedy: it measures at "
        "grpo.temperature into records.baseline")


def _shown_value(value: Setting) -> str:
    if value is None:
        return "none"
    if isinstance(value, str):
        return repr(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def settings_warnings(brief: Brief, record: Baseline) -> list[CheckResult]:
    """One warning per sampling setting that differs from the record's, and one for settings it lacks."""
    redo = f"run `finetune baseline {shown(brief.path)}` to measure under the brief's settings"
    drift, unknown = settings_drift(record, brief)
    out = [CheckResult(ID, WARN, d.yaml_path,
                       f"the baseline was measured with {d.name} {_shown_value(d.recorded)}; the brief now sets "
                       f"{d.yaml_path} {_shown_value(d.now)}: its figures may not hold for this run", redo)
           for d in drift]
    if unknown:
        out.append(CheckResult(
            ID, WARN, PATH, f"the baseline record does not say which {', '.join(unknown)} it was measured with "
            "(an older `finetune baseline` wrote it): whether they match the brief is unknown", redo))
    return out
