"""Loss tolerances by applied rule, the loss check, and what a comparison reads from which run (no torch)."""

from __future__ import annotations

import math

import pytest

from gpulint.core.verification import FUSED_OPTIMIZER, MIXED_PRECISION, NEUTRAL, Tolerance
from gpulint.verify.compare import build_timing, check_losses, check_run_losses, compare
from gpulint.verify.events import RunRecord, StepRecord
from gpulint.verify.rules import tolerance_for, verifications

CURVE = [2.3, 2.1, 1.9, 1.8, 1.7, 1.6, 1.55, 1.5, 1.45, 1.4, 1.38, 1.36]


@pytest.mark.parametrize(
    "codes, expected",
    [
        (["GPU101"], NEUTRAL),
        (["GPU101", "GPU102", "GPU302", "GPU003"], NEUTRAL),
        (["GPU301"], NEUTRAL),
        (["GPU201"], FUSED_OPTIMIZER),
        (["GPU101", "GPU201"], FUSED_OPTIMIZER),
        (["GPU001"], MIXED_PRECISION),
        (["GPU002", "GPU101"], MIXED_PRECISION),
        (["GPU001", "GPU201", "GPU102"], MIXED_PRECISION),
        ([], NEUTRAL),
    ],
)
def test_tolerance_is_the_loosest_any_applied_rule_needs(codes: list[str], expected: Tolerance) -> None:
    assert tolerance_for(codes).tolerance == expected


def test_tolerance_names_the_deciding_rules_and_unregistered_ones() -> None:
    choice = tolerance_for(["GPU201", "GPU101", "GPU999"])
    assert choice.decided_by == ("GPU201",)
    assert choice.unknown == ("GPU999",)


def test_neutral_rewrite_must_match_to_1e6() -> None:
    nudged = [v * (1 + 5e-7) for v in CURVE]
    assert check_losses(CURVE, nudged, NEUTRAL).passed
    off = list(CURVE)
    off[4] *= 1 + 3e-6
    check = check_losses(CURVE, off, NEUTRAL)
    assert not check.passed
    assert check.worst_step == 5
    assert "step 5" in check.reason


def test_fused_optimizer_allows_1e4_but_not_more() -> None:
    assert check_losses(CURVE, [v * (1 + 9e-5) for v in CURVE], FUSED_OPTIMIZER).passed
    assert not check_losses(CURVE, [v * (1 + 2e-4) for v in CURVE], FUSED_OPTIMIZER).passed


def test_mixed_precision_per_step_and_mean_of_last_ten() -> None:
    wobble = [v * (1 + (0.015 if i % 2 else -0.015)) for i, v in enumerate(CURVE)]
    check = check_losses(CURVE, wobble, MIXED_PRECISION)
    assert check.passed, check.reason  # 1.5 % per step, but the mean of the last 10 stays within 1 %
    biased = [v * 1.015 for v in CURVE]
    check = check_losses(CURVE, biased, MIXED_PRECISION)
    assert not check.passed  # every step within 2 %, the mean of the last 10 is 1.5 % off
    assert "mean of the last 10" in check.reason
    spike = list(CURVE)
    spike[7] *= 1.05
    assert not check_losses(CURVE, spike, MIXED_PRECISION).passed


def test_grace_steps_apply_only_when_a_scaler_skipped_a_step() -> None:
    early = list(CURVE)
    early[1] *= 1.1  # a step the fp16 scaler skipped in one run
    assert not check_losses(CURVE, early, MIXED_PRECISION).passed
    assert check_losses(CURVE, early, MIXED_PRECISION, skipped_steps=[2]).passed


def test_nan_loss_fails_with_its_step() -> None:
    broken = list(CURVE)
    broken[3] = math.nan
    check = check_losses(CURVE, broken, MIXED_PRECISION)
    assert not check.passed
    assert "rewritten loss is NaN from step 4" in check.reason


def _run(times: list[float], losses: list[float] = CURVE, **memory: int) -> RunRecord:
    steps = [StepRecord(i + 1, loss, None if i == 0 else t) for i, (t, loss) in enumerate(zip(times, losses))]
    return RunRecord(status="stopped", steps=steps, memory=dict(memory))


def test_every_rule_with_a_fix_says_what_verify_checks() -> None:
    """A rule without a verification would be NOT TRACKED by verify; one without constructs could never be
    exercised, unless its fix has no runtime effect a CPU run can see: GPU900 removes a comment, GPU104's
    non_blocking copies overlap nothing on a CPU, GPU105's device= builds the same values where they are
    used, GPU503's no_grad wraps a loop that only evaluates (the training losses cannot change), GPU506's
    no_sync skips all-reduces that a one-process run never makes."""
    from gpulint.rules import all_rules

    fixable = {rule.code for rule in all_rules() if rule.fix is not None}
    assert fixable and fixable <= set(verifications())
    no_effect = {code for code, check in verifications().items() if not check.constructs}
    assert no_effect == {"GPU900", "GPU104", "GPU105", "GPU503", "GPU506"}


def test_memory_and_losses_come_from_the_checked_runs() -> None:
    old = _run([9.0] + [0.020] * 11, saved_for_backward_max_bytes=1000, peak_rss_bytes=10)
    new = _run([9.0, 5.0] + [0.010] * 10, saved_for_backward_max_bytes=400, peak_rss_bytes=20)
    result = compare(old, new, NEUTRAL)
    assert result.memory_ratio == pytest.approx(0.4)
    assert result.memory_metric == "activation bytes saved for backward"
    assert result.rss_ratio == pytest.approx(2.0)
    assert result.loss is not None and result.loss.passed
    assert result.speedup is None  # checked runs are never timed: their settings are not the script's


def test_cuda_peak_memory_is_preferred_when_both_runs_have_it() -> None:
    old = _run([0.1] * 12, cuda_max_allocated_bytes=800, saved_for_backward_max_bytes=1)
    new = _run([0.1] * 12, cuda_max_allocated_bytes=200, saved_for_backward_max_bytes=1)
    result = compare(old, new, NEUTRAL)
    assert result.memory_metric == "peak CUDA memory allocated"
    assert result.memory_ratio == pytest.approx(0.25)


def test_timing_pairs_interleaved_runs_and_leaves_out_warmup() -> None:
    order = ["original", "rewritten", "rewritten", "original"]
    records = [_run([9.0] + [0.020] * 11), _run([9.0] + [0.010] * 11), _run([9.0] + [0.011] * 11),
               _run([9.0] + [0.021] * 11)]
    timing = build_timing(order, records, warmup=2, cpu_count=2)
    assert [len(run) for run in timing.original_runs] == [10, 10]
    assert timing.speedup is not None and timing.speedup.estimate == pytest.approx(1.95, rel=0.05)
    assert timing.speedup.verdict == "faster"


def test_a_failed_timed_run_is_reported_not_used() -> None:
    broken = RunRecord(status="crashed", message="boom", steps=[])
    timing = build_timing(["original", "rewritten"], [_run([0.1] * 12), broken], warmup=2, cpu_count=2)
    assert timing.speedup is None
    assert timing.failures == ["rewritten: crashed boom"]


def test_last_n_mean_names_the_losses_it_compared() -> None:
    """Issue 13 item 12: "last-10 mean" over 6 steps said 10."""
    check = check_losses(CURVE[:6], CURVE[:6], MIXED_PRECISION)
    assert check.last_n == 6


def test_torchrun_losses_are_checked_rank_by_rank() -> None:
    good, bad = _run([0.1] * 12), _run([0.1] * 12, [v * 1.5 for v in CURVE])
    original, rewritten = RunRecord(ranks=[good, good]), RunRecord(ranks=[good, bad])
    check = check_run_losses(original, rewritten, NEUTRAL)
    assert not check.passed and check.rank == 1 and check.reason.startswith("rank 1:")
