"""GPU403's rewrite, run for real: F.scaled_dot_product_attention gives the hand-written attention's
losses (float32, CPU, its math or flash kernel) and keeps less for backward."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gpulint.engine.linter import fix_text
from tests.fixture_cases import FIXTURES, exec_fixture, load_case

pytestmark = pytest.mark.torch

CASE = load_case(FIXTURES / "GPU403" / "causal_attention_runtime.py")
STEPS = 4


@pytest.fixture(scope="module")
def versions() -> tuple[ModuleType, ModuleType]:
    pytest.importorskip("torch")  # a guard only: CI installs torch
    original = CASE.path.read_text(encoding="utf-8")
    outcome = fix_text(Path(CASE.path), original, CASE.settings, unsafe=True)
    assert outcome.text.count("F.scaled_dot_product_attention(") == 2
    return exec_fixture(original, "attention_original"), exec_fixture(outcome.text, "attention_fixed")


def _train(module: ModuleType, model_name: str) -> tuple[list[float], list[int]]:
    """A few SGD steps from fixed seeds on sequences of 64: each step's loss and saved-for-backward bytes."""
    import torch

    from tests.saved_memory import saved_tensor_bytes

    torch.manual_seed(0)
    model: Any = getattr(module, model_name)()
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1)
    losses, saved = [], []
    for _ in range(STEPS):
        x = torch.randn(8, 64, 32, generator=data)
        optimizer.zero_grad()
        measured = saved_tensor_bytes(lambda: model(x).pow(2).mean(), exclude=list(model.parameters()))  # noqa: B023 - called here
        measured.result.backward()
        optimizer.step()
        losses.append(measured.result.item())
        saved.append(measured.bytes)
    return losses, saved


@pytest.mark.parametrize("model_name", ["CausalSelfAttention", "ScaledAttention"])
def test_fused_attention_trains_like_the_hand_written_one(versions: tuple[ModuleType, ModuleType],
                                                          model_name: str) -> None:
    original, fixed = versions
    losses_before, saved_before = _train(original, model_name)
    losses_after, saved_after = _train(fixed, model_name)
    for before, after in zip(losses_before, losses_after):
        assert after == pytest.approx(before, rel=1e-5, abs=1e-7)
    assert max(saved_after) < max(saved_before)
