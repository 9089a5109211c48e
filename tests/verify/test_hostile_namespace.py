"""Hostile tests, verify's confinement pieces without torch (issue 22, item 4): fast, and run always.

The namespace launcher alone (a shell, a child with a cleared environment and root's own
`mount -o remount,rw` all fail to write), the guard's answers to the calls that once got past
it, and the before/after comparison's reach (.git, linked folders, and what it leaves out).
Verify has no results cache: these are the same with and without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpulint.verify import confine, guard, sandbox

NAMESPACES = confine.probe((), ()) is None
needs_namespace = pytest.mark.skipif(not NAMESPACES, reason=f"no mount namespace here: {confine.probe((), ())}")


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    user, box = tmp_path / "user", tmp_path / "box"
    (user / ".git").mkdir(parents=True)
    box.mkdir()
    (user / "notes.txt").write_text("mine\n")
    (user / ".git" / "config").write_text("[core]\n")
    return user, box


@needs_namespace
def test_in_the_namespace_nothing_but_the_sandbox_is_writable(folders: tuple[Path, Path]) -> None:
    user, box = folders
    confined = confine.confinement([str(box)], [str(user)])
    assert confined.namespace and confined.kind == "mount-namespace"
    script = (f"echo x >> {user / '.git' / 'config'}; echo x >> {user / 'notes.txt'}; "
              f"env -i {sys.executable} -I -c \"open('{user / 'notes.txt'}', 'a').write('x')\"; "
              "mount -o remount,rw / 2>/dev/null && echo REMOUNTED; "
              f"echo ok > {box / 'written.txt'}")
    done = subprocess.run(confine.command(confined, [str(user)], ["sh", "-c", script]), capture_output=True,
                          text=True, cwd=box, timeout=120)
    assert "REMOUNTED" not in done.stdout, "a process of the run made the file system writable again"
    assert done.stderr.count("Read-only file system") >= 3, done.stderr
    assert (user / "notes.txt").read_text() == "mine\n" and (user / ".git" / "config").read_text() == "[core]\n"
    assert (box / "written.txt").read_text() == "ok\n"


def test_the_fallback_is_said_plainly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(confine.SWITCH_ENV, "off")
    confined = confine.confinement([str(tmp_path)], [str(tmp_path)])
    assert not confined.namespace and confined.kind == "python-guard"
    assert confined.describe().startswith("the Python-level guard only (GPULINT_VERIFY_NAMESPACE=off)")
    assert "not confined" in confined.describe()
    assert confine.command(confined, [], ["true"]) == ["true"]  # started as it is


def test_the_guard_refuses_descriptors_dir_fd_and_hard_links(folders: tuple[Path, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """os.fchmod, os.open(..., dir_fd=...) and os.link got past the guard (the audit events carry a
    descriptor, no dir_fd, or were checked on the new name only)."""
    user, box = folders
    log = box / "guard.jsonl"
    check = guard.Guard([str(box)], [str(user)], log=str(log))
    fd = os.open(user / "notes.txt", os.O_RDONLY)
    try:
        with pytest.raises(PermissionError):
            check("os.chmod", (fd, 0o600, -1))
    finally:
        os.close(fd)
    with pytest.raises(PermissionError):
        check("os.link", (str(user / "notes.txt"), str(box / "hard.txt"), None, None))
    check("os.link", (str(box / "a.txt"), str(box / "b.txt"), None, None))  # inside the sandbox: fine
    monkeypatch.setattr(os, "open", os.open)  # the wrapper below replaces it; restored after the test
    import posix

    monkeypatch.setattr(posix, "open", posix.open)
    guard._guard_dir_fd_opens(check)
    folder = os.open(user, os.O_RDONLY)
    try:
        with pytest.raises(PermissionError):
            os.open("notes.txt", os.O_WRONLY | os.O_APPEND, dir_fd=folder)
        os.close(os.open("notes.txt", os.O_RDONLY, dir_fd=folder))  # reading is fine
    finally:
        os.close(folder)
    assert (user / "notes.txt").read_text() == "mine\n"
    logged = log.read_text()
    assert f"change {user / 'notes.txt'}" in logged and f"link to {user / 'notes.txt'}" in logged
    assert f"write to {user / 'notes.txt'}" in logged  # what the parent merges into the report


def test_outside_writes_are_refused_in_a_namespace_and_listed_without_one(folders: tuple[Path, Path],
                                                                          tmp_path: Path) -> None:
    user, box = folders
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listing = guard.Guard([str(box)], [str(user)])
    listing.follow(str(elsewhere / "x.txt"), None, keep=False, verb="write to")
    assert listing.outside == [f"write to {elsewhere / 'x.txt'}"]
    read_only = guard.Guard([str(box)], [str(user)], writable=[])
    with pytest.raises(PermissionError, match="read-only in this run"):
        read_only.follow(str(elsewhere / "x.txt"), None, keep=False, verb="write to")
    read_only.follow("/dev/null", None, keep=False, verb="write to")  # devices stay usable


def test_the_comparison_covers_git_and_linked_folders_and_names_what_it_skips(tmp_path: Path) -> None:
    """.git was linked into the sandbox and never compared, so a change to it passed as "not changed"."""
    project, linked = tmp_path / "project", tmp_path / "linked"
    (project / ".git").mkdir(parents=True)
    (project / ".git" / "config").write_text("[core]\n")
    (project / ".venv").mkdir()
    (project / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (project / "__pycache__").mkdir()
    linked.mkdir()
    (linked / "data.txt").write_text("data")
    (project / "data").symlink_to(linked, target_is_directory=True)
    before = sandbox.fingerprint([project])
    assert str(project / ".git" / "config") in before and str(linked / "data.txt") in before
    assert before.not_checked() == ["1 .venv folder", "1 __pycache__ folder"]
    (project / ".git" / "config").write_text("[core]\n\tchanged = 1\n")
    (linked / "data.txt").write_text("changed")
    assert sandbox.changes(before, sandbox.fingerprint([project])) == sorted([
        f"changed {project / '.git' / 'config'}", f"changed {linked / 'data.txt'}"])
    assert "the files past the first 2" in sandbox.fingerprint([project], limit=2).not_checked()


def test_the_sandbox_mirrors_a_projects_own_links(tmp_path: Path) -> None:
    """A project's `data -> /somewhere` link was missing from the sandbox (its mirror path was resolved)."""
    project, linked = tmp_path / "project", tmp_path / "linked"
    project.mkdir()
    linked.mkdir()
    (linked / "data.txt").write_text("data")
    (project / "data").symlink_to(linked, target_is_directory=True)
    box = sandbox.Sandbox(tmp_path / "run")
    box.build([project])
    try:
        mirrored = box.mirror(project) / "data"
        assert mirrored.is_symlink() and (mirrored / "data.txt").read_text() == "data"
    finally:
        box.remove()
