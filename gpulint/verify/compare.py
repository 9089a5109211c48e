"""Decide whether a rewrite trains the same, and by how much it is faster or leaner.

The loss tolerance follows from what the applied fixes change (figures from CPU runs of an
MLP and a CNN over 50 steps and 3-5 seeds, see gpulint/core/verification.py):
numerics-neutral rewrites reproduce the loss bit for bit with deterministic settings (1e-6
relative allowed), fused optimizers differ in the last bits (1e-4), and mixed precision
deviated at most 0.7 % per step (2e-2 per step, mean of the last 10 losses within 1 %).
Loss, memory and "did it train" come from the checked runs (deterministic); speed from the
timed runs (the script's own settings), interleaved and summarised in stats.py.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from gpulint.core.verification import Tolerance
from gpulint.verify.events import RunRecord
from gpulint.verify.stats import Speedup, Trend, mann_kendall
from gpulint.verify.stats import speedup as stats_speedup


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
    last_n: int = 0  # losses in the "mean of the last" comparison (fewer than the tolerance's when fewer ran)
    rank: Optional[int] = None  # torchrun: the rank this check is about (the worst one)

    def to_json(self) -> dict:
        return {
            "passed": self.passed, "compared_steps": self.compared_steps,
            "max_step_deviation": _finite(self.max_step_deviation), "worst_step": self.worst_step,
            "mean_last_deviation": _finite(self.mean_last_deviation),
            "tolerance": {"name": self.tolerance.name, "per_step": self.tolerance.per_step,
                          "mean_last": self.tolerance.mean_last, "last_n": self.tolerance.last_n},
            "mean_last_n": self.last_n, "rank": self.rank, "reason": self.reason,
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
    n = min(tolerance.last_n, steps)
    if tolerance.mean_last is not None:
        mean_dev = relative(statistics.fmean(original[steps - n:steps]), statistics.fmean(rewritten[steps - n:steps]))
    nan_step = next((i + 1 for i in range(steps) if math.isnan(rewritten[i]) or math.isnan(original[i])), None)
    check = LossCheck(True, steps, worst, start + worst_index + 1, mean_dev, tolerance, last_n=n)
    if nan_step is not None:
        which = "rewritten" if math.isnan(rewritten[nan_step - 1]) else "original"
        check.passed, check.reason = False, f"the {which} loss is NaN at step {nan_step}"
    elif worst > tolerance.per_step:
        check.passed = False
        check.reason = (f"loss differs by {worst:.2e} relative at step {check.worst_step} "
                        f"(limit {tolerance.per_step:g}, {tolerance.name})")
    elif mean_dev is not None and tolerance.mean_last is not None and mean_dev > tolerance.mean_last:
        check.passed = False
        check.reason = (f"mean of the last {n} losses differs by {mean_dev:.2%} "
                        f"(limit {tolerance.mean_last:.0%})")
    return check


def check_run_losses(original: RunRecord, rewritten: RunRecord, tolerance: Tolerance) -> LossCheck:
    """The loss check over the steps both runs recorded; under torchrun, rank by rank, the worst reported."""
    pairs = [(original, rewritten)]
    if original.ranks and rewritten.ranks:
        pairs = list(zip(original.ranks, rewritten.ranks))
    checks = []
    for rank, (old, new) in enumerate(pairs):
        skipped = [s.step for s in old.steps + new.steps if s.skipped]
        check = check_losses(old.losses, new.losses, tolerance, skipped)
        if len(pairs) > 1:
            check.rank = rank
            if check.reason:
                check.reason = f"rank {rank}: {check.reason}"
        checks.append(check)
    failing = [c for c in checks if not c.passed]
    if failing:
        return failing[0]
    return max(checks, key=lambda c: c.max_step_deviation or 0.0)


@dataclass
class TrainingSignal:
    """Did a run train? Its parameters moved, and its loss went down by more than noise."""

    moved: Optional[bool]  # None: not measured (no parameters reached by the loss)
    relative_change: Optional[float]
    tensors: int
    trend: Optional[Trend]

    @property
    def trained(self) -> bool:
        return bool(self.moved) and self.trend is not None and self.trend.direction == "decreasing"

    def describe(self) -> str:
        if self.moved is None:
            weights = "parameters not measured"
        elif self.moved:
            weights = f"weights moved (relative change {self.relative_change:.2g})"
        else:
            weights = f"weights did not move ({self.tensors} parameter tensors unchanged)"
        if self.trend is None:
            loss = "too few steps to judge the loss trend"
        elif self.trend.direction == "none":
            loss = f"no significant loss trend (Mann-Kendall p={self.trend.p:.2g})"
        else:
            loss = f"loss {self.trend.direction} (Mann-Kendall p={self.trend.p:.2g})"
        return f"{weights}; {loss}"

    def to_json(self) -> dict:
        return {"weights_moved": self.moved, "relative_change": _finite(self.relative_change),
                "parameter_tensors": self.tensors, "trained": self.trained,
                "loss_trend": self.trend.to_json() if self.trend else None}


def training_signal(record: RunRecord) -> TrainingSignal:
    info = record.training or {}
    tensors = int(info.get("tensors", 0) or 0)
    moved = bool(info.get("moved")) if tensors else None  # nothing reached by a loss: not measured
    return TrainingSignal(moved, info.get("relative_change"), tensors, mann_kendall(record.losses))


@dataclass
class Timing:
    """Step times of the timed runs (the script's own settings), original and rewritten interleaved."""

    order: list[str]  # "original"/"rewritten", in the order they ran
    original_runs: list[list[float]]
    rewritten_runs: list[list[float]]
    loads: list[Optional[float]]  # 1-minute load average before each run
    cpu_count: Optional[int]
    failures: list[str] = field(default_factory=list)
    speedup: Optional[Speedup] = None

    @property
    def median_original(self) -> Optional[float]:
        times = [t for run in self.original_runs for t in run]
        return statistics.median(times) if times else None

    @property
    def median_rewritten(self) -> Optional[float]:
        times = [t for run in self.rewritten_runs for t in run]
        return statistics.median(times) if times else None

    @property
    def busy(self) -> bool:
        loads = [x for x in self.loads if x is not None]
        return bool(loads and self.cpu_count and max(loads) > 0.75 * self.cpu_count)

    def describe_load(self) -> str:
        loads = [x for x in self.loads if x is not None]
        if not loads:
            return "machine load unknown"
        text = f"load average {min(loads):.1f}-{max(loads):.1f} on {self.cpu_count or '?'} CPUs"
        return text + (" (busy: timings are noisy)" if self.busy else "")

    def to_json(self) -> dict:
        return {"order": self.order, "original_step_times_s": self.original_runs,
                "rewritten_step_times_s": self.rewritten_runs, "load_average_before_run": self.loads,
                "cpu_count": self.cpu_count, "busy": self.busy, "failed_runs": self.failures,
                "median_step_time_s": {"original": self.median_original, "rewritten": self.median_rewritten},
                "speedup": self.speedup.to_json() if self.speedup else None}


def build_timing(order: list[str], records: list[RunRecord], warmup: int, cpu_count: Optional[int]) -> Timing:
    timing = Timing(order, [], [], [r.load_before for r in records], cpu_count)
    for label, record in zip(order, records):
        times = record.timed_step_times(warmup)
        if not record.completed or not times:
            timing.failures.append(f"{label}: {record.status} {record.message}".strip())
            continue
        (timing.original_runs if label == "original" else timing.rewritten_runs).append(times)
    timing.speedup = stats_speedup(timing.original_runs, timing.rewritten_runs)
    return timing


MEMORY_METRICS = (
    ("cuda_max_allocated_bytes", "peak CUDA memory allocated"),
    ("saved_for_backward_max_bytes", "activation bytes saved for backward"),
)


def ratio(new: Optional[float], old: Optional[float]) -> Optional[float]:
    if new is None or old is None or old <= 0:
        return None
    return new / old


@dataclass
class Comparison:
    loss: Optional[LossCheck]
    training_original: TrainingSignal
    training_rewritten: TrainingSignal
    memory_metric: Optional[str]  # which number the memory ratio compares
    memory_original: Optional[int]
    memory_rewritten: Optional[int]
    memory_ratio: Optional[float]
    rss_ratio: Optional[float]
    timing: Optional[Timing] = None
    notes: list[str] = field(default_factory=list)

    @property
    def speedup(self) -> Optional[float]:
        return self.timing.speedup.estimate if self.timing and self.timing.speedup else None

    def to_json(self) -> dict:
        return {
            "loss": self.loss.to_json() if self.loss else None,
            "training": {"original": self.training_original.to_json(),
                         "rewritten": self.training_rewritten.to_json()},
            "speedup": self.timing.speedup.to_json() if self.timing and self.timing.speedup else None,
            "timing": self.timing.to_json() if self.timing else None,
            "memory": {"metric": self.memory_metric, "original_bytes": self.memory_original,
                       "rewritten_bytes": self.memory_rewritten, "ratio": self.memory_ratio,
                       "peak_rss_ratio": self.rss_ratio, "measured_in": "checked runs"},
            "notes": self.notes,
        }


def compare(original: RunRecord, rewritten: RunRecord, tolerance: Tolerance,
            timing: Optional[Timing] = None) -> Comparison:
    """Loss, training signal and memory from the checked runs; speed from the timed runs, if any."""
    metric = mem_old = mem_new = None
    for key, label in MEMORY_METRICS:
        if key in original.memory and key in rewritten.memory:
            metric, mem_old, mem_new = label, original.memory[key], rewritten.memory[key]
            break
    rss = ratio(rewritten.memory.get("peak_rss_bytes"), original.memory.get("peak_rss_bytes"))
    loss = check_run_losses(original, rewritten, tolerance)
    comparison = Comparison(loss, training_signal(original), training_signal(rewritten), metric, mem_old, mem_new,
                            ratio(mem_new, mem_old), rss, timing)
    skipped = sorted({s.step for s in original.steps + rewritten.steps if s.skipped})
    if skipped:
        comparison.notes.append(f"a GradScaler skipped steps {skipped}; the per-step loss check starts "
                                f"after step {tolerance.grace_steps}")
    if len(original.steps) != len(rewritten.steps):
        comparison.notes.append(f"step counts differ: original {len(original.steps)}, rewritten "
                                f"{len(rewritten.steps)}; the loss check compares the first {loss.compared_steps}")
    return comparison
