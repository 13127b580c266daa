"""The paired interval `finetune eval` reports, against figures worked out by hand."""

from __future__ import annotations

import math

import pytest

from llm_finetuning.evaluation.paired import paired_difference, pass_figures, t_quantile_975


@pytest.mark.parametrize(("df", "exact"), [(1, 12.706), (5, 2.571), (8, 2.306), (10, 2.228), (20, 2.086),
                                           (31, 2.040), (60, 2.000), (120, 1.980)])
def test_t_quantile_matches_the_tables(df: int, exact: float) -> None:
    assert abs(t_quantile_975(df) - exact) < 1e-3


def test_paired_interval_by_hand() -> None:
    base = [0.0, 0.25, 0.5, 0.0]
    trained = [0.5, 0.5, 0.75, 0.25]  # differences 0.5, 0.25, 0.25, 0.25: mean 0.3125, sd 0.125
    diff = paired_difference(base, trained)
    half = 3.182 * 0.125 / math.sqrt(4)
    assert diff.delta == pytest.approx(0.3125)
    assert diff.ci95 == pytest.approx((0.3125 - half, 0.3125 + half), abs=1e-6)
    assert diff.beyond_noise and diff.better


def test_noise_and_a_fall() -> None:
    mixed = paired_difference([0.0, 0.5, 0.5, 1.0], [0.5, 0.0, 1.0, 0.5])
    assert mixed.delta == 0.0 and not mixed.beyond_noise and not mixed.better
    fall = paired_difference([1.0] * 8, [0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25])
    assert fall.beyond_noise and not fall.better and fall.ci95[1] < 0
    single = paired_difference([0.0], [1.0])  # one prompt: no spread to measure
    assert single.ci95 == (-1.0, 1.0) and not single.beyond_noise


def test_pass_figures() -> None:
    assert pass_figures([0, 2, 4, 1], 4) == {"pass_at_1": 0.4375, "pass_at_k": 0.75}
