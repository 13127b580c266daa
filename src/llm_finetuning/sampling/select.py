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
from collections.abc import Mapping, Sequence
from typing import TypeVar

# A candidate sample: `prompt_index`, `rewards` ({name: value or None}), `total`, `completion`, and whatever
# else the caller keeps with it (it gets its own objects back).
Sample = TypeVar("Sample", bound=Mapping[str, object])
RewardKey = tuple[tuple[str, float | None], ...]


def reward_key(rewards: Mapping[str, float | None]) -> RewardKey:
    return tuple(sorted((k, None if v is None else round(float(v), 3)) for k, v in rewards.items()))


def sample_rewards(sample: Mapping[str, object]) -> dict[str, float | None]:
    """A sample's `rewards`, {name: value or None} (TypeError when it holds another shape)."""
    rewards = sample["rewards"]
    if not isinstance(rewards, Mapping):
        raise TypeError(f"rewards is {type(rewards).__name__}, not an object")
    return {str(k): sample_number(v) for k, v in rewards.items()}


def sample_number(value: object) -> float | None:
    """A reward value or total as a number (a string through float()); None stays None (TypeError for what is
    no number)."""
    if value is None or isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        return float(value)
    raise TypeError(f"a reward value is {type(value).__name__}, not a number")


def _prompt_index(sample: Mapping[str, object]) -> int:
    index = sample["prompt_index"]
    if not isinstance(index, int):
        raise TypeError(f"prompt_index is {type(index).__name__}, not an int")
    return index


def _pair(candidate: Mapping[str, object]) -> tuple[object, object]:
    """(prompt, completion); a candidate without its text is distinct from every other."""
    return candidate["prompt_index"], candidate["completion"] if "completion" in candidate else id(candidate)


def spread_samples(candidates: Sequence[Sample], n: int, seed: int) -> list[Sample]:
    """`n` candidates (each with `prompt_index`, `rewards`, `total`, `completion`) spread over prompts and
    reward values, distinct (prompt, completion) pairs first.

    Returned in a seeded shuffled order, so the reviewer does not meet all successes in a row.
    """
    rng = random.Random(seed)
    seen: set[tuple[object, object]] = set()
    distinct: list[Sample] = []
    repeats: list[Sample] = []
    for c in candidates:
        (repeats if _pair(c) in seen else distinct).append(c)
        seen.add(_pair(c))
    shown: dict[int, int] = defaultdict(int)
    chosen = _spread(distinct, n, rng, shown)
    chosen += _spread(repeats, n - len(chosen), rng, shown)
    rng.shuffle(chosen)
    return chosen


def repeated_pairs(samples: Sequence[Mapping[str, object]]) -> int:
    """How many samples repeat the (prompt, completion) pair of an earlier one."""
    return len(samples) - len({_pair(s) for s in samples})


def repeat_note(samples: Sequence[Mapping[str, object]]) -> str | None:
    """What to say when the samples could not all be distinct (None when they are)."""
    repeated = repeated_pairs(samples)
    if not repeated:
        return None
    return (f"{repeated} of {len(samples)} samples repeat a (prompt, completion) pair already in the sample: the "
            f"model answered those prompts the same way each time and the pool held only {len(samples) - repeated} "
            "distinct pairs; more prompts in data.train, or a higher grpo.temperature, give more distinct ones")


def _spread(candidates: list[Sample], n: int, rng: random.Random, shown: dict[int, int]) -> list[Sample]:
    """Up to `n` candidates, visiting the reward bins in turn and, in each, the prompt shown least (`shown`,
    updated)."""
    bins: dict[RewardKey, list[Sample]] = defaultdict(list)
    for c in candidates:
        bins[reward_key(sample_rewards(c))].append(c)
    for members in bins.values():
        rng.shuffle(members)
    order = sorted(bins, key=lambda key: (sum(v for _, v in key if v is not None), repr(key)))
    chosen: list[Sample] = []
    while len(chosen) < n and any(bins[key] for key in order):
        for key in order:
            if len(chosen) >= n:
                break
            members = bins[key]
            if not members:
                continue
            best = min(range(len(members)), key=lambda i: shown[_prompt_index(members[i])])
            pick = members.pop(best)
            shown[_prompt_index(pick)] += 1
            chosen.append(pick)
    return chosen


def bin_counts(samples: Sequence[Mapping[str, object]]) -> dict[str, int]:
    """How many samples have each total (as a readable key), for the report's summary."""
    counts: dict[str, int] = defaultdict(int)
    for s in samples:
        total = sample_number(s.get("total"))
        counts["none" if total is None else f"{total:g}"] += 1
    return dict(sorted(counts.items()))
