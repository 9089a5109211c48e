"""The oldest torch a project declares it supports, read from its packaging metadata.

A fix that needs a newer torch than the project supports breaks it for some of its users
(`torch.amp.GradScaler` exists from 2.3 on, so rewriting `torch.cuda.amp.GradScaler` in a
project that declares `torch>=1.13` is wrong). The `torch-version` setting says so
explicitly; without it, the floor comes from the metadata next to the code, as ruff takes
its target version from `requires-python`:

- `pyproject.toml`: `[project] dependencies`;
- `setup.cfg`: `[options] install_requires`;
- `setup.py`: `install_requires=` of the `setup(...)` call, a list of string literals (or a
  module-level name bound to one).

The first directory at or above the file that holds any of these is the project's; the
lowest bound its torch requirements give (`>=`, `~=`, `==`, `>`) is the floor. Metadata that
cannot be read or parsed gives no floor: it never stops a run.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from typing import Iterable, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

METADATA_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
_MAX_BYTES = 1024 * 1024
# a requirement on torch itself (not torchvision), with its extras, version specifiers and marker
_TORCH = re.compile(r"^\s*torch(?![\w.-])\s*(?:\[[^\]]*\])?\s*(?P<specs>[^;]*)", re.IGNORECASE)
_LOWER = re.compile(r"(?:>=|~=|==|>)\s*(?P<major>\d+)\.(?P<minor>\d+)")

Version = tuple[int, int]
Declared = tuple[Optional[Version], Optional[str]]


def torch_floor(requirements: Iterable[str]) -> Optional[Version]:
    """The lowest torch version these requirement strings admit, when each torch line has a bound."""
    floors: list[Version] = []
    for requirement in requirements:
        match = _TORCH.match(requirement)
        if match is None:
            continue  # another package (torchvision, torch-geometric)
        bounds = [(int(m["major"]), int(m["minor"])) for m in _LOWER.finditer(match["specs"])]
        if not bounds:
            return None  # an unbounded torch line: any version may be installed
        floors.append(max(bounds))  # `>=1.13,>=2.0`: both hold
    return min(floors) if floors else None


def declared_torch_floor(directory: str, memo: Optional[dict[str, Declared]] = None) -> Declared:
    """(floor, the metadata file it comes from) for the project `directory` belongs to. `memo` keeps
    every folder's answer for a run: the files of one tree cost one look per folder."""
    memo = {} if memo is None else memo
    current = os.path.abspath(directory)
    passed: list[str] = []
    answer: Declared = (None, None)
    while current not in memo:
        passed.append(current)
        present = [os.path.join(current, name) for name in METADATA_FILES
                   if os.path.isfile(os.path.join(current, name))]
        if present:
            for path in present:
                requirements = _requirements(path)
                floor = torch_floor(requirements) if requirements is not None else None
                if floor is not None:
                    answer = (floor, path)
                    break
            break
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    else:
        answer = memo[current]
    for folder in passed:
        memo[folder] = answer
    return answer


def _requirements(path: str) -> Optional[list[str]]:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(_MAX_BYTES + 1)
        if len(raw) > _MAX_BYTES:
            return None
        text = raw.decode("utf-8-sig")
        name = os.path.basename(path)
        if name == "pyproject.toml":
            return _from_pyproject(text)
        if name == "setup.cfg":
            return _from_setup_cfg(text)
        return _from_setup_py(text)
    except (OSError, UnicodeDecodeError, ValueError, SyntaxError, RecursionError, MemoryError,
            tomllib.TOMLDecodeError):
        return None


def _from_pyproject(text: str) -> Optional[list[str]]:
    project = tomllib.loads(text).get("project")
    dependencies = project.get("dependencies") if isinstance(project, dict) else None
    if not isinstance(dependencies, list):
        return None
    return [d for d in dependencies if isinstance(d, str)]


def _from_setup_cfg(text: str) -> Optional[list[str]]:
    import configparser  # only for projects that keep their metadata in setup.cfg

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    if not parser.has_option("options", "install_requires"):
        return None
    lines = parser.get("options", "install_requires").replace(";", "\n;").splitlines()
    out: list[str] = []
    for line in lines:  # one requirement per line; a `;` line continues the one before (a marker)
        if line.startswith(";") and out:
            out[-1] += line
        elif line.strip():
            out.append(line.strip())
    return out


def _from_setup_py(text: str) -> Optional[list[str]]:
    tree = ast.parse(text)
    lists: dict[str, ast.expr] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name):
            lists[statement.targets[0].id] = statement.value
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_setup(node.func)):
            continue
        for keyword in node.keywords:
            if keyword.arg != "install_requires":
                continue
            value: ast.expr = keyword.value
            if isinstance(value, ast.Name):
                value = lists.get(value.id, value)
            if isinstance(value, (ast.List, ast.Tuple)) and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts):
                return [e.value for e in value.elts]  # type: ignore[attr-defined]
            return None  # built at run time: not readable here
    return None


def _is_setup(func: ast.AST) -> bool:
    return (isinstance(func, ast.Name) and func.id == "setup") or \
        (isinstance(func, ast.Attribute) and func.attr == "setup")
