"""The line length a project formats its code to, read from its formatter and linter settings.

Code a fix writes keeps to it (decisions.md: "wrap generated code at the project's line
length"). `line-length` in gpulint's own configuration wins; otherwise the closest folder at or
above the file that configures one of these gives it, in this order within a folder:

- `ruff.toml` / `.ruff.toml`: `line-length`;
- `pyproject.toml`: `[tool.ruff] line-length`, then `[tool.black] line-length`;
- `setup.cfg`, `tox.ini`, `.flake8`: `[flake8] max-line-length` (also `[pycodestyle]`).

The search stops at the repository's top (a folder holding `.git`). A file that cannot be read
or parsed gives nothing: it never stops a run.
"""

from __future__ import annotations

import configparser
import os
import sys
from typing import Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

Declared = tuple[Optional[int], Optional[str]]
_MAX_BYTES = 1024 * 1024


def _read(path: str) -> Optional[str]:
    try:
        if os.path.getsize(path) > _MAX_BYTES:
            return None
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _toml(path: str) -> Optional[dict]:
    text = _read(path)
    if text is None:
        return None
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return None


def _length(value: object) -> Optional[int]:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    try:
        number = int(value)
    except ValueError:
        return None
    return number if 20 <= number <= 1000 else None


def _in_folder(folder: str) -> Declared:
    for name in ("ruff.toml", ".ruff.toml"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            data = _toml(path)
            if data is not None and _length(data.get("line-length")) is not None:
                return _length(data.get("line-length")), f"{name} line-length"
    path = os.path.join(folder, "pyproject.toml")
    if os.path.isfile(path):
        tool = (_toml(path) or {}).get("tool")
        if isinstance(tool, dict):
            for section in ("ruff", "black"):
                table = tool.get(section)
                if isinstance(table, dict) and _length(table.get("line-length")) is not None:
                    return _length(table.get("line-length")), f"pyproject.toml [tool.{section}] line-length"
    for name in ("setup.cfg", "tox.ini", ".flake8"):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        text = _read(path)
        if text is None:
            continue
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(text)
        except configparser.Error:
            continue
        for section in ("flake8", "pycodestyle"):
            if parser.has_option(section, "max-line-length"):
                found = _length(parser.get(section, "max-line-length").split("#")[0].strip())
                if found is not None:
                    return found, f"{name} [{section}] max-line-length"
    return None, None


def declared_line_length(directory: str, memo: Optional[dict[str, Declared]] = None) -> Declared:
    """(line length, where it is set) for the project `directory` belongs to; (None, None) when
    nothing sets one. `memo` keeps every folder's answer for a run."""
    memo = {} if memo is None else memo
    current = os.path.abspath(directory)
    passed: list[str] = []
    found: Declared = (None, None)
    while True:
        if current in memo:
            found = memo[current]
            break
        passed.append(current)
        found = _in_folder(current)
        if found[0] is not None or os.path.isdir(os.path.join(current, ".git")):
            break
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for folder in passed:
        memo[folder] = found
    return found
