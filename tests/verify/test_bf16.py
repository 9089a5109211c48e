"""Issue 13 item 8: a CPU without native bfloat16 is detected up front, the mixed-precision check is shortened
to numerics only, and the steps a timed-out run finished are compared, not thrown away.

On a CPU with native bfloat16 (AMX / AVX-512 BF16), ATEN_CPU_CAPABILITY=avx2 and
ONEDNN_MAX_CPU_ISA=AVX2 make torch use the AVX2 kernels, as on a CPU without it (bfloat16
matmuls then run ~25x slower than fp32 on the machine of bench/verify_bf16_cpu.py); on an
AVX2-only CPU they change nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpulint.cli import main
from gpulint.verify.session import EXIT_INCONCLUSIVE, NUMERICS_ONLY_STEPS

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.slow]

SCRIPTS = Path(__file__).parent / "scripts"
# The rewritten run sleeps until the timeout after its 6 steps, so the test lasts at least this long; both runs
# must start torch and finish their steps within it: 10 s gave 0 of 12 steps at a load average of 13 on
# 2 CPUs, and a first run of the README demo took 40 s where the next took 4.
TIMEOUT_S = 90


def test_emulated_bf16_is_detected_and_partial_results_are_kept(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    report = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["verify", str(SCRIPTS / "slow_under_autocast.py"), "--device", "cpu",
                                       "--select", "GPU001", "--steps", "60", "--warmup", "2", "--threads", "1",
                                       "--timeout", str(TIMEOUT_S), "--no-diff", "--json", str(report)])
    data = json.loads(report.read_text())
    script = data["scripts"][0]
    assert data["machine"]["cpu_bf16"] == "emulated" and data["machine"]["cpu_capability"] == "AVX2"
    assert "this CPU has no native bfloat16 (torch CPU capability AVX2)" in result.output
    assert script["steps"] == NUMERICS_ONLY_STEPS and script["timed_repeats"] == 0  # shortened, no timed runs
    assert "speed: not measured (numerics-only check)" in result.output
    original, rewritten = script["runs"]["original"], script["runs"]["rewritten"]
    assert original["status"] == "stopped" and len(original["losses"]) == NUMERICS_ONLY_STEPS
    assert rewritten["status"] == "timeout" and len(rewritten["losses"]) == 6
    loss = script["comparison"]["loss"]
    assert loss["passed"] is True and loss["compared_steps"] == 6  # the 6 steps that ran are compared
    assert script["verdict"] == "INCONCLUSIVE" and result.exit_code == EXIT_INCONCLUSIVE, result.output
    assert any("timed out after 6 of 12 steps; the 6 steps both ran match" in d for d in script["inconclusive"])
