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
import re
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from gpulint.analysis.device import ACCELERATOR_EVIDENCE_BYTES
from gpulint.core.source import SourceError, decode_source, read_bytes
from gpulint.engine import guard
from gpulint.engine.cache import PROJECT_FACTS_DIR, ResultCache
from gpulint.engine.files import Walker
from gpulint.notebook import is_notebook, notebook_code
from gpulint.project.env_loops import DYNAMIC
from gpulint.project.facts import FACTS_VERSION, FileFacts, ImportRef, facts_and_tree, facts_of_text
from gpulint.project.view import (
    FactsSource,
    Project,
    ProjectView,
    find_root,
    module_stem,
    own_accelerated,
    package_init,
    relative_to,
    scan_files,
)

MAX_FACTS_BYTES = 2 * 1024 * 1024  # larger files are generated data: no facts worth reading
MAX_STORE_BYTES = 512 * 1024 * 1024  # a project's facts file larger than this is damaged: start over
PARALLEL_THRESHOLD = 64  # fewer files to read than this: one process is faster than a pool
# Linting fewer files than this share of their project reads only the files their views need (their
# imports, transitively, and the files that import them): `gpulint check one_file.py` in a big tree.
PART_OF_PROJECT = 0.5
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
        # the files (absolute paths) whose trees, parsed here, are handed over to their linting (engine/guard.py)
        self.hand_over: frozenset[str] = frozenset()
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
        """Answer every path now: cached facts for unchanged bytes, the others computed in parallel (with one
        worker, each as its file is read: the bytes are not read and hashed again)."""
        misses: list[str] = []
        for path in paths:
            name = os.path.abspath(path)
            raw = _read(path)
            if raw is None:
                self.known[name] = None
                continue
            digest = hashlib.sha256(raw).hexdigest()
            facts = self._cached(name, digest)
            if facts is not None:
                self.known[name] = facts
            elif workers <= 1:
                self._computed(name, digest, _facts_of_bytes(name, raw, name in self.hand_over))
            else:
                misses.append(name)
        if not misses:
            return
        if len(misses) >= PARALLEL_THRESHOLD:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
            with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method)) as pool:
                results = list(pool.map(_facts_json_of, misses, chunksize=16))
        else:
            for name in misses:
                self._computed(name, *_facts_of(name, name in self.hand_over))
            return
        for name, (digest, data) in zip(misses, results):
            self.known[name] = FileFacts.from_json(data) if data is not None else None
            if data is not None:
                self.entries[name] = (digest, data)  # the digest of the very bytes the facts come from
                self.dirty = True

    def _computed(self, name: str, digest: str, facts: Optional[FileFacts]) -> None:
        """Facts computed in this process: kept as they are, put into plain data only for a cache that keeps them."""
        self.known[name] = facts
        if facts is not None and self.cache is not None:
            self.entries[name] = (digest, facts.to_json())
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
    digest, facts = _facts_of(name)
    return digest, (facts.to_json() if facts is not None else None)


def _facts_of(name: str, hand_over: bool = False) -> tuple[str, Optional[FileFacts]]:
    """The digest of one file's bytes and their facts (None: unreadable or not Python). The facts equal what
    their plain data decodes to (FileFacts.from_json), so one process takes them without that round trip.
    With `hand_over` (a Python file about to be linted in this process), its tree is kept for the linter."""
    raw = _read(Path(name))
    if raw is None:
        return "", None
    return hashlib.sha256(raw).hexdigest(), _facts_of_bytes(name, raw, hand_over)


def _facts_of_bytes(name: str, raw: bytes, hand_over: bool = False) -> Optional[FileFacts]:
    """The facts of one file's bytes, as `_facts_of` gives them."""
    notebook = is_notebook(name)
    try:
        text = notebook_code(raw) if notebook else decode_source(raw, Path(name)).text
    except SourceError:
        return None
    if text is None:
        return None
    if not hand_over or notebook:
        return facts_of_text(text)
    facts, tree = facts_and_tree(text)
    if facts is not None and tree is not None:
        guard.hand_over(facts.source, tree, len(text))
    return facts


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
                  workers: int = 1, hand_over: bool = False) -> dict[str, ProjectView]:
    """The project view of every linted file (keyed by str(path)); files outside any scan get none. With
    `hand_over` (the files are linted next, in this process or in processes forked from it), the trees
    parsed here of the linted files are kept for their linting (engine/guard.py `take_tree`)."""
    views: dict[str, ProjectView] = {}
    guard.drop_trees()
    for root, members in project_roots(files, arguments).items():
        store = f"{PROJECT_FACTS_DIR}/{hashlib.sha256(str(root).encode()).hexdigest()}.json"
        facts = FactsCache(cache, store, cache.run_key if cache is not None else "")
        if hand_over:
            facts.hand_over = frozenset(os.path.abspath(m) for m in members)
        paths = _project_files(root, members)
        if len(members) < PART_OF_PROJECT * len(paths):
            project = _partial_project(root, paths, members, facts)
        else:
            facts.prefetch(paths, workers)
            project = scan_files(root, paths, facts)
        facts.save()
        for path in members:
            view = project.view(path)
            if view is not None:
                views[str(path)] = view
    return views


def _partial_project(root: Path, paths: Sequence[Path], members: Sequence[Path], facts: FactsCache) -> Project:
    """The project as the members' views see it, from only the files those views read: every module the
    members import (in their functions too), transitively (dataset classes and model parts are followed through
    re-exports), every file that imports a member, transitively (the callers decide device, scaler and which
    models train), and the modules those callers import, transitively (their code ceilings), and every setup.py.
    Callers are found with a text test first (a file that imports module `pkg/data.py` names `data`), then
    confirmed by resolving its imports. The views are those of the whole project:
    tests/analysis/test_partial_project.py compares them file by file."""
    by_name = {name: path for path in paths if (name := relative_to(root, path)) is not None}
    missing: set[str] = set()  # files without facts (unreadable, not Python): not modules, as in a full scan
    index = _ImportIndex()
    while True:
        existing = [name for name in by_name if name not in missing]
        resolver = Project(root, {}, existing)

        def known(name: str) -> bool:
            if facts(by_name[name]) is None:
                missing.add(name)
                return False
            return True

        before = len(missing)
        starts = [n for m in members if (n := relative_to(root, m)) in by_name]
        needed, texts = _reach(resolver, by_name, starts, facts, known, index)
        if len(missing) == before:
            break  # no import resolved to a file without facts: the reach is exact
    # a script is a file no import of the project may reach, even one the resolver cannot follow: whether
    # any file spells a member's name in its imports (the text test first, then the file's facts)
    # (a member inside a package is never a script: only the others need the test)
    present = set(existing)
    stems = {module_stem(name) for name in starts if package_init(name) not in present}
    spelled: set[str] = set()
    pattern = _Words(stems)
    for name, raw in texts.items() if stems else ():
        found = facts(by_name[name]) if index.spells(name, raw, pattern) else None
        if found is not None:
            spelled |= stems & {w for ref in found.imports for w in (*ref.module.split("."), ref.name or "")}
    for name, raw in texts.items():
        # a file that builds objects from configuration while it steps an environment (FileFacts.env_calls'
        # DYNAMIC marker): its agent's class may be any module's, imported or not (ProjectView.env_called)
        if b"instantiate" in raw and b"hydra" in raw and name not in needed \
                and (found := facts(by_name[name])) is not None and DYNAMIC in found.env_calls:
            needed.add(name)
    for name in sorted(by_name):
        # the extension modules a setup.py compiles (FileFacts.extensions, cpp14_extensions), which importers
        # reach: the root's, and those of ops packages in folders (torch-ngp's raymarching/setup.py)
        if (name == "setup.py" or name.endswith("/setup.py")) and known(name):
            needed.add(name)
    return scan_files(root, [by_name[name] for name in sorted(needed)], facts, existing, spelled,
                      _accelerated(by_name, needed, texts, facts, known))


def _accelerated(by_name: dict[str, Path], needed: set[str], texts: dict[str, bytes], facts: FactsCache,
                 known: Callable[[str], bool]) -> bool:
    """ProjectView.accelerated_project over the whole project, reading facts beyond the views' files only
    for files whose text may hold such evidence (analysis/device.py ACCELERATOR_EVIDENCE_BYTES), first hit wins."""
    for name in sorted(needed):
        found = facts(by_name[name]) if known(name) else None
        if found is not None and own_accelerated(found):
            return True
    for name in sorted(by_name):
        if name in needed:
            continue
        raw = texts.get(name)
        if raw is None:
            raw = _read(by_name[name])
        if raw is None or not ACCELERATOR_EVIDENCE_BYTES.search(raw) or not known(name):
            continue
        found = facts(by_name[name])
        if found is not None and own_accelerated(found):
            return True
    return False


def _reach(resolver: Project, by_name: dict[str, Path], starts: list[str], facts: FactsCache,
           known: Callable[[str], bool], index: "_ImportIndex") -> tuple[set[str], dict[str, bytes]]:
    """The names of the files the views of `starts` read (see `_partial_project`), and the bytes of every
    file of the project that holds the word `import`."""

    def imports(name: str, lazy: bool = False) -> list[str]:
        """The modules `name` imports; with `lazy`, also those it imports in functions (a caller all the same:
        ProjectView.evaluated_only)."""
        found = facts(by_name[name])
        if found is None:
            return []
        refs = (*found.imports, *found.lazy_imports) if lazy else found.imports
        return [t for ref in refs for t in resolver.resolve(name, ref)]

    down: set[str] = set()
    pending = [s for s in starts if known(s)]
    while pending:
        name = pending.pop()
        if name in down:
            continue
        down.add(name)
        # a member's imports in functions too: its view follows them down (ProjectView.native_importees)
        pending.extend(t for t in imports(name, lazy=name in starts) if t not in down and known(t))
    callers: set[str] = set()
    frontier = {s for s in starts if s in down}
    # every file's import statements, read from its text without parsing it (a superset of the imports
    # its facts hold: statements in functions and strings included), for the files that spell a word an
    # import of the frontier must spell
    texts = {name: raw for name in by_name if (raw := _read(by_name[name])) is not None and b"import" in raw}
    written: dict[str, list[ImportRef]] = {}
    while frontier:
        words = {_module_word(name) for name in frontier}
        packages = any(name.endswith("__init__.py") for name in frontier)  # `from . import x` names no package
        spelled = _Words(words)
        confirmed: set[str] = set()
        for name, raw in texts.items():
            if name in callers or name in starts:
                continue
            if is_notebook(name):  # cells are JSON strings: no line starts with the import
                if not any(w.encode() in raw for w in words) and not packages:
                    continue
            elif not (packages and b"from ." in raw) and not index.spells(name, raw, spelled):
                continue
            if name not in written:
                written[name] = _written_imports(raw, is_notebook(name))
            refs = [r for r in written[name] if _may_reach(r, words, packages)]
            if any(frontier.intersection(resolver.resolve(name, ref)) for ref in refs) \
                    and known(name) and frontier & set(imports(name, lazy=True)):
                confirmed.add(name)
        callers |= confirmed
        frontier = confirmed
    # the modules the callers import, transitively: a caller's code ceiling comes from anything it imports
    # (ProjectView.ceiling_code), and a helper member takes its importers' ceilings; in functions too: the
    # losses a caller's factory imports there (ProjectView.bce_losses_around)
    around: set[str] = set()  # `down` is closed under the imports at module level only: walk it again
    pending = [t for c in callers for t in imports(c, lazy=True)]
    while pending:
        name = pending.pop()
        if name in around or name in callers or not known(name):
            continue
        around.add(name)
        pending.extend(imports(name, lazy=True))
    return down | callers | around, texts


_COMMENT = re.compile(r"#[^\n]*")
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n#;]+)", re.M)
_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]*(\([^)]*\)|[^\n#;]+)", re.M)


def _written_imports(raw: bytes, notebook: bool) -> list[ImportRef]:
    """The import bindings a file's text spells, found line by line (backslash continuations joined)."""
    text = (notebook_code(raw) or "") if notebook else raw.decode("utf-8", errors="replace")
    text = _COMMENT.sub("", text.replace("\\\r\n", " ").replace("\\\n", " "))
    refs: list[ImportRef] = []
    for match in _IMPORT.finditer(text):
        for part in match.group(1).split(","):
            dotted = part.split(" as ")[0].strip()
            if dotted:  # `import a.b` binds `a` and reaches a.b (as project/facts.py records it)
                refs.append(ImportRef("", dotted.split(".", 1)[0], 0, None))
                refs.append(ImportRef("", dotted, 0, None))
    for match in _FROM.finditer(text):
        level, module = len(match.group(1)), match.group(2)
        for part in match.group(3).strip("()").split(","):
            name = part.split(" as ")[0].strip()
            if name:
                refs.append(ImportRef(name, module, level, name))
    return refs


_CONTINUATION_LINES = 50  # how far an open import statement (`(` or a backslash) is followed
# (the patterns start with a newline, a literal the regular expression engine skips to quickly)
_LINE = rb"\n[ \t]*(?:from|import)\b[^\n]*"
# an import statement's first line that may leave it open: a `(` (closed or not: a comment may hold
# the `)`), or a backslash at its end
_OPEN_IMPORT = re.compile(_LINE + rb"(?:\(|\\\r?(?=\n))")


class _Words:
    """The import-spelling test for a set of module words, in C-speed regular expressions."""

    def __init__(self, words: set[str]) -> None:
        alternatives = rb"\b(?:" + b"|".join(re.escape(w.encode()) for w in sorted(words)) + rb")\b"
        self.anywhere = re.compile(alternatives)
        self.on_import_line = re.compile(_LINE + alternatives)
        encoded = {w.encode() for w in words}
        # words the index answers for exactly: what `\w+` in a bytes pattern reads as one token
        self.tokens: Optional[frozenset[bytes]] = frozenset(encoded) \
            if all(_TOKEN.fullmatch(w) for w in encoded) else None


def _spells_import_of(raw: bytes, words: _Words) -> bool:
    """Whether an import statement may spell one of the words: on its first line, or on the lines after
    a first line left open by a `(` or a backslash (a superset: the imports found are then resolved)."""
    if words.anywhere.search(raw) is None:
        return False
    text = b"\n" + raw + b"\n"
    if words.on_import_line.search(text) is not None:
        return True
    for start, end in _open_regions(text):
        if words.anywhere.search(text, start, end) is not None:
            return True
    return False


def _open_regions(text: bytes) -> Iterator[tuple[int, int]]:
    """Where the lines after an import's open first line are read: from its last `(` or its backslash
    on, through the _CONTINUATION_LINES lines that follow."""
    for match in _OPEN_IMPORT.finditer(text):
        yield match.end(), _region_end(text, match.end())


def _region_end(text: bytes, start: int) -> int:
    end = start
    for _ in range(_CONTINUATION_LINES):
        end = text.find(b"\n", end + 1)
        if end < 0:
            return len(text)
    return end


_TOKEN = re.compile(rb"\w+")
_IMPORT_LINE = re.compile(rb"\n[ \t]*(?:from|import)\b([^\n]*)")


def import_words(raw: bytes) -> frozenset[bytes]:
    """Every word an import statement of the file may spell (`_spells_import_of`'s places, read once): a
    project's files are tested against the words of each round of callers, and one pass per file serves
    them all."""
    text = b"\n" + raw + b"\n"
    lines: list[bytes] = []
    for match in _IMPORT_LINE.finditer(text):  # one pass: the import lines, and the open ones among them
        rest = match.group(1)
        lines.append(rest)
        # where _OPEN_IMPORT's match would end: after a trailing backslash, else after the line's last `(`
        if rest.endswith((b"\\", b"\\\r")):
            start = match.end()
        elif b"(" in rest:
            start = match.start(1) + rest.rindex(b"(") + 1
        else:
            continue
        lines.append(text[start:_region_end(text, start)])
    return frozenset(_TOKEN.findall(b" ".join(lines)))


class _ImportIndex:
    """`_spells_import_of` for many files and many rounds: each file's words listed on first use."""

    def __init__(self) -> None:
        self.words: dict[str, frozenset[bytes]] = {}

    def spells(self, name: str, raw: bytes, words: _Words) -> bool:
        if words.tokens is None:  # a word the token index cannot answer for: the regular expressions
            return _spells_import_of(raw, words)
        found = self.words.get(name)
        if found is None:
            found = self.words[name] = import_words(raw)
        return not words.tokens.isdisjoint(found)


def _may_reach(ref: ImportRef, words: set[str], packages: bool) -> bool:
    """Whether an import could resolve to a module whose word is in `words` (cheap, before resolving it)."""
    if ref.name is not None and ref.name in words:
        return True
    if not ref.module:
        return packages and ref.level > 0
    return ref.module.rsplit(".", 1)[-1] in words


def _module_word(name: str) -> str:
    """The word an import of this module must spell: its file's stem, or its package's name."""
    parts = name.split("/")
    stem = parts[-1].rsplit(".", 1)[0]
    return parts[-2] if stem == "__init__" and len(parts) > 1 else stem
