"""The rules of `finetune diagnose`: each a pure function of the trajectory and the run context that
returns a `Finding` or None. Thresholds are module constants, documented where they are defined.

The recipe (skills/grpo-rlvr-training): start with plain GRPO, watch for a specific symptom, and only
then switch variant. Findings are of two kinds (docs/diagnose.md): the run's (`training`: a pathology of the
optimisation, which makes the run unhealthy) and the task's (`task`: what the base model cannot do yet, flat or
improving, which the run exists to reduce and which leaves the run healthy). So three rules name a variant (entropy collapse -> DAPO, length-reward correlation
-> Dr.GRPO, MoE -> GSPO, required) and the others name what to fix instead (data, reward, length,
learning rate), with `variant` null. Rewards are assumed to lie roughly in [0, 1] per function, as the
built-in ones do; absolute thresholds below are in those units.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from llm_finetuning.brief.variants import VARIANT_SETTINGS
from llm_finetuning.diagnose.context import CORRECTNESS_NAME, SHAPING_NAME, RunContext
from llm_finetuning.diagnose.stats import (
    fitted_change,
    fmt,
    median,
    pearson,
    spikes,
    step_ranges,
    window_size,
)
from llm_finetuning.diagnose.trajectory import EpisodeStats, Series, Trajectory
from llm_finetuning.errors import Severity
from llm_finetuning.rundir import EVAL_JSONL

# Trend rules need this many logged points; fewer and they stay silent (too little to call a trend).
MIN_TREND_POINTS = 5

# entropy_collapse: the late-window median entropy is at most this share of the early-window median...
ENTROPY_COLLAPSE_RATIO = 0.35
# ...or has fallen below this many nats per token (from an early median at least twice as high).
ENTROPY_FLOOR = 0.05

# converged (info, in place of entropy_collapse): entropy fell while correctness rose at least CONVERGED_RISE
# (reward units, early to late window median) to at least CONVERGED_LEVEL of its ceiling, and stayed up (the late
# median at least CONVERGED_HOLD x the best window's); or while a held-out score rose: `finetune eval` better
# beyond the noise (RUN_DIR/eval.json), or held-out scores (eval.jsonl) up EVAL_GAP_MIN and not fallen back.
CONVERGED_RISE = 0.2
CONVERGED_LEVEL = 0.8
CONVERGED_HOLD = 0.9

# entropy_rising: the late-window median entropy is at least this multiple of the early-window median...
ENTROPY_RISE_RATIO = 1.5
# ...and entropy climbed with the steps (correlation at least this), not one bump: it keeps rising.
ENTROPY_RISE_CORR = 0.6

# length_reward_correlation: mean completion length rose by at least this share (fitted line, first to last
# step) with at least this correlation against the step...
LENGTH_RISE_MIN = 0.20
LENGTH_TREND_CORR = 0.5
# ...while correctness moved by at most this much (fitted change, reward units)...
CORRECTNESS_FLAT = 0.05
# ...and the total reward tracked the length at least this closely (when reward and correctness differ).
LENGTH_REWARD_CORR = 0.5

# moe_instability / kl_blowup spikes: at least SPIKE_FACTOR x the median of the earlier points.
SPIKE_FACTOR = 10.0
CLIP_SPIKE_MIN = 0.2  # clip_ratio/region_mean: share of tokens clipped
KL_SPIKE_MIN = 0.1  # nats per token
GRAD_SPIKE_FLOOR = 1e-3
# kl_blowup: spikes at this many distinct steps (isolated ones on small batches are estimator noise)...
SPIKE_MIN_COUNT = 3
# ...or the late-window median KL above this (warning) / KL_BLOWUP_ERROR (error), nats per token.
KL_BLOWUP_LEVEL = 0.5
KL_BLOWUP_ERROR = 2.0

# no_signal_*: a step has no signal when at least this share of its groups have zero reward std...
NO_SIGNAL_FRAC = 0.9
# ...and the finding fires when this share of logged steps has no signal, or the late window's median does.
NO_SIGNAL_SHARE = 0.75

# truncation: late-window median of completions/clipped_ratio at or above this (warning)...
TRUNCATION_RATIO = 0.3
# ...and an error at or above this, or when no completion terminated (mean_terminated_length 0). A warning is the
# task's (the base model rambles) unless the ratio climbed at least TRUNCATION_CLIMB from the early window.
TRUNCATION_ERROR_RATIO = 0.9
TRUNCATION_CLIMB = 0.2

# reward_hacking: a shaping reward rose at least this much and ends within SATURATED of its maximum...
HACK_RISE_MIN = 0.2
SATURATED = 0.9
# ...or one shaping reward carries at least this share of the total reward's rise...
DOMINANT_SHARE = 0.8
REWARD_RISE_MIN = 0.1
# ...or a held-out stricter verifier gains less than this share of what the training reward gained, with a
# gap that widened by at least EVAL_GAP_MIN.
EVAL_TRACK_SHARE = 0.25
EVAL_GAP_MIN = 0.1

# ...and, with a total reward that did not rise REWARD_RISE_MIN, the length must have grown at least this share
# (GRPO's length bias drifting): a modest drift that no reward pays for is not length hacking.
LENGTH_DRIFT_MIN = 0.5

# zero_loss: |loss| and grad_norm at most this on at least ZERO_LOSS_SHARE of the steps.
ZERO_EPS = 1e-8
ZERO_LOSS_SHARE = 0.5


# The two kinds of finding: a pathology of the run, or what the base model cannot do yet.
TRAINING = "training"
TASK = "task"

# What applying a brief edit costs, by the section it changes: the records (baseline, inspection) are bound to
# the episode, the rewards, the model and the prompts (records/bindings.py), and the baseline to its sampling.
_STALE_ALL = ("makes records/baseline.json and records/inspection.json stale: a new `finetune baseline`, "
              "`finetune inspect` and `finetune review` before the next run")
EDIT_COSTS = {
    "episode": "an episode change: " + _STALE_ALL,
    "rewards": "a reward change: " + _STALE_ALL,
    "model": "a model change: " + _STALE_ALL,
    "data": "a data change: " + _STALE_ALL,
}
_BASELINE_SETTINGS = ("max_completion_length", "temperature")  # records/baseline.py compares them with the brief
_KEEPS_RECORDS = "keeps the records: gate, render and launch again"


def edit_cost(brief_edit: str | None) -> str | None:
    """What applying `brief_edit` costs: which records it makes stale, or that it keeps them."""
    if not brief_edit:
        return None
    sections = [line.split(":", 1)[0] for line in brief_edit.splitlines() if line and not line[0].isspace()]
    costly = [EDIT_COSTS[s] for s in sections if s in EDIT_COSTS]
    if costly:
        return costly[0]
    if any(line.strip().startswith(key + ":") for line in brief_edit.splitlines() for key in _BASELINE_SETTINGS):
        return ("changes how the baseline was sampled: a new `finetune baseline` (the inspection stays), then gate, "
                "render and launch")
    return _KEEPS_RECORDS


@dataclass(frozen=True)
class Finding:
    """One diagnosed finding: the steps where it shows, the numbers, the variant and the fix. `kind` says whose
    it is: `training` (a pathology of the run: an error or warning makes the run unhealthy) or `task` (what the
    base model cannot do yet, which the run should reduce: reported, the run stays healthy)."""

    id: str
    severity: Severity  # INFO: what happened, not a failure mode (the run stays healthy)
    steps: list[int]
    evidence: dict[str, object]  # "message" (one line) and the measured numbers
    variant: str | None
    fix: str
    brief_edit: str | None = None  # YAML to merge into the brief
    settings: dict[str, object] = field(default_factory=dict)  # GRPOConfig values the variant implies
    kind: str = TRAINING

    @property
    def cost(self) -> str | None:
        """What applying the brief edit costs (the records it makes stale), or None without an edit."""
        return edit_cost(self.brief_edit)

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "kind": self.kind, "severity": self.severity, "steps": list(self.steps),
                "evidence": self.evidence, "variant": self.variant, "fix": self.fix, "brief_edit": self.brief_edit,
                "edit_cost": self.cost, "settings": self.settings}


def variant_settings(variant: str) -> dict[str, object]:
    """The GRPOConfig values `finetune render` writes for a variant (one source of truth: brief.variants)."""
    return {key: value for key, value, _ in VARIANT_SETTINGS.get(variant, [])}


def _variant_edit(variant: str, symptom: str) -> str:
    return f"grpo:\n  variant: {variant}\n  symptom: {symptom}\n"


def _early_late(series: Series) -> tuple[float, float, int]:
    k = window_size(len(series))
    return median(series.values[:k]), median(series.values[-k:]), k


def correctness_series(traj: Trajectory, ctx: RunContext) -> tuple[str | None, Series]:
    """The reward that measures correctness: the brief's verifier rewards, else a component whose name says
    so, else the only component; (None, total reward) when none can be told apart."""
    names = traj.reward_components()
    chosen = [n for n in ctx.correctness if n in names]
    if not chosen:
        chosen = [n for n in names if CORRECTNESS_NAME.search(n) and not SHAPING_NAME.search(n)]
    if not chosen and len(names) == 1 and not SHAPING_NAME.search(names[0]):
        chosen = names
    if not chosen:
        return None, traj.series("reward")
    return chosen[0], traj.component(chosen[0])


def shaping_components(traj: Trajectory, ctx: RunContext, correct_name: str | None) -> list[str]:
    return [n for n in traj.reward_components() if n != correct_name and n not in ctx.correctness]


def _aligned(a: Series, b: Series) -> tuple[list[float], list[float]]:
    other = dict(zip(b.steps, b.values, strict=True))
    xs = [v for s, v in zip(a.steps, a.values, strict=True) if s in other]
    ys = [other[s] for s in a.steps if s in other]
    return xs, ys


def _entropy_fall(traj: Trajectory) -> tuple[list[int], str, dict[str, object]] | None:
    """Token entropy fell to a small share of where it started: (steps, message, numbers), or None."""
    ent = traj.series("entropy")
    if len(ent) < MIN_TREND_POINTS:
        return None
    early, late, k = _early_late(ent)
    if early <= 0:
        return None
    ratio = late / early
    if not (ratio <= ENTROPY_COLLAPSE_RATIO or (late <= ENTROPY_FLOOR and early >= 2 * ENTROPY_FLOOR)):
        return None
    threshold = max(early * ENTROPY_COLLAPSE_RATIO, ENTROPY_FLOOR)
    steps = [s for s, v in zip(ent.steps, ent.values, strict=True) if v <= threshold] or list(ent.steps[-k:])
    length = traj.series("completions/mean_length")
    message = (f"entropy fell from {fmt(early)} (median of the first {k} logs) to {fmt(late)} (last {k}), "
               f"{ratio:.0%} of its start; below {fmt(threshold)} at steps {step_ranges(steps, traj.steps)}")
    evidence: dict[str, object] = {"entropy_early": early, "entropy_late": late, "ratio": ratio, "threshold": threshold}
    if len(length) >= MIN_TREND_POINTS:
        l_early, l_late, _ = _early_late(length)
        evidence.update(mean_length_early=l_early, mean_length_late=l_late)
    return steps, message, evidence


def _held_up(values: list[float]) -> bool:
    """The late window's median is at least CONVERGED_HOLD x the best window's: no fall back from a peak."""
    k = window_size(len(values))
    best = max(median(values[i:i + k]) for i in range(len(values) - k + 1))
    return median(values[-k:]) >= CONVERGED_HOLD * best


def _convergence(traj: Trajectory, ctx: RunContext) -> str | None:
    """Why a fall in entropy is the policy settling on answers that score, not a collapse: the training
    correctness rose near its ceiling and stayed there, or a held-out score rose. None when neither shows."""
    if _eval_divergence(traj, ctx) is not None:
        return None  # the training reward rose and the held-out verifier did not follow: reward_hacking's case
    if ctx.heldout is not None and ctx.heldout.improved:
        return (f"held-out pass@1 rose from {ctx.heldout.base:.1%} to {ctx.heldout.trained:.1%}, better beyond the "
                "noise (`finetune eval`, eval.json)")
    if len(ctx.eval_scores) >= 3:
        change = fitted_change([float(s) for s in ctx.eval_steps], ctx.eval_scores)
        if change >= EVAL_GAP_MIN and _held_up(ctx.eval_scores):
            return f"the held-out score rose {change:+.3f} and held ({ctx.eval_source or EVAL_JSONL})"
    correct_name, correct = correctness_series(traj, ctx)
    if len(correct) < MIN_TREND_POINTS:
        return None
    early, late, _ = _early_late(correct)
    ceiling = 1.0 if correct_name is not None else max(1.0, sum(ctx.reward_weights.values()) or 1.0)
    if late - early >= CONVERGED_RISE and late >= CONVERGED_LEVEL * ceiling and _held_up(list(correct.values)):
        return f"{correct_name or 'the reward'} rose from {fmt(early)} to {fmt(late)} and held"
    return None


def entropy_collapse(traj: Trajectory, ctx: RunContext) -> Finding | None:
    """Token entropy fell to a small share of where it started while the task is not solved: the policy
    stopped exploring (-> DAPO). A fall while correctness or a held-out score rises is `converged`."""
    fall = _entropy_fall(traj)
    if fall is None or _convergence(traj, ctx) is not None:
        return None
    steps, message, evidence = fall
    return Finding("entropy_collapse", Severity.ERROR, steps, {"message": message, **evidence}, "dapo",
                   "Switch to DAPO: clip-higher (epsilon_high 0.28) keeps low-probability tokens explorable, no KL "
                   "penalty, truncated completions masked; rerun from the same start.",
                   _variant_edit("dapo", "entropy_collapse"), variant_settings("dapo"))


def converged(traj: Trajectory, ctx: RunContext) -> Finding | None:
    """Entropy fell while correctness or a held-out score rose and stayed up: the policy settled on answers
    that score. Information, not a failure mode: the run stays healthy and no variant is proposed."""
    fall = _entropy_fall(traj)
    why = _convergence(traj, ctx) if fall is not None else None
    if fall is None or why is None:
        return None
    steps, message, evidence = fall
    return Finding("converged", Severity.INFO, steps, {"message": f"{message}; {why}: convergence, not entropy collapse",
                                              "because": why, **evidence}, None,
                   "Nothing to fix: a policy that has learned the task samples with less entropy. If you train on, "
                   "watch the held-out score (`finetune eval`): a flat or falling one while entropy keeps falling is "
                   "the entropy collapse DAPO is for.")


def entropy_rising(traj: Trajectory, ctx: RunContext) -> Finding | None:
    """Token entropy keeps climbing: the policy drifts toward noise, and long GRPO runs end in gibberish
    (verl#2738). Not a variant's symptom: slow the policy down (learning rate, clip-higher, KL)."""
    ent = traj.series("entropy")
    if len(ent) < MIN_TREND_POINTS:
        return None
    early, late, k = _early_late(ent)
    if early <= 0 or late < ENTROPY_RISE_RATIO * early:
        return None
    trend = pearson([float(s) for s in ent.steps], ent.values)
    if trend is None or trend < ENTROPY_RISE_CORR:
        return None
    threshold = ENTROPY_RISE_RATIO * early
    steps = [s for s, v in zip(ent.steps, ent.values, strict=True) if v >= threshold] or list(ent.steps[-k:])
    correct_name, correct = correctness_series(traj, ctx)
    gain = fitted_change([float(s) for s in correct.steps], correct.values) if len(correct) >= MIN_TREND_POINTS else None
    learning = gain is not None and gain > CORRECTNESS_FLAT
    message = (f"entropy rose from {fmt(early)} (median of the first {k} logs) to {fmt(late)} (last {k}), "
               f"{late / early:.1f}x its start, climbing with the steps (corr {trend:.2f}); above {fmt(threshold)} at "
               f"steps {step_ranges(steps, traj.steps)}")
    if gain is not None:
        message += f"; {correct_name or 'reward'} moved {gain:+.3f}"
    evidence: dict[str, object] = {"message": message, "entropy_early": early, "entropy_late": late,
                                "ratio": late / early, "trend_corr": trend, "correctness_change": gain}
    lr = ctx.learning_rate
    lines = ["grpo:"] + ([f"  learning_rate: {lr / 2:g}"] if lr else [])
    if ctx.variant == "dapo":  # GSPO stays: an MoE model needs it whatever the entropy does
        lines += ["  variant: grpo", "  symptom: null", "  beta: 0.01"]
    fix = ("Entropy that keeps rising ends in gibberish: read the latest completions in completions.jsonl, then "
           "resume from the last checkpoint before the rise with half the learning rate"
           + ("; DAPO's clip-higher and dropped KL let rare tokens grow unchecked, so go back to plain GRPO "
              "(beta 0.01)" if ctx.variant == "dapo" else "; keep beta > 0 (the KL term holds the "
              "policy near the reference)")
           + ("." if learning else ". Correctness is not improving either, so stop the run now."))
    return Finding("entropy_rising", Severity.WARNING if learning else Severity.ERROR, steps, evidence, None, fix,
                   "\n".join(lines) + "\n" if len(lines) > 1 else None)


def length_reward_correlation(traj: Trajectory, ctx: RunContext) -> Finding | None:
    """Completion length trends up while correctness stays flat: reward tracks length, not quality
    (-> Dr.GRPO, which removes GRPO's length-normalisation bias)."""
    length = traj.series("completions/mean_length")
    if len(length) < MIN_TREND_POINTS:
        return None
    steps = [float(s) for s in length.steps]
    rise = fitted_change(steps, list(length.values))
    base = max(median(length.values[: window_size(len(length))]), 1.0)
    trend = pearson(steps, list(length.values))
    if rise / base < LENGTH_RISE_MIN or trend is None or trend < LENGTH_TREND_CORR:
        return None
    correct_name, correct = correctness_series(traj, ctx)
    if len(correct) < MIN_TREND_POINTS:
        return None
    c_change = fitted_change([float(s) for s in correct.steps], list(correct.values))
    if c_change > CORRECTNESS_FLAT:
        return None  # correctness improves with length: longer reasoning is paying off
    reward = traj.series("reward")
    lx, rx = _aligned(length, reward)
    corr_lr = pearson(lx, rx)
    lc, cc = _aligned(length, correct)
    corr_lc = pearson(lc, cc)
    shaped = correct_name is not None and bool(shaping_components(traj, ctx, correct_name))
    if shaped and (corr_lr is None or corr_lr < LENGTH_REWARD_CORR):
        return None  # length drifts but the total reward does not follow it: no length bias to remove
    r_change = fitted_change([float(s) for s in reward.steps], list(reward.values)) \
        if len(reward) >= MIN_TREND_POINTS else 0.0
    if r_change < REWARD_RISE_MIN and rise / base < LENGTH_DRIFT_MIN:
        return None  # a modest drift that no reward rise pays for (a run that barely moved): not length hacking
    evidence: dict[str, object] = {
        "message": (f"mean completion length rose {rise / base:+.0%} ({fmt(base)} -> {fmt(base + rise)} tokens, "
                    f"corr with step {trend:.2f}); correlation of length with reward {fmt(corr_lr, 2)}, with "
                    f"correctness ({correct_name or 'reward'}) {fmt(corr_lc, 2)}; correctness changed "
                    f"{c_change:+.3f}"),
        "length_rise": rise / base, "length_step_corr": trend, "length_reward_corr": corr_lr,
        "length_correctness_corr": corr_lc, "correctness": correct_name, "correctness_change": c_change,
        "reward_change": r_change,
    }
    sample_corr = _sample_length_correlation(ctx, correct_name)
    if sample_corr is not None:
        evidence["sample_length_reward_corr"], evidence["sample_length_correctness_corr"] = sample_corr
    half = traj.steps[len(traj.steps) // 2]
    return Finding("length_reward_correlation", Severity.WARNING, [s for s in length.steps if s >= half], evidence, "dr_grpo",
                   "Switch to Dr.GRPO: a constant loss normaliser and no std scaling, so the reward tracks "
                   "correctness, not completion length.",
                   _variant_edit("dr_grpo", "length_reward_correlation"), variant_settings("dr_grpo"))


def _sample_length_correlation(ctx: RunContext, correct_name: str | None) -> tuple[float | None, float | None] | None:
    """Per-completion correlation of length (characters) with the total reward and with correctness."""
    rows = [c for c in ctx.completions if c.rewards]
    if len(rows) < 8:
        return None
    lengths = [float(len(c.completion)) for c in rows]
    totals = [sum(ctx.reward_weights.get(k, 1.0) * v for k, v in c.rewards.items()) for c in rows]
    corr_total = pearson(lengths, totals)
    corr_correct = None
    if correct_name is not None:
        pairs = [(float(len(c.completion)), c.rewards[correct_name]) for c in rows if correct_name in c.rewards]
        corr_correct = pearson([p[0] for p in pairs], [p[1] for p in pairs])
    return corr_total, corr_correct


def moe_instability(traj: Trajectory, ctx: RunContext) -> Finding | None:
    """A mixture-of-experts model trained with per-token ratios (GSPO is required), or the MoE signature
    (clip-ratio spikes) on a model of unknown architecture."""
    if ctx.is_moe is False:
        return None
    on_gspo = ctx.variant == "gspo" or ctx.importance_sampling_level == "sequence"
    clip = traj.series("clip_ratio/region_mean")
    kl = traj.series("kl")
    clip_spikes = [clip.steps[i] for i in spikes(clip.values, SPIKE_FACTOR, 0.01, CLIP_SPIKE_MIN)]
    kl_spikes = [kl.steps[i] for i in spikes(kl.values, SPIKE_FACTOR, 1e-3, KL_SPIKE_MIN)]
    spike_steps = sorted(set(clip_spikes + kl_spikes))
    if on_gspo:
        return None  # already on GSPO: remaining spikes are kl_blowup's business
    clip_max = max(clip.values) if clip else None
    evidence: dict[str, object] = {"clip_ratio_spike_steps": clip_spikes, "kl_spike_steps": kl_spikes,
                                   "clip_ratio_max": clip_max,
                                   "kl_max": max(kl.values) if kl else None, "variant": ctx.variant}
    edit = _variant_edit("gspo", "moe")
    fix = ("Switch to GSPO (sequence-level importance ratios): per-token ratios are unstable under expert "
           "routing, so GSPO is required for MoE models, not optional.")
    if ctx.is_moe:
        evidence["message"] = (f"the model is a mixture of experts ({ctx.moe_source}) trained with "
                               f"variant {ctx.variant or 'grpo'} (per-token ratios)"
                               + (f"; clip-ratio/KL spikes at steps {step_ranges(spike_steps, traj.steps)}"
                                  if spike_steps else ""))
        evidence["architecture_source"] = ctx.moe_source
        return Finding("moe_instability", Severity.ERROR, spike_steps, evidence, "gspo", fix, edit, variant_settings("gspo"))
    if len(clip_spikes) < 2:
        return None
    evidence["message"] = (f"clip ratio spiked at steps {step_ranges(clip_spikes, traj.steps)} (up to "
                           f"{fmt(clip_max)}), the signature of MoE routing instability; the "
                           "architecture is unknown (set model.architecture in the brief, or pass --architecture)")
    return Finding("moe_instability", Severity.WARNING, spike_steps, evidence, "gspo",
                   "If the model is a mixture of experts, switch to GSPO (required for MoE). If it is dense, "
                   "treat the spikes as kl_blowup: lower the learning rate.", edit, variant_settings("gspo"))


def _zero_std_series(traj: Trajectory) -> Series:
    fzs = traj.series("frac_reward_zero_std")
    if fzs:
        return fzs
    std = traj.series("reward_std")  # older logs: a zero reward std means every group tied
    return Series("reward_std==0", std.steps, tuple(1.0 if v <= ZERO_EPS else 0.0 for v in std.values))


def _no_signal(traj: Trajectory, ctx: RunContext, want: str) -> Finding | None:
    fzs = _zero_std_series(traj)
    if not fzs:
        return None
    dead = [s for s, v in zip(fzs.steps, fzs.values, strict=True) if v >= NO_SIGNAL_FRAC]
    share = len(dead) / len(fzs)
    k = window_size(len(fzs))
    late = median(fzs.values[-k:])
    if share < NO_SIGNAL_SHARE and not (len(fzs) >= MIN_TREND_POINTS and late >= NO_SIGNAL_FRAC):
        return None
    correct_name, correct = correctness_series(traj, ctx)
    level_series = correct if correct else traj.series("reward")
    dead_set = set(dead)
    levels = [v for s, v in zip(level_series.steps, level_series.values, strict=True) if s in dead_set]
    if not levels:
        return None
    level = sum(levels) / len(levels)
    top = 1.0 if correct_name is not None else max(1.0, sum(ctx.reward_weights.values()) or 1.0)
    kind = "no_signal_all_fail" if level < 0.5 * top else "no_signal_all_pass"
    learned = _prompts_learned(fzs, traj, ctx) if kind == "no_signal_all_pass" else None
    if learned is not None:
        kind = "prompts_learned"
    if kind != want:
        return None
    what = f"{correct_name} mean" if correct_name else "reward mean"
    message = (f"{share:.0%} of logged steps had >= {NO_SIGNAL_FRAC:.0%} of their groups with zero reward std "
               f"(late median {late:.2f}); {what} on those steps {fmt(level)}: every completion of a prompt "
               + ("fails" if kind == "no_signal_all_fail" else "passes") + ", so every advantage is zero")
    evidence = {"message": message, "steps_without_signal_share": share, "frac_reward_zero_std_late": late,
                "level": level, "level_of": correct_name or "reward"}
    if kind == "prompts_learned":
        return Finding(kind, Severity.INFO, dead, {**evidence, "message": f"{message}, after early steps that had signal; "
                                          f"{learned}: the run has learned its training prompts", "because": learned},
                       None, "Nothing to fix in this run: it learned what these prompts teach, and more steps on them "
                       "train nothing. To train on, add prompts the trained model does not solve k/k and rerun "
                       "`finetune baseline` on them.")
    if kind == "no_signal_all_fail":
        with_signal = [s for s, v in zip(fzs.steps, fzs.values, strict=True) if v < 1.0 - ZERO_EPS]
        if with_signal and max(level_series.values, default=0.0) > 0:  # some group succeeded, somewhere
            evidence["steps_with_signal"] = len(with_signal)
            return Finding(kind, Severity.WARNING, dead, {**evidence, "message": (
                f"{message}; {len(with_signal)} of {len(fzs)} logged steps had a group that varied: successes are "
                "rare, not absent (the task's hardness, not the run's failure)")}, None,
                "What training should reduce, not a failure of this run: the model succeeds rarely, so few groups "
                "carry an advantage. At the recipe's learning rate those few barely move it; a run at a learning "
                "rate that learns (`grpo.deviation` naming this run) uses them, and more completions per prompt "
                "(`grpo.num_generations`) give more of them. Both keep the records.", kind=TASK)
        return Finding(kind, Severity.ERROR, dead, evidence, None, _all_fail_fix(ctx))
    return Finding(kind, Severity.WARNING, dead, evidence, None,
                   "The prompts are too easy: every completion passes. Drop prompts the base model solves k/k in "
                   "the baseline, add harder ones, and rerun `finetune baseline`.")


def _all_fail_fix(ctx: RunContext) -> str:
    """The fix for groups that all fail, from what the brief's baseline record measured: zero base success (or
    unknown) calls for SFT; a nonzero pass@k means successes are rare in training's groups, not absent."""
    if ctx.base_pass_at_k:
        k = f"pass@{ctx.base_k}" if ctx.base_k else "pass@k"
        return (f"Successes are rare here, not absent: the baseline's {k} was {ctx.base_pass_at_k:.0%}, yet "
                "training's groups almost never mix a success with a failure. Raise grpo.num_generations or "
                "grpo.temperature so that more groups hold a success, or train on the prompts the baseline solves "
                "sometimes (a curriculum); fine-tune on demonstrations first (SFT) only if that does not help.")
    return ("Base success is zero on these prompts: RL cannot sharpen what the model never does. "
            "Fine-tune on demonstrations first (SFT, skill lora-qlora-recipes) or use easier prompts, "
            "then rerun `finetune baseline` until pass@k is nonzero.")


def _prompts_learned(fzs: Series, traj: Trajectory, ctx: RunContext) -> str | None:
    """Why groups that all pass are the run's own doing, not prompts that were too easy from the start: the
    early window still had signal (its median share of tied groups below NO_SIGNAL_FRAC) and the run learned
    (`_convergence`: correctness or a held-out score rose and held). None otherwise."""
    if len(fzs) < MIN_TREND_POINTS or median(fzs.values[: window_size(len(fzs))]) >= NO_SIGNAL_FRAC:
        return None
    return _convergence(traj, ctx)


def no_signal_all_fail(traj: Trajectory, ctx: RunContext) -> Finding | None:
    """Most groups tie at failure: zero advantage everywhere (base success is zero -> SFT first; a baseline that
    succeeded sometimes -> larger groups, a higher temperature or a curriculum)."""
    return _no_signal(traj, ctx, "no_signal_all_fail")


def no_signal_all_pass(traj: Trajectory, ctx: RunContext) -> Finding | None:
    """Most groups tie at success: zero advantage everywhere (prompts too easy)."""
    return _no_signal(traj, ctx, "no_signal_all_pass")


def prompts_learned(traj: Trajectory, ctx: RunContext) -> Finding | None:
    """Groups tie at success only after the run learned them (early steps had signal; correctness or a held-out
    score rose and held): information, not a failure mode. The run is done with these prompts."""
    return _no_signal(traj, ctx, "prompts_learned")


def truncation(traj: Trajectory, ctx: RunContext) -> Finding | None:
    """Completions are cut at max_completion_length: rewards score fragments, and the length cap, not the
    model, decides when an answer ends."""
    clipped = traj.series("completions/clipped_ratio")
    if not clipped:
        return None
    k = window_size(len(clipped))
    late = median(clipped.values[-k:])
    if late < TRUNCATION_RATIO:
        return None
    term = traj.series("completions/mean_terminated_length")
    late_term = median(term.values[-k:]) if term else None
    never = bool(term) and all(v == 0 for v in term.values[-k:])
    steps = [s for s, v in zip(clipped.steps, clipped.values, strict=True) if v >= TRUNCATION_RATIO]
    current = ctx.max_completion_length
    where = f" (at max_completion_length {current})" if current else ""
    if current is None:  # not told: the longest completion logged is the cap they were cut at
        longest = traj.series("completions/max_length")
        current = int(max(longest.values)) if longest else None
        where = f" (longest completion {current} tokens)" if current else ""
    suggested = max(64, 2 * current) if current else None
    message = (f"median clipped ratio over the last {k} logs is {late:.0%}" + where
               + ("; no completion terminated (mean_terminated_length 0)" if never
                  else f"; mean terminated length {fmt(late_term)}" if late_term is not None else ""))
    evidence = {"message": message, "clipped_ratio_late": late, "mean_terminated_length_late": late_term,
                "max_completion_length": current}
    severity = Severity.ERROR if late >= TRUNCATION_ERROR_RATIO or never else Severity.WARNING
    fix = ((f"Raise max_completion_length to {suggested}" if suggested else "Raise max_completion_length")
           + " (check memory with `finetune memory --brief BRIEF`). If the model rambles rather than needing the "
           "room, add a length_penalty reward instead.")
    edit = f"grpo:\n  max_completion_length: {suggested}\n" if suggested else None
    early = median(clipped.values[:k])
    evidence["clipped_ratio_early"] = early
    if severity == Severity.WARNING and late - early < TRUNCATION_CLIMB:
        # the base model's rambling, held or easing: the task's, for training to reduce
        return Finding("truncation", severity, steps, evidence, None,
                       "What training should reduce, not a failure of this run: the base model runs past the length "
                       "cap this often, and a run that learns answers sooner. If the answers need more room, raise "
                       "max_completion_length (it changes how the baseline was sampled: a new baseline).", edit,
                       kind=TASK)
    return Finding("truncation", severity, steps, evidence, None, fix, edit)


def reward_hacking(traj: Trajectory, ctx: RunContext) -> Finding | None:
    """The training reward rises for a reason other than correctness: a shaping reward saturates, one
    shaping component carries the rise, or a held-out stricter verifier does not follow."""
    correct_name, correct = correctness_series(traj, ctx)
    signatures: list[str] = []
    evidence: dict[str, object] = {"correctness": correct_name}
    steps: set[int] = set()
    c_change = (fitted_change([float(s) for s in correct.steps], list(correct.values))
                if len(correct) >= MIN_TREND_POINTS else None)
    flat = c_change is not None and c_change <= CORRECTNESS_FLAT
    if c_change is not None:
        evidence["correctness_change"] = c_change
    culprit: str | None = None
    if correct_name is not None and flat:
        reward = traj.series("reward")
        r_change = fitted_change([float(s) for s in reward.steps], list(reward.values)) if reward else 0.0
        for name in shaping_components(traj, ctx, correct_name):
            comp = traj.component(name)
            if len(comp) < MIN_TREND_POINTS:
                continue
            early, late, k = _early_late(comp)
            rise = fitted_change([float(s) for s in comp.steps], list(comp.values))
            top = max(comp.values)
            if top > 0 and late >= SATURATED * top and late - early >= HACK_RISE_MIN and rise >= HACK_RISE_MIN:
                signatures.append(f"{name} saturated ({fmt(early)} -> {fmt(late)}) while {correct_name} stayed "
                                  f"flat ({c_change:+.3f})")
                evidence[f"{name}_early"], evidence[f"{name}_late"] = early, late
                steps.update(s for s, v in zip(comp.steps, comp.values, strict=True) if v >= SATURATED * top)
                culprit = culprit or name
            weight = ctx.reward_weights.get(name, 1.0)
            if r_change >= REWARD_RISE_MIN and weight * rise >= DOMINANT_SHARE * r_change:
                signatures.append(f"{name} carries {weight * rise / r_change:.0%} of the reward's rise "
                                  f"({r_change:+.3f})")
                evidence[f"{name}_share_of_rise"] = weight * rise / r_change
                steps.update(s for s, v in zip(comp.steps, comp.values, strict=True) if v > (early + late) / 2)
                culprit = culprit or name
        if ctx.completions and culprit is not None:
            scored = [c for c in ctx.completions if culprit in c.rewards and correct_name in c.rewards]
            if scored:
                evidence["samples_shaping_pass_correct_fail"] = sum(
                    1 for c in scored if c.rewards[culprit] > 0 and c.rewards[correct_name] <= 0) / len(scored)
    divergence = _eval_divergence(traj, ctx)
    if divergence is not None:
        signatures.append(divergence[0])
        evidence.update(divergence[1])
        steps.update(divergence[2])
    if not signatures:
        return None
    evidence["message"] = "; ".join(signatures)
    evidence["signatures"] = signatures
    severity = Severity.ERROR if divergence is not None else Severity.WARNING
    fix = ("Fix the reward before tuning anything: the model is optimising "
           + (f"{culprit}" if culprit else "the training reward") + " instead of correctness. Make shaping "
           "rewards conditional on a correct answer or cut their weight, re-inspect the rewards (`finetune "
           "inspect`, `finetune review`) and rerun from the base model.")
    edit = None
    if culprit is not None:
        weight = ctx.reward_weights.get(culprit, 1.0)
        edit = f"rewards:\n  - fn: {culprit}\n    weight: {weight * 0.1:g}   # was {weight:g}\n"
    return Finding("reward_hacking", severity, sorted(steps), evidence, None, fix, edit)


def _eval_divergence(traj: Trajectory, ctx: RunContext) -> tuple[str, dict[str, object], list[int]] | None:
    """Training reward up, held-out stricter verifier flat: (signature, numbers, steps) or None."""
    if ctx.eval_steps:
        eval_steps, eval_scores, source = ctx.eval_steps, ctx.eval_scores, ctx.eval_source
    else:
        ev = traj.eval_series("reward")
        eval_steps, eval_scores, source = list(ev.steps), list(ev.values), "TRL eval_reward"
    if len(eval_steps) < 3:
        return None
    train = traj.series("reward")
    if len(train) < MIN_TREND_POINTS:
        return None
    # the training reward near each evaluation step (median of the logs up to it since the previous eval)
    train_at = []
    for i, step in enumerate(eval_steps):
        lo = eval_steps[i - 1] if i else -math.inf
        near = [v for s, v in zip(train.steps, train.values, strict=True) if lo < s <= step]
        if not near:
            near = [min(zip(train.steps, train.values, strict=True), key=lambda sv: abs(sv[0] - step))[1]]
        train_at.append(median(near))
    xs = [float(s) for s in eval_steps]
    t_change = fitted_change(xs, train_at)
    e_change = fitted_change(xs, eval_scores)
    gap_change = t_change - e_change
    if t_change < REWARD_RISE_MIN or e_change > EVAL_TRACK_SHARE * t_change or gap_change < EVAL_GAP_MIN:
        return None
    numbers = {"eval_source": source, "train_reward_change": t_change, "eval_score_change": e_change,
               "eval_steps": eval_steps, "eval_scores": eval_scores}
    return (f"training reward rose {t_change:+.3f} while the held-out stricter verifier moved {e_change:+.3f} "
            f"({source})", numbers, list(eval_steps))


def _grad_with_signal(traj: Trajectory) -> Series:
    """The gradient norm of the steps that had an advantage somewhere: on a step where every group tied, only the
    KL term pulls (a norm near 0), so next to it the first step with a success would read as a spike. On a hard
    task most early steps are such (a learning run at base pass@1 9% logged 0.005 there and 0.7-1.4 elsewhere)."""
    grad, tied = traj.series("grad_norm"), _zero_std_series(traj)
    tie = dict(zip(tied.steps, tied.values, strict=True))
    keep = [i for i, s in enumerate(grad.steps) if tie.get(s, 0.0) < 1.0 - ZERO_EPS]
    return Series(grad.key, tuple(grad.steps[i] for i in keep), tuple(grad.values[i] for i in keep))


def kl_blowup(traj: Trajectory, ctx: RunContext) -> Finding | None:
    """The policy runs away from the reference or the gradients explode: non-finite values, a KL that
    climbs and stays high, or repeated KL/grad-norm spikes."""
    nonfinite = sorted({s for key in ("loss", "kl", "grad_norm", "reward") for s in traj.series(key).nonfinite_steps})
    kl, grad = traj.series("kl"), _grad_with_signal(traj)
    kl_spikes = [kl.steps[i] for i in spikes(kl.values, SPIKE_FACTOR, 1e-3, KL_SPIKE_MIN)]
    grad_spikes = [grad.steps[i] for i in spikes(grad.values, SPIKE_FACTOR, GRAD_SPIKE_FLOOR, 0.0)]
    late_kl = _early_late(kl)[1] if len(kl) >= MIN_TREND_POINTS else None
    parts: list[str] = []
    severity = Severity.WARNING
    if nonfinite:
        parts.append(f"non-finite loss/KL/grad norm at steps {step_ranges(nonfinite, traj.steps)}")
        severity = Severity.ERROR
    if late_kl is not None and late_kl >= KL_BLOWUP_LEVEL:
        parts.append(f"KL climbed to a late median of {fmt(late_kl)} nats/token")
        if late_kl >= KL_BLOWUP_ERROR:
            severity = Severity.ERROR
    spike_steps = sorted(set(kl_spikes + grad_spikes))
    if len(spike_steps) >= SPIKE_MIN_COUNT:
        kinds = [f"{what} spikes at steps {step_ranges(at, traj.steps)}"
                 for what, at in (("KL", kl_spikes), ("grad-norm", grad_spikes)) if at]
        parts.append(", ".join(kinds) + f" (>= {SPIKE_FACTOR:g}x the running median)")
    if not parts:
        return None
    steps = sorted(set(nonfinite) | (set(spike_steps) if len(spike_steps) >= SPIKE_MIN_COUNT else set())
                   | ({s for s, v in zip(kl.steps, kl.values, strict=True) if v >= KL_BLOWUP_LEVEL}
                      if late_kl is not None and late_kl >= KL_BLOWUP_LEVEL else set()))
    lr = ctx.learning_rate
    edit = f"grpo:\n  learning_rate: {lr / 2:g}\n" if lr else None
    fix = ("Lower the learning rate (halve it) and keep gradient clipping on (max_grad_norm 1.0); if KL "
           "still climbs, raise beta. Resume from the last checkpoint before the first spike.")
    lr_then: float | None = None
    logged = traj.series("learning_rate")
    if steps and logged:
        first = min(steps)
        nearest = min(range(len(logged.steps)), key=lambda i: abs(logged.steps[i] - first))
        lr_then = logged.values[nearest]
        parts.append(f"the learning rate at step {first} was {fmt(lr_then)}"
                     + (f" (peak {lr:g}, schedule {ctx.lr_scheduler})" if lr else ""))
        if ctx.lr_scheduler in ("constant", "constant_with_warmup"):
            fix += " The schedule holds the peak to the end: halving the peak halves every step's rate."
        elif lr and lr_then < 0.5 * lr:
            fix += (f" The schedule ({ctx.lr_scheduler}) had already decayed the rate to {lr_then / lr:.0%} of the peak "
                    "here, so the peak itself is too high.")
    evidence: dict[str, object] = {"message": "; ".join(parts), "nonfinite_steps": nonfinite, "kl_spike_steps": kl_spikes,
                "grad_norm_spike_steps": grad_spikes, "kl_late": late_kl,
                "kl_max": max(kl.values) if kl else None, "grad_norm_max": max(grad.values) if grad else None,
                "learning_rate_at_first_problem": lr_then, "lr_scheduler": ctx.lr_scheduler}
    return Finding("kl_blowup", severity, steps, evidence, None, fix, edit)


def zero_loss(traj: Trajectory, ctx: RunContext) -> Finding | None:
    """Loss and gradient are exactly zero: every advantage is zero and the optimiser does nothing."""
    loss, grad = traj.series("loss"), traj.series("grad_norm")
    if not loss:
        return None
    grad_at = dict(zip(grad.steps, grad.values, strict=True))
    tie = _zero_std_series(traj)
    fzs = dict(zip(tie.steps, tie.values, strict=True))
    zero = [s for s, v in zip(loss.steps, loss.values, strict=True)
            if abs(v) <= ZERO_EPS and (grad_at.get(s, 0.0) <= ZERO_EPS if grad else fzs.get(s, 0.0) >= 0.999)]
    if len(zero) / len(loss) < ZERO_LOSS_SHARE:
        return None
    tied = [fzs[s] for s in zero if s in fzs]
    mean_tied = sum(tied) / len(tied) if tied else None
    cause = (f"; frac_reward_zero_std {fmt(mean_tied)} on those steps (every group's rewards tie)"
             if mean_tied is not None else "")
    evidence = {"message": f"loss {'and grad norm ' if grad else ''}exactly 0 on {len(zero)} of {len(loss)} logged "
                           f"steps ({step_ranges(zero, traj.steps)}){cause}",
                "zero_steps_share": len(zero) / len(loss), "frac_reward_zero_std_mean": mean_tied}
    return Finding("zero_loss", Severity.ERROR, zero, evidence, None,
                   "Nothing is being learned: the advantages are zero. Check that the rewards vary within a group "
                   "(`finetune score` on sampled completions; rewards returning None for every completion also do "
                   "this), then see no_signal_all_fail / no_signal_all_pass.")


# tool_failures: late-window median share of failed tool calls (TRL's tools/failure_frequency) at or above this.
TOOL_FAILURE_RATE = 0.3
# ...and the run's own (not the task's) when the failure rate climbed at least this much over the run.
TOOL_FAILURE_CLIMB = 0.1
# episodes_cut: share of the late steps' logged episodes that still called a tool when they ended...
EPISODES_CUT_SHARE = 0.3
# ...and the run's own (not the task's) when that share climbed at least this much from the early window.
EPISODES_CUT_CLIMB = 0.2


def _episode_steps(ctx: RunContext) -> dict[int, list[EpisodeStats]]:
    """Each step's logged episodes (completions.jsonl of a tool-use run), by step."""
    out: dict[int, list[EpisodeStats]] = {}
    for c in ctx.completions:
        if c.episode is not None:
            out.setdefault(c.step, []).append(c.episode)
    return out


def _failure_series(traj: Trajectory, ctx: RunContext) -> Series:
    """Failed calls / calls per step: TRL's own tools/failure_frequency, else counted from the episodes."""
    logged = traj.series("tools/failure_frequency")
    if logged:
        return logged
    steps, values = [], []
    for step, eps in sorted(_episode_steps(ctx).items()):
        calls = sum(e.tool_calls for e in eps)
        if calls:
            steps.append(step)
            values.append(sum(e.tool_failures for e in eps) / calls)
    return Series("tools/failure_frequency", tuple(steps), tuple(values))


def _turns_note(ctx: RunContext) -> str:
    eps = [e for group in _episode_steps(ctx).values() for e in group]
    return f"; {sum(e.turns for e in eps) / len(eps):.2f} turns per episode" if eps else ""


def tool_failures(traj: Trajectory, ctx: RunContext) -> Finding | None:
    """Tool calls fail (bad arguments, unknown tools, errors, time-outs). Flat or falling, the task's: what the
    base model cannot do yet and the run should reduce. The run's own when the reward rises while the failures
    do not fall (the model is rewarded for something other than using the tools) or when they climb."""
    fails = _failure_series(traj, ctx)
    if len(fails) < 2:
        return None
    k = window_size(len(fails))
    late = median(fails.values[-k:])
    if late < TOOL_FAILURE_RATE:
        return None
    reward = traj.series("reward")
    rise = fitted_change([float(s) for s in reward.steps], list(reward.values)) \
        if len(reward) >= MIN_TREND_POINTS else 0.0
    trend = fitted_change([float(s) for s in fails.steps], list(fails.values))
    rising = rise >= REWARD_RISE_MIN and trend >= -0.05
    worse = trend >= TOOL_FAILURE_CLIMB
    steps = [s for s, v in zip(fails.steps, fails.values, strict=True) if v >= TOOL_FAILURE_RATE]
    message = (f"median tool-call failure rate over the last {k} logs is {late:.0%} (moved {trend:+.2f} over the "
               "run)" + _turns_note(ctx)
               + (f"; the reward rose {fmt(rise)} while the failures did not fall" if rising else "")
               + ("; the failures climbed with the steps" if worse and not rising else ""))
    evidence = {"message": message, "failure_rate_late": late, "failure_rate_change": trend, "reward_rise": rise}
    if not (rising or worse):
        return Finding("tool_failures", Severity.WARNING, steps, evidence, None,
                       "What training should reduce, not a failure of this run: the base model calls the tools "
                       "wrongly this often (read the tool messages in completions.jsonl for the errors). A run at a "
                       "learning rate that learns (`grpo.deviation` naming this run) is the fix that keeps the "
                       "records; change a tool's schema or docstring only when the errors show the model cannot know "
                       "the right call (that changes the episode: a new baseline, inspection and review).", kind=TASK)
    fix = ("Read failing episodes in completions.jsonl (the tool messages hold each error): fix the tool's schema "
           "or docstring when the arguments are wrong, raise episode.tool_timeout_s for time-outs, and make the "
           "answer's verifier require the tool's result (a tool_call reward with argument schemas)")
    return Finding("tool_failures", Severity.ERROR if rising else Severity.WARNING, steps, evidence, None, fix)


def episodes_cut(traj: Trajectory, ctx: RunContext) -> Finding | None:
    """Episodes end while the model still calls tools: the turn limit (or the length) cuts them before an
    answer. At a share that holds or falls, the task's (the base model loops or answers late); the run's own
    when the share climbs with the steps (the run is learning to loop)."""
    by_step = sorted(_episode_steps(ctx).items())
    if len(by_step) < 2:
        return None
    k = window_size(len(by_step))
    late = [e for _, eps in by_step[-k:] for e in eps]
    share = sum(e.ended_on_call for e in late) / len(late)
    if share < EPISODES_CUT_SHARE:
        return None
    early = [e for _, eps in by_step[:k] for e in eps]
    early_share = sum(e.ended_on_call for e in early) / len(early)
    steps = [s for s, eps in by_step if sum(e.ended_on_call for e in eps) / len(eps) >= EPISODES_CUT_SHARE]
    limit = ctx.max_turns
    message = (f"{share:.0%} of the episodes of the last {k} logged steps ended on a tool call, before an answer "
               f"({early_share:.0%} in the first {k})" + _turns_note(ctx)
               + (f" (episode.max_turns {limit})" if limit else ""))
    evidence = {"message": message, "cut_share_late": share, "cut_share_early": early_share}
    raise_turns = (f"raising episode.max_turns (now {limit}) " if limit else "raising episode.max_turns ") + \
        "is an episode change: it makes the baseline and the inspection stale (a new baseline, inspection and review)"
    if share - early_share < EPISODES_CUT_CLIMB:
        return Finding("episodes_cut", Severity.WARNING, steps, evidence, None,
                       "What training should reduce, not a failure of this run: the base model loops on calls or "
                       "answers late. A run at a learning rate that learns (`grpo.deviation` naming this run) keeps "
                       f"the records; {raise_turns}, so do it only when the episodes show the task needs more calls "
                       "than the limit allows.", kind=TASK)
    return Finding("episodes_cut", Severity.WARNING, steps, evidence, None,
                   "The run is learning to end on a call (the share climbed): read those episodes; the same call "
                   "repeated is a loop the reward pays for (reward the answer, not the calls). If the task needs more "
                   f"calls, {raise_turns}.")


Rule = Callable[[Trajectory, RunContext], "Finding | None"]

# Registered in report order; each returns at most one finding with its own id.
# Root causes first: a model that never terminates or cannot train stable makes the other symptoms moot.
RULES: list[Rule] = [
    moe_instability,
    truncation,
    no_signal_all_fail,
    no_signal_all_pass,
    prompts_learned,
    zero_loss,
    entropy_collapse,
    converged,
    entropy_rising,
    length_reward_correlation,
    reward_hacking,
    kl_blowup,
    tool_failures,
    episodes_cut,
]

FINDING_IDS = ("entropy_collapse", "entropy_rising", "length_reward_correlation", "moe_instability", "no_signal_all_fail",
               "no_signal_all_pass", "truncation", "reward_hacking", "kl_blowup", "zero_loss", "tool_failures",
               "episodes_cut", "converged", "prompts_learned")
_SEVERITY_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


def diagnose(traj: Trajectory, ctx: RunContext | None = None) -> list[Finding]:
    """Every finding, errors first, then warnings, then information, each in rule order."""
    ctx = ctx or RunContext()
    found = [f for rule in RULES if (f := rule(traj, ctx)) is not None]
    return sorted(found, key=lambda f: _SEVERITY_ORDER[f.severity])


def failure_modes(findings: list[Finding]) -> list[Finding]:
    """The run's failure modes (errors and warnings of kind `training`): a run with none of them is healthy."""
    return [f for f in findings if f.severity != Severity.INFO and f.kind == TRAINING]


def task_findings(findings: list[Finding]) -> list[Finding]:
    """What the base model cannot do yet (errors and warnings of kind `task`): what the run should reduce."""
    return [f for f in findings if f.severity != Severity.INFO and f.kind == TASK]
