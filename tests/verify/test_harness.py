"""The harness, run as the CLI runs it: a fresh subprocess per script, in a sandbox, instrumented from outside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulint.verify import events
from gpulint.verify.process import RunSpec, run_harness

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.slow]

SCRIPTS = Path(__file__).parent / "scripts"


def _run(tmp_path: Path, name: str, steps: int, timeout: float = 120.0, args: tuple[str, ...] = (),
         **extra: object) -> events.RunRecord:
    work = tmp_path / "work"  # the run's working directory (protected); files the scripts write go in the run's
    # folder, the one place outside its sandbox a run may write (the rest is read-only in a mount namespace)
    work.mkdir(exist_ok=True)
    spec = RunSpec(script=SCRIPTS / name, folder=tmp_path / "run", steps=steps, warmup=1, device="cpu", threads=1,
                   timeout=timeout, cwd=work, script_args=args, **extra)  # type: ignore[arg-type]
    return run_harness(spec)


def test_records_unscaled_loss_under_grad_scaler_and_stops_after_steps(tmp_path: Path) -> None:
    own = tmp_path / "run" / "own_losses.json"
    record = _run(tmp_path, "hardcoded_cuda_scaler.py", steps=7, args=(str(own),))
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


def test_manual_updates_count_a_step_per_backward(tmp_path: Path) -> None:
    """Issue 13 item 6: no torch.optim optimizer used to mean no step limit and "the script does not run"."""
    record = _run(tmp_path, "manual_sgd.py", steps=6)
    assert record.status == events.STOPPED, record.message + record.log_tail
    assert record.step_mode == "backward"
    assert len(record.steps) == 6 and record.backward_calls == 6  # stopped as the 7th backward began
    assert record.losses == sorted(record.losses, reverse=True)
    assert record.training["moved"] is True


def test_frozen_parameters_do_not_move(tmp_path: Path) -> None:
    record = _run(tmp_path, "no_training.py", steps=4, args=("--frozen",))
    assert record.status == events.STOPPED, record.message + record.log_tail
    assert record.training["moved"] is False and record.training["tensors"] >= 4


@pytest.fixture(scope="module")
def cuda_only_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[events.RunRecord, Path]:
    tmp_path = tmp_path_factory.mktemp("cuda_only")
    own = tmp_path / "run" / "own.json"
    return _run(tmp_path, "cuda_only_accumulation.py", steps=5, args=(str(own),)), own


def test_step_limit_holds_through_a_bare_except(cuda_only_run: tuple[events.RunRecord, Path]) -> None:
    """Issue 13 item 6: the limit used to be a BaseException that `except:` swallowed ("finished: 64/10 steps")."""
    record, _ = cuda_only_run
    assert record.status == events.STOPPED, record.message + record.log_tail
    assert len(record.steps) == 5 and record.optimizer_steps == 5
    assert "finished all" not in record.log_tail


def test_cuda_only_script_runs_on_the_cpu_with_the_loss_it_reports(cuda_only_run: tuple[events.RunRecord,
                                                                   Path]) -> None:
    """Issue 13 items 11 and 12: pin_memory(), torch.cuda.* calls mapped and reported; the accumulated loss."""
    record, own = cuda_only_run
    assert record.status == events.STOPPED, record.message + record.log_tail
    reported = json.loads(own.read_text())["losses"]
    assert len(reported) == 4  # the run stops at the 5th optimizer step, before the script writes it
    assert record.losses[:4] == pytest.approx(reported, rel=1e-5)  # not a quarter of it
    assert all(s.accumulation_unscaled and s.backward_calls == 4 for s in record.steps)
    notes = " | ".join(record.adaptations)
    for mapped in ("Tensor.pin_memory() left the tensor unpinned", "torch.cuda.Event timed on the CPU clock",
                   "torch.cuda.current_stream() ran synchronously", "torch.cuda.get_device_name() answered 'cpu'",
                   "torch.cuda.mem_get_info() answered the host's memory", "torch.cuda.set_device() skipped",
                   "torch.cuda.is_bf16_supported() answered", "device index (cuda:N) mapped to the CPU",
                   "torch.load() mapped the checkpoint's tensors to the CPU",
                   "torch.cuda.max_memory_allocated() answered 0"):
        assert mapped in notes
