"""What the lint worker runs (server/worker.py): plain functions of text, settings and the project view.

The worker's fork server imports this module ahead of the first job, so the engine and the rules
are loaded once, not by every fresh worker and never by the server's own process; LibCST and the
notebook modules are loaded by its warm-up (warm()), once the first worker is forked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from gpulint.core.edits import Edit
from gpulint.core.findings import Finding
from gpulint.core.settings import Settings
from gpulint.engine.linter import fix_text, lint_text
from gpulint.project.view import ProjectView
from gpulint.rules import all_rules
from gpulint.server.cells import NotebookCells, changed_edits, notebook_of

all_rules()  # the rule modules too: a fresh worker forked from the fork server has them

# A small training script whose lint, with its fixes built, loads what the rules import lazily
# (LibCST, packaging): run once in the fork server (warm()), every worker forked from it has them.
_WARM_SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda")
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512)).to(device)
loader = DataLoader(TensorDataset(torch.randn(64, 512), torch.randn(64, 512)), batch_size=8)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for x, y in loader:
    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def lint(path: Path, text: str, settings: Settings, project: Optional[ProjectView],
         edits: bool = True) -> list[Finding]:
    """The buffer's findings, as `gpulint check - --stdin-filename PATH` finds them; without `edits`,
    fixes are predictions (applicability and message), as `check` reports them: no LibCST is parsed."""
    return lint_text(path, text, settings, project=project, edits=edits).findings


def fix_all(path: Path, text: str, settings: Settings, project: Optional[ProjectView]) -> list[Edit]:
    """The edits of every safe fix (what `gpulint fix` would write), as minimal replacements."""
    outcome = fix_text(path, text, settings, unsafe=False, project=project)
    return [Edit(c.start, c.end, c.text) for c in outcome.changes]


def lint_cells(path: Path, cells: NotebookCells, settings: Settings,
               project: Optional[ProjectView]) -> list[Finding]:
    """An open notebook's findings, in cell coordinates, as `gpulint check` finds them in the .ipynb file."""
    from gpulint.notebook.lint import lint_notebook

    return lint_notebook(path, notebook_of(cells), settings, project=project)


def fix_cells(path: Path, cells: NotebookCells, settings: Settings,
              project: Optional[ProjectView]) -> dict[int, list[Edit]]:
    """Every safe fix of an open notebook: minimal edits per cell index."""
    from gpulint.notebook.lint import fix_notebook

    outcome = fix_notebook(path, notebook_of(cells), settings, unsafe=False, project=project)
    if outcome.too_large is not None:
        return {}
    return {index: changed_edits(cells[index][1], source) for index, source in outcome.sources.items()}


def warm() -> None:
    """Lint a small script with its fixes built, in a folder that does not exist (no configuration or
    project file is read): the modules the first real lint would load on the way are loaded now.
    Called by the fork server (server/preload.py), so a fresh worker starts with them; the notebook
    modules too, which the fork server does not import before its first fork (a first document is
    seldom a notebook)."""
    import gpulint.notebook.lint  # noqa: F401 - loaded for the workers forked from here
    from gpulint.core.settings import Settings

    path = Path("/nonexistent-gpulint-warm-up") / "train.py"
    lint_text(path, _WARM_SCRIPT, Settings(), edits=True)
