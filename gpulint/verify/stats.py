"""The statistics behind verify's claims: is the loss trending, and is the speedup real?

Both questions are asked of noisy data (per-batch losses, step times on a shared machine), so
both answers come with their uncertainty and are made only when the data supports them:

- loss trend: the Mann-Kendall test (no assumption on the noise's distribution) with the
  Theil-Sen slope; a trend is significant at p < 0.05.
- speedup: (the median over the original's runs of each run's median step time) / (the same
  for the rewritten runs), the two numbers the report's step-time row shows, with a 95 %
  interval from a two-level bootstrap (runs, then steps within each run), so run-to-run
  variation -- the machine's load changing between runs -- widens the interval instead of
  producing 0.74x in one run and 1.88x in the next. An interval wider than a factor of
  WIDE_INTERVAL is too noisy to give a number for.
"""

from __future__ import annotations

import math
import random
import statistics
from typing import Optional, Sequence

from gpulint.records import dataclass

TREND_ALPHA = 0.05
MIN_TREND_POINTS = 4
MAX_TREND_POINTS = 1000
BOOTSTRAP_ITERATIONS = 2000
CONFIDENCE = 0.95
WIDE_INTERVAL = 4.0  # high/low of the interval beyond which no estimate is reported


@dataclass(frozen=True)
class Trend:
    points: int
    s: int
    z: float
    p: float
    slope: float  # Theil-Sen: loss change per step
    relative_slope: float  # slope over the median loss
    direction: str  # "decreasing", "increasing" or "none" (not significant)

    @property
    def significant(self) -> bool:
        return self.direction != "none"

    def to_json(self) -> dict:
        return {"points": self.points, "mann_kendall_s": self.s, "z": self.z, "p": self.p, "slope_per_step": self.slope,
                "relative_slope_per_step": self.relative_slope, "direction": self.direction}


def _sign(value: float) -> int:
    return (value > 0) - (value < 0)


def mann_kendall(values: Sequence[float], alpha: float = TREND_ALPHA) -> Optional[Trend]:
    """Two-sided Mann-Kendall trend test with the tie-corrected variance; None below 4 finite points."""
    data = [v for v in values if math.isfinite(v)]
    if len(data) > MAX_TREND_POINTS:  # O(n^2): thin evenly, keeping the first and the last point
        step = (len(data) - 1) / (MAX_TREND_POINTS - 1)
        data = [data[round(i * step)] for i in range(MAX_TREND_POINTS)]
    n = len(data)
    if n < MIN_TREND_POINTS:
        return None
    s = 0
    slopes = []
    for i in range(n - 1):
        for j in range(i + 1, n):
            s += _sign(data[j] - data[i])
            slopes.append((data[j] - data[i]) / (j - i))
    ties: dict[float, int] = {}
    for value in data:
        ties[value] = ties.get(value, 0) + 1
    variance = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in ties.values() if t > 1)) / 18
    if variance <= 0:
        z = 0.0
    elif s > 0:
        z = (s - 1) / math.sqrt(variance)
    elif s < 0:
        z = (s + 1) / math.sqrt(variance)
    else:
        z = 0.0
    p = math.erfc(abs(z) / math.sqrt(2))
    slope = statistics.median(slopes)
    scale = abs(statistics.median(data)) or 1.0
    direction = "none" if p >= alpha else ("decreasing" if z < 0 else "increasing")
    return Trend(n, s, z, p, slope, slope / scale, direction)


@dataclass(frozen=True)
class Speedup:
    estimate: float  # median over run pairs of original/rewritten median step time
    low: float
    high: float
    pairs: int
    confidence: float = CONFIDENCE

    @property
    def too_noisy(self) -> bool:
        return self.low <= 0 or self.high / self.low > WIDE_INTERVAL

    @property
    def verdict(self) -> str:
        """"faster" or "slower" only when the interval excludes 1.0."""
        if self.low > 1.0:
            return "faster"
        if self.high < 1.0:
            return "slower"
        return "no measurable difference"

    def to_json(self) -> dict:
        return {"estimate": self.estimate, "ci_low": self.low, "ci_high": self.high, "confidence": self.confidence,
                "run_pairs": self.pairs, "verdict": self.verdict, "too_noisy": self.too_noisy}


def median_of_runs(runs: Sequence[Sequence[float]]) -> Optional[float]:
    """The median over runs of each run's median step time (what the report's step-time row shows)."""
    medians = [statistics.median(run) for run in runs if run]
    return statistics.median(medians) if medians else None


def _median_ratio(pairs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> float:
    old = median_of_runs([a for a, _ in pairs])
    new = median_of_runs([b for _, b in pairs])
    assert old is not None and new is not None
    return old / new


def speedup(original_runs: Sequence[Sequence[float]], rewritten_runs: Sequence[Sequence[float]],
            iterations: int = BOOTSTRAP_ITERATIONS, confidence: float = CONFIDENCE,
            seed: int = 0) -> Optional[Speedup]:
    """Speedup of the rewrite from paired runs' step times (pair i: the i-th run of each script).

    The interval resamples run pairs, then the steps inside each chosen run. With a single pair
    it reflects step-to-step jitter only; the caller says so.
    """
    pairs = [(list(a), list(b)) for a, b in zip(original_runs, rewritten_runs)
             if a and b and statistics.median(b) > 0]
    if not pairs:
        return None
    estimate = _median_ratio(pairs)
    rng = random.Random(seed)
    samples = []
    for _ in range(iterations):
        chosen = [pairs[rng.randrange(len(pairs))] for _ in pairs]
        resampled = []
        for a, b in chosen:
            ra = rng.choices(a, k=len(a))
            rb = rng.choices(b, k=len(b))
            if statistics.median(rb) > 0:
                resampled.append((ra, rb))
        if resampled:
            samples.append(_median_ratio(resampled))
    samples.sort()
    tail = (1 - confidence) / 2
    low = samples[max(0, int(math.floor(tail * len(samples))))]
    high = samples[min(len(samples) - 1, int(math.ceil((1 - tail) * len(samples))) - 1)]
    return Speedup(estimate, min(low, estimate), max(high, estimate), len(pairs), confidence)
