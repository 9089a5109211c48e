"""Progress bars: on a terminal for runs of hundreds of files; never in CI, a pipe, or the report."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from gpulint.output.progress import PROGRESS_MIN_FILES

FILES = PROGRESS_MIN_FILES + 10


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("many")
    for i in range(FILES):
        (root / f"m{i:03d}.py").write_text(f"x{i} = {i}\n")
    (root / "train.py").write_text("import torch\nopt = torch.optim.Adam(params)\ntorch.device('cuda')\n")
    return root


def _run(tree: Path, *args: str, terminal: bool, ci: bool = False) -> tuple[str, str]:
    """gpulint's stdout (a pipe) and its stderr (a terminal, or a pipe)."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["TERM"] = "xterm"
    if ci:
        env["CI"] = "true"
    command = [sys.executable, "-m", "gpulint", "check", "--no-cache", "-j", "1", *args, str(tree)]
    if not terminal:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        return done.stdout, done.stderr
    master, slave = pty.openpty()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
    stdout = process.stdout.read().decode()  # type: ignore[union-attr]
    process.wait(timeout=120)
    os.close(master)
    return stdout, b"".join(chunks).decode(errors="replace")


def test_a_terminal_gets_a_bar_and_the_json_report_stays_clean(tree: Path) -> None:
    stdout, stderr = _run(tree, "--output-format", "json", terminal=True)
    assert "Checking" in stderr and f"{FILES + 1}/{FILES + 1}" in stderr
    assert [f["code"] for f in json.loads(stdout)] == ["GPU201"]  # nothing of the bar on stdout


def test_ci_and_pipes_get_no_bar(tree: Path) -> None:
    _, in_ci = _run(tree, terminal=True, ci=True)
    assert "Checking" not in in_ci
    stdout, piped = _run(tree, terminal=False)
    assert "Checking" not in piped and "Checking" not in stdout and "GPU201" in stdout


def test_small_runs_get_no_bar(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    _, stderr = _run(tmp_path, terminal=True)
    assert stderr == ""
