"""Notebooks open in an editor (LSP notebook-document sync, issue 28) are linted as `gpulint check`
lints the .ipynb file: the same findings at the same places in the same cells, fixes as edits of
the cells they fall in, and nothing left behind when a cell is deleted or the notebook closed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from gpulint.cli import main
from tests.server.wire import Wire

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = [ROOT / "examples" / "churn.ipynb", ROOT / "tests" / "notebook" / "notebooks" / "colab.ipynb"]
KINDS = {"markdown": 1, "code": 2}


def _cells(notebook: Path) -> list[tuple[str, str]]:
    data = json.loads(notebook.read_text(encoding="utf-8"))
    return [(cell["cell_type"], "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"])
            for cell in data["cells"]]


def _cell_uri(notebook: Path, index: int) -> str:
    return f"vscode-notebook-cell:{notebook}#C{index}"


def _open(wire: Wire, notebook: Path, cells: list[tuple[str, str]]) -> list[str]:
    uris = [_cell_uri(notebook, i) for i in range(len(cells))]
    wire.notify("notebookDocument/didOpen", {
        "notebookDocument": {"uri": notebook.as_uri(), "notebookType": "jupyter-notebook", "version": 1,
                             "cells": [{"kind": KINDS.get(kind, 2), "document": uri}
                                       for (kind, _), uri in zip(cells, uris)]},
        "cellTextDocuments": [{"uri": uri, "languageId": "markdown" if kind == "markdown" else "python",
                               "version": 1, "text": source} for (kind, source), uri in zip(cells, uris)]})
    return uris


def _latest(wire: Wire, uri: str) -> list[dict[str, Any]]:
    return wire.published(uri)[-1]["diagnostics"]


def _settled(wire: Wire, uris: list[str]) -> None:
    """Wait until every cell has diagnostics from the project pass's lint (the second publish)."""
    for uri in uris:
        wire.diagnostics(uri)
    for uri in uris:
        wire.diagnostics(uri)


def test_open_notebooks_get_the_command_lines_findings_on_their_cells(wire: Wire, tmp_path: Path) -> None:
    wire.initialize(tmp_path)
    for source in NOTEBOOKS:
        notebook = tmp_path / source.name
        shutil.copy(source, notebook)
        result = CliRunner().invoke(main, ["check", "--output-format", "json", "--isolated", str(notebook)])
        expected = sorted((f["cell"] - 1, f["code"], f["location"]["row"] - 1, f["location"]["column"] - 1)
                          for f in json.loads(result.output))
        assert expected, f"{source.name}: the test needs findings to compare"
        uris = _open(wire, notebook, _cells(notebook))
        _settled(wire, uris)
        got = sorted((i, d["code"], d["range"]["start"]["line"], d["range"]["start"]["character"])
                     for i, uri in enumerate(uris) for d in _latest(wire, uri))
        assert got == expected, source.name


NOTEBOOK = [
    ("markdown", "# Training\nGPU101 is named here, in markdown."),
    ("code", "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\ndevice = torch.device('cuda')"),
    ("code", "ds = TensorDataset(torch.randn(8, 2))\nloader = DataLoader(ds, batch_size=4)"),
    ("code", "%%bash\necho not python"),
    # 64 tensors: GPU201 is silent on a one-tensor optimizer
    ("code", "opt = torch.optim.SGD([torch.zeros(1, requires_grad=True) for _ in range(64)], lr=0.1)"),
    ("code", "for (x,) in loader:\n    x = x.to(device, non_blocking=True)"),
]


def test_edits_fixes_and_closing_a_notebook(wire: Wire, tmp_path: Path) -> None:
    notebook = tmp_path / "train.ipynb"
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\ndocs-url = "https://docs.example.org/gpulint"\n')
    resolves = {"textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit"]}}}}
    wire.initialize(tmp_path, capabilities=resolves)
    uris = _open(wire, notebook, NOTEBOOK)
    diagnostics = [wire.diagnostics(uri)["diagnostics"] for uri in uris]
    assert [[d["code"] for d in cell] for cell in diagnostics] == [[], [], ["GPU101"], [], ["GPU201"], []]
    assert diagnostics[2][0]["range"]["start"] == {"line": 1, "character": 9}  # in the cell's own lines
    assert diagnostics[2][0]["codeDescription"]["href"] == "https://docs.example.org/gpulint/rules/GPU101/"

    fixes = wire.call("textDocument/codeAction", {"textDocument": {"uri": uris[2]},
                                                  "range": diagnostics[2][0]["range"],
                                                  "context": {"diagnostics": diagnostics[2]}})
    [pin] = [a for a in fixes if "pin_memory" in a["title"]]
    [change] = pin["edit"]["documentChanges"]
    assert change["textDocument"]["uri"] == uris[2] and change["edits"][0]["newText"] == ", pin_memory=True"
    assert any("# noqa" in a["title"] for a in fixes)

    [fix_all] = wire.call("textDocument/codeAction", {"textDocument": {"uri": uris[1]},
                                                      "range": {"start": {"line": 0, "character": 0},
                                                                "end": {"line": 0, "character": 0}},
                                                      "context": {"diagnostics": [],
                                                                  "only": ["notebook.source.fixAll"]}})
    resolved = wire.call("codeAction/resolve", fix_all)
    assert [c["textDocument"]["uri"] for c in resolved["edit"]["documentChanges"]] == [uris[2]]  # the safe fix

    wire.notify("notebookDocument/didChange", {
        "notebookDocument": {"uri": notebook.as_uri(), "version": 2},
        "change": {"cells": {"textContent": [{
            "document": {"uri": uris[2], "version": 2},
            "changes": [{"range": {"start": {"line": 1, "character": 36}, "end": {"line": 1, "character": 36}},
                         "text": ", pin_memory=True"}]}]}}})
    assert wire.diagnostics(uris[2], lambda p: p["version"] == 2)["diagnostics"] == []

    wire.notify("notebookDocument/didChange", {  # the SGD cell is deleted
        "notebookDocument": {"uri": notebook.as_uri(), "version": 3},
        "change": {"cells": {"structure": {"array": {"start": 4, "deleteCount": 1},
                                           "didClose": [{"uri": uris[4]}]}}}})
    wire.diagnostics(uris[4], lambda p: p["diagnostics"] == [])

    wire.notify("notebookDocument/didClose", {"notebookDocument": {"uri": notebook.as_uri()},
                                              "cellTextDocuments": [{"uri": uri} for uri in uris[:4] + uris[5:]]})
    wire.settle(1.0)
    for uri in uris:
        assert _latest(wire, uri) == [], uri
