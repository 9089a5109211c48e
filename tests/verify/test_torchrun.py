"""Issue 13 item 10: a DDP script verified through torchrun, 2 CPU processes with gloo, losses and times per rank.

The fixture is written for GPUs (NCCL, `set_device(local_rank)`, `device_ids=[local_rank]`); on the
CPU verify maps those and says so. scripts/gpu_verify.sh runs the same fixture with NCCL on a GPU
machine (2 processes when it has 2 GPUs).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpulint.cli import main

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.slow]

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "scripts" / "ddp_lm.py"


def test_ddp_script_verifies_through_torchrun_with_two_cpu_processes(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.fail("this torch build has no gloo backend: the torchrun test needs it")
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["verify", str(FIXTURE), "--nproc-per-node", "2", "--device", "cpu",
                                       "--steps", "8", "--warmup", "2", "--repeats", "0", "--threads", "1",
                                       "--select", "GPU201", "--no-diff", "--json", str(report),
                                       "--", "--size", "tiny"])
    data = json.loads(report.read_text())["scripts"][0]
    assert result.exit_code == 0, result.output
    assert data["verdict"] == "PASS"
    for label in ("original", "rewritten"):
        run = data["runs"][label]
        assert run["world_size"] == 2 and [r["rank"] for r in run["per_rank"]] == [0, 1]
        ranks = run["per_rank"]
        assert all(len(r["losses"]) == 8 for r in ranks)
        assert ranks[0]["losses"] != ranks[1]["losses"]  # each rank saw its own shard
        combined = [(a + b) / 2 for a, b in zip(ranks[0]["losses"], ranks[1]["losses"])]
        assert run["losses"] == pytest.approx(combined)  # the step's loss: the mean over ranks
        times = [max(a, b) for a, b in zip(ranks[0]["step_times_s"][1:], ranks[1]["step_times_s"][1:])]
        assert run["step_times_s"][1:] == pytest.approx(times)  # the step's time: the slowest rank
    (rule,) = data["rules"]
    assert rule["code"] == "GPU201" and rule["status"] == "exercised"
    notes = " ".join(data["notes"])
    assert "init_process_group('nccl') ran with gloo" in notes
    assert "DistributedDataParallel device_ids dropped for a CPU module" in notes
    assert "2 processes (torchrun)" in result.output
