"""A private file-system view for one verification run: the user's folders, mirrored, never touched.

Every run (original, rewritten, each repeat) gets a fresh sandbox folder. Under `fs/` it
mirrors, at the same absolute paths, the folders the run may write to by relative path: the
user's working directory and the script's folder (or project root). Small files are copied,
large files and folders beyond a budget are symbolic links to the user's files, and each
ancestor folder holds links to its other entries so that `../data` still resolves. The guard
(guard.py) makes the links copy-on-write. Rewritten files (the script and the project's own
modules it imports) are written over their mirrors. The run's working directory is the mirror
of the user's; `__file__` is the mirror of the script. No torch here.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections import deque
from dataclasses import field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional

from gpulint.records import dataclass

COPY_MAX_BYTES = 1 << 20  # files up to this size are copied into the sandbox
COPY_BUDGET_BYTES = 64 << 20  # at most this much is copied per run; the rest is linked
ENTRY_BUDGET = 10_000  # entries mirrored one by one; deeper folders beyond it are linked whole
ANCESTOR_ENTRY_CAP = 2_000  # links made in each ancestor folder (for ../ paths)
NEVER_WALK = frozenset({
    ".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".tox", ".nox", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".gpulint_cache", ".ipynb_checkpoints",
})


@dataclass
class MirrorStats:
    copied_files: int = 0
    copied_bytes: int = 0
    linked_files: int = 0
    linked_dirs: int = 0
    roots: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return (f"{self.copied_files} files copied ({self.copied_bytes / (1 << 20):.1f} MiB), "
                f"{self.linked_files} large files and {self.linked_dirs} folders linked copy-on-write")


def short_temp_base() -> Optional[str]:
    """/tmp when usable: multiprocessing puts unix sockets (at most 107 bytes of path) in the run's TMPDIR."""
    return "/tmp" if os.name == "posix" and os.path.isdir("/tmp") and os.access("/tmp", os.W_OK) else None


def outermost(paths: Iterable[Path]) -> list[Path]:
    """Drop paths inside another one of the list."""
    unique = sorted({Path(os.path.realpath(p)) for p in paths}, key=lambda p: (len(p.parts), str(p)))
    kept: list[Path] = []
    for path in unique:
        if not any(path == k or k in path.parents for k in kept):
            kept.append(path)
    return kept


class Sandbox:
    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.fs = self.folder / "fs"
        self.tmp = self.folder / "tmp"  # replaced by a short path in build(): unix sockets allow 107 bytes
        self.stats = MirrorStats()
        self._copied = 0
        self._entries = 0

    def mirror(self, original: Path) -> Path:
        """Where `original` (an absolute path) appears inside the sandbox."""
        absolute = Path(os.path.realpath(original))
        return self.fs.joinpath(*absolute.parts[1:])

    def original(self, path: str) -> str:
        """The user's path for a path inside the mirror (other paths are returned as they are)."""
        prefix = str(self.fs)
        if path == prefix:
            return "/"
        if path.startswith(prefix + os.sep):
            return path[len(prefix):]
        return path

    # --- building ---------------------------------------------------------------------------------
    def build(self, roots: Iterable[Path], overrides: Mapping[Path, bytes] = {},
              exclude: Iterable[Path] = ()) -> MirrorStats:
        """Mirror `roots` (and links in their ancestors), then write `overrides` over their mirrors."""
        self.fs.mkdir(parents=True)
        self.tmp = Path(tempfile.mkdtemp(prefix="gv-", dir=short_temp_base()))
        excluded = [Path(os.path.realpath(p)) for p in (*exclude, self.folder, self.tmp)]
        kept = outermost(roots)
        self.stats.roots = [str(r) for r in kept]
        for root in kept:
            self._ancestors(root, excluded)
        for root in kept:
            self._tree(root, excluded)
        for original, data in overrides.items():
            self._override(Path(os.path.realpath(original)), data)
        return self.stats

    def _is_excluded(self, path: Path, excluded: list[Path]) -> bool:
        return any(path == e or path in e.parents for e in excluded)

    def _real_dir(self, target: Path) -> None:
        """Make `target` and every folder above it (inside the mirror) a real folder, never a link.

        A mirror folder made earlier as a link (an ancestor's entry) is replaced by a real folder
        of links; nothing is ever created through a link, which would write into the user's folder.
        """
        current = self.fs
        for part in target.relative_to(self.fs).parts:
            current = current / part
            if os.path.islink(current):
                source = Path(os.path.realpath(current))
                os.unlink(current)
                current.mkdir()
                try:
                    names = os.listdir(source)
                except OSError:
                    names = []
                for name in names:
                    os.symlink(source / name, current / name)
            elif not current.exists():
                current.mkdir()
        self._check_inside(target / "x")

    def _check_inside(self, path: Path) -> None:
        """The last line of defence: what the sandbox writes must land in the sandbox."""
        real_parent = os.path.realpath(path.parent)
        fs = os.path.realpath(self.fs)
        if real_parent != fs and not real_parent.startswith(fs + os.sep):
            raise OSError(f"refusing to write {path}: it resolves outside the sandbox, to {real_parent}")

    def _ancestors(self, root: Path, excluded: list[Path]) -> None:
        chain = [root, *root.parents][::-1]  # "/", ..., root
        for parent, child in zip(chain, chain[1:]):
            target = self.mirror(parent)
            self._real_dir(target)
            try:
                names = sorted(os.listdir(parent))[:ANCESTOR_ENTRY_CAP]
            except OSError:
                continue
            for name in names:
                source = parent / name
                if source == child or self._is_excluded(source, excluded) or source in excluded:
                    continue
                if any(source == e or source in e.parents for e in excluded):
                    continue  # a folder holding the work folder: linking it would let ../ reach our files
                link = target / name
                if not os.path.lexists(link):
                    try:
                        os.symlink(source, link)
                    except OSError:
                        pass

    def _tree(self, root: Path, excluded: list[Path]) -> None:
        base = self.mirror(root)
        if os.path.islink(base):
            os.unlink(base)
        self._real_dir(base)
        queue: deque[Path] = deque([root])
        while queue:
            folder = queue.popleft()
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            mirrored = self.mirror(folder)  # `folder` is a real path: only its entries may be links
            for entry in entries:
                source = Path(entry.path)
                if self._is_excluded(source, excluded):
                    continue
                target = mirrored / entry.name  # not mirror(source): that resolves a link to its target
                self._entries += 1
                self._check_inside(target)
                try:
                    if entry.is_symlink():
                        os.symlink(os.readlink(source), target)
                    elif entry.is_dir(follow_symlinks=False):
                        if (entry.name in NEVER_WALK or self._entries > ENTRY_BUDGET
                                or (source / "pyvenv.cfg").exists()):
                            os.symlink(source, target)
                            self.stats.linked_dirs += 1
                        else:
                            target.mkdir()
                            queue.append(source)
                    elif entry.is_file(follow_symlinks=False):
                        size = entry.stat(follow_symlinks=False).st_size
                        if size <= COPY_MAX_BYTES and self._copied + size <= COPY_BUDGET_BYTES:
                            shutil.copy2(source, target, follow_symlinks=False)
                            self._copied += size
                            self.stats.copied_files += 1
                            self.stats.copied_bytes += size
                        else:
                            os.symlink(source, target)
                            self.stats.linked_files += 1
                    else:
                        os.symlink(source, target)  # FIFOs, sockets, devices: never copied
                        self.stats.linked_files += 1
                except OSError:
                    if not os.path.lexists(target):
                        try:
                            os.symlink(source, target)
                        except OSError:
                            pass

    def _override(self, original: Path, data: bytes) -> None:
        target = self.mirror(original)
        self._real_dir(target.parent)
        try:
            mode: Optional[int] = stat.S_IMODE(os.stat(original).st_mode)
        except OSError:
            mode = None
        if os.path.lexists(target):
            os.unlink(target)
        self._check_inside(target)
        target.write_bytes(data)
        if mode is not None:
            os.chmod(target, mode | stat.S_IRUSR | stat.S_IWUSR)

    # --- removing ---------------------------------------------------------------------------------
    def remove_mirror(self) -> Optional[str]:
        """Delete the mirror and the run's temp folder, keeping the run's log and events beside them."""
        problems = [remove_tree(path) for path in (self.fs, self.tmp)]
        return "; ".join(p for p in problems if p) or None

    def remove(self) -> Optional[str]:
        """Delete the sandbox (links are removed, never followed); returns a problem, if any."""
        return remove_tree(self.folder)


def remove_tree(folder: Path) -> Optional[str]:
    def retry(func: Callable[[str], object], path: str, exc_info: object) -> None:  # shutil's onerror
        try:
            os.chmod(os.path.dirname(path), 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
            func(path)
        except OSError:
            pass

    if not os.path.lexists(folder):
        return None
    if os.path.islink(folder):
        os.unlink(folder)
        return None
    if sys.version_info >= (3, 12):
        shutil.rmtree(folder, onexc=retry)
    else:
        shutil.rmtree(folder, onerror=retry)
    return f"could not remove {folder}" if os.path.lexists(folder) else None


FINGERPRINT_LIMIT = 20_000  # files compared before and after a verification
# folders of tools and environments, not of the user's work: not compared, and the report says so
NOT_COMPARED = frozenset({"__pycache__", "node_modules", ".venv", "venv", ".tox", ".nox", ".mypy_cache",
                          ".pytest_cache", ".ruff_cache", ".gpulint_cache", ".ipynb_checkpoints"})


class Fingerprint(dict):
    """path -> (size, mtime_ns, inode, mode) of every file compared, and what was not compared."""

    def __init__(self) -> None:
        super().__init__()
        self.skipped: dict[str, int] = {}  # a kind of folder -> how many were left out
        self.unchecked: list[str] = []  # folders that could not be read, the limit reached

    def not_checked(self) -> list[str]:
        """In words, for the report: never "not changed" about a tree that was not compared."""
        kinds = [f"{n} {name} folder{'s' if n != 1 else ''}" for name, n in sorted(self.skipped.items())]
        return kinds + self.unchecked


def fingerprint(roots: Iterable[Path], exclude: Iterable[Path] = (), limit: int = FINGERPRINT_LIMIT) -> Fingerprint:
    """What "your files were not changed" is checked on: every file under `roots`, .git and other
    version-control folders included, and the folders and files their symbolic links lead to
    (keyed by their real paths), up to `limit` files. Environments and caches (NOT_COMPARED, a
    folder holding pyvenv.cfg) are left out and counted in `skipped`."""
    excluded = {os.path.realpath(p) for p in exclude}
    seen = Fingerprint()
    kept = outermost(roots)
    walked = {str(r) for r in kept}
    queue: deque[str] = deque(str(r) for r in kept)

    def inside(real: str) -> bool:
        return any(real == str(r) or real.startswith(str(r) + os.sep) for r in kept)

    def follow(link: str) -> None:
        """A link out of the roots: its target is compared too (a write through it reaches it)."""
        real = os.path.realpath(link)
        if inside(real) or real in excluded or real in walked or real in seen:
            return
        try:
            info = os.stat(real)
        except OSError:
            return  # dangling: the link itself is compared
        if stat.S_ISDIR(info.st_mode):
            walked.add(real)
            queue.append(real)
        else:
            seen[real] = (info.st_size, info.st_mtime_ns, info.st_ino, info.st_mode)

    while queue:
        folder = queue.popleft()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            seen.unchecked.append(f"{folder} ({exc.strerror or 'unreadable'})")
            continue
        for entry in entries:
            if entry.path in excluded:
                continue
            if len(seen) >= limit:
                seen.unchecked.append(f"the files past the first {limit:,}")
                return seen
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name in NOT_COMPARED or os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):
                    kind = "virtual environment" if entry.name not in NOT_COMPARED else entry.name
                    seen.skipped[kind] = seen.skipped.get(kind, 0) + 1
                else:
                    queue.append(entry.path)
                continue
            seen[entry.path] = (info.st_size, info.st_mtime_ns, info.st_ino, info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                follow(entry.path)
    return seen


def changes(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    """Files added, removed or changed between two fingerprints."""
    found = [f"changed {p}" for p in before if p in after and after[p] != before[p]]
    found += [f"removed {p}" for p in before if p not in after]
    found += [f"added {p}" for p in after if p not in before]
    return sorted(found)
