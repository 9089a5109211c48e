"""The device type the mixed-precision fix writes is the script's own (gpulint/rewrites/amp_device.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpulint.core.settings import Settings
from gpulint.engine import linter
from gpulint.engine.linter import fix_text
from gpulint.rules.gpu001_missing_autocast import MissingAutocast

XPU = """
    import torch

    model = Net().xpu()
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    for x, y in loader:
        x, y = x.xpu(), y.xpu()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
"""


def test_an_intel_gpu_script_gets_xpu_and_bfloat16(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which files GPU001 reports on is the detector's business (an XPU-only file has no CUDA evidence
    today); given one, the fix writes "xpu", never "cuda", and bfloat16 with no scaler."""
    monkeypatch.setattr(linter, "may_have_gpu_evidence", lambda text, project=None: True)
    monkeypatch.setattr(MissingAutocast, "may_report", classmethod(lambda cls, project, settings=None: True))
    monkeypatch.setattr(MissingAutocast, "applies", lambda self: True)
    settings = Settings(select=("GPU001",), values=(("strictness", "pedantic"),))  # the detector's premises aside
    fixed = fix_text(Path("t.py"), textwrap.dedent(XPU), settings, unsafe=True).text
    assert 'with torch.autocast(device_type="xpu", dtype=torch.bfloat16):' in fixed
    assert "cuda" not in fixed and "GradScaler" not in fixed


def test_a_cuda_script_with_dot_cuda_calls_keeps_the_cuda_literal() -> None:
    """`.cuda()` in the step: the device is CUDA whatever the model says; no `next(model.parameters())`."""
    source = XPU.replace(".xpu()", ".cuda()")
    fixed = fix_text(Path("t.py"), textwrap.dedent(source), Settings(select=("GPU001",)), unsafe=True).text
    assert 'torch.amp.GradScaler("cuda", enabled=(amp_dtype == torch.float16))' in fixed
    assert "parameters()).device" not in fixed
