"""Issue 22, item 7: the server never publishes what is not so.

- A `didClose` during the project pass was followed by a publish of the disk file's findings for
  the closed document (a ghost the editor shows until it restarts).
- While pyproject.toml was invalid, every keystroke published empty diagnostics (as if the file
  were clean) and showed a popup. The last valid configuration now stays in use, and the problem
  is shown once.
"""

from __future__ import annotations

from pathlib import Path

from tests.server.wire import ADAM, TRAIN, Wire, codes

PROJECT_FILES = 150  # enough that the project pass is still running when the document closes


def _project(root: Path) -> None:
    (root / "pyproject.toml").write_text('[tool.gpulint]\nignore = ["GPU101"]\n', encoding="utf-8")
    package = root / "pkg"
    package.mkdir()
    for i in range(PROJECT_FILES):
        (package / f"module_{i}.py").write_text(f"import torch\n\ndef f_{i}(x):\n    return torch.relu(x) * {i}\n",
                                                encoding="utf-8")


def test_no_diagnostics_for_a_document_closed_during_the_project_pass(wire: Wire, tmp_path: Path) -> None:
    _project(tmp_path)
    closed, witness = tmp_path / "closed.py", tmp_path / "witness.py"
    closed.write_text(TRAIN, encoding="utf-8")
    witness.write_text(TRAIN, encoding="utf-8")
    wire.initialize(tmp_path)
    uri = wire.open(closed, "import torch\n")  # the buffer differs from the file on disk
    wire.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    other = wire.open(witness, TRAIN)
    wire.diagnostics(other)
    wire.diagnostics(other)  # with the project pass: the closed document's pass has run by now too
    wire.settle(1.0)
    after_close = wire.published(uri)
    while after_close and after_close[0]["diagnostics"]:  # what came before the close was processed
        after_close.pop(0)
    assert after_close and all(not p["diagnostics"] for p in after_close), after_close  # cleared, no ghost


def test_an_invalid_configuration_keeps_the_last_valid_one_and_says_so_once(wire: Wire, tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.gpulint]\nignore = ["GPU101"]\n', encoding="utf-8")
    wire.initialize(tmp_path)
    uri = wire.open(tmp_path / "train.py", TRAIN)
    assert codes(wire.diagnostics(uri)) == ["GPU201"]
    config.write_text('[tool.gpulint]\nignore = ["GPU101"\n', encoding="utf-8")  # half-typed: not TOML
    wire.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": config.as_uri(), "type": 2}]})
    text = TRAIN
    for version in range(2, 8):  # keystrokes, each linted after a pause
        text += ADAM if version == 7 else "#\n"
        wire.change(uri, version, text)
        wire.diagnostics(uri, lambda p, v=version: p["version"] == v)
    published = wire.published(uri)
    assert all(codes(p) == ["GPU201"] for p in published[:-1]), published  # never empty, never GPU101
    assert codes(published[-1]) == ["GPU201", "GPU201"]  # the new Adam, under the last valid configuration
    [message] = [m for m in wire.shown() if "pyproject.toml" in m]
    assert "last valid configuration" in message
    config.write_text('[tool.gpulint]\nignore = ["GPU201"]\n', encoding="utf-8")  # fixed, and different
    wire.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": config.as_uri(), "type": 2}]})
    wire.diagnostics(uri, lambda p: codes(p) == ["GPU101"])  # the fixed configuration applies at once
    assert len(wire.shown()) == 1


def test_a_document_opened_while_the_configuration_is_invalid_is_not_called_clean(wire: Wire,
                                                                               tmp_path: Path) -> None:
    (tmp_path / "gpulint.toml").write_text("num-workers = 'x'\n", encoding="utf-8")
    wire.initialize(tmp_path)
    uri = wire.open(tmp_path / "train.py", TRAIN)
    [message] = [wire.wait_for(lambda m: m.get("method") == "window/showMessage")["params"]["message"]]
    assert "num-workers" in message and "not linted" in message
    for version in (2, 3):
        wire.change(uri, version, TRAIN + "#" * version)
    wire.settle(2.0)
    assert wire.published(uri) == [] and len(wire.shown()) == 1  # no "clean" publish, one message


def test_a_file_excluded_by_a_configuration_change_loses_its_diagnostics(wire: Wire, tmp_path: Path) -> None:
    wire.initialize(tmp_path)
    uri = wire.open(tmp_path / "train.py", TRAIN)
    assert codes(wire.diagnostics(uri)) == ["GPU101", "GPU201"]
    config = tmp_path / "gpulint.toml"
    config.write_text('extend-exclude = ["train.py"]\n', encoding="utf-8")
    wire.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": config.as_uri(), "type": 1}]})
    wire.diagnostics(uri, lambda p: p["diagnostics"] == [])
    assert wire.shown() == []
