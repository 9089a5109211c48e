"""`gpulint verify` usage errors and scripts with nothing to rewrite: decided before any run starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gpulint.cli import main

pytest.importorskip("torch")  # verify refuses to start without torch


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["verify", str(tmp_path / "nope.py")])
    assert result.exit_code == 2
    assert "no such file or directory" in result.output


def test_warmup_must_leave_steps_to_time(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    result = CliRunner().invoke(main, ["verify", str(script), "--steps", "10", "--warmup", "10"])
    assert result.exit_code == 2
    assert "--warmup must be between 0 and --steps - 1" in result.output


def test_script_without_fixes_is_skipped_without_running(tmp_path: Path) -> None:
    script = tmp_path / "clean.py"
    script.write_text("raise SystemExit('must not run')\n")
    result = CliRunner().invoke(main, ["verify", str(script), "--", "--ignored", "arg"])
    assert result.exit_code == 0, result.output
    assert "no applicable fixes, nothing to verify" in result.output
    assert "must not run" not in result.output


def test_syntax_error_is_reported_not_run(tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("import torch\nopt = torch.optim.Adam(\n")
    result = CliRunner().invoke(main, ["verify", str(script)])
    assert result.exit_code == 1
    assert "cannot parse the script" in result.output
