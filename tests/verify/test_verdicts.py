"""Issue 13 items 4 and 5: a PASS needs runs that trained and rewritten code that ran in the timed steps.

Each case is one real verification (two short checked runs, no timed runs): a learning rate
of 0 and frozen parameters are INCONCLUSIVE, never PASS (exit 3); an optimizer rewritten on an
argv branch the run never took, and a DataLoader used only in the warm-up, are NOT EXERCISED.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpulint.cli import main
from gpulint.verify.session import EXIT_INCONCLUSIVE

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.slow]

SCRIPTS = Path(__file__).parent / "scripts"


def _verify(tmp_path: Path, script: str, steps: int, *args: str) -> tuple[int, str, dict[str, Any]]:
    report = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["verify", str(SCRIPTS / script), "--steps", str(steps), "--warmup", "2",
                                       "--repeats", "0", "--threads", "1", "--no-diff", "--json", str(report),
                                       "--", *args])
    data = json.loads(report.read_text())["scripts"][0] if report.exists() else {}
    return result.exit_code, result.output, data


def test_a_learning_rate_of_zero_is_inconclusive(tmp_path: Path) -> None:
    """The mixed-precision check used to PASS an lr=0 run (deviation 1.26e-2 under a 2e-2 limit).

    Frozen parameters take the same path: test_harness.py shows their weights do not move.
    """
    code, output, script = _verify(tmp_path, "no_training.py", 8, "--lr0")
    assert {"GPU001", "GPU201"} <= set(script["rules_applied"]), output
    assert script["comparison"]["loss"]["passed"] is True  # the losses match...
    assert code == EXIT_INCONCLUSIVE, output  # ...and prove nothing
    assert script["verdict"] == "INCONCLUSIVE"
    training = script["comparison"]["training"]
    for label in ("original", "rewritten"):
        assert training[label]["weights_moved"] is False
        assert training[label]["trained"] is False
        assert training[label]["loss_trend"]["direction"] != "decreasing"
    assert "neither run trains" in output and "the weights did not move" in output
    assert "verdict: INCONCLUSIVE" in output


def test_rewritten_code_that_never_ran_in_the_timed_steps_is_not_exercised(tmp_path: Path) -> None:
    code, output, script = _verify(tmp_path, "not_exercised.py", 8)
    assert {"GPU101", "GPU201"} <= set(script["rules_applied"]), output
    assert script["comparison"]["loss"]["passed"] is True
    assert script["comparison"]["training"]["rewritten"]["trained"] is True
    rules = {r["code"]: r for r in script["rules"]}
    assert rules["GPU201"]["status"] == "NOT EXERCISED"
    assert "never ran" in rules["GPU201"]["detail"]
    assert "the run used RMSprop at not_exercised.py:14" in rules["GPU201"]["detail"]
    assert rules["GPU101"]["status"] == "NOT EXERCISED"
    assert "used only in the warm-up steps" in rules["GPU101"]["detail"]
    assert code == EXIT_INCONCLUSIVE, output
    assert "GPU201 NOT EXERCISED" in output and "verdict: INCONCLUSIVE" in output
