"""TRL's batch rule, in one place: the generation batch holds whole groups of `num_generations` completions.

TRL 1.16's `GRPOConfig.__post_init__` sets `generation_batch_size = per_device_train_batch_size x num_processes
x steps_per_generation` (steps_per_generation defaults to gradient_accumulation_steps; a
`generation_batch_size` given instead must divide by per_device x num_processes) and refuses a generation batch
that does not divide by `num_generations`. The gate checks this rule and the renderer refuses what breaks it;
both read it here, with the smallest edits that mend it. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

MIN_NUM_GENERATIONS = 8  # the recipe's smallest group (references/grpo-recipe.md)


def nearest_multiple(value: int, step: int) -> int:
    """The multiple of `step` (>= step) closest to `value`; the larger one on a tie."""
    lower = (value // step) * step
    upper = lower + step
    if lower < step:
        return upper
    return lower if value - lower < upper - value else upper


def groups_of(total: int, n: int) -> str:
    """`4 groups of 8`, `1 group of 12`: how many groups of n completions a batch of `total` holds."""
    count = total // n
    return f"{count} group{'' if count == 1 else 's'} of {n}"


@dataclass(frozen=True)
class GenerationBatch:
    """One generation batch as TRL computes it (`GrpoSpec.generation_batch` builds it from the brief)."""

    per_device: int
    processes: int
    steps_per_generation: int | None  # None when generation_batch_size is overridden instead
    num_generations: int
    accumulation: int
    steps_overridden: bool  # grpo.overrides.steps_per_generation, rather than derived from the accumulation
    size_override: int | None = None  # grpo.overrides.generation_batch_size

    @property
    def global_batch(self) -> int:
        """Completions per optimizer step on all processes together."""
        return self.per_device * self.processes

    @property
    def size(self) -> int:
        if self.size_override is not None:
            return self.size_override
        return self.global_batch * (self.steps_per_generation or 0)

    @property
    def formula(self) -> str:
        if self.size_override is not None:
            return f"grpo.overrides.generation_batch_size {self.size}"
        return (f"{self.per_device} per device x {self.processes} training process(es) x "
                f"{self.steps_per_generation} step(s) per generation = {self.size}")

    @property
    def divides_global_batch(self) -> bool:
        """An overridden generation_batch_size is a whole number of global batches (TRL refuses otherwise)."""
        return self.global_batch > 0 and self.size % self.global_batch == 0

    @property
    def holds_whole_groups(self) -> bool:
        return self.size > 0 and self.size % self.num_generations == 0 and self.divides_global_batch

    def fixes(self) -> list[str]:
        """Edits that make the batch hold whole groups, the cheapest first: the steps per generation (they leave
        the per-step memory alone), then the per-device batch, then the group size."""
        n, procs = self.num_generations, max(self.processes, 1)
        if self.size_override is not None:
            step = self.global_batch * n // gcd(self.global_batch, n) if self.global_batch else n
            return [f"set `grpo.overrides.generation_batch_size: {nearest_multiple(self.size, step)}`"]
        steps = self.steps_per_generation or 1
        factor = steps // max(self.accumulation, 1) if not self.steps_overridden else 1
        need = n // gcd(self.per_device * procs * factor, n)
        if self.steps_overridden:
            fixes = [f"set `grpo.overrides.steps_per_generation: {nearest_multiple(steps, need)}`"]
        else:
            ga = nearest_multiple(self.accumulation, need)
            total = self.per_device * procs * factor * ga
            fixes = [f"set `grpo.gradient_accumulation_steps: {ga}` (generation batch {total} = {groups_of(total, n)})"]
        pd = nearest_multiple(self.per_device, n // gcd(steps * procs, n))
        fixes.append(f"set `grpo.per_device_train_batch_size: {pd}` (generation batch {pd * procs * steps})")
        divisors = [d for d in range(MIN_NUM_GENERATIONS, self.size + 1) if self.size % d == 0]
        if divisors:
            d = min(divisors, key=lambda x: (abs(x - n), -x))
            fixes.append(f"set `grpo.num_generations: {d}` ({groups_of(self.size, d)})")
        return fixes
