"""The harness, run as the CLI runs it: a fresh subprocess per script, instrumented from outside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulint.verify import events
from gpulint.verify.process import RunSpec, run_harness

pytest.importorskip("torch")
pytestmark = pytest.mark.torch

SCRIPTS = Path(__file__).parent / "scripts"


def _spec(tmp_path: Path, script: Path, steps: int, device: str = "cpu", timeout: float = 120.0,
          args: tuple[str, ...] = ()) -> RunSpec:
    return RunSpec(script=script, as_file=script, events=tmp_path / "run.jsonl", log=tmp_path / "run.log",
                   steps=steps, device=device, threads=1, timeout=timeout, script_args=args)


def test_records_unscaled_loss_under_grad_scaler_and_stops_after_steps(tmp_path: Path) -> None:
    own = tmp_path / "own_losses.json"
    record = run_harness(_spec(tmp_path, SCRIPTS / "hardcoded_cuda_scaler.py", steps=7, args=(str(own),)))
    assert record.status == events.STOPPED, record.message + record.log_tail
    assert len(record.steps) == 7  # the script asks for 1000
    written = json.loads(own.read_text())
    assert written["scale"] == 1024.0  # the CPU scaler really scaled (and found no inf)
    assert len(written["losses"]) == 7
    # what the script computed before scaling, not 1024x that
    assert record.losses == pytest.approx(written["losses"], rel=1e-6)
    assert record.losses[-1] < record.losses[0]
    assert [s.time_s is None for s in record.steps] == [True] + [False] * 6
    assert all(s.saved_bytes and s.saved_bytes > 0 for s in record.steps)
    # CUDA-only code ran on the CPU, and the run says how
    notes = " | ".join(record.adaptations)
    assert "GradScaler('cuda') ran as a working CPU GradScaler" in notes
    assert "autocast float16 ran as CPU bfloat16" in notes
    assert "device 'cuda' mapped to the CPU" in notes
    assert record.environment["device"] == "cpu"
    assert record.environment["torch"]


def test_hang_is_killed_at_the_timeout(tmp_path: Path) -> None:
    record = run_harness(_spec(tmp_path, SCRIPTS / "hangs.py", steps=5, timeout=4))
    assert record.status == events.TIMEOUT
    assert "timeout" in record.message and "0 of 5 steps" in record.message
    assert record.returncode is not None  # the process is gone, not left behind


def test_rewritten_copy_runs_as_if_it_were_the_original(tmp_path: Path) -> None:
    """The rewrite lives in a temp dir, but __file__-relative paths must still find the user's files."""
    original = SCRIPTS / "reads_file_beside_it.py"
    copy = tmp_path / "rewritten" / original.name
    copy.parent.mkdir()
    copy.write_text(original.read_text().replace("lr=settings", "fused=True, lr=settings"))
    spec = RunSpec(script=copy, as_file=original, events=tmp_path / "run.jsonl", log=tmp_path / "run.log",
                   steps=3, device="cpu", threads=1, timeout=120)
    record = run_harness(spec)
    assert record.status == events.STOPPED, record.message + record.log_tail
    assert len(record.steps) == 3
