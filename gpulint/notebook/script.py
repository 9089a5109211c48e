"""A notebook's code cells as a Python script, for `gpulint verify nb.ipynb`.

The cells run in order, in the notebook's folder (as Jupyter runs them). IPython syntax that
only sets up the session (`%matplotlib`, `%load_ext`, `%autoreload`, `%config`, installing
packages, `obj?` help) is dropped with a note; `%time stmt` and `%%time` cells run their code
once. Anything else IPython would do for the code (a shell command, `%run`, `%cd`, a `%%bash`
or `%%writefile` cell) cannot be done by a script: the notebook is then not run, and the
reason names the cell and the line.
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import Optional

from gpulint.notebook.magics import PYTHON_CELL_MAGICS, STATEMENT_MAGICS, transform
from gpulint.notebook.model import Notebook
from gpulint.notebook.program import build_program
from gpulint.records import dataclass

# magics that only set up the interactive session: a script does without them
SESSION_MAGICS = frozenset({"matplotlib", "load_ext", "reload_ext", "autoreload", "config", "pip", "conda",
                            "precision", "pprint", "xmode", "aimport", "notebook", "who", "whos", "lsmagic"})
_INSTALL = re.compile(r"!\s*(?:python3?\s+-m\s+)?(?:pip3?|conda|mamba)\s+install\b")
_NAME = re.compile(r"%%?([A-Za-z_][\w.]*)")
PRELUDE = (
    "# the code cells of {name}, in order, run as gpulint verify runs a script\n"
    "import os as _gpulint_os\n"
    "_gpulint_os.chdir(_gpulint_os.path.dirname(_gpulint_os.path.abspath(__file__)))  # the notebook's folder\n"
    "try:\n"
    "    from IPython.display import display\n"
    "except ImportError:\n"
    "    display = print\n"
)


@dataclass
class NotebookScript:
    text: str = ""
    refusal: Optional[str] = None  # why the notebook cannot run as a script
    notes: list[str] = field(default_factory=list)  # IPython lines dropped


def _dropped(line: str) -> Optional[str]:
    """Why a magic line can be left out of the script, or None when the script cannot do without it."""
    stripped = line.strip()
    if _INSTALL.match(stripped):
        return "installs packages (install them before verifying)"
    if stripped.endswith("?") or stripped.startswith("?"):
        return "asks for help"
    match = _NAME.match(stripped)
    if match is None:
        return None
    name = match.group(1)
    if name in SESSION_MAGICS:
        return "sets up the interactive session"
    if name in STATEMENT_MAGICS and not stripped.startswith("%%"):
        return "times a statement (the statement runs once)"
    if stripped.startswith("%%") and name in PYTHON_CELL_MAGICS:
        return "times or captures the cell (its code runs once)"
    return None


def notebook_script(notebook: Notebook, name: str) -> NotebookScript:
    out = NotebookScript()
    program = build_program(notebook)
    for problem in program.problems:
        row, column = problem.location
        out.refusal = f"cell {problem.cell.number} does not parse ({problem.message.split(' (')[0]} at {row}:{column})"
        return out
    for cell, reason in program.skipped:
        first = cell.source.splitlines()[0] if cell.source else ""
        out.refusal = f"cell {cell.number} is a {reason} cell (`{first.strip()}`), which a Python script cannot run"
        return out
    for cell in notebook.code_cells:  # cells of magics only have no code in the program: check them too
        continued: Optional[str] = None
        for row, line in transform(cell.source).magics:
            why = continued or _dropped(line)
            continued = why if line.rstrip().endswith("\\") else None
            if why is None:
                out.refusal = (f"cell {cell.number}, line {row}: `{line.strip()}` needs IPython (a shell "
                               "command or a magic), which a Python script cannot run")
                return out
            out.notes.append(f"cell {cell.number}, line {row}: `{line.strip()}` left out: {why}")
    parts = [PRELUDE.format(name=name)]
    for placement in program.placements:
        parts.append(f"\n# cell {placement.cell.number}\n")
        parts.append(program.text[placement.start:placement.stop])
    out.text = "".join(parts)
    return out
