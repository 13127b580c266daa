"""Baseline figures from scored groups, and the verdict on whether GRPO has a signal to learn from.

Success of one completion: every *verifier* reward that returned a value scored 1.0 or more, and at
least one returned a value. Verifiers are the built-in `exact_match`, `json_schema` and `unit_tests`
and every custom `module:function` reward; `length_penalty` and `judge` shape the total but do not
decide success. (A brief with no verifier at all counts every reward except `length_penalty`.)

pass@1 is the mean over prompts of (successes / k); pass@k is the share of prompts with at least one
success among their k completions (the unbiased estimator of Chen et al. 2021 with n = k). A group
whose k totals are all equal gives GRPO no advantage to learn from: `frac_groups_all_tie` is the
share of such groups (TRL logs the same quantity as `frac_reward_zero_std`). Pure: no ML imports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from llm_finetuning.brief.sections import RewardSpec
from llm_finetuning.reward_registry import VERIFIERS, is_custom
from llm_finetuning.sampling.select import sample_number, sample_rewards

NOT_SUCCESS_DECIDING = ("length_penalty", "judge")
SUCCESS_DEFINITION = ("a completion succeeds when every verifier reward (exact_match, json_schema, unit_tests, tool_call, "
                      "custom module:function) that returned a value scored >= 1.0")

# Thresholds of the verdict.
ALL_PASS = 0.95
MOSTLY_TIED = 0.9
TRUNCATION_WARN = 0.1


def verifier_names(rewards: Sequence[RewardSpec]) -> list[str]:
    """Names (as scored) of the rewards that decide success."""
    chosen = [r.name for r in rewards if r.fn in VERIFIERS or is_custom(r.fn)]
    if chosen:
        return chosen
    return [r.name for r in rewards if r.fn not in ("length_penalty",)]


class BaselineFigures(TypedDict):
    """What a baseline measured (`baseline_figures`)."""

    pass_at_1: float
    pass_at_k: float
    mean_reward: dict[str, float]
    mean_total: float
    frac_groups_all_tie: float
    frac_truncated: float
    successes: int
    completions: int


def is_success(rewards: Mapping[str, float | None], verifiers: list[str]) -> bool:
    values = [rewards.get(n) for n in verifiers]
    present = [v for v in values if v is not None]
    return bool(present) and all(v >= 1.0 - 1e-9 for v in present)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def baseline_figures(groups: Sequence[Sequence[Mapping[str, object]]], names: list[str],
                     verifiers: list[str]) -> BaselineFigures:
    """Figures of a baseline from scored groups: each completion `{"rewards", "total", "truncated"}`."""
    n_groups = len(groups)
    completions = [c for g in groups for c in g]
    rewards = [sample_rewards(c) for c in completions]
    totals = [sample_number(c.get("total")) for c in completions]
    successes = [sum(is_success(sample_rewards(c), verifiers) for c in g) for g in groups]
    pass_at_1 = _mean([s / len(g) for s, g in zip(successes, groups, strict=True) if g])
    pass_at_k = _mean([1.0 if s > 0 else 0.0 for s in successes])
    mean_reward: dict[str, float] = {}
    for name in names:
        vals = [v for r in rewards if (v := r.get(name)) is not None]
        mean_reward[name] = round(_mean(vals), 6)
    ties = 0
    for g in groups:
        group_totals = [sample_number(c.get("total")) or 0.0 for c in g]
        if group_totals and max(group_totals) - min(group_totals) <= 1e-9:
            ties += 1
    totals_all = [t for t in totals if t is not None]
    return {
        "pass_at_1": round(pass_at_1, 6),
        "pass_at_k": round(pass_at_k, 6),
        "mean_reward": mean_reward,
        "mean_total": round(_mean(totals_all), 6),
        "frac_groups_all_tie": round(ties / n_groups, 6) if n_groups else 0.0,
        "frac_truncated": round(_mean([1.0 if c.get("truncated") else 0.0 for c in completions]), 6),
        "successes": sum(successes),
        "completions": len(completions),
    }


@dataclass
class Verdict:
    """Is there a learning signal for GRPO, in one line, and what to do about it."""

    signal: bool
    headline: str
    advice: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {"signal": self.signal, "headline": self.headline, "advice": self.advice}


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def verdict(fig: BaselineFigures, k: int, max_completion_length: int, num_generations: int | None = None) -> Verdict:
    """The learning-signal verdict on baseline figures measured with k completions a prompt at
    `max_completion_length` (the record's own settings), with the cheapest fixes first; `num_generations`, the
    group size training uses, when the brief says it."""
    advice: list[str] = []
    truncated = float(fig["frac_truncated"])
    lengthen = (f"lengthen completions: {_pct(truncated)} were cut at grpo.max_completion_length="
                f"{max_completion_length}; raise it (e.g. to {2 * max_completion_length}) and run the baseline again")
    if fig["pass_at_k"] == 0:
        if truncated >= TRUNCATION_WARN:
            advice.append(lengthen)
        advice += [  # inspecting the reward takes minutes; SFT and a curriculum take a training run
            "check the reward with `finetune inspect`: a reward that never fires may be wrong",
            "SFT first: fine-tune on a few hundred demonstrations of the expected output "
            "(lora-qlora-recipes skill), then run the baseline on the SFT model",
            "easier prompts: start GRPO on a subset the model sometimes solves (a curriculum)",
        ]
        return Verdict(False, f"No learning signal: none of {fig['completions']} completions succeeded "
                              f"(pass@{k} = 0). GRPO learns only from differences within a group.", advice)
    if fig["pass_at_1"] >= ALL_PASS:
        advice.append("harder prompts: the base model already solves almost everything, so groups tie at 1.0")
        return Verdict(False, f"Little to learn: pass@1 is {_pct(fig['pass_at_1'])} already.", advice)
    if fig["frac_groups_all_tie"] >= MOSTLY_TIED:
        if truncated >= TRUNCATION_WARN:
            advice.append(lengthen)
        if num_generations is not None and num_generations != k:
            advice.append(f"measure at training's group size: this baseline sampled k={k} completions a prompt, "
                          f"training samples grpo.num_generations={num_generations}; run `finetune baseline` "
                          "without --k")
        advice += [
            f"more completions per group than k={k} (raise grpo.num_generations) or a higher grpo.temperature, "
            "so that more groups mix successes and failures",
            "easier prompts (or SFT first) so that successes are not rare",
        ]
        return Verdict(False, f"Weak learning signal: {_pct(fig['frac_groups_all_tie'])} of groups have all-equal "
                              f"rewards (pass@1 {_pct(fig['pass_at_1'])}, pass@{k} {_pct(fig['pass_at_k'])}).",
                       advice)
    if truncated >= TRUNCATION_WARN:
        advice.append(lengthen)
    return Verdict(True, f"Learning signal present: pass@1 {_pct(fig['pass_at_1'])}, pass@{k} "
                         f"{_pct(fig['pass_at_k'])}; {_pct(1 - fig['frac_groups_all_tie'])} of groups mix "
                         "higher and lower rewards.", advice)


def finite(x: float) -> float:
    """A JSON-safe number (records refuse NaN and infinities)."""
    return x if math.isfinite(x) else 0.0
