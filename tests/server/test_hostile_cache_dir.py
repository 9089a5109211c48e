"""Issue 22, item 8: the server's results cache lives in the project, as the command line's does.

The server created `.gpulint_cache/` wherever the editor started it (a home directory, `/`).
Now the cache directory is resolved as `gpulint check` resolves it when run in the project:
`--cache-dir` or GPULINT_CACHE_DIR when given, else `.gpulint_cache` in the workspace folder
that holds the file, or in the file's project root when no workspace folder does.
`gpulint server --no-cache` writes none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator, Optional

import pytest

from tests.server.wire import TRAIN, Wire, codes


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """Where the editor starts the server: not the project."""
    folder = tmp_path / "editor-cwd"
    folder.mkdir()
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n", encoding="utf-8")
    (root / "src" / "pkg" / "train.py").write_text(TRAIN, encoding="utf-8")
    (root / "src" / "pkg" / "data.py").write_text("import torch\n", encoding="utf-8")
    return root


@pytest.fixture
def start(elsewhere: Path, server_args: tuple[str, ...]) -> Iterator[Callable[..., Wire]]:
    servers: list[Wire] = []

    def start(*extra: str, env: Optional[dict[str, Optional[str]]] = None) -> Wire:
        server = Wire(elsewhere, (*server_args, *extra), env={"GPULINT_CACHE_DIR": None, **(env or {})})
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def _lint_with_project_pass(wire: Wire, path: Path) -> None:
    uri = wire.open(path, TRAIN)
    assert codes(wire.diagnostics(uri)) == ["GPU101", "GPU201"]
    wire.diagnostics(uri)  # after the project pass, which reads and writes the cache
    assert wire.call("shutdown") is None


def _caches(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("CACHEDIR.TAG"))


def test_the_cache_goes_in_the_workspace_folder(start: Callable[..., Wire], tmp_path: Path, project: Path,
                                                elsewhere: Path, server_args: tuple[str, ...]) -> None:
    wire = start()
    wire.call("initialize", {"processId": None, "rootUri": project.as_uri(), "capabilities": {},
                             "workspaceFolders": [{"uri": project.as_uri(), "name": "project"}]})
    wire.notify("initialized", {})
    _lint_with_project_pass(wire, project / "src" / "pkg" / "train.py")
    expected = [] if "--no-cache" in server_args else [project / ".gpulint_cache"]
    assert _caches(tmp_path) == expected
    assert list(elsewhere.iterdir()) == []


def test_without_a_workspace_folder_the_cache_goes_in_the_project_root(start: Callable[..., Wire], tmp_path: Path,
                                                                     project: Path,
                                                                     server_args: tuple[str, ...]) -> None:
    wire = start()
    wire.call("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    wire.notify("initialized", {})
    _lint_with_project_pass(wire, project / "src" / "pkg" / "train.py")
    assert _caches(tmp_path) == ([] if "--no-cache" in server_args else [project / ".gpulint_cache"])


def test_cache_dir_and_the_environment_are_honoured_as_on_the_command_line(start: Callable[..., Wire], tmp_path: Path,
                                                                         project: Path,
                                                                         server_args: tuple[str, ...]) -> None:
    for wire in (start("--cache-dir", str(tmp_path / "by-option")),
                 start(env={"GPULINT_CACHE_DIR": str(tmp_path / "by-env")})):
        wire.initialize(project)
        _lint_with_project_pass(wire, project / "src" / "pkg" / "train.py")
    expected = [] if "--no-cache" in server_args else [tmp_path / "by-env", tmp_path / "by-option"]
    assert _caches(tmp_path) == expected
