"""The reproduction behind GPU201's FSDP rule and GPU001's bfloat16 under FSDP with a fused optimizer:
two CPU ranks (gloo), FSDP, ShardedGradScaler, an inf in one rank's gradient shard (bench/fsdp_fused_scaler.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.torch, pytest.mark.slow]

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "bench"))


def test_a_fused_optimizer_splits_the_ranks_under_sharded_scaling() -> None:
    pytest.importorskip("torch")  # a guard only: CI installs torch
    import fsdp_fused_scaler as repro

    for_loop = repro.run_case(fused=False, unscale=False)
    assert for_loop["agree"] and for_loop["stepped_on_inf"] == [False, False]  # both ranks skip the step
    fused = repro.run_case(fused=True, unscale=False)
    assert not fused["agree"]
    assert fused["stepped_on_inf"] == [False, True] and fused["scales"][0] != fused["scales"][1]
    with_unscale = repro.run_case(fused=True, unscale=True)
    assert "error" in with_unscale or not with_unscale["agree"]  # torch 2.13: raises
