"""`gpulint verify` end to end on the shipped fixture training scripts (CPU, tiny sizes).

Each verification runs two real training subprocesses, so the runs are shared between the
tests through module-scoped fixtures and kept to a dozen steps. Speed is never asserted here
(bench/verify_dataloader.py measures it); structure, verdicts, memory and loss are.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpulint.cli import main
from gpulint.verify import events
from gpulint.verify.process import RunSpec, run_harness

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "fixtures" / "scripts"
STEPS, WARMUP = 12, 2


def _verify(tmp: Path, script: str, *options: str) -> tuple[int, str, dict[str, Any]]:
    report = tmp / "report.json"
    args = ["verify", str(SCRIPTS / script), "--steps", str(STEPS), "--warmup", str(WARMUP), "--threads", "1",
            "--json", str(report), "--workdir", str(tmp / "work"), *options, "--", "--size", "tiny"]
    if "--repeats" not in options:
        args[2:2] = ["--repeats", "0"]
    result = CliRunner().invoke(main, args)
    data = json.loads(report.read_text()) if report.exists() else {}
    return result.exit_code, result.output, data


def _goes_down(losses: list[float]) -> bool:
    return statistics.fmean(losses[-3:]) < statistics.fmean(losses[:3])


@pytest.fixture(scope="module")
def fixed_copies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture scripts after `gpulint fix --unsafe-fixes` (the issue 3 end-to-end rewrite), with the
    folder's gpulint.toml, as verify reads it."""
    folder = tmp_path_factory.mktemp("fixed") / "scripts"
    shutil.copytree(SCRIPTS, folder)
    result = CliRunner().invoke(main, ["fix", "--unsafe-fixes", str(folder)])
    assert result.exit_code in (0, 1), result.output
    return folder


@pytest.fixture(scope="module")
def dataloader_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, dict[str, Any], Path]:
    tmp = tmp_path_factory.mktemp("dataloader")
    plot = tmp / "report.png"
    code, output, data = _verify(tmp, "image_classifier.py", "--plot", str(plot))
    return code, output, data, plot


@pytest.fixture(scope="module")
def transformer_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, dict[str, Any]]:
    return _verify(tmp_path_factory.mktemp("transformer"), "transformer_lm.py", "--device", "cpu")


def test_dataloader_fixture_verifies_with_a_passing_loss_verdict(dataloader_run: tuple[int, str, dict[str,
                                                                 Any], Path]) -> None:
    code, output, data, _ = dataloader_run
    assert code == 0, output
    (script,) = data["scripts"]
    assert {"GPU101", "GPU102"} <= set(script["rules_applied"])
    assert script["verdict"] == "PASS" and script["passed"] is True
    assert script["comparison"]["loss"]["passed"] is True
    assert "num_workers=min(4, os.cpu_count() or 1)" in script["diff"] and "pin_memory=True" in script["diff"]
    assert "\nloss: matches" in output or "\nloss: identical bit for bit" in output
    assert "speed: not measured (numerics-only check)" in output
    rules = {r["code"]: r for r in script["rules"]}
    assert rules["GPU101"]["status"] == rules["GPU102"]["status"] == "exercised"
    workers = min(4, os.cpu_count() or 1)  # what the rewrite's num_workers=min(4, os.cpu_count() or 1) gives here
    assert f"DataLoader (num_workers={workers}, pin_memory=True) at image_classifier.py:" in rules["GPU102"]["detail"]
    training = script["comparison"]["training"]
    assert training["original"]["trained"] and training["rewritten"]["trained"]


def test_report_json_carries_curves_times_memory_and_environment(dataloader_run: tuple[int, str, dict[str,
                                                                 Any], Path]) -> None:
    _, _, data, plot = dataloader_run
    assert data["schema_version"] == 3
    assert data["settings"]["steps"] == STEPS and data["settings"]["warmup"] == WARMUP
    assert data["settings"]["script_args"] == ["--size", "tiny"]  # what came after --
    env = data["environment"]
    assert env["device"] == "cpu" and env["device_name"] and env["torch"]
    assert "cuda" in env  # None on a CPU-only torch, the CUDA version otherwise
    (script,) = data["scripts"]
    for label in ("original", "rewritten"):
        run = script["runs"][label]
        assert run["status"] == events.STOPPED
        assert len(run["losses"]) == STEPS and all(isinstance(v, float) for v in run["losses"])
        assert len(run["step_times_s"]) == STEPS and run["step_times_s"][0] is None
        assert all(t > 0 for t in run["step_times_s"][1:])
        assert run["memory"]["peak_rss_bytes"] > 0
        assert run["memory"]["saved_for_backward_max_bytes"] > 0
    comparison = script["comparison"]
    assert comparison["timing"] is None and comparison["speedup"] is None  # --repeats 0 (test_project times runs)
    assert comparison["memory"]["metric"] == "activation bytes saved for backward"
    assert comparison["loss"]["tolerance"]["per_step"] in (1e-6, 1e-4, 2e-2)
    assert Path(script["rewritten_path"]).is_file()
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_transformer_fixture_matches_under_cpu_bf16_autocast(transformer_run: tuple[int, str, dict[str, Any]]) -> None:
    code, output, data = transformer_run
    (script,) = data["scripts"]
    if "GPU001" not in script["rules_applied"]:
        pytest.fail("GPU001 did not rewrite transformer_lm.py: the mixed-precision verification needs it")
    assert code == 0, output
    assert script["tolerance"]["name"] == "mixed precision"
    loss = script["comparison"]["loss"]
    assert loss["passed"] is True
    assert loss["max_step_deviation"] > 0  # bf16 really ran: not bit-identical to fp32
    notes = " ".join(script["notes"])
    # amp-dtype "auto": the rewrite chooses its dtype at run time (bfloat16 on a CPU run)
    rewritten = Path(script["rewritten_path"]).read_text()
    assert "amp_dtype" in rewritten and "is_bf16_supported(including_emulation=False)" in rewritten
    assert "its speed is this CPU's" in notes
    assert "speed: not measured (numerics-only check)" in output


def test_checkpointing_fixture_saves_less_activation_memory_with_the_same_loss(tmp_path: Path) -> None:
    code, output, data = _verify(tmp_path, "deep_mlp.py", "--select", "GPU301")
    (script,) = data["scripts"]
    assert script["rules_applied"] == ["GPU301"], output
    assert code == 0, output
    memory = script["comparison"]["memory"]
    assert memory["metric"] == "activation bytes saved for backward"
    assert memory["rewritten_bytes"] < memory["original_bytes"]
    assert memory["ratio"] < 0.6
    loss = script["comparison"]["loss"]
    assert loss["passed"] is True and loss["tolerance"]["per_step"] == 1e-6


def test_fused_attention_fixture_matches_the_hand_written_loss_with_less_memory(tmp_path: Path) -> None:
    """GPU403 on the CPU: SDPA's kernel reproduces the hand-written causal attention's loss within the rule's
    tolerance, keeps fewer bytes for backward, and verify sees the fused call run in the timed steps."""
    script_path = Path(__file__).parent / "scripts" / "manual_attention_lm.py"
    report = tmp_path / "report.json"
    result = CliRunner().invoke(main, [
        "verify", str(script_path), "--select", "GPU403", "--repeats", "0", "--steps", str(STEPS), "--warmup",
        str(WARMUP), "--threads", "1", "--json", str(report), "--workdir", str(tmp_path / "work"), "--",
        "--size", "tiny"])
    (script,) = json.loads(report.read_text())["scripts"]
    assert script["rules_applied"] == ["GPU403"], result.output
    assert result.exit_code == 0, result.output
    assert "scaled_dot_product_attention(is_causal=True)" in result.output
    memory = script["comparison"]["memory"]
    assert memory["rewritten_bytes"] < memory["original_bytes"]
    loss = script["comparison"]["loss"]
    assert loss["passed"] is True and loss["max_step_deviation"] < 1e-5


def test_fixed_fixtures_still_train(fixed_copies: Path, dataloader_run: tuple[int, str, dict[str, Any], Path],
                                    transformer_run: tuple[int, str, dict[str, Any]], tmp_path: Path) -> None:
    """Issue 3 end to end: `gpulint fix --unsafe-fixes` output runs on this machine and its loss goes down."""
    for name, run in (("image_classifier.py", dataloader_run), ("transformer_lm.py", transformer_run)):
        script = run[2]["scripts"][0]
        # verify ran exactly what `gpulint fix --unsafe-fixes` writes
        assert Path(script["rewritten_path"]).read_text() == (fixed_copies / name).read_text(), name
        assert _goes_down(script["runs"]["rewritten"]["losses"]), name
    fixed = fixed_copies / "deep_mlp.py"
    assert fixed.read_text() != (SCRIPTS / "deep_mlp.py").read_text()
    record = run_harness(RunSpec(script=fixed, folder=tmp_path / "run", steps=STEPS, device="cpu", threads=1,
                                 timeout=120, cwd=tmp_path, script_args=("--size", "tiny")))
    assert record.status == events.STOPPED, record.message + record.log_tail
    assert _goes_down(record.losses)


def test_non_blocking_copies_verify_bit_for_bit_with_no_effect_on_a_cpu(tmp_path: Path) -> None:
    """GPU104 (preview): `non_blocking=True` on a pinned loader's copies changes no number, and on a CPU
    there is no copy to overlap, so verify says the rewrite has no runtime effect there."""
    code, output, data = _verify(tmp_path, "pinned_regression.py", "--preview", "--select", "GPU104")
    assert code == 0, output
    (script,) = data["scripts"]
    assert script["rules_applied"] == ["GPU104"] and script["verdict"] == "PASS"
    assert script["diff"].count("non_blocking=True") == 2
    assert "\nloss: identical bit for bit" in output


def test_foreach_ema_fixture_verifies_bit_for_bit_with_the_foreach_call_in_the_step(tmp_path: Path) -> None:
    """GPU507 (preview): the EMA loop becomes one `torch._foreach_lerp_` call, which verify sees run in the
    timed steps; the EMA model is not in the loss, so the losses are identical (the speed is measured by
    bench/foreach_ema_cpu.py and by a timed verify run, not asserted here)."""
    script_path = Path(__file__).parent / "scripts" / "ema_mlp.py"
    report = tmp_path / "report.json"
    result = CliRunner().invoke(main, [
        "verify", str(script_path), "--preview", "--select", "GPU507", "--repeats", "0", "--steps", str(STEPS),
        "--warmup", str(WARMUP), "--threads", "1", "--json", str(report), "--workdir", str(tmp_path / "work"), "--",
        "--size", "tiny"])
    (script,) = json.loads(report.read_text())["scripts"]
    assert script["rules_applied"] == ["GPU507"], result.output
    assert result.exit_code == 0 and script["verdict"] == "PASS", result.output
    assert "torch._foreach_lerp_(244 tensors)" in result.output
    assert "\nloss: identical bit for bit" in result.output


def test_crash_and_no_backward_are_verdicts_not_tracebacks(tmp_path: Path) -> None:
    scripts = Path(__file__).parent / "scripts"
    runner = CliRunner()
    report = tmp_path / "crash.json"
    crash = runner.invoke(main, ["verify", str(scripts / "crashes.py"), "--threads", "1", "--no-diff",
                                 "--repeats", "0", "--json", str(report)])
    assert crash.exit_code == 1
    assert "original script does not run" in crash.output
    assert "crashed: ValueError: bad batch shape (crashes.py:14)" in crash.output, crash.output
    assert not crash.output.startswith("Traceback")
    original = json.loads(report.read_text())["scripts"][0]["runs"]["original"]
    assert original["status"] == events.CRASHED
    assert original["location"] == "crashes.py:14"
    assert len(original["losses"]) == 2  # the steps before the crash are kept
    assert "Traceback" in original["traceback"]  # the details are in the JSON, not on the screen
    quiet = runner.invoke(main, ["verify", str(scripts / "no_backward.py"), "--threads", "1", "--no-diff",
                                 "--repeats", "0"])
    assert quiet.exit_code == 1
    assert "never calls backward()" in quiet.output


def test_cuda_request_without_cuda_is_a_usage_error() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    scripts = Path(__file__).parent / "scripts"
    result = CliRunner().invoke(main, ["verify", str(scripts / "crashes.py"), "--device", "cuda", "--no-diff"])
    assert result.exit_code == 2
    assert "--device cuda was requested but torch.cuda.is_available() is False" in result.output
