"""Choosing the samples a person reviews: spread over prompts and over reward values.

A review of only failures (or only successes) tests half of the reward. The candidates are binned by
their vector of reward values; bins are visited in turn (lowest total first) and each visit takes the
candidate whose prompt has been shown least, so rare outcomes (the few successes of a weak model, the
few failures of a strong one) are all shown instead of drowned, and as many prompts as possible are
covered. Pure and seeded.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any


def reward_key(rewards: dict[str, float | None]) -> tuple[tuple[str, float | None], ...]:
    return tuple(sorted((k, None if v is None else round(float(v), 3)) for k, v in rewards.items()))


def spread_samples(candidates: list[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """`n` candidates (each with `prompt_index`, `rewards`, `total`) spread over prompts and reward values.

    Returned in a seeded shuffled order, so the reviewer does not meet all successes in a row.
    """
    rng = random.Random(seed)
    bins: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for c in candidates:
        bins[reward_key(c["rewards"])].append(c)
    for members in bins.values():
        rng.shuffle(members)
    order = sorted(bins, key=lambda key: (sum(v for _, v in key if v is not None), repr(key)))
    shown: dict[int, int] = defaultdict(int)
    chosen: list[dict[str, Any]] = []
    while len(chosen) < n and any(bins[key] for key in order):
        for key in order:
            if len(chosen) >= n:
                break
            members = bins[key]
            if not members:
                continue
            best = min(range(len(members)), key=lambda i: shown[members[i]["prompt_index"]])
            pick = members.pop(best)
            shown[pick["prompt_index"]] += 1
            chosen.append(pick)
    rng.shuffle(chosen)
    return chosen


def bin_counts(samples: list[dict[str, Any]]) -> dict[str, int]:
    """How many samples have each total (as a readable key), for the report's summary."""
    counts: dict[str, int] = defaultdict(int)
    for s in samples:
        total = s.get("total")
        counts["none" if total is None else f"{float(total):g}"] += 1
    return dict(sorted(counts.items()))
