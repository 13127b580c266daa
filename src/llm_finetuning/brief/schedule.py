"""The learning-rate schedule a brief decides (`grpo.lr_scheduler`, `grpo.warmup_ratio`), as TRL runs it.

Pure: the multipliers are transformers' own formulas (`get_constant_schedule_with_warmup`,
`get_linear_schedule_with_warmup`, `get_cosine_schedule_with_warmup` with half a cycle), evaluated at the
steps the optimizer takes (0 .. max_steps - 1), so the gate can say what learning rate a run will see
before it starts, the renderer writes the matching `lr_scheduler_type` and `warmup_steps`, and
`finetune diagnose` can tell a decayed learning rate from a low one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llm_finetuning.brief.sections import LR_SCHEDULERS, GrpoSpec, choice_of, number_of, value_of
from llm_finetuning.jsonvalue import JsonObject

SCHEDULES = ("constant", "cosine", "linear")


@dataclass(frozen=True)
class Schedule:
    """A brief's schedule: its name, warm-up steps, steps and peak learning rate."""

    name: str
    warmup_steps: int
    max_steps: int
    peak: float

    @classmethod
    def of(cls, grpo: JsonObject) -> Schedule:
        """The schedule of a brief's (defaulted) `grpo` section. Warm-up steps round up, as transformers does."""
        return cls.made(choice_of(grpo, "lr_scheduler", LR_SCHEDULERS), number_of(grpo, "warmup_ratio"),
                        value_of(grpo, "max_steps", int), number_of(grpo, "learning_rate"))

    @classmethod
    def of_spec(cls, grpo: GrpoSpec) -> Schedule:
        """The schedule of a loaded brief's `grpo` section."""
        return cls.made(grpo.lr_scheduler, grpo.warmup_ratio, grpo.max_steps, grpo.learning_rate)

    @classmethod
    def made(cls, name: str, warmup_ratio: float, max_steps: int, peak: float) -> Schedule:
        return cls(name, math.ceil(float(warmup_ratio) * max_steps), int(max_steps), float(peak))

    @property
    def trl_type(self) -> str:
        """GRPOConfig's `lr_scheduler_type` for this schedule."""
        return "constant_with_warmup" if self.name == "constant" and self.warmup_steps else self.name

    def multiplier(self, step: int) -> float:
        """The share of the peak learning rate the optimizer uses at `step` (0-based)."""
        if step < self.warmup_steps:
            return step / max(1, self.warmup_steps)
        if self.name == "constant":
            return 1.0
        progress = (step - self.warmup_steps) / max(1, self.max_steps - self.warmup_steps)
        if self.name == "linear":
            return max(0.0, 1.0 - progress)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    def learning_rate(self, step: int) -> float:
        return self.peak * self.multiplier(step)

    @property
    def mean_learning_rate(self) -> float:
        """The mean learning rate over the run's steps (what the run learns at, on average)."""
        return self.peak * sum(self.multiplier(s) for s in range(self.max_steps)) / max(1, self.max_steps)

    def describe(self) -> str:
        """`constant, no warm-up` / `cosine to 0 after 4 warm-up steps` for reports."""
        shape = {"constant": "constant", "cosine": "cosine decay to 0", "linear": "linear decay to 0"}[self.name]
        warm = f"{self.warmup_steps} warm-up step(s)" if self.warmup_steps else "no warm-up"
        return f"{shape}, {warm}"
