"""Hostile tests, verify's outputs (issue 22, item 1): `--json` and `--plot` never write through a link.

`ln -s lib.py r.json; ln train.py h.json; gpulint verify train.py --json r.json` turned lib.py into
the report (with h.json, train.py). A report path that is a symbolic link, a second name of a file,
a FIFO or a device is refused before any run; the writer itself opens with O_NOFOLLOW and checks the
open file, so a link put there after the check is refused too. Verify has no results cache: every
test here is the same with and without it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gpulint.cli import main

pytest.importorskip("torch")  # verify refuses to start without torch

NOTHING_TO_FIX = "print('nothing to rewrite here')\n"  # verify skips it: no run, the report is written at once
LIBRARY = "def helper():\n    return 1\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "train.py").write_text(NOTHING_TO_FIX)
    (tmp_path / "lib.py").write_text(LIBRARY)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _verify(*args: str) -> Result:
    return CliRunner().invoke(main, ["verify", "train.py", "--no-diff", *args])


@pytest.mark.parametrize("flag, name", [("--json", "r.json"), ("--plot", "r.png")])
def test_a_report_path_that_is_a_symlink_to_a_python_file_is_refused(project: Path, flag: str, name: str) -> None:
    (project / name).symlink_to("lib.py")
    result = _verify(flag, name)
    assert result.exit_code == 2, result.output
    assert f"gpulint: error: {flag} {name}: is a symbolic link (to lib.py)" in result.output
    assert (project / "lib.py").read_text() == LIBRARY and (project / name).is_symlink()


@pytest.mark.parametrize("flag, name", [("--json", "h.json"), ("--plot", "h.png")])
def test_a_report_path_that_is_a_hard_link_to_the_script_is_refused(project: Path, flag: str, name: str) -> None:
    os.link(project / "train.py", project / name)
    result = _verify(flag, name)
    assert result.exit_code == 2, result.output
    assert f"gpulint: error: {flag} {name}: has 2 names (hard links)" in result.output
    assert (project / "train.py").read_text() == NOTHING_TO_FIX


def test_a_fifo_as_report_path_is_refused_without_blocking(project: Path) -> None:
    os.mkfifo(project / "r.json")
    result = _verify("--json", "r.json")
    assert result.exit_code == 2 and "not a regular file (a FIFO)" in result.output, result.output


def test_a_plain_report_path_is_still_written(project: Path) -> None:
    result = _verify("--json", "r.json")
    assert result.exit_code == 0, result.output
    assert '"scripts"' in (project / "r.json").read_text()
    (project / "r.json").write_text("old report")  # an existing report of one name is replaced
    assert _verify("--json", "r.json").exit_code == 0 and '"scripts"' in (project / "r.json").read_text()


def test_the_writer_refuses_a_link_made_after_the_check(tmp_path: Path) -> None:
    """The check before the runs and the write after them are minutes apart: the writer checks again."""
    from gpulint.core.source import OutputRefused, write_output

    target = tmp_path / "lib.py"
    target.write_text(LIBRARY)
    (tmp_path / "r.json").symlink_to(target)
    with pytest.raises(OutputRefused, match="is a symbolic link"):
        write_output(tmp_path / "r.json", b"{}")
    os.link(target, tmp_path / "h.json")
    with pytest.raises(OutputRefused, match="has 2 names"):
        write_output(tmp_path / "h.json", b"{}")
    os.mkfifo(tmp_path / "f.json")
    # a reader is waiting; a daemon, so that a reader still blocked in open() can never keep the test run from
    # exiting (it did once: the writer refused before the reader had opened, and the release below found no one)
    reader = threading.Thread(target=lambda: open(tmp_path / "f.json", "rb").close(), daemon=True)
    reader.start()
    try:
        with pytest.raises(OutputRefused, match="a FIFO"):
            write_output(tmp_path / "f.json", b"{}")
    finally:  # let the reader go, whatever happened: until it has opened, a non-blocking writer finds no one
        deadline = time.monotonic() + 5
        while reader.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                os.close(os.open(tmp_path / "f.json", os.O_WRONLY | os.O_NONBLOCK))
            reader.join(0.05)
        assert not reader.is_alive()
    assert target.read_text() == LIBRARY
