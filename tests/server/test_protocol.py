"""gpulint's own LSP layer without a server process: framing, params shapes, the open documents."""

from __future__ import annotations

import io
import json

from gpulint.rules.gpu000_invalid_file import InvalidFile
from gpulint.rules.gpu900_unused_suppression import UnusedSuppression
from gpulint.server.convert import INVALID_FILE, UNUSED_SUPPRESSION
from gpulint.server.lsp import CODE_ACTION, DID_CHANGE, HOVER
from gpulint.server.protocol import frame, read_body, shape_problem
from gpulint.server.workspace import Workspace, choose_encoding, offset_at


def test_the_rule_codes_the_server_writes_out_are_the_rules() -> None:
    assert (INVALID_FILE, UNUSED_SUPPRESSION) == (InvalidFile.code, UnusedSuppression.code)


def test_frames_read_back_and_a_header_without_length_is_skipped() -> None:
    message = {"jsonrpc": "2.0", "method": "x", "params": {"text": "é🚀"}}
    stream = io.BytesIO(b"X-Other: 1\r\n\r\n" + frame(message) + b"Content-Length: 10\r\n\r\n{}")
    assert json.loads(read_body(stream) or b"") == message  # UTF-8 bytes counted, not characters
    assert read_body(stream) is None  # a body cut short: the end


def test_params_shapes_name_what_is_wrong() -> None:
    position = {"line": 0, "character": 0}
    assert shape_problem({"textDocument": {"uri": "file:///x.py"}, "position": position}, HOVER) is None
    assert shape_problem({"textDocument": 5, "position": position}, HOVER) == "params.textDocument must be an object"
    assert shape_problem(["a"], HOVER) == "params must be an object"
    assert shape_problem({"textDocument": {"uri": "u"}, "position": {"line": True, "character": 0}},
                         HOVER) == "params.position.line must be an integer"
    assert shape_problem({"textDocument": {"uri": "u"}}, CODE_ACTION) == "params.range is missing"
    full = {"textDocument": {"uri": "u", "version": 2}, "contentChanges": [{"text": "x"}]}
    assert shape_problem(full, DID_CHANGE) is None


def test_incremental_changes_count_in_the_negotiated_encoding() -> None:
    assert choose_encoding({"general": {"positionEncodings": ["utf-7", "utf-32", "utf-8"]}}) == "utf-32"
    assert choose_encoding({}) == "utf-16"
    text = 'a = "🚀"; b = 1\r\nc = 2\rd = 3\n'
    assert offset_at(text, 0, 9, "utf-16") == text.index(";") + 1 == offset_at(text, 0, 8, "utf-32")  # 🚀: 2 units
    assert offset_at(text, 2, 0, "utf-16") == text.index("d") and offset_at(text, 9, 0, "utf-16") == len(text)
    assert offset_at(text, 0, 99, "utf-8") == text.index("\r")
    workspace = Workspace("file:///project", [], "utf-16")
    workspace.open_text({"uri": "file:///project/a%20b.py", "languageId": "python", "version": 1, "text": text})
    workspace.change_text({"uri": "file:///project/a b.py", "version": 2}, [
        {"range": {"start": {"line": 0, "character": 10}, "end": {"line": 0, "character": 15}}, "text": "bb = 10"},
        {"range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 5}}, "text": "22"}])
    document = workspace.get_text("file:///project/a%20b.py")
    assert document is not None and document.version == 2
    assert document.source == 'a = "🚀"; bb = 10\r\nc = 22\rd = 3\n'
    assert workspace.root_path == "/project"


def test_notebook_cells_are_added_removed_and_edited() -> None:
    workspace = Workspace(None, [])
    cell = {"languageId": "python", "version": 1}
    cells = [{"kind": 2, "document": "c0"}, {"kind": 1, "document": "c1"}]
    workspace.open_notebook({"notebookDocument": {"uri": "file:///n.ipynb", "notebookType": "jupyter", "version": 1,
                                                  "cells": cells},
                             "cellTextDocuments": [{"uri": "c0", "text": "x = 1", **cell},
                                                   {"uri": "c1", "text": "# md", **cell}]})
    workspace.change_notebook({"notebookDocument": {"uri": "file:///n.ipynb", "version": 2}, "change": {"cells": {
        "structure": {"array": {"start": 1, "deleteCount": 1, "cells": [{"kind": 2, "document": "c2"}]},
                      "didOpen": [{"uri": "c2", "text": "y = 2", **cell}], "didClose": [{"uri": "c1"}]},
        "textContent": [{"document": {"uri": "c0", "version": 2},
                         "changes": [{"range": {"start": {"line": 0, "character": 4},
                                                "end": {"line": 0, "character": 5}}, "text": "3"}]}]}}})
    notebook = workspace.get_notebook("file:///n.ipynb")
    assert notebook is not None and notebook.version == 2
    assert [c.document for c in notebook.cells] == ["c0", "c2"]
    assert workspace.notebook_of_cell("c2") is notebook and workspace.notebook_of_cell("c1") is None
    assert [workspace.get_text(u).source for u in ("c0", "c2")] == ["x = 3", "y = 2"]  # type: ignore[union-attr]
