"""Issue 13 item 12: what the report says about runs that stopped early or were stopped on purpose (no torch)."""

from __future__ import annotations

from pathlib import Path

from gpulint.core.verification import MIXED_PRECISION
from gpulint.verify import events
from gpulint.verify.compare import compare
from gpulint.verify.events import RunRecord, StepRecord
from gpulint.verify.report import script_table
from gpulint.verify.results import ScriptResult, VerifyOptions
from gpulint.verify.rules import tolerance_for


def _record(status: str, count: int, factor: float = 1.0) -> RunRecord:
    losses = [(2.0 - 0.05 * i) * factor for i in range(count)]
    return RunRecord(status=status, steps=[StepRecord(i + 1, loss, None if i == 0 else 0.01)
                                           for i, loss in enumerate(losses)],
                     environment={"device": "cpu", "device_name": "x86_64", "torch": "2.13.0+cpu"},
                     memory={"peak_rss_bytes": 1 << 20})


def _table(original: RunRecord, rewritten: RunRecord, steps: int) -> str:
    result = ScriptResult("train.py", applied=("GPU001",), tolerance=tolerance_for(["GPU001"]), original=original,
                          rewritten=rewritten, verdict="PASS", steps=steps, warmup=2)
    result.comparison = compare(original, rewritten, MIXED_PRECISION)
    return script_table(result, VerifyOptions(paths=(Path("train.py"),), steps=steps))


def test_a_run_stopped_at_steps_reads_as_success_and_the_header_counts_what_ran() -> None:
    text = _table(_record(events.STOPPED, 30), _record(events.STOPPED, 30), 30)
    assert "30 (reached --steps)" in text and "stopped" not in text
    assert "30 steps a run," in text and "ran)" not in text


def test_a_script_that_ends_early_is_counted_as_it_ran() -> None:
    """The header said 60 steps when 32 ran; "last-10 mean" was printed over 6 steps."""
    text = _table(_record(events.FINISHED, 32), _record(events.FINISHED, 32), 60)
    assert "60 steps a run (32 ran)" in text
    assert "32 (ended by itself)" in text
    short = _table(_record(events.FINISHED, 6), _record(events.FINISHED, 6, 1.001), 60)
    assert "last-6 mean" in short and "last-10" not in short
