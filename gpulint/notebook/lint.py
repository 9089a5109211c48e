"""Lint and fix a notebook: the engine runs on the cells' program; findings and fixes go back to cells."""

from __future__ import annotations

import traceback
from dataclasses import field, replace
from pathlib import Path
from typing import Optional, Sequence

from gpulint.analysis.evidence import pedantic
from gpulint.core.edits import Edit, Fix, apply_edits, select_edits
from gpulint.core.findings import CellRef, Finding, FixEdit, Location
from gpulint.core.settings import Settings
from gpulint.engine.guard import text_size
from gpulint.engine.linter import MAX_FIX_ROUNDS, InternalError, lint_text, parse, syntax_finding
from gpulint.engine.profile import NO_PROFILE, Profile
from gpulint.notebook.model import Cell, Notebook, NotebookError
from gpulint.notebook.program import Placement, Program, build_program, row_column
from gpulint.project.view import ProjectView
from gpulint.records import dataclass
from gpulint.rules.gpu000_invalid_file import InvalidFile, may_hold_findings

NO_FIX_HERE = " (no automatic fix in a notebook here: it would edit a magic line or span two cells)"


def cell_ref(notebook: Notebook, cell: Cell, start: int, end: int) -> CellRef:
    """The cell, and the lines of the .ipynb file that hold source offsets `start` to `end`."""
    def file_row(offset: int) -> int:
        if cell.lines is None:
            return notebook.text_row(cell.span[0])
        position = 0
        for line in cell.lines:
            position += len(line.value)
            if offset < position:
                return notebook.text_row(line.start)
        return notebook.text_row(cell.lines[-1].start if cell.lines else cell.span[0])

    return CellRef(cell.number, cell.id, file_row(start), file_row(max(start, end - 1)))


def _map_finding(program: Program, notebook: Notebook, finding: Finding) -> Finding:
    placement, start = program.locate(program.offset(finding.location.row, finding.location.column))
    if placement is None:
        return finding
    end_placement, end = program.locate(program.offset(finding.end_location.row, finding.end_location.column),
                                        at_end=True)
    if end_placement is not placement:
        end = len(placement.source)
    end = max(start, end)
    source = placement.source
    fix, message = finding.fix, finding.message
    if fix is not None:
        edits = _mapped_edits(program, fix.edits)
        if edits is None:
            fix, message = None, message + NO_FIX_HERE
        else:
            fix = Fix(fix.applicability, fix.message, edits)
    first, last = finding.noqa_rows
    rows = (0, 0)
    if first > 0:
        rows = (_cell_row(program, placement, first), _cell_row(program, placement, last))
    return replace(finding, message=message, location=Location(*row_column(source, start)),
                   end_location=Location(*row_column(source, end)), fix=fix, noqa_rows=rows,
                   cell=cell_ref(notebook, placement.cell, start, end))


def to_program(program: Program, finding: Finding) -> Optional[Finding]:
    """A finding in cell coordinates back in the program's (a code line is one source line)."""
    cell = finding.cell
    placement = next((p for p in program.placements if cell is not None and p.cell.number == cell.number), None)
    if placement is None:
        return None
    first_row = row_column(program.text, placement.start)[0] - 1
    first, last = finding.noqa_rows
    return replace(finding, location=Location(first_row + finding.location.row, finding.location.column),
                   end_location=Location(first_row + finding.end_location.row, finding.end_location.column),
                   noqa_rows=(first_row + first, first_row + last) if first > 0 else (0, 0), cell=None)


def _cell_row(program: Program, placement: Placement, row: int) -> int:
    found, offset = program.locate(program.offset(row, 1))
    if found is not placement:
        offset = 0 if program.offset(row, 1) < placement.start else len(placement.source)
    return row_column(placement.source, offset)[0]


def _mapped_edits(program: Program, edits: tuple[FixEdit, ...]) -> Optional[tuple[FixEdit, ...]]:
    out = []
    for edit in edits:
        mapped = program.map_edit(edit.start, edit.end, edit.content)
        if mapped is None:
            return None
        source = next(p.source for p in program.placements if p.cell is mapped.cell)
        out.append(FixEdit(mapped.start, mapped.end, mapped.content, Location(*row_column(source, mapped.start)),
                           Location(*row_column(source, mapped.end)), mapped.cell.number))
    return tuple(out)


def _problems(path: Path, program: Program, notebook: Notebook, settings: Settings) -> list[Finding]:
    if not settings.is_enabled(InvalidFile.code):
        return []
    out = []
    # a cell of YAML or shell commands, or a notebook that never names torch: nothing any rule reads went unchecked
    everything = pedantic(settings)
    if not everything and not may_hold_findings("".join(cell.source for cell in notebook.code_cells)):
        return []
    for problem in program.problems:
        if not everything and problem.holds is not None:
            continue
        finding = syntax_finding(str(path), problem.message, *problem.location)
        out.append(replace(finding, cell=cell_ref(notebook, problem.cell, problem.offset, problem.offset)))
    return out


def lint_notebook(path: Path, notebook: Notebook, settings: Settings, profile: Profile = NO_PROFILE,
                  project: Optional[ProjectView] = None) -> list[Finding]:
    """Findings of the notebook's code cells, in cell coordinates. Raises InternalError on a bug."""
    program = build_program(notebook)
    findings = _problems(path, program, notebook, settings)
    if program.text:
        result = lint_text(path, program.text, settings, profile=profile, project=project)
        findings += [_map_finding(program, notebook, f) for f in result.findings]
    return sorted(findings, key=lambda f: f.sort_key)


@dataclass
class NotebookFix:
    sources: dict[int, str] = field(default_factory=dict)  # new sources by cell index
    applied: int = 0
    too_large: Optional[Finding] = None  # over max-fix-size: nothing was fixed


def fix_notebook(path: Path, notebook: Notebook, settings: Settings, unsafe: bool, profile: Profile = NO_PROFILE,
                 project: Optional[ProjectView] = None) -> NotebookFix:
    """Apply the fixes that map onto cells, round after round, as `fix_text` does for a file."""
    outcome = NotebookFix()
    program = build_program(notebook)
    if text_size(program.text) > settings.max_fix_size:
        from gpulint.core.options import format_size

        if settings.is_enabled(InvalidFile.code):
            outcome.too_large = syntax_finding(str(path), f"notebook code is too large to fix (max-fix-size is "
                                                          f"{format_size(settings.max_fix_size)}); left unfixed")
        return outcome
    for _ in range(MAX_FIX_ROUNDS):
        result = lint_text(path, program.text, settings, profile=profile, project=project)
        fixes = [f.fix for f in result.findings if f.fix is not None and f.fix.is_applicable(unsafe)
                 and _mapped_edits(program, f.fix.edits) is not None]
        if not fixes:
            break
        with profile.phase("fixing"):
            edits, applied = select_edits(fixes)
            changed = apply_to_cells(program, edits)
        if applied == 0 or not changed:
            break
        outcome.sources.update(changed)
        program = build_program(notebook, outcome.sources)
        broken = [p for p in program.problems if p.cell.index in changed]
        try:
            if broken:
                raise SyntaxError(broken[0].message)
            with profile.phase("fixing"):
                parse(program.text)
        except Exception as exc:  # noqa: BLE001 - any parser error: the fix is a bug, never written
            raise InternalError(str(path), f"a fix produced code that does not parse ({exc}); notebook left "
                                           "unchanged", traceback.format_exc()) from None
        outcome.applied += applied
    return outcome


def apply_to_cells(program: Program, edits: Sequence[Edit]) -> dict[int, str]:
    """The program's edits applied to the cells they fall in: new sources by cell index.
    NotebookError when an edit does not fall in one cell's own text."""
    per_cell: dict[int, list[Edit]] = {}
    for edit in edits:
        mapped = program.map_edit(edit.start, edit.end, edit.content)
        if mapped is None:
            raise NotebookError("an edit falls on a magic line or between cells; not written")
        per_cell.setdefault(mapped.cell.index, []).append(Edit(mapped.start, mapped.end, mapped.content))
    sources = {p.cell.index: p.source for p in program.placements}
    changed = {}
    for index, cell_edits in per_cell.items():
        new = apply_edits(sources[index], cell_edits)
        if new != sources[index]:
            changed[index] = new
    return changed
