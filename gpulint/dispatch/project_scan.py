"""The project pass: every file's facts, read once per content and remembered between runs.

Before the files are linted, each project they belong to is scanned with CPython's `ast`
(project/facts.py). A file's facts are keyed by the SHA-256 of its bytes, so a warm run reads
and hashes the project's files but parses only those that changed. The facts of one project
live in one JSON file in the results cache directory, written atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Optional, Sequence

from gpulint.core.source import SourceError, decode_source, read_bytes
from gpulint.engine.cache import PROJECT_FACTS_DIR, ResultCache
from gpulint.engine.files import Walker
from gpulint.notebook import is_notebook, notebook_code
from gpulint.project.facts import FACTS_VERSION, FileFacts, facts_of_text
from gpulint.project.view import (
    FactsSource,
    Project,
    ProjectView,
    find_root,
    scan_files,
)

MAX_FACTS_BYTES = 2 * 1024 * 1024  # larger files are generated data: no facts worth reading
MAX_STORE_BYTES = 512 * 1024 * 1024  # a project's facts file larger than this is damaged: start over
PARALLEL_THRESHOLD = 64  # fewer files to read than this: one process is faster than a pool
# A root with more Python files than this (a home directory under git, a monorepo) is not
# scanned whole: the linted files' own folders stand in for it.
MAX_PROJECT_FILES = 20_000


class FactsCache(FactsSource):
    """Facts per file content; `store` is the JSON file that keeps them between runs (None: memory only)."""

    def __init__(self, cache: Optional[ResultCache] = None, store: str = "", linter: str = "") -> None:
        self.cache = cache
        self.store = store  # the side file's name inside the cache directory
        self.key = f"{FACTS_VERSION}|{linter}"
        self.entries: dict[str, tuple[str, dict]] = {}
        self.known: dict[str, Optional[FileFacts]] = {}  # this run's answers, by absolute path
        self.dirty = False
        raw = cache.read_blob(store, MAX_STORE_BYTES) if cache is not None else None
        if raw is not None:
            try:
                data = json.loads(raw)
                if isinstance(data, dict) and data.get("key") == self.key and isinstance(data.get("files"), dict):
                    self.entries = {k: (v[0], v[1]) for k, v in data["files"].items()
                                    if isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)
                                    and isinstance(v[1], dict)}
            except (ValueError, TypeError, KeyError, IndexError, RecursionError, MemoryError):
                self.entries = {}

    def prefetch(self, paths: Sequence[Path], workers: int) -> None:
        """Answer every path now: cached facts for unchanged bytes, the others computed in parallel."""
        misses: list[str] = []
        for path in paths:
            name = os.path.abspath(path)
            raw = _read(path)
            if raw is None:
                self.known[name] = None
                continue
            facts = self._cached(name, hashlib.sha256(raw).hexdigest())
            if facts is not None:
                self.known[name] = facts
            else:
                misses.append(name)
        if not misses:
            return
        if workers > 1 and len(misses) >= PARALLEL_THRESHOLD:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
            with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method)) as pool:
                results = list(pool.map(_facts_json_of, misses, chunksize=16))
        else:
            results = [_facts_json_of(n) for n in misses]
        for name, (digest, data) in zip(misses, results):
            self.known[name] = FileFacts.from_json(data) if data is not None else None
            if data is not None:
                self.entries[name] = (digest, data)  # the digest of the very bytes the facts come from
                self.dirty = True

    def _cached(self, name: str, digest: str) -> Optional[FileFacts]:
        entry = self.entries.get(name)
        if entry is None or entry[0] != digest:
            return None
        try:
            return FileFacts.from_json(entry[1])
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def __call__(self, path: Path) -> Optional[FileFacts]:
        name = os.path.abspath(path)
        if name not in self.known:
            self.prefetch([path], workers=1)
        return self.known.get(name)

    def save(self) -> None:
        if self.cache is None or not self.dirty:
            return
        data = json.dumps({"key": self.key, "files": {k: list(v) for k, v in self.entries.items()}},
                          separators=(",", ":")).encode()
        self.cache.write_blob(self.store, data)  # False: not writable, the next run computes again


def _read(path: Path) -> Optional[bytes]:
    try:
        return read_bytes(Path(path), MAX_FACTS_BYTES)[0]  # never blocks on a FIFO named *.py
    except SourceError:
        return None  # unreadable, or larger than MAX_FACTS_BYTES


def _facts_json_of(name: str) -> tuple[str, Optional[dict]]:
    """Worker: the digest of one file's bytes and their facts as plain data (None: unreadable or not Python)."""
    raw = _read(Path(name))
    if raw is None:
        return "", None
    digest = hashlib.sha256(raw).hexdigest()
    try:
        text = notebook_code(raw) if is_notebook(name) else decode_source(raw, Path(name)).text
    except SourceError:
        return digest, None
    facts = facts_of_text(text) if text is not None else None
    return digest, (facts.to_json() if facts is not None else None)


def project_roots(files: Sequence[Path], arguments: Sequence[Path]) -> dict[Path, list[Path]]:
    """Group the linted files by the project root each belongs to."""
    directories = [os.path.join(os.path.abspath(a), "") for a in arguments if os.path.isdir(a)]  # end with "/"
    groups: dict[Path, list[Path]] = {}
    marked: dict[str, bool] = {}
    for path in files:
        absolute = os.path.abspath(path)
        fallback = next((Path(d) for d in directories if absolute.startswith(d)), None)
        groups.setdefault(find_root(Path(absolute), fallback, marked), []).append(path)
    return groups


def _project_files(root: Path, members: Sequence[Path]) -> list[Path]:
    walker = Walker()
    found: list[Path] = []
    try:
        for path in walker.files([root]):
            found.append(path)
            if len(found) > MAX_PROJECT_FILES:
                folders = sorted({Path(os.path.abspath(m)).parent for m in members})
                found = [p for folder in folders for p in Walker().files([folder])]
                break
    except Exception:  # noqa: BLE001 - the project pass sharpens precision; it must never stop a run
        found = []
    known = {os.path.abspath(p) for p in found}
    return found + [m for m in members if os.path.abspath(m) not in known]


def scan_projects(files: Sequence[Path], arguments: Sequence[Path], cache: Optional[ResultCache] = None,
                  workers: int = 1) -> dict[str, ProjectView]:
    """The project view of every linted file (keyed by str(path)); files outside any scan get none."""
    views: dict[str, ProjectView] = {}
    for root, members in project_roots(files, arguments).items():
        store = f"{PROJECT_FACTS_DIR}/{hashlib.sha256(str(root).encode()).hexdigest()}.json"
        facts = FactsCache(cache, store, cache.run_key if cache is not None else "")
        paths = _project_files(root, members)
        facts.prefetch(paths, workers)
        project: Project = scan_files(root, paths, facts)
        facts.save()
        for path in members:
            view = project.view(path)
            if view is not None:
                views[str(path)] = view
    return views
