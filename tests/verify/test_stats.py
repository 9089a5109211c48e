"""Issue 13 items 4 and 7: the loss-trend test and the speedup interval (synthetic data, no timing, no torch)."""

from __future__ import annotations

import random

import pytest

from gpulint.verify.stats import mann_kendall, speedup


def test_a_steady_decrease_is_a_significant_trend() -> None:
    trend = mann_kendall([2.3 - 0.05 * i + random.Random(i).uniform(-0.02, 0.02) for i in range(30)])
    assert trend is not None and trend.direction == "decreasing" and trend.p < 1e-6
    assert trend.slope == pytest.approx(-0.05, abs=0.01)


def test_noise_around_a_constant_is_no_trend() -> None:
    rng = random.Random(3)
    trend = mann_kendall([1.0 + rng.gauss(0, 0.05) for _ in range(60)])
    assert trend is not None and trend.direction == "none" and not trend.significant


def test_a_constant_loss_and_too_few_points() -> None:
    flat = mann_kendall([0.7] * 20)
    assert flat is not None and flat.direction == "none" and flat.p == 1.0
    assert mann_kendall([3.0, 2.0, 1.0]) is None  # 3 points cannot show anything
    assert mann_kendall([4.0, 3.0, 2.0, 1.0]).direction == "none"  # 4 strictly falling: p = 0.09


def _runs(centre: float, count: int, rng: random.Random, jitter: float = 0.02) -> list[list[float]]:
    return [[centre * (1 + rng.gauss(0, jitter)) for _ in range(50)] for _ in range(count)]


def test_run_to_run_variation_widens_the_interval_instead_of_flipping_the_answer() -> None:
    """The issue's rename-only rewrite: 0.74x, 1.88x and 0.74x in three runs on a busy machine."""
    rng = random.Random(7)
    original = [[t * scale for t in run] for run, scale in zip(_runs(0.010, 3, rng), (1.0, 1.9, 1.0))]
    rewritten = [[t * scale for t in run] for run, scale in zip(_runs(0.010, 3, rng), (1.35, 1.0, 1.35))]
    result = speedup(original, rewritten)
    assert result is not None
    assert result.low < 1.0 < result.high
    assert result.verdict == "no measurable difference"


def test_a_real_speedup_is_called_with_an_interval_that_excludes_one() -> None:
    rng = random.Random(11)
    result = speedup(_runs(0.030, 3, rng), _runs(0.020, 3, rng))
    assert result is not None and result.verdict == "faster"
    assert 1.0 < result.low <= result.estimate <= result.high
    assert result.estimate == pytest.approx(1.5, rel=0.05)
    slower = speedup(_runs(0.020, 3, rng), _runs(0.030, 3, rng))
    assert slower is not None and slower.verdict == "slower" and slower.high < 1.0


def test_the_interval_is_reproducible_and_needs_data() -> None:
    rng = random.Random(5)
    a, b = _runs(0.03, 2, rng), _runs(0.02, 2, rng)
    assert speedup(a, b) == speedup(a, b)
    assert speedup([], []) is None
    assert speedup([[]], [[0.1]]) is None
