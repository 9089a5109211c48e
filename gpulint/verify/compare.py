"""Decide whether a rewrite trains the same, and by how much it is faster or leaner.

Two runs that differ only in float rounding drift apart as training amplifies the difference,
so a fixed per-step tolerance cannot tell drift from damage. The loss check therefore allows
each rule's own tolerance (gpulint/core/verification.py: 1e-6 for numerics-neutral rewrites,
which must stay bit-exact, 1e-4 for fused optimizers, 2e-2 per step and 1 % on the mean of the
last 10 for mixed precision) plus NOISE_MULTIPLE times a measured noise floor: how far the
original drifts from itself when its initial weights are nudged by one ulp (of float32, or of
float16 for mixed precision). A deviation is relative to the larger loss, or to a tenth of the
run's starting loss when both have fallen below it.
Loss, memory and "did it train" come from the checked runs (deterministic); speed from the
timed runs (the script's own settings), interleaved and summarised in stats.py.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import field
from typing import Iterable, Optional, Sequence

from gpulint.core.verification import Tolerance
from gpulint.records import dataclass
from gpulint.verify.events import RunRecord
from gpulint.verify.stats import Speedup, Trend, mann_kendall, median_of_runs
from gpulint.verify.stats import speedup as stats_speedup

LOSS_FLOOR = 0.1  # a deviation is relative to the larger loss, but never to less than this share of the run's scale
NOISE_MULTIPLE = 3.0  # a rewrite may deviate this many times the noise floor (plus its rule's own tolerance)
NOISE_RECHECK_RUNS = 3  # perturbed runs behind a failure that came within NOISE_RECHECK_FACTOR of its allowance
NOISE_RECHECK_FACTOR = 3.0
SCALE_STEPS = 10  # the run's loss scale: the largest magnitude among its first losses


def relative(a: float, b: float, scale: float = 0.0) -> float:
    """|a - b| relative to the larger of the two, or to LOSS_FLOOR x `scale` when both are smaller: a loss
    that has fallen to 0.008 from 0.7 differs by 5e-4 "by 6 %" otherwise."""
    if a == b:
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b), LOSS_FLOOR * scale, 1e-12)


def loss_scale(losses: Sequence[float]) -> float:
    finite = [abs(v) for v in losses[:SCALE_STEPS] if math.isfinite(v)]
    return max(finite, default=0.0)


def first_nonfinite(losses: Sequence[float]) -> Optional[int]:
    """1-based step of the first NaN or infinite loss."""
    return next((i + 1 for i, v in enumerate(losses) if not math.isfinite(v)), None)


def _mean_last(a: Sequence[float], b: Sequence[float], n: int, scale: float) -> Optional[float]:
    tail_a = [v for v in a[len(a) - n:] if math.isfinite(v)]
    tail_b = [v for v in b[len(b) - n:] if math.isfinite(v)]
    if not tail_a or not tail_b:
        return None
    return relative(statistics.fmean(tail_a), statistics.fmean(tail_b), scale)


@dataclass
class NoiseFloor:
    """How far the original drifts from itself when its initial weights are nudged by one ulp.

    `envelope[i]`: the largest deviation of any perturbed run from the original at steps 1..i+1
    (a running maximum: float rounding differences grow as training amplifies them).
    """

    runs: int
    precision: str  # whose ulp the nudge was: "float32", or "float16" for mixed precision
    envelope: list[float]
    mean_last: Optional[float]  # the largest deviation of a perturbed run's mean of the last n losses
    last_n: int
    multiple: float = NOISE_MULTIPLE
    failures: list[str] = field(default_factory=list)  # perturbed runs that did not run to the end
    added: str = ""  # why runs were added to the first ones: a failure that came close to its allowance

    def at(self, step: int) -> float:
        """The envelope at a 1-based step (its last value past the end)."""
        if not self.envelope:
            return 0.0
        return self.envelope[min(step, len(self.envelope)) - 1]

    @property
    def final(self) -> float:
        return self.envelope[-1] if self.envelope else 0.0

    def to_json(self) -> dict:
        return {"runs": self.runs, "nudge": f"one {self.precision} ulp on every initial parameter element",
                "envelope": [_finite(v) for v in self.envelope], "mean_last": _finite(self.mean_last),
                "last_n": self.last_n, "multiple": self.multiple, "failed_runs": self.failures,
                "added_runs": self.added or None}


def noise_floor(original: Sequence[float], perturbed: Sequence[Sequence[float]], precision: str, last_n: int,
                failures: Sequence[str] = ()) -> NoiseFloor:
    scale = loss_scale(original)
    envelope: list[float] = []
    worst = 0.0
    for i, value in enumerate(original):
        for run in perturbed:
            if i < len(run):
                deviation = relative(value, run[i], scale)
                if math.isfinite(deviation):
                    worst = max(worst, deviation)
        envelope.append(worst)
    means = [_mean_last(original[:len(run)], run[:len(original)], min(last_n, len(run), len(original)), scale)
             for run in perturbed if run]
    known = [m for m in means if m is not None and math.isfinite(m)]
    return NoiseFloor(len(perturbed), precision, envelope, max(known) if known else None, last_n,
                      failures=list(failures))


@dataclass
class LossCheck:
    passed: bool
    compared_steps: int
    max_step_deviation: Optional[float]  # the largest deviation of any compared step
    worst_step: Optional[int]  # the step judged: the first beyond its allowance, else the closest to it
    mean_last_deviation: Optional[float]
    tolerance: Tolerance
    reason: str = ""
    last_n: int = 0  # losses in the "mean of the last" comparison (fewer than the tolerance's when fewer ran)
    rank: Optional[int] = None  # torchrun: the rank this check is about (the worst one)
    noise: Optional[NoiseFloor] = None
    bound_at_worst: Optional[float] = None  # the allowed deviation at the worst step (own tolerance + noise)
    deviation_at_worst: Optional[float] = None
    largest_step: Optional[int] = None  # where the largest deviation is
    within_own_tolerance: bool = False  # passes without the noise floor (then the floor need not be measured)
    identical: bool = False  # every compared loss equal bit for bit
    diverged: Optional[int] = None  # both runs turned NaN/inf at this step; the steps before it were compared
    original_diverged: Optional[int] = None
    rewritten_diverged: Optional[int] = None
    doubt: str = ""  # nothing could be compared (both diverged at the first step)
    mean_bound: Optional[float] = None  # the mean of the last losses' allowance (own limit + noise)
    over_allowance: Optional[float] = None  # a failure's deviation divided by its allowance (1.01: just beyond)
    failed_at: str = ""  # that deviation, where it is: "6.62e-03 at step 45" or "the last-10 mean 1.31%"

    @property
    def envelope_at_worst(self) -> Optional[float]:
        if self.noise is None or self.worst_step is None:
            return None
        return self.noise.at(self.worst_step)

    def describe(self) -> str:
        """The loss line of the report: the deviation beside the noise floor; never "PASS" above a FAIL."""
        if self.doubt:
            return self.doubt
        if self.max_step_deviation is None:  # nothing finite to compare: the reason says why
            return f"DIFFERS: {self.reason}" if self.reason else "no steps compared"
        if self.identical:
            text = f"identical bit for bit over {self.compared_steps} steps"
        else:
            allowed = f"{self.bound_at_worst:.2e}"
            if self.noise is not None and not self.tolerance.bit_exact:
                allowed += (f" = {self.tolerance.per_step:g} + {self.noise.multiple:g} x noise floor "
                            f"{self.noise.at(self.worst_step or 1):.2e}")
            if self.passed:
                text = (f"matches: largest deviation {self.max_step_deviation:.2e} (step {self.largest_step}); "
                        f"closest to its allowance at step {self.worst_step}: {self.deviation_at_worst:.2e} of "
                        f"{allowed}")
            else:
                text = f"DIFFERS: {self.deviation_at_worst:.2e} at step {self.worst_step}, allowed {allowed}"
            text += f"; over {self.compared_steps} steps"
            if self.mean_last_deviation is not None and self.tolerance.mean_last is not None:
                text += f", last-{self.last_n} mean {self.mean_last_deviation:.2%}"
                if self.mean_bound is not None:
                    text += f" ({_mean_allowance(self.tolerance, self.noise, self.mean_bound)})"
        if self.noise is not None:
            text += (f"; noise floor: {self.noise.runs} run{'s' if self.noise.runs != 1 else ''} of the original "
                     f"with its weights nudged by one {self.noise.precision} ulp drift up to "
                     f"{self.noise.final:.2e}")
            if self.noise.added:
                text += f" ({self.noise.added})"
        elif not self.identical and self.within_own_tolerance:
            text += f"; within {self.tolerance.name}'s own limit {self.tolerance.per_step:g}, noise floor not needed"
        if self.rank is not None:
            text += f", worst rank {self.rank}"
        return text

    def to_json(self) -> dict:
        return {
            "passed": self.passed, "compared_steps": self.compared_steps,
            "max_step_deviation": _finite(self.max_step_deviation), "largest_step": self.largest_step,
            "worst_step": self.worst_step, "deviation_at_worst_step": _finite(self.deviation_at_worst),
            "bound_at_worst_step": _finite(self.bound_at_worst), "envelope_at_worst_step": _finite(
                self.envelope_at_worst), "mean_last_deviation": _finite(self.mean_last_deviation),
            "tolerance": {"name": self.tolerance.name, "per_step": self.tolerance.per_step,
                          "mean_last": self.tolerance.mean_last, "last_n": self.tolerance.last_n,
                          "bit_exact": self.tolerance.bit_exact},
            "mean_last_n": self.last_n, "mean_last_bound": _finite(self.mean_bound), "rank": self.rank,
            "reason": self.reason,
            "within_own_tolerance": self.within_own_tolerance, "identical": self.identical,
            "noise_floor": self.noise.to_json() if self.noise else None, "over_allowance": _finite(
                self.over_allowance),
            "diverged_at": self.diverged, "original_diverged_at": self.original_diverged,
            "rewritten_diverged_at": self.rewritten_diverged, "doubt": self.doubt,
        }


def _finite(value: Optional[float]) -> Optional[float]:
    return None if value is None or not math.isfinite(value) else value


def _word(value: float) -> str:
    return "NaN" if math.isnan(value) else "infinite"


def check_losses(original: Sequence[float], rewritten: Sequence[float], tolerance: Tolerance,
                 skipped_steps: Iterable[int] = (), noise: Optional[NoiseFloor] = None) -> LossCheck:
    """Per step, the rewrite's deviation must stay within the rule's own tolerance plus NOISE_MULTIPLE
    times the noise floor (never for a bit-exact rule), and so must the mean of the last losses."""
    steps = min(len(original), len(rewritten))
    if steps == 0:
        return LossCheck(False, 0, None, None, None, tolerance, "no steps to compare")
    check = LossCheck(True, steps, None, None, None, tolerance, noise=noise)
    bad_old, bad_new = first_nonfinite(original[:steps]), first_nonfinite(rewritten[:steps])
    check.original_diverged, check.rewritten_diverged = bad_old, bad_new
    if bad_new is not None and (bad_old is None or bad_new < bad_old):
        value = rewritten[bad_new - 1]
        until = f"until step {bad_old}" if bad_old is not None else f"through step {steps}"
        check.passed = False
        check.reason = f"the rewritten loss is {_word(value)} from step {bad_new}; the original's stays finite {until}"
        steps = bad_new - 1
    elif bad_old is not None:
        if bad_new == bad_old:
            check.diverged = bad_old
        steps = bad_old - 1
    check.compared_steps = steps
    if steps == 0:
        if check.passed:
            check.doubt = ("both runs diverged (NaN or inf) at step 1: no finite loss to compare"
                           if check.diverged else "the original's loss is not finite from step 1: nothing to compare")
        return check
    scale = loss_scale(original)
    start = min(tolerance.grace_steps if any(True for _ in skipped_steps) else 0, steps - 1)
    deviations = [relative(original[i], rewritten[i], scale) for i in range(start, steps)]
    check.identical = all(d == 0 for d in deviations) and start == 0

    def bound(index: int) -> float:
        if noise is None or tolerance.bit_exact:
            return tolerance.per_step
        return tolerance.per_step + noise.multiple * noise.at(start + index + 1)

    ratios = [d / bound(i) for i, d in enumerate(deviations)]
    worst_index = max(range(len(deviations)), key=lambda i: (ratios[i], deviations[i]))
    first_over = next((i for i, r in enumerate(ratios) if r > 1), None)
    shown = first_over if first_over is not None else worst_index
    largest = max(range(len(deviations)), key=lambda i: deviations[i])
    check.max_step_deviation, check.largest_step = deviations[largest], start + largest + 1
    check.worst_step, check.deviation_at_worst = start + shown + 1, deviations[shown]
    check.bound_at_worst = bound(shown)
    n = min(tolerance.last_n, steps)
    check.last_n = n
    if tolerance.mean_last is not None:
        check.mean_last_deviation = _mean_last(original[:steps], rewritten[:steps], n, scale)
    mean_bound = tolerance.mean_last
    if mean_bound is not None and noise is not None and noise.mean_last is not None and not tolerance.bit_exact:
        mean_bound += noise.multiple * noise.mean_last
    check.mean_bound = mean_bound
    check.within_own_tolerance = (max(deviations) <= tolerance.per_step and (
        tolerance.mean_last is None or check.mean_last_deviation is None
        or check.mean_last_deviation <= tolerance.mean_last))
    if not check.passed:
        return check
    if first_over is not None:
        check.passed = False
        check.over_allowance = ratios[first_over]
        check.failed_at = f"{deviations[first_over]:.2e} at step {check.worst_step}"
        check.reason = (f"loss differs by {deviations[first_over]:.2e} relative at step {check.worst_step} "
                        f"(allowed {bound(first_over):.2e}: "
                        f"{_allowance(tolerance, noise, check.worst_step, deviations[first_over])})")
    elif check.mean_last_deviation is not None and mean_bound is not None and check.mean_last_deviation > mean_bound:
        check.passed = False
        check.over_allowance = check.mean_last_deviation / mean_bound if mean_bound > 0 else math.inf
        check.failed_at = f"the last-{n} mean {check.mean_last_deviation:.2%}"
        check.reason = (f"mean of the last {n} losses differs by {check.mean_last_deviation:.2%} "
                        f"({_mean_allowance(tolerance, noise, mean_bound)})")
    return check


def _mean_allowance(tolerance: Tolerance, noise: Optional[NoiseFloor], bound: float) -> str:
    """The mean-of-last allowance with its parts, so that 1.31% beside a 1% limit reads as allowed."""
    if noise is None or noise.mean_last is None or tolerance.bit_exact or bound == tolerance.mean_last:
        return f"limit {bound:.2%}"
    return f"allowed {bound:.2%} = {tolerance.mean_last:.0%} + {noise.multiple:g} x noise floor {noise.mean_last:.2%}"


def _allowance(tolerance: Tolerance, noise: Optional[NoiseFloor], step: int, deviation: float) -> str:
    if tolerance.bit_exact:
        text = f"{tolerance.name} rewrites must reproduce the loss, limit {tolerance.per_step:g}"
        if noise is not None:
            within = "within" if deviation <= noise.multiple * noise.at(step) else "beyond"
            text += (f"; nudging the original's weights by one ulp moves it by up to {noise.at(step):.2e} there, "
                     f"so the difference is {within} float-rounding reach")
        return text
    if noise is None:
        return f"limit {tolerance.per_step:g}, {tolerance.name}; noise floor not measured"
    return (f"{tolerance.name}'s {tolerance.per_step:g} + {noise.multiple:g} x the noise floor "
            f"{noise.at(step):.2e} there")


def wants_more_noise(check: LossCheck) -> bool:
    """Measure more perturbed runs before a FAIL that came within NOISE_RECHECK_FACTOR of an allowance built on
    fewer than NOISE_RECHECK_RUNS of them. Rounding differences are amplified chaotically, step by step: how far
    one nudged run happens to drift by a given step is a thin sample of how far rounding reaches there (the README
    demo on an AVX2 CPU: its fused Adam is 6.62e-3 off at step 45, where 1 nudged run drifted 2.15e-3 and
    5 drift up to 5.69e-3). A damage far beyond the allowance still fails at once, without the extra runs; a
    bit-exact rule gains nothing from the floor."""
    noise = check.noise
    return (not check.passed and noise is not None and noise.runs < NOISE_RECHECK_RUNS
            and not check.tolerance.bit_exact and check.over_allowance is not None
            and check.over_allowance <= NOISE_RECHECK_FACTOR)


def check_run_losses(original: RunRecord, rewritten: RunRecord, tolerance: Tolerance,
                     noise: Optional[NoiseFloor] = None) -> LossCheck:
    """The loss check over the steps both runs recorded; under torchrun, rank by rank, the worst reported."""
    pairs = [(original, rewritten)]
    if original.ranks and rewritten.ranks:
        pairs = list(zip(original.ranks, rewritten.ranks))
    checks = []
    for rank, (old, new) in enumerate(pairs):
        skipped = [s.step for s in old.steps + new.steps if s.skipped]
        check = check_losses(old.losses, new.losses, tolerance, skipped, noise)
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
    trend: Optional[Trend]  # over the steps before a divergence
    changed_tensors: int = 0
    diverged: Optional[int] = None  # first step with a NaN or infinite loss
    steps: int = 0

    @property
    def trained(self) -> bool:
        return self.missing() is None

    def missing(self) -> Optional[str]:
        """Why this run does not show training, in the words the report uses; None when it does."""
        if self.moved is None:
            return "its parameters could not be measured (no parameter reached by a loss)"
        if not self.moved:
            return f"its weights did not move ({self.tensors} parameter tensors unchanged)"
        if self.trend is None:
            return f"{self.steps} steps are too few to judge the loss trend"
        if self.trend.direction != "decreasing":
            return f"its loss shows no significant decrease (Mann-Kendall p={self.trend.p:.2g})"
        return None

    def describe(self) -> str:
        if self.moved is None:
            weights = "parameters not measured"
        elif self.moved:
            weights = (f"weights moved ({self.changed_tensors} of {self.tensors} parameter tensors, relative "
                       f"change {self.relative_change:.2g})")
        else:
            weights = f"weights did not move ({self.tensors} parameter tensors unchanged)"
        before = f" over the {self.diverged - 1} steps before" if self.diverged else ""
        if self.trend is None:
            loss = f"too few steps{before} to judge the loss trend"
        elif self.trend.direction == "none":
            loss = f"no significant loss trend{before} (Mann-Kendall p={self.trend.p:.2g})"
        else:
            loss = f"loss {self.trend.direction}{before} (Mann-Kendall p={self.trend.p:.2g})"
        if self.diverged:
            loss += f", then diverged (NaN or inf from step {self.diverged})"
        return f"{weights}; {loss}"

    def to_json(self) -> dict:
        return {"weights_moved": self.moved, "relative_change": _finite(self.relative_change),
                "parameter_tensors": self.tensors, "changed_parameter_tensors": self.changed_tensors,
                "trained": self.trained, "diverged_at": self.diverged,
                "loss_trend": self.trend.to_json() if self.trend else None}


def training_signal(record: RunRecord) -> TrainingSignal:
    info = record.training or {}
    tensors = int(info.get("tensors", 0) or 0)
    moved = bool(info.get("moved")) if tensors else None  # nothing reached by a loss: not measured
    losses = record.losses
    diverged = first_nonfinite(losses)
    before = losses[:diverged - 1] if diverged else losses
    return TrainingSignal(moved, info.get("relative_change"), tensors, mann_kendall(before),
                          int(info.get("changed_tensors", 0) or 0), diverged, len(before))


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
        return median_of_runs(self.original_runs)

    @property
    def median_rewritten(self) -> Optional[float]:
        return median_of_runs(self.rewritten_runs)

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
            timing: Optional[Timing] = None, noise: Optional[NoiseFloor] = None) -> Comparison:
    """Loss, training signal and memory from the checked runs; speed from the timed runs, if any."""
    metric = mem_old = mem_new = None
    for key, label in MEMORY_METRICS:
        if key in original.memory and key in rewritten.memory:
            metric, mem_old, mem_new = label, original.memory[key], rewritten.memory[key]
            break
    rss = ratio(rewritten.memory.get("peak_rss_bytes"), original.memory.get("peak_rss_bytes"))
    loss = check_run_losses(original, rewritten, tolerance, noise)
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
