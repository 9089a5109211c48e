"""Progress bars: on a terminal for runs of hundreds of files; never in CI, a pipe, or the report."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from gpulint.output.progress import PROGRESS_MIN_FILES, Bar, Estimate, work_of

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


# the time estimate --------------------------------------------------------------------------------

def test_the_estimate_weighs_files_by_size_where_a_count_would_be_many_times_too_high() -> None:
    """A run where each file costs its size, largest first as the runner orders them."""
    sizes = sorted((200 + (i * 7919) % 60_000 for i in range(1000)), reverse=True)
    names = [f"f{i}.py" for i in range(len(sizes))]
    now = [0.0]
    estimate = Estimate(dict(zip(names, map(float, sizes))), clock=lambda: now[0])
    finished = [1e-5 * sum(sizes[:i + 1]) for i in range(len(sizes))]
    for i, name in enumerate(names):
        now[0] = finished[i]
        estimate.advance([Path(name)], False)
        if i + 1 in (20, 100, 250, 500):
            truth = finished[-1] - finished[i]
            left = estimate.seconds_left()
            assert left is not None and 0.8 < left / truth < 1.25, (i, left, truth)
            by_count = finished[i] / (i + 1) * (len(names) - i - 1)  # click's estimate, from the count
            assert by_count / truth > 1.5
    assert estimate.seconds_left() == 0


def test_cached_files_are_no_work_and_a_notebook_counts_an_eighth(tmp_path: Path) -> None:
    script, notebook = tmp_path / "a.py", tmp_path / "b.ipynb"
    script.write_bytes(b"x" * 800)
    notebook.write_bytes(b"x" * 800)
    assert work_of(script) == 800 and work_of(notebook) == 100 and work_of(tmp_path / "gone.py") == 0
    now = [10.0]
    estimate = Estimate({"a": 1000.0, "b": 1000.0, "c": 2000.0}, clock=lambda: now[0])
    estimate.advance([Path("a")], True)  # the cache answered: no work, and the clock starts now
    assert estimate.left == 3000 and estimate.seconds_left() is None
    now[0] = 12.0
    estimate.advance([Path("b")], False)  # 1000 bytes in 2 s: 2000 left is 4 s
    assert estimate.seconds_left() == pytest.approx(4.0)


def test_the_bar_line_counts_files_and_drops_the_estimate_when_done() -> None:
    import io

    now = [0.0]
    stream = io.StringIO()
    bar = Bar("Checking", [Path("a.py"), Path("b.py")], stream, clock=lambda: now[0])
    bar.estimate.work = {"a.py": 100.0, "b.py": 100.0}
    bar.estimate.left = 200.0
    assert bar.line() == f"Checking  [{'-' * 30}]  0/2  --:--"
    now[0] = 3.0
    bar.advance([Path("a.py")], False)
    assert bar.line() == f"Checking  [{'#' * 15}{'-' * 15}]  1/2  00:03"
    now[0] = 6.0
    bar.advance([Path("b.py")], False)
    bar.finish()
    assert stream.getvalue().endswith(f"Checking  [{'#' * 30}]  2/2\033[K\n")
