"""The shipped examples run: each script and the notebook are verified next to their rewrite on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpulint.cli import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.parametrize("target", ["examples/", "examples/churn.ipynb"])
def test_every_example_passes_verify_on_the_cpu(target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")  # a guard only: CI installs torch
    monkeypatch.chdir(ROOT)
    report = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["verify", target, "--steps", "12", "--warmup", "2", "--repeats", "0",
                                       "--no-diff", "--threads", "1", "--json", str(report)])
    scripts = json.loads(report.read_text())["scripts"]
    assert result.exit_code == 0, result.output
    assert [s["verdict"] for s in scripts] == ["PASS"] * (3 if target == "examples/" else 1)
    assert all(r["status"] == "exercised" for s in scripts for r in s["rules"] if r["code"] != "GPU003")
    for script in scripts:  # a real PASS: a rewrite ran next to the original and their losses were compared
        assert script["rules_applied"], script["path"]
        loss = script["comparison"]["loss"]
        assert loss["passed"] and loss["compared_steps"] >= 10 and loss["max_step_deviation"] is not None, loss
        losses = script["runs"]["original"]["losses"]
        assert len(losses) >= 10 and all(isinstance(x, float) for x in losses), script["path"]
