"""`-o/--output-file FILE`: the report goes to FILE, whole or not at all, and never over source code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gpulint.cli import lint, main

FLAGGED = 'import torch\ntorch.device("cuda")\nopt = torch.optim.Adam(params)\n'


def gpulint(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(FLAGGED)
    return tmp_path


def test_the_report_goes_to_the_file_and_stdout_stays_empty(project: Path) -> None:
    result = gpulint("check", "--output-format", "json", "-o", "reports/ci/gpulint.json", ".")
    assert result.exit_code == 1 and result.stdout == ""  # the exit code is the gate's, as without -o
    report = json.loads((project / "reports" / "ci" / "gpulint.json").read_text())
    assert [f["code"] for f in report] == ["GPU201"]
    assert sorted(p.name for p in (project / "reports" / "ci").iterdir()) == ["gpulint.json"]  # no temporary left
    concise = gpulint("check", "--output-file", "out.txt", ".")
    assert "train.py:3:7: GPU201" in (project / "out.txt").read_text() and concise.stdout == ""
    assert "Found 1 finding." in (project / "out.txt").read_text()


def test_fix_writes_what_remains(project: Path) -> None:
    result = gpulint("fix", "-o", "left.txt", ".")
    assert result.exit_code == 0 and "fused=True" in (project / "train.py").read_text()
    assert (project / "left.txt").read_text() == "Fixed 1 finding.\n"


@pytest.mark.parametrize("name", ["train.py", "other.py", "nb.ipynb", "types.pyi"])
def test_a_report_never_replaces_source_code(project: Path, name: str) -> None:
    result = gpulint("check", "-o", name, ".")
    assert result.exit_code == 2 and "refusing to write the report over a Python file" in result.stderr
    assert (project / "train.py").read_text() == FLAGGED and not (project / "other.py").exists()


def test_a_folder_is_refused(project: Path) -> None:
    (project / "out").mkdir()
    result = gpulint("check", "-o", "out", ".")
    assert result.exit_code == 2


def test_an_interrupted_run_leaves_the_previous_report(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "report.txt").write_text("previous\n")

    def interrupted(options: object) -> int:
        print("half a report")
        raise KeyboardInterrupt

    monkeypatch.setattr(lint, "_lint_run", interrupted)
    result = CliRunner().invoke(main, ["check", "-o", "report.txt", "."])
    assert result.exit_code == 130
    assert (project / "report.txt").read_text() == "previous\n"
    assert sorted(p.name for p in project.iterdir()) == ["report.txt", "train.py"]


def test_stdin_fix_sends_the_fixed_code_to_the_file(project: Path) -> None:
    result = gpulint("fix", "-", "--stdin-filename", "train.py", "-o", "fixed.txt", input=FLAGGED)
    assert result.stdout == "" and "fused=True" in (project / "fixed.txt").read_text()


def test_a_fifo_is_written_in_place_not_replaced(project: Path) -> None:
    """`-o /dev/stdout`, `-o /dev/null` or a named pipe: renaming a temporary file over it replaced the device or
    pipe with a plain file (as root, /dev/null itself). What is not a regular file is written to where it is."""
    import os
    import stat
    import threading

    fifo = project / "report.pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    result = gpulint("check", "--output-format", "json", "-o", str(fifo), ".")
    reader.join(timeout=30)
    assert result.exit_code == 1 and result.stdout == ""
    assert [f["code"] for f in json.loads(received[0])] == ["GPU201"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the pipe
    assert sorted(p.name for p in project.iterdir()) == ["report.pipe", "train.py"]  # no temporary left


def test_a_link_is_written_through_and_stays_a_link(project: Path) -> None:
    (project / "reports").mkdir()
    (project / "latest.json").symlink_to(project / "reports" / "run.json")
    result = gpulint("check", "--output-format", "json", "-o", "latest.json", ".")
    assert result.exit_code == 1
    assert (project / "latest.json").is_symlink()
    assert [f["code"] for f in json.loads((project / "reports" / "run.json").read_text())] == ["GPU201"]
