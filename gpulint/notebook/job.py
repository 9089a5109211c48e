"""A notebook through `check`, `fix` and `--diff`: what the runner calls for a .ipynb file.

`fix` keeps every promise it makes for .py files: only the edited sources change (the rest
of the JSON is compared after splicing), the fixed code is re-parsed, and the file is written
by the same guarded writer (atomic, mode and owner kept, not written when it changed since it
was read).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from gpulint.core.findings import Finding
from gpulint.core.settings import Settings
from gpulint.engine.linter import syntax_finding
from gpulint.engine.profile import NO_PROFILE, Profile
from gpulint.notebook.lint import fix_notebook, lint_notebook
from gpulint.notebook.model import Notebook, NotebookError, is_python, load_notebook
from gpulint.notebook.write import splice_sources
from gpulint.project.view import ProjectView
from gpulint.records import dataclass


def unreadable(path: Path, raw: bytes) -> tuple[Optional[Notebook], list[Finding]]:
    """The notebook, or why it cannot be linted as a GPU000 finding."""
    try:
        notebook = load_notebook(raw)
    except NotebookError as exc:
        return None, [syntax_finding(str(path), f"cannot lint notebook: {exc}")]
    if not is_python(notebook):
        return None, [syntax_finding(str(path), f"cannot lint notebook: its kernel runs {notebook.language}, not "
                                                "Python (exclude it with extend-exclude)")]
    return notebook, []


def changed_cells(path: str, before: Notebook, after: Notebook) -> tuple[tuple[str, str, str], ...]:
    """(label, source before, source after) per changed code cell, labelled `nb.ipynb:cell N`; the
    command line prints them as unified diffs."""
    return tuple((f"{path}:cell {old.number}", old.source, new.source)
                 for old, new in zip(before.cells, after.cells) if old.source != new.source)


@dataclass
class NotebookResult:
    findings: list[Finding]
    fixed: int = 0
    data: Optional[bytes] = None  # the fixed notebook's bytes, when fixing changed it
    changes: tuple[tuple[str, str, str], ...] = ()  # the changed cells (see changed_cells)
    error: Optional[str] = None  # a fix computed but refused (left unwritten)
    cacheable: bool = True


def run_notebook(path: Path, raw: bytes, settings: Settings, fixing: bool, unsafe: bool,
                 project: Optional[ProjectView] = None, profile: Profile = NO_PROFILE) -> NotebookResult:
    """Findings, and with `fixing` the fixed bytes (not written here). Raises InternalError on a bug."""
    notebook, problems = unreadable(path, raw)
    if notebook is None:
        return NotebookResult(problems)
    if not fixing:
        return NotebookResult(lint_notebook(path, notebook, settings, profile, project))
    outcome = fix_notebook(path, notebook, settings, unsafe, profile, project)
    if outcome.too_large is not None:
        findings = lint_notebook(path, notebook, settings, profile, project) + [outcome.too_large]
        return NotebookResult(sorted(findings, key=lambda f: f.sort_key), cacheable=False)
    if not outcome.sources:
        return NotebookResult(lint_notebook(path, notebook, settings, profile, project))
    try:
        data = splice_sources(notebook, outcome.sources)
        fixed = load_notebook(data)
    except NotebookError as exc:
        return NotebookResult(lint_notebook(path, notebook, settings, profile, project), error=str(exc))
    return NotebookResult(lint_notebook(path, fixed, settings, profile, project), outcome.applied, data,
                          changed_cells(str(path), notebook, fixed))
