"""Notebooks for tests, written the way Jupyter writes them, and checks of what `fix` may change."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any, Optional, Sequence

NOTEBOOKS = Path(__file__).resolve().parent / "notebooks"


def source_lines(text: str) -> list[str]:
    """A source as Jupyter stores it: one string per line, each but the last ending in its newline."""
    return re.findall(r"[^\n]*\n|[^\n]+", text)


def code_cell(source: str, index: int, outputs: Optional[list] = None) -> dict[str, Any]:
    return {"cell_type": "code", "execution_count": index + 1, "id": f"cell-{index}", "metadata": {},
            "outputs": outputs or [], "source": source_lines(source)}


def notebook(sources: Sequence[str], indent: Optional[int] = 1) -> str:
    """A Jupyter-shaped notebook (nbformat 4.5, indent 1, sorted keys) of code cells."""
    data = {
        "cells": [code_cell(source, i) for i, source in enumerate(sources)],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    return json.dumps(data, indent=indent, sort_keys=True, ensure_ascii=False) + "\n"


def split_statements(text: str) -> list[str]:
    """The text cut before each top-level statement's leading comments: concatenated, the chunks
    are the text again, and a comment above a statement stays in its chunk."""
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    cuts = []
    previous_end = 0
    for node in tree.body:
        cuts.append(previous_end)
        previous_end = node.end_lineno or node.lineno
    cuts = sorted(set(cuts[1:]))
    chunks, start = [], 0
    for cut in cuts:
        chunks.append("".join(lines[start:cut]))
        start = cut
    chunks.append("".join(lines[start:]))
    return [c for c in chunks if c]


def sources_of(text: str) -> list[str]:
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in json.loads(text)["cells"]]


def without_sources(text: str) -> Any:
    """The notebook's data with every source blanked (what `fix` must not change)."""
    data = json.loads(text, parse_constant=str)
    for cell in data["cells"]:
        cell["source"] = type(cell["source"])()
    return data


def assert_only_sources_changed(before: bytes, after: bytes) -> int:
    """Bytes outside the edited cells' source values are identical; returns how many JSON lines differ."""
    from gpulint.notebook.model import load_notebook

    old, new = load_notebook(before), load_notebook(after)
    assert old.bom == new.bom
    assert without_sources(old.text) == without_sources(new.text)
    outside_old, outside_new = _outside(old), _outside(new)
    assert outside_old == outside_new, "bytes outside the source values changed"
    import difflib
    return sum(1 for line in difflib.ndiff(old.text.splitlines(True), new.text.splitlines(True))
               if line.startswith(("+ ", "- ")))


def _outside(nb: Any) -> list[str]:
    pieces, position = [], 0
    for cell in nb.cells:
        pieces.append(nb.text[position:cell.span[0]])
        position = cell.span[1]
    pieces.append(nb.text[position:])
    return pieces
