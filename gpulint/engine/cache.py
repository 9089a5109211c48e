"""Results cache: a file whose bytes, settings and linter are unchanged is not linted again.

An entry is keyed by everything the findings depend on: the file's bytes and path, the
effective `Settings.fingerprint()`, the rule set, and the linter itself (gpulint version,
a digest of its own source files so an editable install never serves stale results,
the LibCST and Python versions). It stores the findings, not just "clean".

Entries live in `<cache dir>/v1/<2 hex>/<key>.json`. Each is written to a temporary file
and renamed into place, so concurrent gpulint processes (pre-commit, editors, CI shards)
only ever see complete entries; two writers of one key write the same content. An entry
that cannot be read or decoded is a miss, never an error. The directory holds a
`CACHEDIR.TAG` so backup tools skip it, and a `.gitignore` so it is never committed.

gpulint only ever writes into a directory it created itself, marked by its CACHEDIR.TAG:
`--cache-dir DIR` naming a directory that does not exist creates it; naming one that exists
and is not a gpulint cache (`.`, `~/.cache`) puts the cache in `DIR/.gpulint_cache` instead,
so no file of the user's is ever written, replaced or deleted. `clean` removes the files
gpulint wrote there and nothing else.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Sequence

from gpulint import ENV_CACHE_DIR, __version__
from gpulint.core.findings import Finding
from gpulint.core.settings import Settings
from gpulint.records import dataclass

CACHE_DIR_NAME = ".gpulint_cache"
FORMAT = "v1"
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by gpulint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


class CacheError(Exception):
    """The cache directory cannot be used as asked (shown to the user as one line)."""


_GITIGNORE = "# created by gpulint\n*\n"
_ENTRY = re.compile(r"[0-9a-f]{64}\.json")
_FORMAT_DIR = re.compile(r"v[0-9]+")
PROJECT_FACTS_DIR = "project-facts"  # one <sha256 of the root>.json per project (dispatch/project_scan.py)
RULE_OPTIONS_DIR = "rule-options"  # one <sha256 of the run key>.json per gpulint build: the options it knows
_MAX_ENTRY_BYTES = 16 * 1024 * 1024


def default_cache_dir() -> Path:
    return Path(os.environ.get(ENV_CACHE_DIR) or CACHE_DIR_NAME)


def requested_dir(requested: Optional[Path] = None) -> Path:
    """The directory `--cache-dir` or GPULINT_CACHE_DIR names, as a shell would read it: a leading
    `~` is the home directory (a quoted `'~/.cache'` in a CI file is no folder named `~`), and a
    symbolic link is the directory it points to, for `check` and `clean` alike."""
    path = Path(os.path.expanduser(requested if requested is not None else default_cache_dir()))
    return Path(os.path.realpath(path)) if os.path.islink(path) else path


def resolve_cache_dir(requested: Optional[Path] = None) -> Path:
    """Where the cache for `requested` lives: the directory itself when gpulint created it (or
    may create it), else gpulint's own subdirectory in it."""
    requested = requested_dir(requested)
    if is_gpulint_cache(requested) or not os.path.lexists(requested):
        return requested
    return requested / CACHE_DIR_NAME


def _libcst_version() -> str:
    """LibCST's version without importing it: its generated `_version.py` (version and commit), read as
    bytes. importlib.metadata, the usual way, costs a warm run 30 ms of imports."""
    import importlib.util

    spec = importlib.util.find_spec("libcst")
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            try:
                return hashlib.sha256(Path(folder, "_version.py").read_bytes()).hexdigest()
            except OSError:
                continue
    import importlib.metadata

    try:
        return importlib.metadata.version("libcst")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a vendored copy
        return "?"


@lru_cache(maxsize=1)
def linter_fingerprint() -> str:
    """Identifies this gpulint build, rule set included: a change to any of its source files changes it."""
    import gpulint

    digest = hashlib.sha256()
    digest.update(f"{__version__}|{_libcst_version()}|{sys.version_info[:3]}".encode())
    root = Path(gpulint.__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        try:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        except OSError:
            digest.update(path.name.encode() + b"\0?\0")
    return digest.hexdigest()[:24]


@dataclass(frozen=True)
class ResultCache:
    """Picklable handle on a cache directory, shared with worker processes."""

    directory: Path
    run_key: str  # the linter and rule-set part of every key, computed once per run

    @classmethod
    def open(cls, directory: Optional[Path] = None) -> "ResultCache":
        directory = resolve_cache_dir(directory)
        # The rule set is part of gpulint's sources (so of linter_fingerprint) and the enabled
        # rules are part of the settings; neither needs the rules imported (and LibCST with
        # them), so a run answered from the cache never loads LibCST.
        run_key = hashlib.sha256(f"{FORMAT}|{linter_fingerprint()}".encode()).hexdigest()
        return cls(directory, run_key)

    def key(self, path: Path, raw: bytes, settings: Settings, project: str = "") -> str:
        """`project`: the fingerprint of the project facts the file's rules may use."""
        digest = hashlib.sha256()
        digest.update(self.run_key.encode())
        digest.update(b"\0" + str(path).encode("utf-8", "surrogateescape") + b"\0")
        digest.update(settings.fingerprint().encode() + b"\0")
        digest.update(project.encode() + b"\0")
        digest.update(raw)
        return digest.hexdigest()

    def _entry(self, key: str) -> Path:
        return self.directory / FORMAT / key[:2] / f"{key}.json"

    def get(self, key: str, path: str) -> Optional[list[Finding]]:
        """The cached findings for `key`, or None when absent, unreadable or corrupt in any way."""
        from gpulint.core.source import SourceError, read_bytes

        try:
            raw, _ = read_bytes(self._entry(key), _MAX_ENTRY_BYTES)  # never blocks on a FIFO
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("key") != key:
                return None
            items = data["findings"]
            if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
                return None
            return [Finding.from_dict({**item, "path": path}) for item in items]
        except (SourceError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError,
                MemoryError):
            return None

    def put(self, key: str, findings: Sequence[Finding]) -> bool:
        """Store findings atomically; False (and nothing written) when the cache is not writable."""
        items = []
        for finding in findings:
            item: dict[str, Any] = finding.to_dict()
            item.pop("path", None)
            items.append(item)
        payload = json.dumps({"key": key, "findings": items}, separators=(",", ":")).encode()
        return self._write(self._entry(key), payload)

    def _rule_options_blob(self) -> str:
        return f"{RULE_OPTIONS_DIR}/{hashlib.sha256(self.run_key.encode()).hexdigest()}.json"

    def use_rule_options(self) -> bool:
        """Hand the registry the configuration options a previous run of this very build saved, so
        validating a configuration needs no rule imported (and no LibCST); False: none saved."""
        from gpulint.core.options import Option
        from gpulint.rules import use_options

        raw = self.read_blob(self._rule_options_blob())
        if raw is None:
            return False
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("key") != self.run_key:
                return False
            options = [Option.from_json(item) for item in data["options"]]
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, MemoryError):
            return False
        use_options(options)
        return True

    def store_rule_options(self) -> None:
        """Save the options for the next run, when this run loaded the rules anyway."""
        from gpulint.rules import all_options, all_rules

        if not all_rules.cache_info().currsize:
            return  # nothing imported them: the next run can do the same
        payload = {"key": self.run_key, "options": [o.to_json() for o in all_options()]}
        self.write_blob(self._rule_options_blob(), json.dumps(payload, separators=(",", ":")).encode())

    def read_blob(self, name: str, limit: int = _MAX_ENTRY_BYTES) -> Optional[bytes]:
        """The bytes of a side file of the cache (the project facts), or None: absent, unreadable, too large."""
        from gpulint.core.source import SourceError, read_bytes

        try:
            return read_bytes(self.directory / name, limit)[0]  # never blocks on a FIFO
        except SourceError:
            return None

    def write_blob(self, name: str, data: bytes) -> bool:
        """Store a side file atomically, only inside a directory gpulint owns (as for entries)."""
        return self._write(self.directory / name, data)

    def _write(self, target: Path, data: bytes) -> bool:
        """Write atomically (a temporary file renamed into place); False when the cache is not writable."""
        try:
            self._prepare()
            target.parent.mkdir(parents=True, exist_ok=True)
            import tempfile  # (not on import: a run that writes nothing never loads it)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=target.parent)
        except OSError:
            return False
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, target)
            return True
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False

    def _prepare(self) -> None:
        """Make sure the directory is gpulint's own: create it, tagged, when it does not exist.

        The directory is built under a temporary name and renamed into place, so it never
        exists without its tag (a concurrent gpulint would otherwise take it for a user's
        directory); an existing directory without gpulint's tag is never written to.
        """
        if is_gpulint_cache(self.directory):
            return
        if os.path.lexists(self.directory):
            raise OSError(f"{self.directory} is not a gpulint cache")  # appeared since open(): not ours
        parent = self.directory.parent
        parent.mkdir(parents=True, exist_ok=True)
        import tempfile  # (not on import: a run that writes nothing never loads it)
        building = tempfile.mkdtemp(prefix=".gpulint-cache-", dir=parent)
        try:
            for name, content in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", _GITIGNORE)):
                with open(os.path.join(building, name), "w", encoding="utf-8") as handle:
                    handle.write(content)
            if os.path.lexists(self.directory):
                raise FileExistsError(str(self.directory))
            os.rename(building, self.directory)
        except OSError:
            for name in ("CACHEDIR.TAG", ".gitignore"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(building, name))
            with contextlib.suppress(OSError):
                os.rmdir(building)
            if not is_gpulint_cache(self.directory):  # another gpulint may have won the race
                raise


def is_gpulint_cache(directory: Path) -> bool:
    """Whether `directory` (not a symlink) holds gpulint's CACHEDIR.TAG: the mark of a directory it created."""
    try:
        if os.path.islink(directory) or not os.path.isdir(directory):
            return False
        tag = Path(directory) / "CACHEDIR.TAG"
        if not stat.S_ISREG(os.lstat(tag).st_mode):
            return False
        with open(tag, encoding="utf-8", errors="replace") as handle:
            content = handle.read(4096)
        return content.startswith(CACHEDIR_TAG.splitlines()[0]) and "gpulint" in content
    except OSError:
        return False


@dataclass(frozen=True)
class Cleaned:
    directory: Path
    removed: int  # files
    left: int  # files gpulint did not write, left in place


def clean(directory: Optional[Path] = None) -> Optional[Cleaned]:
    """Remove what gpulint wrote in its cache directory; None when there is no cache.

    Only gpulint's own files go: its tag and .gitignore, its entries and their temporary
    files; directories are removed only once empty. Anything else (a file a user put there)
    stays, and so do the directories holding it. A directory without gpulint's tag is refused
    (CacheError): a mistyped `--cache-dir` can never delete anything. A link names the directory
    it points to, as for `check` (the link itself stays).
    """
    requested = requested_dir(directory)
    if not os.path.lexists(requested):
        return None
    if os.path.islink(requested) or not os.path.isdir(requested):
        raise CacheError(f"{requested} is not a gpulint cache directory; not removed")
    target = resolve_cache_dir(requested)
    if target != requested:
        if not os.path.lexists(target):
            return None
        if not is_gpulint_cache(target):
            raise CacheError(f"{target} is not a gpulint cache directory; not removed")
    removed, left, errors = 0, 0, []

    def remove(path: str) -> None:
        nonlocal removed
        try:
            os.unlink(path)
            removed += 1
        except OSError as exc:
            errors.append(f"{path}: {exc.strerror or exc}")

    def is_ours(root: str, name: str, top: bool) -> bool:
        if name.startswith(".tmp-"):
            return True
        if top:
            return name == "CACHEDIR.TAG" or (
                name == ".gitignore" and _read_small(os.path.join(root, name)) == _GITIGNORE)
        return _ENTRY.fullmatch(name) is not None

    for entry in sorted(os.listdir(target)):
        path = os.path.join(target, entry)
        if os.path.isdir(path) and not os.path.islink(path) and (_FORMAT_DIR.fullmatch(entry)
                                                                  or entry in (PROJECT_FACTS_DIR, RULE_OPTIONS_DIR)):
            for root, _dirs, files in os.walk(path, topdown=False):
                for name in files:
                    if is_ours(str(root), name, top=False):
                        remove(os.path.join(root, name))
                    else:
                        left += 1
                with contextlib.suppress(OSError):
                    os.rmdir(root)
        elif entry != "CACHEDIR.TAG" and is_ours(str(target), entry, top=True):
            remove(path)
        elif entry != "CACHEDIR.TAG":
            left += sum(len(files) for _, _, files in os.walk(path)) if os.path.isdir(path) else 1
    if errors:
        raise CacheError(f"could not remove all of {target}: {errors[0]}")
    # the tag goes last: until then the directory stays recognisably gpulint's
    remove(os.path.join(target, "CACHEDIR.TAG"))
    if left == 0:
        with contextlib.suppress(OSError):
            os.rmdir(target)
    if errors:
        raise CacheError(f"could not remove all of {target}: {errors[0]}")
    return Cleaned(target, removed, left)


def _read_small(path: str) -> Optional[str]:
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(4096)
    except OSError:
        return None
