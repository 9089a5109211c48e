"""`--diff-base REV`: the lines changed since a git revision, to report only findings on them.

What counts as changed is what a pull request from the current branch would show, plus the work
not committed yet: the working tree (staged and unstaged edits, and untracked files that are not
ignored) against the merge base of REV and HEAD (`git diff $(git merge-base REV HEAD)`), so the
commits REV gained after the branch left it are not counted. Renames are detected (`-M`): a moved
file's unchanged lines are not changed. A notebook is diffed as its JSON: a finding counts when
one of the .ipynb file's lines holding its code changed.

A finding is kept when one of its lines changed: its reported range or the statement it is on, or
a line was deleted from inside that statement. A GPU000 finding (a file that could not be checked)
is kept for every changed file, wherever its line is, and for a folder that could not be read: what
could not be checked must fail the gate.
"""

from __future__ import annotations

import os
import re
from dataclasses import field, replace
from pathlib import Path
from typing import Optional, Sequence

from gpulint.core.findings import Finding
from gpulint.engine.runner import FileResult
from gpulint.records import dataclass
from gpulint.rules.gpu000_invalid_file import InvalidFile

_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


class ChangesError(Exception):
    """Not a git repository, an unknown revision, no common history: exit 2 with the message."""


@dataclass
class FileChanges:
    whole: bool = False  # a new file (untracked, added, or too different to be a rename): every line
    lines: set[int] = field(default_factory=set)  # lines added or modified, in the working tree's file
    deleted_after: set[int] = field(default_factory=set)  # lines were deleted right after these

    def touches(self, first: int, last: int) -> bool:
        if self.whole or any(first <= line <= last for line in self.lines):
            return True
        return any(first <= line < last for line in self.deleted_after)


@dataclass
class Changes:
    revision: str
    bases: dict[str, str]  # repository root -> the commit compared with
    files: dict[str, FileChanges]  # real path -> its changes (absent: unchanged)

    def changed(self, path: Path) -> bool:
        return os.path.realpath(path) in self.files

    def keeps(self, finding: Finding) -> bool:
        changes = self.files.get(os.path.realpath(finding.path))
        if finding.code == InvalidFile.code:  # a changed file, or a folder, that could not be checked
            return changes is not None or os.path.isdir(finding.path)
        if changes is None:
            return False
        if finding.cell is not None:  # the .ipynb file's own lines
            return changes.touches(finding.cell.file_row, finding.cell.file_end_row)
        first, last = finding.location.row, finding.end_location.row
        if finding.noqa_rows[0] > 0:
            first, last = min(first, finding.noqa_rows[0]), max(last, finding.noqa_rows[1])
        return changes.touches(first, last)

    def describe(self) -> str:
        """"main (merge base 1a2b3c4d)" or "HEAD~2 (1a2b3c4d)"."""
        shown = sorted({base[:10] for base in self.bases.values()})
        return f"{self.revision} ({', '.join(shown)})" if shown else self.revision


def keep_changed(results: Sequence[FileResult], changes: Changes) -> tuple[list[FileResult], int]:
    """The results with only the findings on changed lines; how many were left out."""
    kept: list[FileResult] = []
    hidden = 0
    for result in results:
        findings = [f for f in result.findings if changes.keeps(f)]
        hidden += len(result.findings) - len(findings)
        kept.append(replace(result, findings=findings) if len(findings) != len(result.findings) else result)
    return kept, hidden


def changes_since(revision: str, files: Sequence[Path]) -> Changes:
    """The changed lines of `files` since `revision`, from each file's git repository."""
    roots: dict[str, list[Path]] = {}
    for path in files:
        root = repository_root(path)
        if root is None:
            raise ChangesError(f"{path} is not in a git repository: --diff-base compares with a git revision")
        roots.setdefault(root, []).append(path)
    changes = Changes(revision, {}, {})
    for root in roots:
        base = _merge_base(root, revision)
        changes.bases[root] = base
        changes.files.update(_diff(root, base))
        for name in _git(root, "ls-files", "-z", "--others", "--exclude-standard").split("\0"):
            if name:
                changes.files[os.path.realpath(os.path.join(root, name))] = FileChanges(whole=True)
    return changes


_roots: dict[str, Optional[str]] = {}


def repository_root(path: Path) -> Optional[str]:
    """The nearest folder above `path` holding `.git` (a folder, or a file in a worktree or submodule)."""
    folder = os.path.dirname(os.path.realpath(path))
    seen = []
    root: Optional[str] = None
    while True:
        if folder in _roots:
            root = _roots[folder]
            break
        seen.append(folder)
        if os.path.lexists(os.path.join(folder, ".git")):
            root = folder
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    for visited in seen:
        _roots[visited] = root
    return root


def _git(root: str, *args: str) -> str:
    import subprocess  # only when --diff-base is given: a plain run does not pay for the import

    try:
        done = subprocess.run(["git", "-C", root, *args], capture_output=True, timeout=120,
                              env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"})
    except FileNotFoundError:
        raise ChangesError("--diff-base needs git, which is not installed (or not on PATH)") from None
    except subprocess.TimeoutExpired:
        raise ChangesError(f"git {args[0]} in {root} took more than 120 s") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ChangesError(f"git {' '.join(args)} failed in {root}: {message[-1] if message else done.returncode}")
    return done.stdout.decode("utf-8", "surrogateescape")


def _merge_base(root: str, revision: str) -> str:
    """The commit a branch from `revision` to HEAD left it at (`revision` itself when it is an ancestor)."""
    if not revision.strip():
        raise ChangesError("--diff-base was given an empty revision (is the CI variable that names it set?)")
    try:
        commit = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}").strip()
    except ChangesError:
        raise ChangesError(f"--diff-base {revision}: no such revision in the git repository {root} "
                           "(a branch of a remote needs fetching first: git fetch origin)") from None
    try:
        _git(root, "rev-parse", "--verify", "--quiet", "HEAD")
    except ChangesError:
        raise ChangesError(f"the git repository {root} has no commit yet: nothing to compare with") from None
    try:
        return _git(root, "merge-base", commit, "HEAD").strip()
    except ChangesError:
        shallow = _git(root, "rev-parse", "--is-shallow-repository").strip() == "true"
        hint = (" (this clone is shallow: fetch the history, e.g. `git fetch --unshallow` or a checkout with "
                "fetch-depth: 0)" if shallow else "")
        raise ChangesError(f"--diff-base {revision}: it has no common history with HEAD in {root}{hint}") from None


def _diff(root: str, base: str) -> dict[str, FileChanges]:
    """Changed lines of the working tree against `base`, by real path. The diff's own options are set
    here, whatever the user's git configuration says (prefixes, external diff drivers, colour)."""
    text = _git(root, "-c", "core.quotePath=false", "diff", "--no-color", "--no-ext-diff", "--no-textconv",
                "--no-relative", "--unified=0", "--find-renames", "--ignore-submodules", "--src-prefix=a/",
                "--dst-prefix=b/", base, "--")
    return {os.path.realpath(os.path.join(root, name)): changes for name, changes in parse_diff(text).items()}


def parse_diff(text: str) -> dict[str, FileChanges]:
    """`git diff --unified=0` output -> the new side's path (relative) -> its changed lines."""
    found: dict[str, FileChanges] = {}
    current: Optional[FileChanges] = None
    old_left = new_left = 0
    for line in text.split("\n"):
        if old_left or new_left:  # inside a hunk: its lines, whatever they start with
            if line.startswith("-"):
                old_left -= 1
            elif line.startswith("+"):
                new_left -= 1
            continue
        if line.startswith("diff --git "):
            current = None
        elif line.startswith("+++ "):
            name = _path(line[4:])
            current = None if name is None else found.setdefault(name, FileChanges())
        elif line.startswith("Binary files ") and line.endswith(" differ"):  # no lines to compare: all of it
            name = _path(line[:-len(" differ")].rsplit(" and ", 1)[-1])
            if name is not None:
                found.setdefault(name, FileChanges()).whole = True
        elif current is not None:
            match = _HUNK.match(line)
            if match:
                old_left = int(match.group(1)) if match.group(1) is not None else 1
                start = int(match.group(2))
                new_left = int(match.group(3)) if match.group(3) is not None else 1
                if new_left == 0:
                    current.deleted_after.add(start)
                else:
                    current.lines.update(range(start, start + new_left))
    return found


def _path(field_text: str) -> Optional[str]:
    """A `+++ b/name` field's name (quoted C-style when it holds special characters); None for /dev/null."""
    text = field_text[:-1] if field_text.endswith("\t") else field_text  # git adds a tab after names with spaces
    if text == "/dev/null":
        return None
    if text.startswith('"') and text.endswith('"'):
        text = _unquote(text[1:-1])
    return text[2:] if text.startswith(("a/", "b/")) else text


def _unquote(text: str) -> str:
    """git's C-style quoting: \\n, \\", \\\\ and octal bytes (\\303\\251), back to the name's text."""
    out = bytearray()
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            if re.match(r"[0-7]{3}", text[i + 1:i + 4]):
                out.append(int(text[i + 1:i + 4], 8))
                i += 4
                continue
        out += char.encode("utf-8", "surrogateescape")
        i += 1
    return out.decode("utf-8", "surrogateescape")
