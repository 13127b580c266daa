"""The gate's checks, one module each, run in this order. Each module has `ID` and
`check(brief, ctx) -> list[CheckResult]`: a pure function of the brief and the context loaded up front."""

from __future__ import annotations

from collections.abc import Callable

from llm_finetuning.brief import Brief
from llm_finetuning.gate.checks import (
    base_success,
    brief_is_valid,
    generation_hardware,
    global_batch,
    memory_fits,
    num_generations,
    overrides,
    protection,
    recipe_values,
    reward_inspected,
    text_only,
    tracking,
    variant_table,
    verifiable_reward,
)
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import CheckResult

Check = Callable[[Brief, GateContext], list[CheckResult]]

CHECKS: list[tuple[str, Check]] = [
    (m.ID, m.check)
    for m in (brief_is_valid, verifiable_reward, text_only, base_success, reward_inspected, num_generations,
              global_batch, recipe_values, variant_table, generation_hardware, overrides, tracking, memory_fits,
              protection)
]
