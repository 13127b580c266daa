"""Small, pure-Python statistics for short metric trajectories (tens to thousands of points).

No numpy: `finetune diagnose` answers inside an agent's chat and must not pull in the ML stack.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def median(values: Sequence[float]) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def window_size(n: int) -> int:
    """Points in the early and late windows of a trajectory of `n` points: a quarter, at least 2 (or n)."""
    return min(n, max(2, math.ceil(n / 4)))


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson correlation, or None when either side is constant or there are fewer than 3 points."""
    if len(x) != len(y) or len(x) < 3:
        return None
    mx, my = mean(x), mean(y)
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx <= 1e-18 or syy <= 1e-18:
        return None
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    return sxy / math.sqrt(sxx * syy)


def fitted_change(x: Sequence[float], y: Sequence[float]) -> float:
    """Change of the least-squares line of y on x from the first x to the last: a noise-robust 'rise'."""
    if len(x) < 2:
        return 0.0
    mx, my = mean(x), mean(y)
    sxx = sum((a - mx) ** 2 for a in x)
    if sxx <= 1e-18:
        return 0.0
    slope = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sxx
    return slope * (x[-1] - x[0])


def spikes(values: Sequence[float], factor: float, floor: float, minimum: float, history: int = 10) -> list[int]:
    """Indices whose value is at least `factor` x the median of up to `history` earlier points (at least 3)
    and at least `minimum` in absolute terms. `floor` keeps a near-zero baseline from making noise a spike."""
    found = []
    for i in range(3, len(values)):
        base = max(median(values[max(0, i - history):i]), floor)
        if values[i] >= factor * base and values[i] >= minimum:
            found.append(i)
    return found


def step_ranges(steps: Sequence[int], logged: Sequence[int] | None = None) -> str:
    """[1, 2, 3, 7, 9, 10] -> '1-3, 7, 9-10'. With `logged` (every logged step, in order), steps that are
    neighbours among the logged ones join a range too, so logging every 10 steps gives '10-50'."""
    if not steps:
        return "-"
    ordered = sorted(set(steps))
    position = {s: i for i, s in enumerate(sorted(set(logged)))} if logged else {s: s for s in ordered}
    parts: list[str] = []
    start = prev = ordered[0]
    for s in ordered[1:]:
        if s in position and prev in position and position[s] == position[prev] + 1:
            prev = s
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = s
    parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(parts)


def fmt(value: float | None, digits: int = 3) -> str:
    """A number for a message: 3 significant digits, 'n/a' for missing."""
    if value is None:
        return "n/a"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.{digits}g}"
