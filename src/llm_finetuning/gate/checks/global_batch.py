"""The global batch is a whole number of groups: per-device batch x gradient accumulation x training
processes is divisible by num_generations (TRL refuses otherwise), with the smallest fix computed."""

from __future__ import annotations

from math import gcd

from llm_finetuning.brief import MIN_NUM_GENERATIONS, Brief
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, CheckResult
from llm_finetuning.gate.topology import training_processes

ID = "global_batch"


def nearest_multiple(value: int, step: int) -> int:
    """The multiple of `step` (>= step) closest to `value`; the larger one on a tie."""
    lower = (value // step) * step
    upper = lower + step
    if lower < step:
        return upper
    return lower if value - lower < upper - value else upper


def groups_of(total: int, n: int) -> str:
    """`4 groups of 8`, `1 group of 12`: how many groups of n completions a global batch of `total` holds."""
    count = total // n
    return f"{count} group{'' if count == 1 else 's'} of {n}"


def smallest_fixes(per_device: int, accumulation: int, processes: int, n: int) -> list[str]:
    """Edits that make the global batch divisible by n: gradient accumulation first (it leaves the
    per-step memory alone), then the per-device batch, then the group size."""
    ga = nearest_multiple(accumulation, n // gcd(per_device * processes, n))
    pd = nearest_multiple(per_device, n // gcd(accumulation * processes, n))
    fixes = [f"set `grpo.gradient_accumulation_steps: {ga}` (global batch {per_device * ga * processes} = "
             f"{groups_of(per_device * ga * processes, n)})",
             f"set `grpo.per_device_train_batch_size: {pd}` (global batch {pd * accumulation * processes})"]
    total = per_device * accumulation * processes
    divisors = [d for d in range(MIN_NUM_GENERATIONS, total + 1) if total % d == 0]
    if divisors:
        d = min(divisors, key=lambda x: (abs(x - n), -x))
        fixes.append(f"set `grpo.num_generations: {d}` ({groups_of(total, d)})")
    return fixes


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    grpo = brief.grpo
    n = grpo.num_generations
    pd, ga = grpo.per_device_train_batch_size, grpo.gradient_accumulation_steps
    procs = max(training_processes(brief.hardware), 1)
    total = pd * ga * procs
    formula = f"{pd} per device x {ga} accumulation x {procs} training process(es) = {total}"
    if total % n:
        fixes = smallest_fixes(pd, ga, procs, n)
        return [CheckResult(ID, FAIL, "grpo.gradient_accumulation_steps",
                            f"global batch {formula} is not divisible by num_generations {n}",
                            "; or ".join(fixes))]
    return [CheckResult(ID, PASS, "grpo.gradient_accumulation_steps",
                        f"global batch {formula} = {groups_of(total, n)}")]
