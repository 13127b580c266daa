"""The task is text-only: vision tasks are refused (documented, not runnable)."""

from __future__ import annotations

from llm_finetuning.brief import Brief
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, CheckResult

ID = "text_only"


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    modality = brief.task.modality
    if modality == "vision":
        return [CheckResult(
            ID, FAIL, "task.modality",
            "vision is refused: text-only GRPO on a vision-language model learns to sound right without looking "
            "at the image (the reward cannot tell), and this product's trainer feeds no images",
            "recast the task as text (`task.modality: text`) or use a VLM-aware trainer; see the "
            "finetuning-method-selection skill")]
    return [CheckResult(ID, PASS, "task.modality", "text-only task")]
