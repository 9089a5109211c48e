"""What the editor holds open: text documents, notebooks and their cells, workspace folders.

The server lints these and nothing else (it never reads an open document from disk). Edits arrive
as LSP content changes, positions counted in the negotiated encoding; URIs are compared unquoted
(`file:///a%20b.py` and `file:///a b.py` are one document), as editors spell them either way.
"""

from __future__ import annotations

import logging
from dataclasses import field
from pathlib import Path
from typing import Any, Optional
from urllib.parse import unquote, urlparse

from gpulint.records import dataclass

log = logging.getLogger("gpulint.server")

ENCODINGS = ("utf-8", "utf-16", "utf-32")
MARKUP_CELL, CODE_CELL = 1, 2  # NotebookCellKind


def file_path(uri: str) -> Optional[Path]:
    """The path of a file: URI; None for another scheme (an untitled buffer, a notebook cell)."""
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def choose_encoding(capabilities: Any) -> str:
    """The position encoding: the client's first choice that gpulint counts in, else UTF-16 (LSP's)."""
    general = capabilities.get("general") if isinstance(capabilities, dict) else None
    offered = general.get("positionEncodings") if isinstance(general, dict) else None
    for encoding in offered if isinstance(offered, list) else []:
        if encoding in ENCODINGS:
            return str(encoding)
    return "utf-16"


def _width(char: str, encoding: str) -> int:
    """How many units of `encoding` one character counts."""
    if encoding == "utf-32":
        return 1
    if encoding == "utf-8":
        return len(char.encode("utf-8", errors="surrogatepass"))
    return 2 if ord(char) > 0xFFFF else 1


def offset_at(text: str, line: int, character: int, encoding: str) -> int:
    """The offset in `text` of an LSP position; past a line's end: that end, past the last line: the text's end.
    Lines end at \\n, \\r\\n or \\r (the specification's three)."""
    start = 0
    for _ in range(max(line, 0)):
        newline = _next_break(text, start)
        if newline < 0:
            return len(text)
        start = newline + (2 if text.startswith("\r\n", newline) else 1)
    end = _next_break(text, start)
    end = len(text) if end < 0 else end
    units = 0
    position = start
    while position < end and units < character:
        units += _width(text[position], encoding)
        position += 1
    return position


def _next_break(text: str, start: int) -> int:
    breaks = [i for i in (text.find("\n", start), text.find("\r", start)) if i >= 0]
    return min(breaks) if breaks else -1


@dataclass
class TextDocument:
    """An open text document (or a notebook cell) as the editor holds it."""

    uri: str
    source: str
    version: Optional[int] = None
    language_id: Optional[str] = None

    def apply(self, change: dict[str, Any], encoding: str) -> None:
        """One content change: a range replaced, or (no range) the whole text."""
        if "range" not in change or change["range"] is None:
            self.source = change["text"]
            return
        start, end = change["range"]["start"], change["range"]["end"]
        low = offset_at(self.source, start["line"], start["character"], encoding)
        high = max(low, offset_at(self.source, end["line"], end["character"], encoding))
        self.source = self.source[:low] + change["text"] + self.source[high:]


@dataclass
class NotebookCell:
    kind: int  # MARKUP_CELL or CODE_CELL
    document: str  # the URI of the cell's text document


@dataclass
class NotebookDocument:
    uri: str
    version: Optional[int]
    cells: list[NotebookCell] = field(default_factory=list)


def _cells(data: list[dict[str, Any]]) -> list[NotebookCell]:
    return [NotebookCell(cell["kind"], cell["document"]) for cell in data]


class Workspace:
    """The open documents, notebooks and workspace folders, and the position encoding in use."""

    def __init__(self, root_uri: Optional[str], folders: list[dict[str, Any]], encoding: str = "utf-16") -> None:
        self.root_uri = root_uri
        self.root_path: Optional[str] = None
        if root_uri:
            path = file_path(root_uri)
            self.root_path = str(path) if path is not None else None
        self.position_encoding = encoding
        self.text_documents: dict[str, TextDocument] = {}  # by unquoted URI
        self.notebooks: dict[str, NotebookDocument] = {}  # by unquoted URI
        self.cell_notebook: dict[str, str] = {}  # unquoted cell URI -> unquoted notebook URI
        self.folders: dict[str, str] = {}  # unquoted folder URI -> the folder's URI as sent
        for folder in folders:
            self.add_folder(folder["uri"])

    # --- folders --------------------------------------------------------------------------------
    def add_folder(self, uri: str) -> None:
        self.folders[unquote(uri)] = uri

    def remove_folder(self, uri: str) -> None:
        self.folders.pop(unquote(uri), None)

    # --- text documents -------------------------------------------------------------------------
    def get_text(self, uri: str) -> Optional[TextDocument]:
        return self.text_documents.get(unquote(uri))

    def open_text(self, item: dict[str, Any], notebook_uri: Optional[str] = None) -> None:
        """didOpen's TextDocumentItem (or a cell's, with the notebook it belongs to)."""
        uri = item["uri"]
        self.text_documents[unquote(uri)] = TextDocument(uri, item["text"], item.get("version"), item.get("languageId"))
        if notebook_uri is not None:
            self.cell_notebook[unquote(uri)] = unquote(notebook_uri)

    def change_text(self, identifier: dict[str, Any], changes: list[dict[str, Any]]) -> None:
        """didChange's content changes, in order; the document takes the identifier's version."""
        document = self.get_text(identifier["uri"])
        if document is None:
            log.warning("ignored a change to %s: it is not open", identifier["uri"])
            return
        for change in changes:
            document.apply(change, self.position_encoding)
        document.version = identifier.get("version")

    def close_text(self, uri: str) -> None:
        self.text_documents.pop(unquote(uri), None)
        self.cell_notebook.pop(unquote(uri), None)

    # --- notebooks ------------------------------------------------------------------------------
    def get_notebook(self, uri: str) -> Optional[NotebookDocument]:
        return self.notebooks.get(unquote(uri))

    def notebook_of_cell(self, cell_uri: str) -> Optional[NotebookDocument]:
        notebook = self.cell_notebook.get(unquote(cell_uri))
        return self.notebooks.get(notebook) if notebook is not None else None

    def open_notebook(self, params: dict[str, Any]) -> None:
        """notebookDocument/didOpen: the notebook, its cells, and each cell's text document."""
        data = params["notebookDocument"]
        self.notebooks[unquote(data["uri"])] = NotebookDocument(data["uri"], data.get("version"),
                                                                _cells(data["cells"]))
        for item in params["cellTextDocuments"]:
            self.open_text(item, data["uri"])

    def change_notebook(self, params: dict[str, Any]) -> None:
        """notebookDocument/didChange: cells' kinds, the cell list (cells added, removed), cells' text."""
        uri = params["notebookDocument"]["uri"]
        notebook = self.get_notebook(uri)
        if notebook is None:
            log.warning("ignored a change to notebook %s: it is not open", uri)
            return
        notebook.version = params["notebookDocument"].get("version")
        cells = (params.get("change") or {}).get("cells") or {}
        by_document = {cell.document: cell for cell in notebook.cells}
        for data in cells.get("data") or []:
            if data["document"] in by_document:
                by_document[data["document"]].kind = data["kind"]
        structure = cells.get("structure")
        if structure:
            array = structure["array"]
            start, count = array["start"], array["deleteCount"]
            notebook.cells[start:start + count] = _cells(array.get("cells") or [])
            for item in structure.get("didOpen") or []:
                self.open_text(item, uri)
            for identifier in structure.get("didClose") or []:
                self.close_text(identifier["uri"])
        for content in cells.get("textContent") or []:
            self.change_text(content["document"], content["changes"])

    def close_notebook(self, params: dict[str, Any]) -> None:
        self.notebooks.pop(unquote(params["notebookDocument"]["uri"]), None)
        for identifier in params["cellTextDocuments"]:
            self.close_text(identifier["uri"])
