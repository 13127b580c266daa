"""Base success is nonzero: the baseline record for this model and these rewards saw some group succeed.

GRPO learns from differences within a group; a model that never succeeds gives every group the same
reward and no gradient. Warns when almost every group ties or most completions are cut off, and when
the record was measured under sampling settings other than the brief's (each difference named) or does
not say which settings it was measured under: its figures may then not describe this brief's run.
Fails a record measured at an evaluation setting (`finetune baseline --temperature T` or `--greedy`):
the learning signal is judged at the training temperature, where GRPO samples its groups.
"""

from __future__ import annotations

from typing import Any

from llm_finetuning.brief import Brief
from llm_finetuning.fileio import shown
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, WARN, CheckResult
from llm_finetuning.records.baseline import measured_for_evaluation, recorded_decoding, settings_drift

ID = "base_success_nonzero"
PATH = "records.baseline"
TIE_WARN = 0.9
TRUNCATED_WARN = 0.5


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    if ctx.baseline_problems:
        return [CheckResult(ID, FAIL, PATH, f"{p.id}: {p.message}", p.fix) for p in ctx.baseline_problems]
    b = ctx.baseline
    assert b is not None  # load_context loads the record whenever it has no problem
    if measured_for_evaluation(b):
        return [evaluation_setting_failure(brief, b)]
    n = b.get("prompts", {}).get("count", "?")
    figures = f"pass@1 {b['pass_at_1']:.2f}, pass@{b['k']} {b['pass_at_k']:.2f} over {n} prompts"
    if b["pass_at_k"] <= 0:
        return [CheckResult(
            ID, FAIL, PATH, f"the base model never succeeded ({figures}): every group ties at zero and GRPO "
            "has nothing to learn from",
            "train on demonstrations first with SFT (the lora-qlora-recipes skill), point model.id at the SFT "
            f"model, then run `finetune baseline {shown(brief.path)}` again")] + settings_warnings(brief, b)
    results = [CheckResult(ID, PASS, PATH, f"base success is nonzero: {figures}")]
    tie = b["frac_groups_all_tie"]
    if tie >= TIE_WARN:
        results.append(CheckResult(
            ID, WARN, PATH, f"{tie:.0%} of groups have all-equal rewards: little learning signal",
            "use easier prompts, a finer-grained reward (partial credit), or a larger grpo.num_generations"))
    truncated = b["frac_truncated"]
    if truncated >= TRUNCATED_WARN:
        results.append(CheckResult(
            ID, WARN, "grpo.max_completion_length", f"{truncated:.0%} of baseline completions were cut at "
            f"max_completion_length ({brief.section('grpo')['max_completion_length']} tokens)",
            "raise grpo.max_completion_length or ask for a shorter answer in the prompt, then run "
            f"`finetune baseline {shown(brief.path)}` again"))
    return results + settings_warnings(brief, b)


def evaluation_setting_failure(brief: Brief, record: dict[str, Any]) -> CheckResult:
    """The record at records.baseline measures an evaluation setting, not the training temperature."""
    decoding = recorded_decoding(record)
    setting = decoding.label if decoding is not None else "an evaluation setting"
    temperature = float(brief.section("grpo").get("temperature", 1.0))
    return CheckResult(
        ID, FAIL, PATH, f"the baseline record was measured at {setting} (`finetune baseline --temperature/--greedy`), "
        f"an evaluation setting: the learning signal is judged at the training temperature (grpo.temperature "
        f"{temperature:g})",
        f"run `finetune baseline {shown(brief.path)}` without --temperature or --greedy: it measures at "
        "grpo.temperature into records.baseline")


def _shown_value(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, str):
        return repr(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def settings_warnings(brief: Brief, record: dict[str, Any]) -> list[CheckResult]:
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
