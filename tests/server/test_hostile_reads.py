"""Issue 22, item 5 (and item 7's over-long names): the server reads nothing it could hang on.

A hover or code action for a `*.py` URI the editor never opened used to make pygls read the
file from disk; for a FIFO that read never returned, and not even `shutdown` was answered.
Requests are answered from the editor's open documents only; the files the server reads
itself (configuration, the project pass) are regular files, read with a bound.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.server.wire import TRAIN, Wire, codes

REQUEST_WAIT_S = 30.0  # a request that needs no lint: answered in milliseconds, even on a loaded machine


def _requests(uri: str) -> list[tuple[str, dict]]:
    start = {"line": 0, "character": 0}
    return [
        ("textDocument/hover", {"textDocument": {"uri": uri}, "position": start}),
        ("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": {"start": start, "end": start},
                                     "context": {"diagnostics": []}}),
        ("codeAction/resolve", {"title": "gpulint: fix all safe fixes", "kind": "source.fixAll.gpulint",
                                "data": {"uri": uri}}),
    ]


def test_requests_for_an_unopened_fifo_are_answered_without_reading_it(wire: Wire, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    wire.initialize(tmp_path)
    hover, actions, resolved = (wire.call(method, params, REQUEST_WAIT_S)
                                for method, params in _requests(fifo.as_uri()))
    assert hover is None and actions == []
    assert "edit" not in resolved  # nothing to fix in a document the editor has not opened
    assert wire.call("shutdown", timeout=REQUEST_WAIT_S) is None  # the server still answers
    wire.notify("exit")
    assert wire.exit_code() == 0


def test_an_unopened_regular_file_is_not_read_either(wire: Wire, tmp_path: Path) -> None:
    """The editor's buffer is the truth: a file on disk the editor has not opened gets no answer
    computed from the disk (pygls would have linted the disk's bytes as if they were open)."""
    path = tmp_path / "train.py"
    path.write_text(TRAIN, encoding="utf-8")
    wire.initialize(tmp_path)
    hover, actions, _ = (wire.call(method, params) for method, params in _requests(path.as_uri()))
    assert hover is None and actions == []
    assert not wire.published(path.as_uri())


def test_the_project_pass_skips_fifos_around_the_file(wire: Wire, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "data.py")
    os.mkfifo(tmp_path / "pyproject.toml")  # where a configuration file would be read
    (tmp_path / "model.py").write_text("import torch\n", encoding="utf-8")
    path = tmp_path / "train.py"
    path.write_text(TRAIN, encoding="utf-8")
    wire.initialize(tmp_path)
    uri = wire.open(path, TRAIN)
    assert codes(wire.diagnostics(uri)) == ["GPU101", "GPU201"]
    assert codes(wire.diagnostics(uri)) == ["GPU101", "GPU201"]  # again, with the project pass's facts
    assert wire.call("shutdown", timeout=REQUEST_WAIT_S) is None


def test_a_path_component_over_255_bytes_is_linted_without_an_error(wire: Wire, tmp_path: Path) -> None:
    """Such a name cannot exist on disk (ENAMETOOLONG); pygls showed an OSError popup for it and
    published nothing. Its buffer is linted, with the configuration of the folders above it."""
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\nignore = ["GPU101"]\n', encoding="utf-8")
    long_name = tmp_path / ("é" * 200) / "train.py"  # 400 bytes in UTF-8
    wire.initialize(tmp_path)
    uri = wire.open(long_name, TRAIN)
    assert codes(wire.diagnostics(uri)) == ["GPU201"]  # the configuration above it applies
    hover = wire.call("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 7, "character": 10}})
    assert hover is not None and "GPU201" in hover["contents"]["value"]
    assert wire.shown() == []
    assert wire.call("shutdown", timeout=REQUEST_WAIT_S) is None
