"""An editor's notebook as the command line reads a .ipynb file, and text edits between two versions.

Light on purpose: the lint worker's jobs (server/jobs.py) use it, and a fresh worker should load the
linter, not the configuration reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpulint.core.edits import Edit, diff_changes, minimize

if TYPE_CHECKING:
    from gpulint.notebook.model import Notebook


def changed_edits(old: str, new: str) -> list[Edit]:
    """Minimal edits that turn `old` into `new`."""
    return [minimize(old[c.start:c.end], c.text, c.start) for c in diff_changes(old, new)]


# An editor's notebook: (cell type, source) per cell, in order; the cell type is "code" (a Python
# code cell), "markdown", or "raw" (a code cell in another language: not linted, as a cell magic).
NotebookCells = tuple[tuple[str, str], ...]


def notebook_of(cells: NotebookCells) -> "Notebook":
    """An editor's notebook as the command line reads a .ipynb file of the same cells."""
    import json

    from gpulint.notebook.model import load_notebook

    def cell(kind: str, source: str) -> dict[str, Any]:
        extra: dict[str, Any] = {"outputs": [], "execution_count": None} if kind == "code" else {}
        return {"cell_type": kind, "metadata": {}, "source": source, **extra}

    data = {"cells": [cell(kind, source) for kind, source in cells], "metadata": {"language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 4}
    return load_notebook(json.dumps(data).encode())
