"""Which files to lint: recurse directories, skip the usual and what `.gitignore` ignores."""

from __future__ import annotations

import os
import re
from dataclasses import field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Iterator, Optional

from gpulint.records import dataclass

DEFAULT_EXCLUDES = frozenset({
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "build", "dist", "__pycache__",
    "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".gpulint_cache", ".eggs",
    ".ipynb_checkpoints", "site-packages",
})
PYTHON_SUFFIXES = (".py", ".pyi")
LINT_SUFFIXES = PYTHON_SUFFIXES + (".ipynb",)  # what `check` and `fix` look for in directories


class PathError(Exception):
    """A path given on the command line that cannot be linted (exit 2)."""


_SHEBANG = re.compile(rb"#![^\r\n]*\bpython[0-9.]*\b")


def not_python_reason(name: str, raw: bytes) -> Optional[str]:
    """Why a file named on the command line is not Python source, or None when it is.

    A file named explicitly is linted when it has one of the suffixes directories are searched
    for (.py, .pyi, .ipynb) or .pyw, or no suffix and a python shebang, as pre-commit decides
    what is Python. Anything else (JSON, YAML) would parse as Python by accident and pass: it
    is a GPU000 finding instead.
    """
    suffix = os.path.splitext(os.path.basename(name))[1].lower()
    if suffix in PYTHON_SUFFIXES + (".pyw",) or name == "-":
        return None
    if suffix == "" and _SHEBANG.match(raw.lstrip(b"\xef\xbb\xbf")[:256]):
        return None
    if suffix == ".ipynb":  # read as a notebook (gpulint/notebook/), never as Python
        return None
    kind = f"a {suffix} file" if suffix else "no .py suffix and no python shebang"
    return f"not Python source ({kind}): gpulint lints .py and .pyi files"


def glob_to_regex(pattern: str) -> str:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            if pattern[i:i + 3] == "**/":
                out.append("(?:.*/)?")
                i += 3
                continue
            if pattern[i:i + 2] == "**":
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class IgnoreRule:
    regex: re.Pattern
    negate: bool
    dir_only: bool


def parse_gitignore(text: str) -> list[IgnoreRule]:
    rules = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate:
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        body = glob_to_regex(line)
        regex = re.compile(("^" if anchored else "^(?:.*/)?") + body + "$")
        rules.append(IgnoreRule(regex, negate, dir_only))
    return rules


@lru_cache(maxsize=1024)
def _gitignore_rules(directory: str) -> tuple[IgnoreRule, ...]:
    from gpulint.core.source import SourceError, read_bytes

    path = os.path.join(directory, ".gitignore")
    if not os.path.lexists(path):
        return ()
    try:  # a FIFO or a device named .gitignore must not block the walk
        raw, _ = read_bytes(Path(path), 4 * 1024 * 1024)
    except SourceError:
        return ()
    return tuple(parse_gitignore(raw.decode("utf-8", errors="replace")))


@lru_cache(maxsize=4096)
def _git_root(start: Path) -> Optional[Path]:
    for candidate in [start, *start.parents]:
        if (candidate / ".git").exists():
            return candidate
    return None


@lru_cache(maxsize=4096)
def _ignore_chain(directory: Path) -> tuple[Path, ...]:
    """The directories from the git root down to `directory` that hold ignore rules.

    Cached per directory: discovery asks once per file, and walking up the parents each
    time made it a third of a warm (cached) run.
    """
    root = _git_root(directory)
    if root is None:
        return ()
    chain = []
    for candidate in [directory, *directory.parents]:
        if _gitignore_rules(str(candidate)):
            chain.append(candidate)
        if candidate == root:
            break
    return tuple(reversed(chain))


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


@dataclass
class Walker:
    """Finds Python files under the given paths. Errors are collected, not raised."""

    respect_gitignore: bool = True
    extra_excludes: tuple[str, ...] = ()
    errors: list[tuple[str, str]] = field(default_factory=list)
    suffixes: tuple[str, ...] = PYTHON_SUFFIXES  # the files a directory is searched for

    def is_gitignored(self, path: Path, is_dir: bool) -> bool:
        if not self.respect_gitignore:
            return False
        ignored = False
        for base in _ignore_chain(path.parent):
            try:
                relative = path.relative_to(base).as_posix()
            except ValueError:
                continue
            for rule in _gitignore_rules(str(base)):
                if rule.dir_only and not is_dir:
                    continue
                if rule.regex.match(relative):
                    ignored = not rule.negate
        return ignored

    def excluded_name(self, name: str) -> bool:
        return name in DEFAULT_EXCLUDES or any(re.fullmatch(glob_to_regex(p), name) for p in self.extra_excludes)

    def files(self, paths: Iterable[Path]) -> Iterator[Path]:
        """The files to lint under `paths`, each once. Links are followed as ruff follows them, but
        never out of `paths`: a linked folder found while walking is not entered (a folder named
        on the command line is, link or not), and a linked file whose target lies outside every
        folder named is skipped (`fix` would rewrite a file the user did not ask about); named
        itself, it is linted."""
        paths = list(paths)
        roots = [os.path.realpath(p) for p in paths if os.path.isdir(p)]
        seen: set[str] = set()
        for path in paths:
            if not os.path.lexists(path):
                raise PathError(f"{path}: no such file or directory")
            if path.is_dir():
                yield from self._walk(path, seen, roots)
            else:
                key = os.path.realpath(path)
                if key not in seen:
                    seen.add(key)
                    yield path  # explicit files are always linted

    def _walk(self, top: Path, seen: set[str], roots: list[str]) -> Iterator[Path]:
        def onerror(exc: OSError) -> None:
            self.errors.append((str(exc.filename or top), exc.strerror or str(exc)))

        for dirpath, dirnames, filenames in os.walk(top, onerror=onerror, followlinks=False):
            base = Path(dirpath)
            real_base = os.path.realpath(dirpath)  # once per folder: a plain file's real path is this + its name
            ignores = self.respect_gitignore and bool(_ignore_chain(base))  # no rules above: no test per file
            dirnames[:] = sorted(
                d for d in dirnames
                if not self.excluded_name(d) and not (ignores and self.is_gitignored(base / d, is_dir=True))
            )
            for name in sorted(filenames):
                if not name.endswith(self.suffixes) or self.excluded_name(name):
                    continue
                path = base / name
                if ignores and self.is_gitignored(path, is_dir=False):
                    continue
                link = os.path.islink(path)
                key = os.path.realpath(path) if link else os.path.join(real_base, name)
                if key in seen or (link and not (os.path.exists(path) and _inside(key, roots))):
                    continue
                seen.add(key)
                yield path
