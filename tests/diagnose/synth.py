"""Synthetic GRPO trajectories for the diagnose rules: a healthy baseline and one change per failure mode.

Values are shaped like TRL 1.16's logs (same keys, realistic scales) with deterministic noise, so each rule
is tested on a trajectory that shows its symptom and on the healthy one that does not.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

N = 40


def healthy(n: int = N, seed: int = 0) -> list[dict[str, Any]]:
    """Reward and correctness rise together, entropy eases slowly, lengths steady, nothing clipped."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        t = i / (n - 1)
        correct = min(1.0, 0.2 + 0.4 * t + rng.uniform(-0.04, 0.04))
        rows.append({
            "step": i + 1, "epoch": round((i + 1) / n, 4), "loss": rng.uniform(-0.02, 0.02),
            "grad_norm": 0.5 + rng.uniform(-0.1, 0.1), "learning_rate": 5e-7,
            "completions/mean_length": 120 + rng.uniform(-8, 8), "completions/clipped_ratio": 0.02,
            "completions/mean_terminated_length": 115 + rng.uniform(-8, 8), "completions/max_length": 250.0,
            "rewards/exact_match/mean": correct, "rewards/exact_match/std": 0.4,
            "reward": correct, "reward_std": 0.4, "frac_reward_zero_std": 0.3 + rng.uniform(-0.05, 0.05),
            "kl": 0.05 * t + rng.uniform(0, 0.005), "entropy": 0.8 - 0.15 * t + rng.uniform(-0.02, 0.02),
            "clip_ratio/region_mean": 0.001 + rng.uniform(0, 0.001),
        })
    return rows


def vary(rows: list[dict[str, Any]], **changes: Callable[[float, dict[str, Any]], Any]) -> list[dict[str, Any]]:
    """A copy of `rows` with keys set by functions of t in [0, 1] (and the row); None deletes the key."""
    out = []
    n = len(rows)
    for i, row in enumerate(rows):
        new = dict(row)
        t = i / max(n - 1, 1)
        for key, fn in changes.items():
            value = fn(t, new)
            if value is None:
                new.pop(key.replace("__", "/"), None)
            else:
                new[key.replace("__", "/")] = value
        out.append(new)
    return out


def entropy_collapse() -> list[dict[str, Any]]:
    return vary(healthy(), entropy=lambda t, r: 0.8 * math.exp(-4 * t))


def entropy_converged() -> list[dict[str, Any]]:
    """Entropy falls as in entropy_collapse while correctness climbs from 0.2 to about 0.95 and holds there:
    the policy has learned the task (as the demo's run does), not lost its exploration."""
    rng = random.Random(4)
    rows = vary(entropy_collapse(),
                rewards__exact_match__mean=lambda t, r: min(1.0, 0.2 + 0.75 * min(1.0, 2 * t) + rng.uniform(-0.03, 0.03)))
    return vary(rows, reward=lambda t, r: r["rewards/exact_match/mean"])


def entropy_converged_then_falls_back() -> list[dict[str, Any]]:
    """Correctness climbs to about 0.95 by mid-run, then falls back to 0.5 while entropy keeps falling: collapse."""
    rows = vary(entropy_collapse(),
                rewards__exact_match__mean=lambda t, r: 0.2 + 0.75 * 2 * t if t < 0.5 else 0.95 - 0.9 * (t - 0.5))
    return vary(rows, reward=lambda t, r: r["rewards/exact_match/mean"])


def entropy_rising() -> list[dict[str, Any]]:
    """Entropy climbs from 0.8 to about 2.6 nats over the run while correctness stays near 0.3: gibberish."""
    rng = random.Random(2)
    rows = vary(healthy(), entropy=lambda t, r: 0.8 + 1.8 * t ** 1.5 + rng.uniform(-0.03, 0.03),
                rewards__exact_match__mean=lambda t, r: 0.3 + rng.uniform(-0.03, 0.03))
    return vary(rows, reward=lambda t, r: r["rewards/exact_match/mean"])


def entropy_recovers() -> list[dict[str, Any]]:
    """After DAPO: entropy dips, then climbs back to where it started (about 1.1x); correctness rises. Healthy."""
    return vary(healthy(), entropy=lambda t, r: 0.8 - 0.5 * math.sin(math.pi * t) * (1 - t) + 0.1 * t)


def length_bias() -> list[dict[str, Any]]:
    """Length triples; a style reward that pays for length rises with it; correctness stays at 0.3."""
    rng = random.Random(1)
    rows = vary(healthy(),
                completions__mean_length=lambda t, r: 120 + 240 * t + rng.uniform(-10, 10),
                rewards__exact_match__mean=lambda t, r: 0.3 + rng.uniform(-0.03, 0.03),
                rewards__reasoning_steps__mean=lambda t, r: 0.2 + 0.6 * t + rng.uniform(-0.03, 0.03))
    return vary(rows, reward=lambda t, r: r["rewards/exact_match/mean"] + r["rewards/reasoning_steps/mean"])


def length_pays_off() -> list[dict[str, Any]]:
    """Length grows and correctness grows with it: longer reasoning is working, no finding."""
    return vary(healthy(), completions__mean_length=lambda t, r: 120 + 240 * t,
                rewards__exact_match__mean=lambda t, r: 0.2 + 0.5 * t, reward=lambda t, r: 0.2 + 0.5 * t)


def clip_spikes() -> list[dict[str, Any]]:
    return vary(healthy(), clip_ratio__region_mean=lambda t, r: 0.45 if int(t * 39) in (12, 25, 33) else 0.002)


def all_fail() -> list[dict[str, Any]]:
    return vary(healthy(), frac_reward_zero_std=lambda t, r: 1.0, reward=lambda t, r: 0.0, reward_std=lambda t, r: 0.0,
                rewards__exact_match__mean=lambda t, r: 0.0)


def all_pass() -> list[dict[str, Any]]:
    return vary(healthy(), frac_reward_zero_std=lambda t, r: 1.0, reward=lambda t, r: 1.0, reward_std=lambda t, r: 0.0,
                rewards__exact_match__mean=lambda t, r: 1.0)


def learned_prompts() -> list[dict[str, Any]]:
    """Groups have signal early (30% tied); correctness climbs to 1.0 by two thirds of the run and holds, and
    the groups tie at success from then on: the run learned its prompts (the tool task on one H200 did this)."""
    return vary(healthy(), rewards__exact_match__mean=lambda t, r: min(1.0, 0.4 + 0.9 * t),
                reward=lambda t, r: min(1.0, 0.4 + 0.9 * t),
                frac_reward_zero_std=lambda t, r: 1.0 if t >= 0.67 else 0.3,
                reward_std=lambda t, r: 0.0 if t >= 0.67 else 0.4)


def truncated(ratio: float = 1.0) -> list[dict[str, Any]]:
    return vary(healthy(), completions__clipped_ratio=lambda t, r: ratio,
                completions__mean_length=lambda t, r: 256.0,
                completions__mean_terminated_length=lambda t, r: 0.0 if ratio >= 1 else 200.0)


def format_hack() -> list[dict[str, Any]]:
    """A format reward climbs to 1 while exact_match stays near 0.1."""
    rng = random.Random(2)
    rows = vary(healthy(),
                rewards__exact_match__mean=lambda t, r: 0.1 + rng.uniform(-0.02, 0.02),
                rewards__format__mean=lambda t, r: min(1.0, 0.3 + 1.4 * t))
    return vary(rows, reward=lambda t, r: r["rewards/exact_match/mean"] + r["rewards/format/mean"])


def format_and_correct() -> list[dict[str, Any]]:
    """The format reward saturates but correctness climbs too: not a hack."""
    rows = vary(healthy(), rewards__format__mean=lambda t, r: min(1.0, 0.3 + 1.4 * t))
    return vary(rows, reward=lambda t, r: r["rewards/exact_match/mean"] + r["rewards/format/mean"])


def kl_climb() -> list[dict[str, Any]]:
    return vary(healthy(), kl=lambda t, r: 0.01 + 3.0 * t ** 2)


def grad_spikes() -> list[dict[str, Any]]:
    return vary(healthy(), grad_norm=lambda t, r: 40.0 if int(round(t * 39)) in (10, 20, 30) else r["grad_norm"])


def one_spike() -> list[dict[str, Any]]:
    """One transient KL and grad-norm spike that recovers (the real healthy fixture has one): no finding."""
    return vary(healthy(), kl=lambda t, r: 2.9 if int(round(t * 39)) == 6 else r["kl"],
                grad_norm=lambda t, r: 18.0 if int(round(t * 39)) == 6 else r["grad_norm"])


def nan_loss() -> list[dict[str, Any]]:
    return vary(healthy(), loss=lambda t, r: float("nan") if t > 0.8 else r["loss"])


def zero_loss() -> list[dict[str, Any]]:
    return vary(all_fail(), loss=lambda t, r: 0.0, grad_norm=lambda t, r: 0.0, kl=lambda t, r: None)


def grpo_zero_loss_is_normal() -> list[dict[str, Any]]:
    """GRPO's logged loss is ~0 on the first iteration even with signal; the gradient is not: no finding."""
    return vary(healthy(), loss=lambda t, r: 0.0)


def write_run(run_dir: Path, rows: list[dict[str, Any]], ended: bool = True) -> Path:
    """A run directory with metrics.jsonl as `finetune launch` writes it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in rows]
    if ended:
        lines.append(json.dumps({"event": "end", "step": rows[-1]["step"] if rows else 0}))
    (run_dir / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))
    return run_dir
