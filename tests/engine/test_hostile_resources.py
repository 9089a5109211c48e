"""Hostile tests, resources: gpulint never hangs, never eats the machine, stops cleanly.

Issue 10, items 8 (a FIFO or /dev/zero named *.py, with the cache on: the cache read bytes
before the regular-file check), 9 (work per file is bounded: `max-fix-size`), 10 (`-j` is
capped at the number of files), 16 (SIGINT: exit 130, one line, no half-written file) and
the decision on crashing workers (exit 2, the file named, every other file's findings kept).
Runs that could hang or exhaust memory on a regression run in a subprocess with a limit.
"""

from __future__ import annotations

import concurrent.futures
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import Gpulint

# a torchvision dataset yields CPU tensors, so GPU101's fix is the safe one (docs/fix-safety.md)
TRAIN = """\
import torch
from torch.utils.data import DataLoader
from torchvision.datasets import MNIST
device = torch.device("cuda")
loader = DataLoader(MNIST(), batch_size=32)
for images, labels in loader:
    images = images.to(device)
"""
FIXED = TRAIN.replace("batch_size=32)", "batch_size=32, pin_memory=True)")
HANG_GUARD_S = 120  # a regression would hang forever; this only ends the test


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def gpulint_process(gl: Gpulint, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpulint", *gl.args(*args)], capture_output=True, text=True,
                          timeout=HANG_GUARD_S, preexec_fn=_limit_memory, cwd=cwd)


def lines_for(stdout: str, path: Path) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(f"{path}:")]


# -- item 8: FIFOs and devices, with the cache on and off -------------------------------------

@pytest.mark.parametrize("command", ["check", "fix"])
@pytest.mark.parametrize("named", ["in-a-directory", "explicitly"])
def test_fifo_and_dev_zero_named_py_never_hang(gl: Gpulint, tmp_path: Path, command: str, named: str) -> None:
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.py"
    zero.symlink_to("/dev/zero")
    train = tmp_path / "train.py"
    train.write_text(TRAIN)
    paths = [str(tmp_path)] if named == "in-a-directory" else [str(fifo), str(zero), str(train)]
    proc = gpulint_process(gl, command, *paths)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert [line.split(": ", 1)[1] for line in lines_for(proc.stdout, fifo)] == [
        "GPU000 cannot lint file: not a regular file"]
    assert [line.split(": ", 1)[1] for line in lines_for(proc.stdout, zero)] == [
        "GPU000 cannot lint file: not a regular file"]
    assert lines_for(proc.stdout, train), proc.stdout


def test_fifo_named_gitignore_or_config_never_hangs(gl: Gpulint, tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    os.mkfifo(tmp_path / ".gitignore")
    (tmp_path / "sub").mkdir()
    os.mkfifo(tmp_path / "sub" / ".gitignore")
    os.mkfifo(tmp_path / "sub" / "pyproject.toml")
    (tmp_path / "sub" / "train.py").write_text(TRAIN)
    proc = gpulint_process(gl, "check", str(tmp_path))
    assert proc.returncode == 1 and len(lines_for(proc.stdout, tmp_path / "sub" / "train.py")) == 2, proc.stderr


def test_fifo_in_place_of_a_cache_entry_never_hangs(tmp_path: Path, _private_cache_dir: Path) -> None:
    train = tmp_path / "train.py"
    train.write_text(TRAIN)
    cache = tmp_path / "cache"
    first = subprocess.run([sys.executable, "-m", "gpulint", "check", "--cache-dir", str(cache), str(train)],
                           capture_output=True, text=True, timeout=HANG_GUARD_S)
    [entry] = list(cache.glob("v1/*/*.json"))
    entry.unlink()
    os.mkfifo(entry)
    again = subprocess.run([sys.executable, "-m", "gpulint", "check", "--cache-dir", str(cache), str(train)],
                           capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert again.returncode == first.returncode == 1 and again.stdout == first.stdout


def test_a_huge_regular_file_is_never_read_whole(gl: Gpulint, tmp_path: Path) -> None:
    huge = tmp_path / "huge.py"
    with open(huge, "wb") as handle:  # sparse: 8 GB on paper, nothing on disk
        handle.truncate(8 << 30)
    proc = gpulint_process(gl, "check", str(huge))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    [line] = lines_for(proc.stdout, huge)
    assert "GPU000 cannot lint file: file is too large to read (8192.0 MB" in line and "max-file-size" in line


# -- item 9: bounded work per file ------------------------------------------------------------

def test_a_file_over_max_fix_size_is_not_fixed_and_says_so(gl: Gpulint, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\nmax-fix-size = 4096\n")
    big = tmp_path / "big.py"
    text = TRAIN + "DATA = [" + ", ".join(str(i) for i in range(3000)) + "]\n"
    big.write_text(text)
    result = gl.fix(big)
    assert big.read_text() == text
    lines = lines_for(result.stdout, big)
    assert any("GPU101" in line for line in lines), "the findings are still reported"
    [too_large] = [line for line in lines if "GPU000" in line]
    assert "too large to fix" in too_large and "max-fix-size" in too_large
    assert result.exit_code == 1
    checked = gl.check(big)  # check never fixes: no such finding there
    assert not [line for line in lines_for(checked.stdout, big) if "GPU000" in line]
    small = tmp_path / "small.py"
    small.write_text(TRAIN)
    gl.fix(small)
    assert small.read_text() == FIXED, "files under the limit are fixed as always"


def test_the_default_fix_limit_applies_without_configuration(gl: Gpulint, tmp_path: Path) -> None:
    big = tmp_path / "big.py"
    text = TRAIN + 'BLOB = """' + "x" * (300 * 1024) + '"""\n'  # 300 KB, cheap to parse
    big.write_text(text)
    result = gl.fix(big)
    assert big.read_text() == text
    assert "too large to fix" in result.stdout and "256 KB" in result.stdout


def test_max_file_size_is_a_setting_named_in_the_finding(gl: Gpulint, tmp_path: Path) -> None:
    (tmp_path / "gpulint.toml").write_text('max-file-size = "1 KB"\n')
    path = tmp_path / "train.py"
    path.write_text(TRAIN + "# padding\n" * 200)
    result = gl.check(path)
    [line] = lines_for(result.stdout, path)
    assert "GPU000 file is too large to analyse" in line and "max-file-size" in line


# -- item 10: -j is capped ------------------------------------------------------------------

def test_jobs_are_capped_at_the_number_of_files(gl: Gpulint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(10):
        (tmp_path / f"t{i}.py").write_text(TRAIN)
    started: list[int] = []
    real = concurrent.futures.ProcessPoolExecutor  # the runner imports it when a pool starts

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, max_workers: int, **kwargs) -> None:  # noqa: ANN003
            started.append(max_workers)
            super().__init__(max_workers=max_workers, **kwargs)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Recording)
    result = gl.check("-j", "300", tmp_path)
    assert result.exit_code == 1
    assert len([line for line in result.stdout.splitlines() if "GPU101" in line]) == 10
    assert started == [10], started


# -- item 16: SIGINT ------------------------------------------------------------------------

SLOW_FIX = textwrap.dedent("""\
    import os, signal, sys, time
    from pathlib import Path
    from gpulint.engine import linter

    # as in a terminal: a test run started in the background of a script inherits SIGINT ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)

    real = linter.fix_text
    markers = Path(sys.argv[1])

    def slow_fix(path, *args, **kwargs):
        outcome = real(path, *args, **kwargs)
        (markers / f"{os.getpid()}-{Path(path).name}").touch()
        time.sleep(1)  # the interrupt arrives while files are being fixed
        return outcome

    linter.fix_text = slow_fix
    from gpulint.cli import run
    sys.argv = ["gpulint", *sys.argv[2:]]
    run()
""")


@pytest.mark.parametrize("jobs", ["1", "4"])
def test_sigint_during_fix_exits_130_with_one_line_and_no_half_written_file(
        gl: Gpulint, tmp_path: Path, jobs: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for i in range(12):
        (project / f"t{i:02d}.py").write_text(TRAIN)
    markers = tmp_path / "markers"
    markers.mkdir()
    script = tmp_path / "slow_gpulint.py"
    script.write_text(SLOW_FIX)
    proc = subprocess.Popen([sys.executable, str(script), str(markers), *gl.args("fix", "-j", jobs, str(project))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for _ in range(HANG_GUARD_S * 20):
            if any(markers.iterdir()) or proc.poll() is not None:
                break
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground process group
        stdout, stderr = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, (proc.returncode, stderr)
    assert stderr.splitlines() == ["gpulint: interrupted"], stderr
    for path in project.iterdir():
        assert path.read_text() in (TRAIN, FIXED), f"{path.name} is half-written"
    assert not [p for p in project.iterdir() if "tmp" in p.name]


# -- a crashing worker: named, exit 2, the other files' findings kept --------------------------

CRASHING = textwrap.dedent("""\
    import os, signal, sys
    from pathlib import Path
    from gpulint.engine import linter

    real = linter.lint_text

    def crash_on_one_file(path, *args, **kwargs):
        if Path(path).name == "crash.py":
            os.kill(os.getpid(), signal.SIGSEGV)  # what LibCST's native parser does on some input
        return real(path, *args, **kwargs)

    linter.lint_text = crash_on_one_file
    from gpulint.cli import run
    sys.argv = ["gpulint", *sys.argv[1:]]
    run()
""")


def test_a_crashing_worker_names_its_file_and_keeps_every_other_finding(gl: Gpulint, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for i in range(10):
        (project / f"t{i}.py").write_text(TRAIN)
    (project / "crash.py").write_text(TRAIN)
    script = tmp_path / "crashing_gpulint.py"
    script.write_text(CRASHING)
    proc = subprocess.run([sys.executable, str(script), *gl.args("check", "-j", "2", str(project))],
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    crash_lines = [line for line in proc.stderr.splitlines() if "crash.py" in line]
    assert crash_lines and "crashed" in crash_lines[0] and "SIGSEGV" in crash_lines[0], proc.stderr
    for i in range(10):
        assert len(lines_for(proc.stdout, project / f"t{i}.py")) == 2, proc.stdout
    assert "All checks passed!" not in proc.stdout
