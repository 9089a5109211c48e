"""GPU001's rewrite, run for real on CPU: the fixed script trains under autocast and its loss goes down."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulint.engine.linter import fix_text
from tests.fixture_cases import FIXTURES, exec_fixture, load_case

pytestmark = pytest.mark.torch

CASE = load_case(FIXTURES / "GPU001" / "runnable_cpu_script.py")
STEPS = 24


def _fixed(amp_dtype: str) -> str:
    settings = CASE.settings.with_values({"amp-dtype": amp_dtype})
    original = CASE.path.read_text(encoding="utf-8")
    outcome = fix_text(Path(CASE.path), original, settings, unsafe=True)
    assert outcome.applied >= 1 and not outcome.findings
    return outcome.text


@pytest.mark.parametrize("amp_dtype", ["auto", "float16", "bfloat16"])
def test_fixed_script_trains_under_autocast(amp_dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a CPU run the "auto" choice takes bfloat16 (no CUDA GPU without native bfloat16 here), and its
    scaler, enabled only on the float16 path, stays off."""
    torch = pytest.importorskip("torch")  # a guard only: CI installs torch
    if amp_dtype != "bfloat16" and tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 3):
        pytest.skip("GradScaler('cpu') needs torch >= 2.3")
    text = _fixed(amp_dtype)
    assert ("GradScaler" in text) == (amp_dtype != "bfloat16")

    entered: list[tuple[str, object]] = []
    real_autocast = torch.autocast

    class RecordingAutocast(real_autocast):  # type: ignore[misc, valid-type]
        def __init__(self, device_type: str, *args: object, **kwargs: object) -> None:
            super().__init__(device_type, *args, **kwargs)
            entered.append((device_type, kwargs.get("dtype")))

    monkeypatch.setattr(torch, "autocast", RecordingAutocast)
    module = exec_fixture(text, f"runnable_{amp_dtype}")
    if module.device.type != "cpu":
        pytest.skip("this check runs the CPU path")
    losses = module.train(steps=STEPS)

    assert len(losses) == STEPS
    assert entered and all(device == "cpu" for device, _ in entered)
    assert {dtype for _, dtype in entered} == {torch.bfloat16 if amp_dtype == "auto" else getattr(torch, amp_dtype)}
    assert all(loss == loss for loss in losses), "NaN loss"  # noqa: PLR0124
    first, last = sum(losses[:4]) / 4, sum(losses[-4:]) / 4
    assert last < 0.8 * first, f"loss did not go down: {first:.3f} -> {last:.3f}"
