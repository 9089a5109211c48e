"""Hostile tests, data loss: gpulint never deletes, overwrites or re-encodes what is not its own.

Issue 10, items 1 (cache directory), 3 (a save during the write), 6 (codecs that do not
round-trip) and 7 (owner, xattrs, hard links, long names), and their siblings on the other
write paths (`--add-noqa`, `fix -` on stdin). Every test runs with the results cache on and off.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from gpulint.core import source as source_module
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
# GPU101's fix also makes the copies of the loader's batches asynchronous
FIXED = TRAIN.replace("batch_size=32)", "batch_size=32, pin_memory=True)").replace(
    "images.to(device)", "images.to(device, non_blocking=True)")


def snapshot(directory: Path, skip: str = "\0") -> dict[str, bytes]:
    """Every file below `directory` (except under `skip`) with its bytes."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file() and skip not in p.relative_to(directory).parts}


def temp_files(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if "gpulint" in p.name and "tmp" in p.name]


def make_repo(root: Path) -> Path:
    """A user's project: sources, a .gitignore, git metadata."""
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".gitignore").write_text("*.ckpt\n")
    (root / "src").mkdir()
    (root / "src" / "train.py").write_text(TRAIN)
    (root / "notes.md").write_text("precious\n")
    return root


# -- item 1: the cache directory ---------------------------------------------------------------

def test_cache_dir_dot_never_touches_the_users_files_and_clean_removes_only_the_cache(
        gl: Gpulint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    before = snapshot(repo)
    result = gl("check", "--cache-dir", ".", "src")
    assert result.exit_code == 1
    assert snapshot(repo, skip=".gpulint_cache") == before, "a user file was changed"
    assert not (repo / "CACHEDIR.TAG").exists()
    if gl.cache:
        assert (repo / ".gpulint_cache" / "CACHEDIR.TAG").is_file(), "the cache lives in its own subdirectory"
    result = gl("clean", "--cache-dir", ".")
    assert result.exit_code == 0, result.output
    assert snapshot(repo) == before, "clean removed or changed a user file"
    assert not (repo / ".gpulint_cache").exists()
    assert (repo / ".git" / "HEAD").is_file() and (repo / "src" / "train.py").read_text() == TRAIN


def test_cache_dir_from_environment_pointing_at_an_existing_directory(
        gl: Gpulint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home_cache = tmp_path / "home" / ".cache"
    (home_cache / "pip").mkdir(parents=True)
    (home_cache / "pip" / "selfcheck.json").write_text("{}")
    (home_cache / ".gitignore").write_text("# mine\n")
    before = snapshot(home_cache)
    monkeypatch.setenv("GPULINT_CACHE_DIR", str(home_cache))
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    assert gl.check(project).exit_code == 1
    assert gl.check(project).exit_code == 1  # warm
    assert snapshot(home_cache, skip=".gpulint_cache") == before
    result = gl("clean")
    assert result.exit_code == 0, result.output
    assert snapshot(home_cache) == before and (home_cache / "pip").is_dir()


def test_a_new_cache_directory_is_created_tagged_and_removed_whole(gl: Gpulint, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    cache = tmp_path / "deep" / "new-cache"
    assert gl.check("--cache-dir", cache, tmp_path / "train.py").exit_code == 1
    if gl.cache:
        assert (cache / "CACHEDIR.TAG").is_file() and (cache / ".gitignore").read_text().splitlines()[-1] == "*"
        assert not (cache / ".gpulint_cache").exists(), "a directory gpulint created is used as it is"
        result = gl("clean", "--cache-dir", cache)
        assert result.exit_code == 0 and "Removed" in result.output
        assert not cache.exists() and (tmp_path / "deep").is_dir()
    else:
        assert not cache.exists()


def test_clean_leaves_files_gpulint_did_not_write_in_its_own_cache(gl: Gpulint, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    cache = tmp_path / "cache"
    gl("check", "--cache-dir", cache, tmp_path / "train.py")
    if not gl.cache:
        cache.mkdir()
        (cache / "CACHEDIR.TAG").write_text(source_module.__name__)  # not gpulint's tag
    else:
        (cache / "my-notes.txt").write_text("do not delete")
        [entry_dir] = [p for p in (cache / "v1").iterdir() if p.is_dir()]
        (entry_dir / "keep.txt").write_text("mine")
    result = gl("clean", "--cache-dir", cache)
    if gl.cache:
        assert result.exit_code == 0, result.output
        assert (cache / "my-notes.txt").read_text() == "do not delete"
        assert (entry_dir / "keep.txt").read_text() == "mine"
        assert not list(cache.rglob("*.json")) and not (cache / "CACHEDIR.TAG").exists()
        assert "2 files gpulint did not write" in result.output
    else:  # someone else's directory with someone else's tag: not gpulint's, nothing removed
        assert result.exit_code == 0 and "No cache at" in result.output
        assert (cache / "CACHEDIR.TAG").read_text() == source_module.__name__


def test_a_linked_cache_dir_is_the_same_directory_for_check_and_clean(gl: Gpulint, tmp_path: Path) -> None:
    """Issue 22, item 13: `--cache-dir link` wrote through the link but `clean --cache-dir link`
    refused it. A link is the directory it points to for both; the link itself stays."""
    (tmp_path / "train.py").write_text(TRAIN)
    for name, tagged in (("made-by-gpulint", True), ("someone-elses", False)):
        target = tmp_path / name
        if tagged:  # a cache gpulint made, then reached through a link
            assert gl.check("--cache-dir", target, tmp_path / "train.py").exit_code == 1
        target.mkdir(exist_ok=True)
        (target / "data.txt").write_text("keep")
        link = tmp_path / f"link-to-{name}"
        link.symlink_to(target, target_is_directory=True)
        assert gl.check("--cache-dir", link, tmp_path / "train.py").exit_code == 1
        cache = target if tagged and gl.cache else target / ".gpulint_cache"
        assert (cache / "CACHEDIR.TAG").is_file() == gl.cache, sorted(tmp_path.rglob("*"))
        assert not (tmp_path / ".gpulint_cache").exists() and not (link / ".gpulint_cache").is_symlink()
        result = gl("clean", "--cache-dir", link)
        assert result.exit_code == 0, result.output
        if gl.cache:
            assert "Removed" in result.output and str(cache) in result.output, result.output
            assert not list(cache.rglob("*.json")) and not (cache / "CACHEDIR.TAG").exists()
        assert link.is_symlink() and (target / "data.txt").read_text() == "keep"


@pytest.mark.parametrize("how", ["environment", "option"])
def test_a_tilde_in_the_cache_dir_is_the_home_directory(gl: Gpulint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       how: str) -> None:
    """Issue 22, item 13: `GPULINT_CACHE_DIR='~/.cache/gpulint'` (quoted in a CI file, so no shell
    expands it) made a folder named `~` in the working directory."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(project)
    option: tuple[str, ...] = ()
    if how == "environment":
        monkeypatch.setenv("GPULINT_CACHE_DIR", "~/.cache/gpulint")
    else:
        option = ("--cache-dir", "~/.cache/gpulint")
    assert gl("check", *option, "train.py").exit_code == 1
    assert not (project / "~").exists()
    assert (home / ".cache" / "gpulint" / "CACHEDIR.TAG").is_file() == gl.cache
    result = gl("clean", *option)
    assert result.exit_code == 0, result.output
    assert not (home / ".cache" / "gpulint").exists() and not (project / "~").exists()


# -- item 3: an editor saves while gpulint writes ------------------------------------------------

def _save_during(monkeypatch: pytest.MonkeyPatch, path: Path, theirs: bytes, hook: str) -> None:
    """Simulate an editor saving `path` at a given moment of gpulint's write (an injected delay)."""
    real = getattr(source_module.os, hook)
    done: list[bool] = []

    def late_save(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        result = real(*args, **kwargs)
        if not done:
            done.append(True)
            path.write_bytes(theirs)
        return result

    monkeypatch.setattr(source_module.os, hook, late_save)


@pytest.mark.parametrize("hook", ["fsync", "chmod"])
def test_save_during_the_write_is_not_overwritten(gl: Gpulint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  hook: str) -> None:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    theirs = (TRAIN + "# saved by the editor\n").encode()
    _save_during(monkeypatch, path, theirs, hook)
    result = gl.fix(path)
    assert path.read_bytes() == theirs, "the editor's save was overwritten"
    assert "changed during fix, skipped" in result.stderr
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert not temp_files(tmp_path)


def test_save_during_an_in_place_write_is_not_overwritten(gl: Gpulint, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    os.link(path, tmp_path / "twin.py")  # two links: written in place
    theirs = (TRAIN + "# saved by the editor\n").encode()
    real_open = source_module.os.open
    saved: list[bool] = []

    def open_then_save(file, flags, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if not saved and flags & os.O_WRONLY and os.path.basename(file) == "train.py":
            saved.append(True)
            path.write_bytes(theirs)
        return real_open(file, flags, *args, **kwargs)

    monkeypatch.setattr(source_module.os, "open", open_then_save)
    result = gl.fix(path)
    assert saved, "the in-place path was not taken"
    assert path.read_bytes() == theirs and "changed during fix, skipped" in result.stderr


def test_add_noqa_skips_a_file_changed_after_it_was_linted(gl: Gpulint, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import gpulint.cli.lint as cli

    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    theirs = "# a new first line moves every row\n" + TRAIN
    real = cli.run_jobs

    def lint_then_edit(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        reports = real(*args, **kwargs)
        path.write_text(theirs)
        return reports

    monkeypatch.setattr(cli, "run_jobs", lint_then_edit)
    result = gl.check("--add-noqa", path)
    assert path.read_text() == theirs, "noqa comments were written on rows of another version of the file"
    assert "changed" in result.stderr and "skipped" in result.stderr


# -- item 6: codecs whose text does not round-trip ---------------------------------------------

# 87 9A (NEC row 13) decodes to U+2235, which encodes back to 81 E6: re-encoding the whole text
# would change this comment although no fix touches it
CP932_HEAD = b"# -*- coding: cp932 -*-\n# \x81\xe6 and \x87\x9a both read as U+2235\n"


@pytest.mark.parametrize("mode", ["file", "stdin", "add-noqa"])
def test_cp932_bytes_outside_the_edit_are_kept(gl: Gpulint, tmp_path: Path, mode: str) -> None:
    head = CP932_HEAD
    raw = head + TRAIN.encode("cp932")
    assert raw.decode("cp932").encode("cp932") != raw, "the test needs bytes that do not round-trip"
    path = tmp_path / "train.py"
    path.write_bytes(raw)
    if mode == "file":
        result = gl.fix(path)
        new = path.read_bytes()
        assert new == head + FIXED.encode("cp932"), (result.output, new)
    elif mode == "stdin":
        result = gl("fix", "-", "--stdin-filename", str(path), input=raw)
        assert result.stdout_bytes == head + FIXED.encode("cp932")
    else:
        result = gl.check("--add-noqa", path)
        new = path.read_bytes()
        assert new == head + TRAIN.replace("batch_size=32)", "batch_size=32)  # noqa: GPU101, GPU102").encode(), \
            result.output


def test_utf7_file_is_fixed_exactly_or_refused_never_reencoded(gl: Gpulint, tmp_path: Path) -> None:
    text = "# -*- coding: utf-7 -*-\n# caf\u00e9 \u2014 +plus+\n" + TRAIN
    raw = text.encode("utf-7")
    path = tmp_path / "train.py"
    path.write_bytes(raw)
    result = gl.fix(path)
    new = path.read_bytes()
    if new == raw:
        assert "not written" in result.stderr and "utf-7" in result.stderr, result.output
        assert result.exit_code == 1
    else:
        assert new.decode("utf-7") == text.replace("batch_size=32)", "batch_size=32, pin_memory=True)").replace(
            "images.to(device)", "images.to(device, non_blocking=True)")
        assert new.startswith(raw[:raw.index(b"loader")]), "bytes before the edit changed"
    assert "Traceback" not in result.output


# -- item 7: metadata --------------------------------------------------------------------------

def test_hard_linked_file_is_fixed_in_place_for_every_name(gl: Gpulint, tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text(TRAIN)
    twin = tmp_path / "b.py"
    os.link(path, twin)
    inode = path.stat().st_ino
    result = gl.fix(path)
    assert result.exit_code == 1  # GPU102 (unsafe) remains
    assert twin.read_text() == FIXED and path.read_text() == FIXED
    assert path.stat().st_ino == inode and path.stat().st_nlink == 2
    assert not temp_files(tmp_path)


def test_xattrs_owner_group_and_mode_are_kept(gl: Gpulint, tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    os.setxattr(path, "user.origin", b"kept")
    uid, gid = path.stat().st_uid, path.stat().st_gid
    if os.geteuid() == 0:  # root can hand the file to someone else, which is where owners get lost
        uid, gid = 4242, 4343
        os.chown(path, uid, gid)
    os.chmod(path, 0o2751)  # after chown, which clears set-id bits
    gl.fix(path)
    st = path.stat()
    assert path.read_text() == FIXED
    assert os.getxattr(path, "user.origin") == b"kept"
    assert (st.st_uid, st.st_gid) == (uid, gid)
    assert stat.S_IMODE(st.st_mode) == 0o2751


@pytest.mark.parametrize("refused", ["chown", "setxattr"])
def test_metadata_that_cannot_be_copied_makes_the_write_in_place(
        gl: Gpulint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refused: str) -> None:
    """A normal user cannot give a new file someone else's owner or a privileged xattr: then the
    file is written in place (same inode), never replaced by one that lost them."""
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    os.setxattr(path, "user.origin", b"kept")
    if refused == "chown" and os.geteuid() == 0:
        os.chown(path, 4242, 4343)  # someone else's file, as a normal user would meet it
    inode, owner = path.stat().st_ino, (path.stat().st_uid, path.stat().st_gid)

    def denied(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(source_module.os, refused, denied)
    result = gl.fix(path)
    monkeypatch.undo()
    assert path.read_text() == FIXED, result.output
    assert path.stat().st_ino == inode, "the file was replaced although its metadata could not be copied"
    assert os.getxattr(path, "user.origin") == b"kept"
    assert (path.stat().st_uid, path.stat().st_gid) == owner
    assert not temp_files(tmp_path)


@pytest.mark.parametrize("length", [230, 250, 255])
def test_long_file_names_can_be_fixed(gl: Gpulint, tmp_path: Path, length: int) -> None:
    path = tmp_path / ("n" * (length - 3) + ".py")
    path.write_text(TRAIN)
    result = gl.fix(path)
    assert path.read_text() == FIXED, result.output
    assert not temp_files(tmp_path)


def test_multibyte_long_file_name(gl: Gpulint, tmp_path: Path) -> None:
    path = tmp_path / ("\u00e9" * 126 + ".py")  # 255 bytes in UTF-8
    path.write_text(TRAIN)
    gl.fix(path)
    assert path.read_text() == FIXED and not temp_files(tmp_path)


def test_fix_twice_changes_nothing_the_second_time(gl: Gpulint, tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(b"\xef\xbb\xbf" + TRAIN.replace("\n", "\r\n").encode())
    gl.fix(path)
    first = path.read_bytes()
    digest = hashlib.sha256(first).hexdigest()
    mtime = path.stat().st_mtime_ns
    gl.fix(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert path.stat().st_mtime_ns == mtime, "the second run wrote the file"


# -- issue 22, item 11: links never take `fix DIR` out of DIR ----------------------------------------

def test_fix_dir_never_rewrites_a_file_outside_it_through_a_link(gl: Gpulint, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`fix proj` rewrote ../outside/lib.py through proj/linked.py. A link found while walking is
    followed only to a target inside the paths given (linked folders are not entered, as in ruff);
    a link named on the command line is the user's choice and is followed."""
    proj, outside = tmp_path / "proj", tmp_path / "outside"
    (outside / "pkg").mkdir(parents=True)
    (proj / "sub").mkdir(parents=True)
    for path in (outside / "lib.py", outside / "pkg" / "m.py", proj / "own.py", proj / "sub" / "shared.py"):
        path.write_text(TRAIN)
    (proj / "linked.py").symlink_to(outside / "lib.py")
    (proj / "linkdir").symlink_to(outside / "pkg", target_is_directory=True)
    (proj / "inner.py").symlink_to(proj / "sub" / "shared.py")  # a link inside the tree: linted once, by its name
    monkeypatch.chdir(tmp_path)
    checked = gl("check", "proj")
    assert sorted({line.split(":")[0] for line in checked.stdout.splitlines() if " GPU" in line}) == [
        "proj/inner.py", "proj/own.py"], checked.stdout
    result = gl("fix", "proj")
    assert result.exit_code == 1, result.output
    assert (outside / "lib.py").read_text() == TRAIN and (outside / "pkg" / "m.py").read_text() == TRAIN
    assert (proj / "own.py").read_text() == FIXED and (proj / "sub" / "shared.py").read_text() == FIXED
    assert (proj / "linked.py").is_symlink() and (proj / "inner.py").is_symlink()
    named = gl("fix", "proj/linked.py", "proj/linkdir")  # named: followed, as ruff does
    assert named.exit_code == 1, named.output
    assert (outside / "lib.py").read_text() == FIXED and (outside / "pkg" / "m.py").read_text() == FIXED
    assert (proj / "linked.py").is_symlink()
