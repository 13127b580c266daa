"""The run fits in GPU memory, by `llm_finetuning.memory.estimate_brief` (loaded into the context).

Without the estimator the check says "not assessed" as a warning, never a pass.
"""

from __future__ import annotations

from llm_finetuning.brief import Brief
from llm_finetuning.fileio import shown
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, WARN, CheckResult

ID = "memory_fits"
PATH = "hardware.gpu_memory_gib"


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    est = ctx.memory
    if est is None:
        return [CheckResult(ID, WARN, PATH, f"not assessed: {ctx.memory_problem}",
                            f"run `finetune memory --brief {shown(brief.path)}` once it is available")]
    figures = f"predicted peak {est.total_gib:.1f} GiB per GPU of {est.gpu_memory_gib:g} GiB"
    assumed = est.settings.episode_assumption()
    if assumed:
        figures += f" (assumed: {assumed})"
    if not est.fits:
        fix = "; or ".join(est.advice[:3]) if est.advice else "use LoRA (`model.adapter: lora`) or more GPUs"
        return [CheckResult(ID, FAIL, PATH, f"does not fit: {figures}", fix)]
    return [CheckResult(ID, PASS, PATH, f"fits: {figures}")]
