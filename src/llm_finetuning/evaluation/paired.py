"""Before/after on the same prompts: the paired difference of per-prompt success rates, with a 95% interval.

Each prompt i gives a base rate b_i and a trained rate t_i (successes / k). The difference in pass@1 is
the mean of d_i = t_i - b_i; its 95% interval is Student's t over the n prompts (paired, so the spread
between prompts, which both models share, does not count as noise). The change is beyond the noise when
the interval leaves out zero; one prompt alone gives the interval [-1, 1]. Pure: no ML imports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

# Two-sided 97.5% quantiles of Student's t for 1-7 degrees of freedom; beyond that the Cornish-Fisher
# expansion below is within 0.001 of the exact value.
_T975_SMALL = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365}


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom."""
    if df < 1:
        raise ValueError("degrees of freedom must be >= 1")
    if df in _T975_SMALL:
        return _T975_SMALL[df]
    z = NormalDist().inv_cdf(0.975)
    v = float(df)
    return (z + (z**3 + z) / (4 * v) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3))


@dataclass(frozen=True)
class PairedDifference:
    n: int
    delta: float
    ci95: tuple[float, float]

    @property
    def beyond_noise(self) -> bool:
        """The interval leaves out zero (a rise or a fall larger than sampling noise)."""
        return self.ci95[0] > 0 or self.ci95[1] < 0

    @property
    def better(self) -> bool:
        return self.beyond_noise and self.delta > 0


def paired_difference(base: list[float], trained: list[float]) -> PairedDifference:
    """Mean of trained - base over prompts, with a 95% t interval (a single prompt has no interval)."""
    if len(base) != len(trained) or not base:
        raise ValueError("paired figures need the same, nonzero number of prompts on both sides")
    diffs = [t - b for b, t in zip(base, trained, strict=True)]
    n = len(diffs)
    delta = sum(diffs) / n
    if n < 2:  # no spread to measure: the interval is every difference two rates can have
        return PairedDifference(n, delta, (-1.0, 1.0))
    sd = math.sqrt(sum((d - delta) ** 2 for d in diffs) / (n - 1))
    half = t_quantile_975(n - 1) * sd / math.sqrt(n)
    return PairedDifference(n, delta, (delta - half, delta + half))


def pass_figures(successes: list[int], k: int) -> dict[str, float]:
    """pass@1 (mean success rate) and pass@k (share of prompts with a success) from per-prompt counts."""
    n = len(successes)
    return {"pass_at_1": round(sum(s / k for s in successes) / n, 6) if n else 0.0,
            "pass_at_k": round(sum(1 for s in successes if s > 0) / n, 6) if n else 0.0}
