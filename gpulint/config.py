"""Configuration files and the command line: the settings each file is linted with.

`[tool.gpulint]` in pyproject.toml or a gpulint.toml, the closest one to each file, with its
`extend` chain; then the command line's selection on top. The options a file may set are the
general ones and every rule's own (`gpulint.rules.all_options`), validated by their kinds.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from gpulint.core.options import (
    LINE_LENGTH,
    LINT_TESTS,
    TORCH_VERSION,
    Option,
    OptionError,
    describe_value,
    version_text,
)
from gpulint.core.settings import ConfigError, Selection, Settings
from gpulint.records import dataclass
from gpulint.selectors import parse_codes

if TYPE_CHECKING:  # read only when a file is linted: the project's torch floor
    from gpulint.project.requirements import Declared, DeclaredRange, Stale

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

# Test code runs fp32 reference checks and bitwise comparisons, not training: the training-step,
# loader and optimizer rules stay silent there unless `lint-tests = true`.
DEFAULT_TEST_PATTERNS = ("test_*.py", "*_test.py", "conftest.py", "tests", "test", "testing", "test_utils")
DEFAULT_INCLUDE = ("*.py", "*.pyi", "*.ipynb")  # what a directory search finds (engine/files.py)


@dataclass
class CliOverrides:
    """Settings given on the command line; they win over every configuration file."""

    select: Optional[tuple[str, ...]] = None
    extend_select: Optional[tuple[str, ...]] = None
    ignore: Optional[tuple[str, ...]] = None
    preview: Optional[bool] = None
    lint_tests: Optional[bool] = None

    def apply(self, settings: Settings) -> Settings:
        """A layer on top of the configuration's selection, so the command line always wins:
        `--select` starts over, `--extend-select` / `--ignore` decide the rules they name."""
        if self.lint_tests is not None:
            settings = settings.with_values({LINT_TESTS.key: self.lint_tests})
        if self.select is not None or self.extend_select or self.ignore:
            layer = Selection(self.select, tuple(self.extend_select or ()), tuple(self.ignore or ()))
            settings = replace(settings, overrides=settings.overrides + (layer,))
        if self.preview is not None:
            settings = replace(settings, preview=self.preview)
        return settings


# ---------------------------------------------------------------------------------------------
# Configuration files: `[tool.gpulint]` in pyproject.toml, or a gpulint.toml (top-level keys).

CONFIG_FILENAMES = ("gpulint.toml", "pyproject.toml")  # in one directory the first one found wins

# the keys that shape the run rather than hold an option's value
STRUCTURE_KEYS = ("select", "extend-select", "ignore", "preview", "exclude", "extend-exclude", "force-exclude",
                  "per-file-ignores", "test-patterns", "extend", "include", "docs-url")


def options_by_key() -> dict[str, Option[Any]]:
    """Every option a configuration may set (the general ones and every rule's), by key."""
    from gpulint.rules import all_options

    return {option.key: option for option in all_options()}


def known_keys() -> frozenset[str]:
    return frozenset(STRUCTURE_KEYS) | frozenset(options_by_key())


PathLike = Union[str, "os.PathLike[str]"]


@lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> "re.Pattern[str]":
    from gpulint.engine.files import glob_to_regex

    return re.compile(glob_to_regex(pattern))


@lru_cache(maxsize=64)
def _compiled_globs(patterns: tuple[str, ...]) -> tuple[tuple[bool, "re.Pattern[str]"], ...]:
    """`PathPattern.matches`' reading of each pattern, once per pattern list: (matched against each name of the
    path: no `/` in it, its regex); a pattern empty once trimmed matches nothing and is left out."""
    out = []
    for pattern in patterns:
        pattern = pattern.strip()
        if pattern.startswith("./"):
            pattern = pattern[2:]
        pattern = pattern.rstrip("/")
        if pattern:
            out.append(("/" not in pattern, _glob_regex(pattern)))
    return tuple(out)


def _relative(path: str, base: str) -> Optional[str]:
    """`path` relative to `base` with `/` separators, or None when it is not below it (both absolute)."""
    prefix = base if base.endswith(os.sep) else base + os.sep
    if path.startswith(prefix) and os.sep == "/":  # the common case, without relpath's normalising
        return path[len(prefix):] or "."
    relative = os.path.relpath(path, base).replace(os.sep, "/")
    return None if relative == ".." or relative.startswith("../") else relative


@dataclass(frozen=True)
class PathPattern:
    """A glob from a config file, relative to that file's directory.

    A pattern without `/` matches a file or directory name anywhere below the directory
    (`conftest.py`, `*_test.py`, `legacy`); one with `/` matches the path relative to the
    directory (`scripts/*.py`, `tests/**`). A matching directory covers everything in it.
    A name pattern inherited through `extend` also matches below the extending file's
    directory (`root`).
    """

    base: str  # absolute directory
    pattern: str

    def matches(self, path: PathLike, root: Optional[str] = None) -> bool:
        pattern = self.pattern.strip()
        if pattern.startswith("./"):
            pattern = pattern[2:]
        pattern = pattern.rstrip("/")
        if not pattern:
            return False
        regex = _glob_regex(pattern)
        absolute = os.path.abspath(path)
        relative = _relative(absolute, self.base)
        inside = relative is not None
        if "/" not in pattern:
            below = relative if relative is not None else (_relative(absolute, root) if root else None)
            names = below.split("/") if below is not None else [os.path.basename(absolute)]
            return any(regex.fullmatch(name) for name in names)
        if not inside:
            return False
        parts = relative.split("/")  # type: ignore[union-attr]
        return any(regex.fullmatch("/".join(parts[:i])) for i in range(1, len(parts) + 1))


@dataclass(frozen=True)
class _Layer:
    """The validated keys of one configuration file (None: key not given)."""

    path: Path
    values: dict[str, Any]
    per_file_ignores: Optional[tuple[tuple[PathPattern, tuple[str, ...]], ...]] = None
    exclude: Optional[tuple[PathPattern, ...]] = None
    extend_exclude: tuple[PathPattern, ...] = ()
    extend: Optional[Path] = None
    include: Optional[tuple[PathPattern, ...]] = None


def _fail(path: Path, key: str, problem: str) -> ConfigError:
    return ConfigError(f"{path}: {table_name(path)} {key}: {problem}")


def table_name(path: Path) -> str:
    return "[tool.gpulint]" if path.name == "pyproject.toml" else "(top level)"


def _str_list(path: Path, key: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _fail(path, key, f"expected a list of strings, got {describe_value(value)}")
    return list(value)


def _codes_of(path: Path, key: str, value: object) -> tuple[str, ...]:
    items = _str_list(path, key, value)
    try:
        return parse_codes(items)
    except ConfigError as exc:
        raise _fail(path, key, str(exc)) from None


def _validate(path: Path, table: dict[str, Any]) -> _Layer:
    base = os.path.dirname(os.path.abspath(path))
    values: dict[str, Any] = {}
    per_file: Optional[tuple[tuple[PathPattern, tuple[str, ...]], ...]] = None
    exclude: Optional[tuple[PathPattern, ...]] = None
    extend_exclude: tuple[PathPattern, ...] = ()
    extend: Optional[Path] = None
    options = options_by_key()
    include: Optional[tuple[PathPattern, ...]] = None
    for key, value in table.items():
        if key in options:
            try:
                values[key] = options[key].read(value)
            except OptionError as exc:
                raise _fail(path, key, str(exc)) from None
            continue
        if key not in STRUCTURE_KEYS:
            known = known_keys()
            hint = ""
            if key.replace("_", "-") in known:
                hint = f"; did you mean {key.replace('_', '-')!r}?"
            elif isinstance(value, dict):
                hint = "; gpulint has no sub-tables other than per-file-ignores"
            raise _fail(path, key, f"unknown key{hint} (known keys: {', '.join(sorted(known))})")
        if key in ("select", "extend-select", "ignore"):
            values[key] = _codes_of(path, key, value)
        elif key in ("preview", "force-exclude"):
            if not isinstance(value, bool):
                raise _fail(path, key, f"expected true or false, got {describe_value(value)}")
            values[key] = value
        elif key == "test-patterns":
            values[key] = tuple(_str_list(path, key, value))
        elif key in ("exclude", "extend-exclude", "include"):
            patterns = tuple(PathPattern(base, p) for p in _str_list(path, key, value))
            if key == "exclude":
                exclude = patterns
            elif key == "include":
                include = patterns
            else:
                extend_exclude = patterns
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise _fail(path, key, f"expected a table of glob = [codes], got {describe_value(value)}")
            per_file = tuple(
                (PathPattern(base, glob), _codes_of(path, f"{key}.{glob!r}", codes)) for glob, codes in value.items()
            )
        elif key == "extend":
            if not isinstance(value, str) or not value.strip():
                raise _fail(path, key, f"expected the path of another configuration file, got {describe_value(value)}")
            extend = Path(base) / os.path.expanduser(value)
        elif key == "docs-url":
            from gpulint.core.docs_url import valid_docs_url

            if not isinstance(value, str) or not valid_docs_url(value):
                raise _fail(path, key, "expected the http(s) URL of the site built from gpulint's docs/, such as "
                            f'"https://<where you host it>", got {describe_value(value)}')
            values[key] = value.strip()
    return _Layer(Path(path), values, per_file, exclude, extend_exclude, extend, include)


MAX_CONFIG_BYTES = 4 * 1024 * 1024


def _parse_toml(path: Path) -> dict[str, Any]:
    """A TOML file's data; any problem is a ConfigError naming the file, never a traceback."""
    from gpulint.core.source import SourceError, read_bytes

    try:
        raw, _ = read_bytes(path, MAX_CONFIG_BYTES)  # a FIFO or a huge file never blocks or fills memory
    except SourceError as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc}") from None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(f"{path}: the file is UTF-16; TOML files must be UTF-8")
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]  # a UTF-8 BOM, as some Windows editors write: harmless
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 (at byte {exc.start}); TOML files must be UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except (RecursionError, MemoryError):
        raise ConfigError(f"{path}: invalid TOML: nested too deeply to read") from None


def read_table(path: Path) -> Optional[dict[str, Any]]:
    """The gpulint table of a config file; None for a pyproject.toml without `[tool.gpulint]`."""
    data = _parse_toml(path)
    if path.name != "pyproject.toml":
        return data
    tool = data.get("tool")
    table = tool.get("gpulint") if isinstance(tool, dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.gpulint] must be a table")
    return table


@dataclass(frozen=True)
class ProjectConfig:
    """One configuration file with everything it extends folded in (or the defaults)."""

    path: Optional[Path]  # None: no configuration file applies
    settings: Settings  # before per-file-ignores and command-line overrides
    sources: tuple[Path, ...] = ()  # the file, then the files it extends
    per_file_ignores: tuple[tuple[PathPattern, tuple[str, ...]], ...] = ()
    exclude: tuple[PathPattern, ...] = ()
    extend_exclude: tuple[PathPattern, ...] = ()
    force_exclude: bool = False
    test_patterns: tuple[str, ...] = DEFAULT_TEST_PATTERNS
    include: Optional[tuple[PathPattern, ...]] = None  # None: every file a directory search finds
    docs_url: Optional[str] = None  # the site rule links point to (see gpulint/core/docs_url.py)

    def is_included(self, path: PathLike) -> bool:
        """Whether `include` lets this file be linted (`include = ["*.py"]` leaves notebooks out);
        it chooses among files, so a directory is always included."""
        return self.include is None or os.path.isdir(path) or any(p.matches(path, self.root) for p in self.include)

    def is_test_file(self, path: PathLike) -> bool:
        """Matches a test pattern, relative to the configuration's folder (or the working directory)."""
        base = self.root or os.getcwd()
        absolute = os.path.abspath(path)
        relative = _relative(absolute, base)
        # what PathPattern(base, pattern).matches(path) gives, each pattern read once
        for by_name, regex in _compiled_globs(tuple(self.test_patterns)):
            if by_name:
                names = relative.split("/") if relative is not None else [os.path.basename(absolute)]
                if any(regex.fullmatch(name) for name in names):
                    return True
            elif relative is not None:
                parts = relative.split("/")
                if any(regex.fullmatch("/".join(parts[:i])) for i in range(1, len(parts) + 1)):
                    return True
        return False

    def ignored_codes(self, path: PathLike) -> tuple[str, ...]:
        codes: list[str] = []
        for pattern, ignored in self.per_file_ignores:
            if pattern.matches(path, self.root):
                codes.extend(c for c in ignored if c not in codes)
        return tuple(codes)

    def settings_for(self, path: PathLike) -> Settings:
        codes = self.ignored_codes(path)
        settings = replace(self.settings, per_file_ignores=codes) if codes else self.settings
        return replace(settings, test_file=True) if self.is_test_file(path) else settings

    def is_excluded(self, path: PathLike) -> bool:
        return any(p.matches(path, self.root) for p in self.exclude + self.extend_exclude)

    @property
    def root(self) -> Optional[str]:
        return os.path.dirname(os.path.abspath(self.path)) if self.path is not None else None


def _merge(base: ProjectConfig, layer: _Layer) -> ProjectConfig:
    """`layer` on top of `base`: given keys replace, extend-select / extend-exclude add.

    A `select` in `layer` starts the rule selection over (the base's ignore and extend-select
    no longer apply), as a later `select` does in ruff.
    """
    values = layer.values
    settings = base.settings
    changes: dict[str, Any] = {}
    if "select" in values:  # a new selection starts over: the base's extend-select and ignore go
        changes["select"] = values["select"]
        changes["extend_select"] = values.get("extend-select", ())
        changes["ignore"] = values.get("ignore", ())
    else:
        if "extend-select" in values:
            changes["extend_select"] = settings.extend_select + values["extend-select"]
        if "ignore" in values:
            changes["ignore"] = values["ignore"]
    if "preview" in values:
        changes["preview"] = values["preview"]
    options = {key: value for key, value in values.items() if key not in STRUCTURE_KEYS}
    return ProjectConfig(
        path=layer.path,
        settings=replace(settings, **changes).with_values(options),
        sources=(layer.path,) + base.sources,
        per_file_ignores=layer.per_file_ignores if layer.per_file_ignores is not None else base.per_file_ignores,
        exclude=layer.exclude if layer.exclude is not None else base.exclude,
        extend_exclude=base.extend_exclude + layer.extend_exclude,
        force_exclude=values.get("force-exclude", base.force_exclude),
        test_patterns=values.get("test-patterns", base.test_patterns),
        include=layer.include if layer.include is not None else base.include,
        docs_url=values.get("docs-url", base.docs_url),
    )


def find_config_file(directory: Path) -> Optional[Path]:
    """The configuration file that lives in `directory`, if any (no parent search)."""
    for name in CONFIG_FILENAMES:
        candidate = directory / name
        if os.path.isfile(candidate):  # not Path.is_file(): it raises for a name over 255 bytes
            if name == "pyproject.toml" and read_table(candidate) is None:
                continue
            return candidate
    return None


def _as_toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_as_toml(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)


class SettingsResolver:
    """Effective settings per file: defaults, then the closest configuration file, then the command line.

    Each directory is looked up once: the closest `gpulint.toml`, or `pyproject.toml` with a
    `[tool.gpulint]` table, in the file's directory or above wins. `config_file` uses one file
    for everything; `isolated` ignores configuration files altogether.
    """

    def __init__(self, overrides: Optional[CliOverrides] = None, base: Optional[Settings] = None,
                 config_file: Optional[PathLike] = None, isolated: bool = False,
                 force_exclude: bool = False) -> None:
        self.overrides = overrides or CliOverrides()
        self.base = base or Settings()
        self.isolated = isolated
        self.force_exclude_flag = force_exclude
        self.config_file = Path(config_file) if config_file is not None else None
        self._cache: dict[str, Settings] = {}
        self._by_directory: dict[str, ProjectConfig] = {}
        self._torch_ranges: dict[str, DeclaredRange] = {}  # by folder (project/requirements.py)
        self._stale_pins: dict[str, Stale] = {}  # pins the project's code contradicts, by the pinning file
        self._library_ranges: dict[str, dict[str, DeclaredRange]] = {}  # by library, then folder (the same)
        self._line_lengths: dict[str, tuple[Optional[int], Optional[str]]] = {}  # by folder (project/line_length.py)
        self._loaded: dict[str, ProjectConfig] = {}
        self.defaults = ProjectConfig(None, self.base)
        self._fixed: Optional[ProjectConfig] = None
        if self.config_file is not None and not isolated:
            from gpulint.core.source import unreadable_reason

            reason = unreadable_reason(self.config_file)
            if reason is not None:  # /dev/null or a FIFO is there, just not a file to read
                raise ConfigError(f"{self.config_file}: " + ("configuration file not found" if reason == "no such file"
                                                              else f"cannot read configuration: {reason}"))
            self._fixed = self.load(self.config_file)

    def load(self, path: Path, chain: tuple[str, ...] = ()) -> ProjectConfig:
        """The configuration in `path` with its `extend` chain resolved; each file read once."""
        key = os.path.abspath(path)
        if key in chain:
            raise ConfigError(f"{path}: extend forms a cycle: {' -> '.join(chain + (key,))}")
        if key in self._loaded:
            return self._loaded[key]
        table = read_table(Path(key))
        if table is None:
            raise ConfigError(f"{path}: no [tool.gpulint] table")
        layer = _validate(Path(key), table)
        base = self.defaults
        if layer.extend is not None:
            from gpulint.core.source import unreadable_reason

            reason = unreadable_reason(layer.extend)
            if reason is not None:
                raise _fail(Path(key), "extend", f"{layer.extend}: {reason}")
            base = self.load(layer.extend, chain + (key,))
        project = _merge(base, layer)
        self._loaded[key] = project
        return project

    def project_for(self, path: PathLike) -> ProjectConfig:
        """The configuration that applies to `path` (a file, or a directory itself)."""
        if self.isolated:
            return self.defaults
        if self._fixed is not None:
            return self._fixed
        absolute = Path(os.path.abspath(path))
        directory = absolute if os.path.isdir(absolute) else absolute.parent  # no raise on an over-long name
        pending: list[str] = []
        found: Optional[ProjectConfig] = None
        current = directory
        while True:
            key = str(current)
            if key in self._by_directory:
                found = self._by_directory[key]
                break
            pending.append(key)
            config_path = find_config_file(current)
            if config_path is not None:
                found = self.load(config_path)
                break
            if current.parent == current:
                found = self.defaults
                break
            current = current.parent
        for key in pending:
            self._by_directory[key] = found
        return found

    def for_path(self, path: PathLike) -> Settings:
        key = str(path)
        if key not in self._cache:
            settings = self.overrides.apply(self.project_for(path).settings_for(path))
            if TORCH_VERSION.key not in dict(settings.values):
                floor, above, _ = self.declared_torch_range(path)
                if floor is not None:
                    settings = settings.with_values({TORCH_VERSION.key: floor})
                if above is not None:  # the same pin's end (a configured torch-version reads no pin)
                    settings = replace(settings, torch_above=above)
            from gpulint.core.floors import LIBRARIES

            libraries = tuple((name, *self.declared_library_range(path, name)[:2]) for name in LIBRARIES)
            bounded = tuple(entry for entry in libraries if entry[1:] != (None, None))
            if bounded:
                settings = replace(settings, libraries=bounded)
            if dict(settings.values).get(LINE_LENGTH.key) is None:
                length, _ = self.declared_line_length(path)
                if length is not None:
                    settings = settings.with_values({LINE_LENGTH.key: length})
            self._cache[key] = settings
        return self._cache[key]

    def declared_torch_floor(self, path: PathLike) -> Declared:
        """The torch floor the project's packaging metadata declares, and the file that says so
        (project/requirements.py); `torch-version` in a configuration file wins over it, and
        `--isolated` reads no project file at all. A pin the project's own imports contradict (SimCLR pins
        torch 1.4 and imports `torch.cuda.amp`, 1.6) is stale: no floor, `(None, the pinning file)`."""
        floor, _, source = self.declared_torch_range(path)
        return floor, source

    def declared_torch_range(self, path: PathLike) -> DeclaredRange:
        """(the torch floor, the first MAJOR.MINOR the same pin no longer admits, the file that says so), as
        `declared_torch_floor` reads them (project/requirements.py `declared_torch_range`); a stale pin gives
        neither, `(None, None, the pinning file)`."""
        if self.isolated:
            return None, None, None
        absolute = os.path.abspath(path)
        directory = absolute if os.path.isdir(absolute) else os.path.dirname(absolute)
        found = self._torch_ranges.get(directory)
        if found is None:
            from gpulint.core.floors import NEEDED_BY_IMPORT
            from gpulint.project.requirements import declared_torch_range

            found = declared_torch_range(directory, self._torch_ranges, NEEDED_BY_IMPORT, self._stale_pins)
        return found

    def declared_library_range(self, path: PathLike, name: str) -> DeclaredRange:
        """The range of library `name` (core/floors.py LIBRARIES: `transformers`) the project's pins declare, and
        the file that does (project/requirements.py `declared_range`); read once per folder, and not at all
        with `--isolated`."""
        if self.isolated:
            return None, None, None
        absolute = os.path.abspath(path)
        directory = absolute if os.path.isdir(absolute) else os.path.dirname(absolute)
        memo = self._library_ranges.setdefault(name, {})
        found = memo.get(directory)
        if found is None:
            from gpulint.project.requirements import declared_range, package

            found = declared_range(directory, package(name), memo)
        return found

    def declared_line_length(self, path: PathLike) -> tuple[Optional[int], Optional[str]]:
        """The line length the project's ruff, black or flake8 settings give (project/line_length.py);
        `line-length` in a gpulint configuration wins over it, and `--isolated` reads none."""
        if self.isolated:
            return None, None
        from gpulint.project.line_length import declared_line_length

        absolute = os.path.abspath(path)
        directory = absolute if os.path.isdir(absolute) else os.path.dirname(absolute)
        return declared_line_length(directory, self._line_lengths)

    def is_excluded(self, path: PathLike, explicit: bool = False) -> bool:
        """Whether `path` is excluded by its configuration; a path named on the command line
        is linted anyway unless force-exclude is on (pre-commit passes every file by name)."""
        project = self.project_for(path)
        if explicit and not (self.force_exclude_flag or project.force_exclude):
            return False
        return project.is_excluded(path) or not project.is_included(path)

    def docs_site(self, path: PathLike) -> Optional[str]:
        """The site rule links point to for `path`: `docs-url`, else the package metadata's, else None."""
        from gpulint.core.docs_url import docs_site

        return docs_site(self.project_for(path).docs_url)

    def describe(self, path: PathLike) -> str:
        """The settings that apply to `path`, as TOML-like text (`gpulint show-config`)."""
        from gpulint.rules import all_options, all_rules
        from gpulint.rules.gpu000_invalid_file import InvalidFile

        project = self.project_for(path)
        settings = self.for_path(path)
        if project.path is None:
            origin = "none (defaults)" + (" because of --isolated" if self.isolated else "")
        else:
            origin = " extends ".join(str(p) for p in project.sources)
        lines = [f"# settings for {path}", f"# configuration: {origin}"]
        floor, source = self.declared_torch_floor(path)
        if floor is not None and dict(project.settings.values).get(TORCH_VERSION.key) is None:
            lines.append(f"# torch-version: {version_text(floor)}, the torch floor {source} declares")
        elif source is not None and source in self._stale_pins \
                and dict(project.settings.values).get(TORCH_VERSION.key) is None:
            lines.append(f"# torch-version: none: {self._stale_pins[source].reason()}: a stale pin, not a floor")
        from gpulint.core.floors import LIBRARIES

        for name in LIBRARIES:
            low, above, declaring = self.declared_library_range(path, name)
            if declaring is not None:
                admitted = ",".join(filter(None, (f">={version_text(low)}" if low else "",
                                                  f"<{version_text(above)}" if above else "")))
                lines.append(f"# {name}: {admitted}, the range {declaring} declares")
        length, where = self.declared_line_length(path)
        if dict(project.settings.values).get(LINE_LENGTH.key) is None:
            lines.append(f"# line-length: {length}, from {where}" if length is not None else
                         "# line-length: 88, the default (no ruff, black or flake8 line length found)")
        rows: list[tuple[str, object]] = [
            ("select", list(settings.select) or ["GPU"]),  # the default, as the README documents it
            ("extend-select", list(settings.extend_select)),
            ("ignore", list(settings.ignore)),
            ("per-file-ignores", list(settings.per_file_ignores)),
            ("preview", settings.preview),
        ]
        rows += [(option.key, settings.line_length if option is LINE_LENGTH else option.show(settings.value(option)))
                 for option in all_options()]
        rows += [
            ("test-patterns", list(project.test_patterns)),
            ("test-file", settings.test_file),
            ("include", [p.pattern for p in project.include] if project.include is not None else
             list(DEFAULT_INCLUDE)),
            ("exclude", [p.pattern for p in project.exclude]),
            ("extend-exclude", [p.pattern for p in project.extend_exclude]),
            ("force-exclude", self.force_exclude_flag or project.force_exclude),
            ("excluded", project.is_excluded(path) or not project.is_included(path)),
            ("docs-url", self.docs_site(path) or ""),  # "": no site, so no rule links
            ("enabled-rules", [rule.code for rule in all_rules() if rule is not InvalidFile
                               and settings.is_enabled(rule.code, rule.preview, rule.opt_in)]),
        ]
        lines.extend(f"{key} = {_as_toml(value)}" for key, value in rows)
        return "\n".join(lines) + "\n"
