"""The rewrites train: each script in fixtures/runtime is fixed with `gpulint fix --unsafe-fixes`, then
run on the CPU with warnings promoted to errors, and its loss must go down.

The mixed-precision scripts run under CPU autocast (amp-dtype "auto" takes bfloat16 on the CPU; with
"float16", a working CPU GradScaler scales the loss). What
only CUDA would refuse (binary_cross_entropy under autocast) is asserted on the rewritten code.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpulint.cli import main

pytestmark = [pytest.mark.torch, pytest.mark.slow]

RUNTIME = Path(__file__).resolve().parents[2] / "fixtures" / "runtime"
# the one warning a CPU-only machine must give: pinned memory needs an accelerator
CPU_ONLY_WARNING = "'pin_memory' argument is set as true but no accelerator is found"


def fix(path: Path, amp_dtype: str = "") -> str:
    """`gpulint fix --unsafe-fixes`, with `amp-dtype` set when given. The scripts are CPU-sized stand-ins
    for real training, so the premises that keep gpulint silent on toy models and small batches are lifted
    (pedantic, min-width 1): the rewrites are what these tests run."""
    config = path.parent / "gpulint-test.toml"
    lines = ['strictness = "pedantic"', "min-width = 1"] + ([f'amp-dtype = "{amp_dtype}"'] if amp_dtype else [])
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    settings = ["--config", str(config)]
    result = CliRunner().invoke(main, ["fix", "--unsafe-fixes", *settings, "--no-cache", str(path)])
    assert result.exit_code in (0, 1), result.output
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def run(script: Path, *args: str) -> list[float]:
    pytest.importorskip("torch")  # a guard only: CI installs torch
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONHASHSEED="0")
    command = [sys.executable, "-W", "error", "-W", f"ignore:{CPU_ONLY_WARNING}:UserWarning", str(script), *args]
    result = subprocess.run(command, capture_output=True, text=True, cwd=script.parent, env=env, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def assert_trains(losses: list[float], factor: float = 0.8) -> None:
    assert losses and all(loss == loss for loss in losses), "NaN loss"  # noqa: PLR0124
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < factor * first, f"loss did not go down: {first:.3f} -> {last:.3f}"


def copy(tmp_path: Path, name: str) -> Path:
    source = RUNTIME / name
    target = tmp_path / name
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copy(source, target)
    return target


def test_bce_loss_is_computed_outside_autocast_in_float32(tmp_path: Path) -> None:
    script = copy(tmp_path, "bce_siamese.py")
    text = fix(script)
    with_block = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.With))
    inside = ast.unparse(with_block)
    assert "autocast" in inside and "model(a, b)" in inside and "criterion" not in inside
    assert "loss = criterion(outputs.float(), same.float())" in text
    assert "fused=True" in text and "scaler.scale(loss).backward()" in text
    assert_trains(run(script))


def test_scaler_lives_beside_a_global_optimizer(tmp_path: Path) -> None:
    script = copy(tmp_path, "global_optimizer.py")
    text = fix(script)
    module = ast.parse(text)
    top_level = [ast.unparse(s) for s in module.body if isinstance(s, ast.Assign)]
    # created once, not per train() call, with the dtype chosen once beside it (amp-dtype "auto")
    assert "scaler = torch.amp.GradScaler(device, enabled=amp_dtype == torch.float16)" in top_level
    assert any(line.startswith("amp_dtype = ") for line in top_level)
    assert_trains(run(script))


@pytest.mark.parametrize("amp_dtype", ["float16", "auto"])
def test_scaler_is_passed_in_saved_and_resumed(tmp_path: Path, amp_dtype: str) -> None:
    """float16: the scaler's state is saved and resumed. "auto": the dtype chosen in main() is passed in
    with the scaler, which this CPU run leaves off (bfloat16): its saved state is empty."""
    torch = pytest.importorskip("torch")
    script = copy(tmp_path, "epochs_with_checkpoint.py")
    text = fix(script, amp_dtype)
    if amp_dtype == "float16":
        assert "def train(model, device, loader, optimizer, losses, scaler=None):" in text
        assert "train(model, device, data(), optimizer, losses, scaler=scaler)" in text
    else:
        assert "def train(model, device, loader, optimizer, losses, scaler=None, amp_dtype=None):" in text
        call = "train(model, device, data(), optimizer, losses, scaler=scaler,\n              amp_dtype=amp_dtype)"
        assert call in text  # laid out under its bracket, as the file does
    checkpoint = tmp_path / "checkpoint.pt"
    first = run(script, str(checkpoint), "2")
    saved = torch.load(checkpoint)
    assert "scaler" in saved and (saved["scaler"]["scale"] > 0 if amp_dtype == "float16" else saved["scaler"] == {})
    resumed = run(script, str(checkpoint), "4")
    assert len(first) == len(resumed) == 20  # the second run resumed at epoch 2
    assert_trains(first + resumed)


def test_float16_autocast_gets_its_scaler_and_trains(tmp_path: Path) -> None:
    script = copy(tmp_path, "fp16_autocast_no_scaler.py")
    text = fix(script)
    assert "scaler.unscale_(optimizer)" in text.split("clip_grad_norm_")[0]  # unscale before clipping
    assert_trains(run(script))


def test_pinned_workers_train_the_same(tmp_path: Path) -> None:
    script = copy(tmp_path, "loader_per_item_work.py")
    text = fix(script)
    assert "pin_memory=True" in text and "num_workers=min(4, os.cpu_count() or 1)" in text
    assert_trains(run(script))


def test_sgd_built_in_another_module_is_never_fused_under_the_scaler(tmp_path: Path) -> None:
    project = copy(tmp_path, "sgd_across_files")
    fix(project)
    utils = (project / "optim_utils.py").read_text(encoding="utf-8")
    sgd = next(line for line in utils.splitlines() if "optim.SGD(" in line)
    assert "fused" not in sgd  # momentum + GradScaler in train.py: fused SGD would corrupt its buffer
    assert "torch.optim.Adam(model.parameters(), lr=lr, fused=True)" in utils
    assert_trains(run(project / "train.py"))
