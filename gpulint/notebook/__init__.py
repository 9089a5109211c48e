"""Jupyter notebooks: their code cells linted as one program, fixed without touching other bytes.

Light on purpose: the file walk and the runner ask `is_notebook` for every file, and must not
load LibCST or the notebook machinery to do it.
"""

from __future__ import annotations

import os
from typing import Optional

from gpulint.project import NOTEBOOK_SUFFIX


def is_notebook(name: str) -> bool:
    """Whether `name` is a notebook by its suffix (the content is checked when it is read)."""
    return os.path.splitext(name)[1].lower() == NOTEBOOK_SUFFIX


def notebook_code(raw: bytes) -> Optional[str]:
    """The program of a notebook's code cells (for the project pass), or None when it is not one."""
    from gpulint.notebook.model import NotebookError, load_notebook
    from gpulint.notebook.program import build_program

    try:
        return build_program(load_notebook(raw)).text
    except NotebookError:
        return None
