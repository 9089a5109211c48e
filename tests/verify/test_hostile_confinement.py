"""Hostile tests, verify's confinement (issue 22, item 4): what the report says, it can back up.

A script (scripts/escapes.py) tries what got past the Python-level guard: a shell appending to
.git/config (linked into the sandbox, never compared), writes through the project's own symlink
and by absolute path outside the project, os.fchmod, os.open with dir_fd, os.link, a `python -I`
child and one with a cleared environment, and a DataLoader worker writing a file of the user's.

With a mount namespace (this machine allows one: `unshare -rm true` works), nothing of the
user's changes, and the report says which confinement ran and lists the refusals of every
process. Without one (GPULINT_VERIFY_NAMESPACE=off), the guard still refuses what Python code
does, and what it cannot stop is found by the before/after comparison, which now covers .git
and linked folders: the report never says "not changed" about them. Verify has no results
cache: these are the same with and without it.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpulint.cli import main
from gpulint.verify import confine

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.slow]

SCRIPTS = Path(__file__).parent / "scripts"


def _tree(root: Path) -> dict[str, tuple]:
    return {str(p.relative_to(root)): (stat.S_IMODE(p.lstat().st_mode),
                                       os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    project, outside, linked = tmp_path / "project", tmp_path / "outside", tmp_path / "linked-data"
    for folder in (project / ".git", outside, linked):
        folder.mkdir(parents=True)
    (project / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (project / "notes.txt").write_text("my notes\n")
    os.chmod(project / "notes.txt", 0o644)
    (outside / "notes.txt").write_text("elsewhere\n")
    (linked / "data.txt").write_text("linked data\n")
    (project / "linked").symlink_to(linked, target_is_directory=True)
    shutil.copy(SCRIPTS / "escapes.py", project / "escapes.py")
    monkeypatch.chdir(project)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "temp"))
    (tmp_path / "temp").mkdir()
    return tmp_path


def _verify(user: Path) -> tuple[str, dict]:
    report = user / "temp" / "report.json"
    result = CliRunner().invoke(main, ["verify", "escapes.py", "--select", "GPU201", "--steps", "8", "--repeats", "0",
                                       "--threads", "1", "--no-diff", "--json", str(report), "--",
                                       str(user / "project"), str(user / "outside"), str(user / "linked-data")])
    assert result.exit_code == 0 and "verdict: PASS" in result.output, result.output  # it ran to the end
    return result.output, json.loads(report.read_text())["scripts"][0]


def test_in_a_mount_namespace_nothing_of_yours_changes(user: Path) -> None:
    assert confine.probe((), (str(user),)) is None, "this machine allows unprivileged mount namespaces"
    before = _tree(user)
    output, script = _verify(user)
    temp = user / "temp"
    assert {k: v for k, v in _tree(user).items() if not k.startswith("temp")} == \
        {k: v for k, v in before.items() if not k.startswith("temp")}, output
    assert list(temp.iterdir()) == [temp / "report.json"]
    assert "confinement: a mount namespace: the whole file system was read-only" in output
    assert "your files were not changed (" in output and "SOME OF YOUR FILES CHANGED" not in output
    assert script["isolation"]["confinement"] == "mount-namespace"
    blocked = script["runs"]["original"]["guard"]["blocked"]
    project = user / "project"
    for entry in (f"change {project / 'notes.txt'}", f"write to {project / 'notes.txt'}",
                  f"link to {project / 'notes.txt'}", f"write to {project / 'worker.txt'}",
                  f"write to {user / 'outside' / 'from_python.txt'}"):
        assert entry in blocked, (entry, blocked)  # the worker's refusal too, not only the main process's


def test_without_a_namespace_the_guard_refuses_python_and_the_comparison_finds_the_rest(
        user: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(confine.SWITCH_ENV, "off")
    project = user / "project"
    output, script = _verify(user)
    assert "confinement: the Python-level guard only (GPULINT_VERIFY_NAMESPACE=off)" in output
    assert "are not confined" in output
    # what Python code tried is refused, in every process, and listed
    blocked = script["runs"]["original"]["guard"]["blocked"]
    for entry in (f"change {project / 'notes.txt'}", f"write to {project / 'notes.txt'}",
                  f"link to {project / 'notes.txt'}", f"write to {project / 'worker.txt'}"):
        assert entry in blocked, (entry, blocked)
    assert stat.S_IMODE((project / "notes.txt").stat().st_mode) == 0o644
    assert not (project / "worker.txt").exists()
    # a write outside your folders is allowed here, and said
    assert f"write to {user / 'outside' / 'from_python.txt'}" in script["runs"]["original"]["guard"]["outside"]
    assert "changed files outside your folders and its sandbox" in output
    # a shell, `python -I` and a cleared environment got through: the comparison finds them, in .git
    # and in the linked folder too, and the report does not say "not changed"
    changed = script["isolation"]["changed"]
    for path in (project / ".git" / "config", user / "linked-data" / "data.txt", project / "notes.txt"):
        assert f"changed {path}" in changed, changed
    assert "SOME OF YOUR FILES CHANGED" in output and "your files were not changed" not in output
    assert script["isolation"]["confinement"] == "python-guard"
