"""Decide whether a rewrite trains the same, and by how much it is faster or leaner.

The loss tolerance follows from what the applied fixes change (figures from CPU runs of an
MLP and a CNN over 50 steps and 3-5 seeds, see docs/pytorch-performance-facts.md):
numerics-neutral rewrites reproduce the loss bit for bit with deterministic settings (1e-6
relative allowed), fused optimizers differ in the last bits (1e-4), and mixed precision
deviated at most 0.7 % per step (2e-2 per step, mean of the last 10 losses within 1 %).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from gpulint.verify.events import RunRecord


@dataclass(frozen=True)
class Tolerance:
    name: str
    per_step: float  # relative deviation allowed at every compared step
    mean_last: Optional[float] = None  # relative deviation allowed for the mean of the last `last_n` losses
    last_n: int = 10
    grace_steps: int = 0  # steps left out of the per-step check when a GradScaler skipped a step
    rank: int = 0  # larger is looser; a combination of fixes takes the loosest it needs

    def describe(self) -> str:
        text = f"{self.name}: {self.per_step:g} relative per step"
        if self.mean_last is not None:
            text += f", mean of the last {self.last_n} within {self.mean_last:.0%}"
        return text


NEUTRAL = Tolerance("numerics-neutral", 1e-6, rank=0)
FUSED_OPTIMIZER = Tolerance("fused optimizer", 1e-4, rank=1)
MIXED_PRECISION = Tolerance("mixed precision", 2e-2, mean_last=1e-2, grace_steps=5, rank=2)

RULE_TOLERANCES: dict[str, Tolerance] = {
    "GPU101": NEUTRAL,  # pin_memory
    "GPU102": NEUTRAL,  # worker processes (items must not draw from the global RNG)
    "GPU003": NEUTRAL,  # API rename
    "GPU301": NEUTRAL,  # checkpointing with use_reentrant=False and the RNG state preserved: bitwise
    "GPU302": NEUTRAL,  # explicit use_reentrant=False
    "GPU201": FUSED_OPTIMIZER,
    "GPU001": MIXED_PRECISION,
    "GPU002": MIXED_PRECISION,
}


@dataclass(frozen=True)
class ToleranceChoice:
    tolerance: Tolerance
    decided_by: tuple[str, ...]  # the applied codes that need this tolerance
    unknown: tuple[str, ...] = ()  # applied codes with no registered tolerance (treated as neutral)


def tolerance_for(codes: Iterable[str]) -> ToleranceChoice:
    """The strictest tolerance that every applied fix can meet: the loosest any one of them needs."""
    codes = sorted(set(codes))
    unknown = tuple(c for c in codes if c not in RULE_TOLERANCES)
    chosen = max((RULE_TOLERANCES.get(c, NEUTRAL) for c in codes), key=lambda t: t.rank, default=NEUTRAL)
    deciding = tuple(c for c in codes if RULE_TOLERANCES.get(c, NEUTRAL) == chosen)
    return ToleranceChoice(chosen, deciding, unknown)


def relative(a: float, b: float) -> float:
    if a == b:
        return 0.0
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


@dataclass
class LossCheck:
    passed: bool
    compared_steps: int
    max_step_deviation: Optional[float]
    worst_step: Optional[int]
    mean_last_deviation: Optional[float]
    tolerance: Tolerance
    reason: str = ""

    def to_json(self) -> dict:
        return {
            "passed": self.passed, "compared_steps": self.compared_steps,
            "max_step_deviation": _finite(self.max_step_deviation), "worst_step": self.worst_step,
            "mean_last_deviation": _finite(self.mean_last_deviation),
            "tolerance": {"name": self.tolerance.name, "per_step": self.tolerance.per_step,
                          "mean_last": self.tolerance.mean_last, "last_n": self.tolerance.last_n},
            "reason": self.reason,
        }


def _finite(value: Optional[float]) -> Optional[float]:
    return None if value is None or not math.isfinite(value) else value


def check_losses(original: Sequence[float], rewritten: Sequence[float], tolerance: Tolerance,
                 skipped_steps: Iterable[int] = ()) -> LossCheck:
    steps = min(len(original), len(rewritten))
    if steps == 0:
        return LossCheck(False, 0, None, None, None, tolerance, "no steps to compare")
    start = tolerance.grace_steps if any(True for _ in skipped_steps) else 0
    start = min(start, steps - 1)
    deviations = [relative(original[i], rewritten[i]) for i in range(start, steps)]
    worst_index = max(range(len(deviations)), key=lambda i: deviations[i])
    worst = deviations[worst_index]
    mean_dev = None
    if tolerance.mean_last is not None:
        n = min(tolerance.last_n, steps)
        mean_dev = relative(statistics.fmean(original[steps - n:steps]), statistics.fmean(rewritten[steps - n:steps]))
    nan_step = next((i + 1 for i in range(steps) if math.isnan(rewritten[i]) or math.isnan(original[i])), None)
    check = LossCheck(True, steps, worst, start + worst_index + 1, mean_dev, tolerance)
    if nan_step is not None:
        which = "rewritten" if math.isnan(rewritten[nan_step - 1]) else "original"
        check.passed, check.reason = False, f"the {which} loss is NaN at step {nan_step}"
    elif worst > tolerance.per_step:
        check.passed = False
        check.reason = (f"loss differs by {worst:.2e} relative at step {check.worst_step} "
                        f"(limit {tolerance.per_step:g}, {tolerance.name})")
    elif mean_dev is not None and tolerance.mean_last is not None and mean_dev > tolerance.mean_last:
        check.passed = False
        check.reason = (f"mean of the last {min(tolerance.last_n, steps)} losses differs by {mean_dev:.2%} "
                        f"(limit {tolerance.mean_last:.0%})")
    return check


def median_step_time(run: RunRecord, warmup: int) -> Optional[float]:
    """Median wall time per step after the warm-up; the first step (start-up) is never timed."""
    times = [s.time_s for s in run.steps[warmup:] if s.time_s is not None]
    return statistics.median(times) if times else None


def ratio(new: Optional[float], old: Optional[float]) -> Optional[float]:
    if new is None or old is None or old <= 0:
        return None
    return new / old


@dataclass
class Comparison:
    median_time_original: Optional[float]
    median_time_rewritten: Optional[float]
    speedup: Optional[float]
    memory_metric: Optional[str]  # which number the memory ratio compares
    memory_original: Optional[int]
    memory_rewritten: Optional[int]
    memory_ratio: Optional[float]
    rss_ratio: Optional[float]
    loss: Optional[LossCheck]
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "median_step_time_s": {"original": self.median_time_original, "rewritten": self.median_time_rewritten},
            "speedup": self.speedup,
            "memory": {"metric": self.memory_metric, "original_bytes": self.memory_original,
                       "rewritten_bytes": self.memory_rewritten, "ratio": self.memory_ratio,
                       "peak_rss_ratio": self.rss_ratio},
            "loss": self.loss.to_json() if self.loss else None,
            "notes": self.notes,
        }


MEMORY_METRICS = (
    ("cuda_max_allocated_bytes", "peak CUDA memory allocated"),
    ("saved_for_backward_max_bytes", "activation bytes saved for backward"),
)


def compare(original: RunRecord, rewritten: RunRecord, tolerance: Tolerance, warmup: int) -> Comparison:
    t_old, t_new = median_step_time(original, warmup), median_step_time(rewritten, warmup)
    speedup = ratio(t_old, t_new)
    metric = mem_old = mem_new = None
    for key, label in MEMORY_METRICS:
        if key in original.memory and key in rewritten.memory:
            metric, mem_old, mem_new = label, original.memory[key], rewritten.memory[key]
            break
    rss = ratio(rewritten.memory.get("peak_rss_bytes"), original.memory.get("peak_rss_bytes"))
    skipped = [s.step for s in original.steps + rewritten.steps if s.skipped]
    loss = check_losses(original.losses, rewritten.losses, tolerance, skipped)
    comparison = Comparison(t_old, t_new, speedup, metric, mem_old, mem_new, ratio(mem_new, mem_old), rss, loss)
    if t_old is None:
        comparison.notes.append(f"no step times after the {warmup} warm-up steps: raise --steps to measure speed")
    if skipped:
        comparison.notes.append(f"a GradScaler skipped steps {sorted(set(skipped))}; the per-step loss check starts "
                                f"after step {tolerance.grace_steps}")
    if len(original.steps) != len(rewritten.steps):
        comparison.notes.append(f"step counts differ: original {len(original.steps)}, rewritten {len(rewritten.steps)}")
    return comparison
