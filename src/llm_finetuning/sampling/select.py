"""Choosing the samples a person reviews: spread over prompts and over reward values.

A review of only failures (or only successes) tests half of the reward. The candidates are binned by
their vector of reward values; bins are visited in turn (lowest total first) and each visit takes the
candidate whose prompt has been shown least, so rare outcomes (the few successes of a weak model, the
few failures of a strong one) are all shown instead of drowned, and as many prompts as possible are
covered. A completion that repeats one already drawn for the same prompt (a model that answers a prompt the
same way every time) is taken only when the distinct ones run out; `repeated_pairs` counts those, so the
caller can say so. Pure and seeded.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any


def reward_key(rewards: dict[str, float | None]) -> tuple[tuple[str, float | None], ...]:
    return tuple(sorted((k, None if v is None else round(float(v), 3)) for k, v in rewards.items()))


def _pair(candidate: dict[str, Any]) -> tuple[Any, Any]:
    """(prompt, completion); a candidate without its text is distinct from every other."""
    return candidate["prompt_index"], candidate["completion"] if "completion" in candidate else id(candidate)


def spread_samples(candidates: list[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """`n` candidates (each with `prompt_index`, `rewards`, `total`, `completion`) spread over prompts and
    reward values, distinct (prompt, completion) pairs first.

    Returned in a seeded shuffled order, so the reviewer does not meet all successes in a row.
    """
    rng = random.Random(seed)
    seen: set[tuple[Any, Any]] = set()
    distinct: list[dict[str, Any]] = []
    repeats: list[dict[str, Any]] = []
    for c in candidates:
        (repeats if _pair(c) in seen else distinct).append(c)
        seen.add(_pair(c))
    shown: dict[int, int] = defaultdict(int)
    chosen = _spread(distinct, n, rng, shown)
    chosen += _spread(repeats, n - len(chosen), rng, shown)
    rng.shuffle(chosen)
    return chosen


def repeated_pairs(samples: list[dict[str, Any]]) -> int:
    """How many samples repeat the (prompt, completion) pair of an earlier one."""
    return len(samples) - len({_pair(s) for s in samples})


def repeat_note(samples: list[dict[str, Any]]) -> str | None:
    """What to say when the samples could not all be distinct (None when they are)."""
    repeated = repeated_pairs(samples)
    if not repeated:
        return None
    return (f"{repeated} of {len(samples)} samples repeat a (prompt, completion) pair already in the sample: the "
            f"model answered those prompts the same way each time and the pool held only {len(samples) - repeated} "
            "distinct pairs; more prompts in data.train, or a higher grpo.temperature, give more distinct ones")


def _spread(candidates: list[dict[str, Any]], n: int, rng: random.Random, shown: dict[int, int]) -> list[dict[str, Any]]:
    """Up to `n` candidates, visiting the reward bins in turn and, in each, the prompt shown least (`shown`,
    updated)."""
    bins: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for c in candidates:
        bins[reward_key(c["rewards"])].append(c)
    for members in bins.values():
        rng.shuffle(members)
    order = sorted(bins, key=lambda key: (sum(v for _, v in key if v is not None), repr(key)))
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
    return chosen


def bin_counts(samples: list[dict[str, Any]]) -> dict[str, int]:
    """How many samples have each total (as a readable key), for the report's summary."""
    counts: dict[str, int] = defaultdict(int)
    for s in samples:
        total = s.get("total")
        counts["none" if total is None else f"{float(total):g}"] += 1
    return dict(sorted(counts.items()))
