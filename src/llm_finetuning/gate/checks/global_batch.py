"""The generation batch is a whole number of groups: per-device batch x training processes x steps per
generation is divisible by num_generations (TRL refuses otherwise), with the smallest fix computed. The rule
and its fixes live with the brief (`brief.batch`), where the renderer reads them too."""

from __future__ import annotations

from llm_finetuning.brief import Brief
from llm_finetuning.brief.batch import groups_of
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, CheckResult

ID = "global_batch"


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    batch = brief.grpo.generation_batch(max(brief.hardware.training_processes, 1))
    n = batch.num_generations
    if not batch.holds_whole_groups:
        what = (f"is not a multiple of the global batch {batch.global_batch}" if not batch.divides_global_batch
                else f"is not divisible by num_generations {n}")
        return [CheckResult(ID, FAIL, "grpo.gradient_accumulation_steps",
                            f"generation batch {batch.formula} {what}", "; or ".join(batch.fixes()))]
    return [CheckResult(ID, PASS, "grpo.gradient_accumulation_steps",
                        f"generation batch {batch.formula} = {groups_of(batch.size, n)}")]
