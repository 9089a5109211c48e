"""`--add-noqa` in a notebook: the comments are added to the cells' program, then written into the cells."""

from __future__ import annotations

from typing import Optional, Sequence

from gpulint.core.edits import diff_changes, minimize
from gpulint.core.findings import Finding
from gpulint.engine.suppressions import add_noqa
from gpulint.notebook.lint import apply_to_cells, to_program
from gpulint.notebook.model import NotebookError, load_notebook
from gpulint.notebook.program import build_program
from gpulint.notebook.write import splice_sources


def notebook_with_noqa(raw: bytes, findings: Sequence[Finding]) -> tuple[Optional[bytes], int]:
    """The notebook's bytes with `# noqa: CODE` on its findings (None: nothing to add), and how
    many findings the comments cover. Raises NotebookError when they cannot be written."""
    notebook = load_notebook(raw)
    program = build_program(notebook)
    placed = [f for f in (to_program(program, finding) for finding in findings) if f is not None]
    new_text, covered = add_noqa(program.text, placed)
    if new_text == program.text:
        return None, covered
    edits = [minimize(program.text[c.start:c.end], c.text, c.start) for c in diff_changes(program.text, new_text)]
    sources = apply_to_cells(program, edits)
    if any(p.cell.index in sources for p in build_program(notebook, sources).problems):
        raise NotebookError("adding comments would break a cell; left unchanged")
    return splice_sources(notebook, sources), covered
