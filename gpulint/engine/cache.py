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
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Sequence

from gpulint import __version__
from gpulint.config import Settings
from gpulint.engine.findings import Finding

CACHE_DIR_NAME = ".gpulint_cache"
ENV_CACHE_DIR = "GPULINT_CACHE_DIR"
FORMAT = "v1"
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by gpulint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


class CacheError(Exception):
    """The cache directory cannot be used as asked (shown to the user as one line)."""


def default_cache_dir() -> Path:
    return Path(os.environ.get(ENV_CACHE_DIR) or CACHE_DIR_NAME)


@lru_cache(maxsize=1)
def linter_fingerprint() -> str:
    """Identifies this gpulint build, rule set included: a change to any of its source files changes it."""
    import importlib.metadata

    import gpulint

    try:
        libcst_version = importlib.metadata.version("libcst")  # without importing it
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a vendored copy
        libcst_version = "?"
    digest = hashlib.sha256()
    digest.update(f"{__version__}|{libcst_version}|{sys.version_info[:3]}".encode())
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
        directory = Path(directory) if directory is not None else default_cache_dir()
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
        """The cached findings for `key`, or None when absent, unreadable or corrupt."""
        try:
            with open(self._entry(key), "rb") as handle:
                data = json.loads(handle.read())
            if not isinstance(data, dict) or data.get("key") != key:
                return None
            items = data["findings"]
            if not isinstance(items, list):
                return None
            return [Finding.from_dict({**item, "path": path}) for item in items]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def put(self, key: str, findings: Sequence[Finding]) -> bool:
        """Store findings atomically; False (and nothing written) when the cache is not writable."""
        items = []
        for finding in findings:
            item: dict[str, Any] = finding.to_dict()
            item.pop("path", None)
            items.append(item)
        payload = json.dumps({"key": key, "findings": items}, separators=(",", ":")).encode()
        entry = self._entry(key)
        try:
            self._prepare()
            entry.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=entry.parent)
        except OSError:
            return False
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
            os.replace(tmp, entry)
            return True
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False

    def _prepare(self) -> None:
        """Create the directory with its CACHEDIR.TAG and .gitignore once."""
        tag = self.directory / "CACHEDIR.TAG"
        if tag.exists():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        for name, content in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", "# created by gpulint\n*\n")):
            target = self.directory / name
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.directory)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(content)
            os.replace(tmp, target)


def is_gpulint_cache(directory: Path) -> bool:
    try:
        with open(directory / "CACHEDIR.TAG", encoding="utf-8", errors="replace") as handle:
            return "gpulint" in handle.read()
    except OSError:
        return False


def clean(directory: Optional[Path] = None) -> Optional[Path]:
    """Remove a gpulint cache directory; None when there was none.

    Refuses (CacheError) a directory that lacks gpulint's CACHEDIR.TAG, so a mistyped
    `--cache-dir` can never delete anything else.
    """
    import shutil

    directory = Path(directory) if directory is not None else default_cache_dir()
    if not os.path.lexists(directory):
        return None
    if directory.is_symlink() or not directory.is_dir():
        raise CacheError(f"{directory} is not a gpulint cache directory; not removed")
    if not is_gpulint_cache(directory):
        raise CacheError(f"{directory} has no gpulint CACHEDIR.TAG; not removed")
    errors: list[str] = []
    if sys.version_info >= (3, 12):
        shutil.rmtree(directory, onexc=lambda func, path, exc: errors.append(f"{path}: {exc}"))
    else:
        shutil.rmtree(directory, onerror=lambda func, path, exc: errors.append(f"{path}: {exc[1]}"))
    if errors:
        raise CacheError(f"could not remove all of {directory}: {errors[0]}")
    return directory
