"""The run fits in GPU memory, by `llm_finetuning.memory.estimate_brief` (loaded into the context).

Without the estimator the check says "not assessed" as a warning, never a pass.
"""

from __future__ import annotations

from llm_finetuning.brief import Brief
from llm_finetuning.fileio import shown
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, WARN, CheckResult
from llm_finetuning.memory import Estimate

ID = "memory_fits"
PATH = "hardware.gpu_memory_gib"


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    est = ctx.memory
    if est is None:
        then = f"run `finetune memory --brief {shown(brief.path)}`"
        return [CheckResult(ID, WARN, PATH, f"not assessed: {ctx.memory_problem}",
                            f"{ctx.memory_fix}, then {then}" if ctx.memory_fix else f"{then} once it is available")]
    if est.settings.cpu:
        return _cpu_run(est)
    figures = f"predicted peak {est.total_gib:.1f} GiB per GPU of {est.gpu_memory_gib:g} GiB"
    assumed = est.settings.episode_assumption()
    if assumed:
        figures += f" (assumed: {assumed})"
    if not est.fits:
        fix = "; or ".join(est.advice[:3]) if est.advice else "use LoRA (`model.adapter: lora`) or more GPUs"
        return [CheckResult(ID, FAIL, PATH, f"does not fit: {figures}", fix)]
    return [CheckResult(ID, PASS, PATH, f"fits: {figures}")]


def _cpu_run(est: Estimate) -> list[CheckResult]:
    """A CPU run (hardware.gpus 0) against this machine's RAM: the estimate is calibrated on GPUs and bounds a
    CPU run from above, so a run over it warns (it may swap, or be killed) rather than fails."""
    figures = f"predicted peak {est.total_gib:.1f} GiB of {est.gpu_memory_gib:g} GiB RAM (a CPU run, hardware.gpus 0)"
    if est.fits:
        return [CheckResult(ID, PASS, "hardware.gpus", f"fits: {figures}")]
    fix = "; or ".join(est.advice[:3]) if est.advice else "use LoRA (`model.adapter: lora`) or a smaller model"
    return [CheckResult(ID, WARN, "hardware.gpus", f"may not fit: {figures}; it may swap or be killed", fix)]
