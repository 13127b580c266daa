"""The group is large enough: num_generations >= 8 (smaller groups make the group baseline noisy)."""

from __future__ import annotations

from llm_finetuning.brief import MIN_NUM_GENERATIONS, Brief
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, CheckResult

ID = "num_generations"


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    n = brief.grpo.num_generations
    if n < MIN_NUM_GENERATIONS:
        return [CheckResult(ID, FAIL, "grpo.num_generations",
                            f"found {n}; groups under {MIN_NUM_GENERATIONS} give a noisy group baseline",
                            f"set `grpo.num_generations: {MIN_NUM_GENERATIONS}` (and keep the global batch a multiple of it)")]
    return [CheckResult(ID, PASS, "grpo.num_generations", f"{n} completions per prompt")]
