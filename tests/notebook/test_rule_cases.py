"""Every rule case of fixtures/rules as a notebook, one top-level statement a cell: the same
findings (mapped back to the file's lines) and the same fixed code as the .py file gives.

A notebook is linted as its code cells joined, so the rules must see exactly what they see in
the file, and every fix must land in the right cell, at the right place, byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulint.notebook.lint import fix_notebook, lint_notebook
from gpulint.notebook.model import load_notebook
from gpulint.notebook.write import splice_sources
from tests.fixture_cases import Case, all_cases
from tests.notebook.nbfiles import assert_only_sources_changed, notebook, sources_of, split_statements

CASES = all_cases()


def _text(case: Case, crlf: bool = False) -> str:
    text = case.path.read_text(encoding="utf-8")
    return text.replace("\n", "\r\n") if crlf else text


def _as_notebook(case: Case, trailing_newline: bool = True, crlf: bool = False) -> tuple[list[str], bytes]:
    """The case cut into cells; without `trailing_newline` each cell's last newline is dropped,
    as Jupyter stores cells (joined with a newline, the cells are the file again); with `crlf`
    every line ends in CRLF, as in notebooks saved on Windows."""
    chunks = split_statements(_text(case, crlf))
    if not trailing_newline:
        newline = "\r\n" if crlf else "\n"
        chunks = [c[:-len(newline)] if c.endswith(newline) and i < len(chunks) - 1 else c for i, c in enumerate(chunks)]
    return chunks, notebook(chunks).encode("utf-8")


def _joined(sources: list[str], trailing_newline: bool, crlf: bool = False) -> str:
    return "".join(sources) if trailing_newline else ("\r\n" if crlf else "\n").join(sources)


@pytest.mark.parametrize("trailing_newline", [True, False], ids=["newline", "jupyter"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_findings_are_the_files_findings(case: Case, trailing_newline: bool) -> None:
    chunks, raw = _as_notebook(case, trailing_newline)
    first_rows = [1]
    for chunk in chunks[:-1]:
        first_rows.append(first_rows[-1] + chunk.count("\n") + (0 if trailing_newline else 1))
    findings = lint_notebook(Path("case.ipynb"), load_notebook(raw), case.settings)
    got = []
    for finding in findings:
        assert finding.cell is not None
        got.append((first_rows[finding.cell.number - 1] + finding.location.row - 1, finding.location.column,
                    finding.code))
    assert tuple(sorted(got)) == case.expected


@pytest.mark.parametrize("trailing_newline, crlf", [(True, False), (False, False), (False, True)],
                         ids=["newline", "jupyter", "jupyter-crlf"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fixes_are_the_files_fixes(case: Case, trailing_newline: bool, crlf: bool) -> None:
    text = _text(case, crlf)
    _, raw = _as_notebook(case, trailing_newline, crlf)
    nb = load_notebook(raw)
    outcome = fix_notebook(Path("case.ipynb"), nb, case.settings, unsafe=True)
    fixed = splice_sources(nb, outcome.sources)
    expected = case.fixed_path.read_text(encoding="utf-8") if case.fixed_path.exists() else text
    if crlf:
        expected = expected.replace("\r\n", "\n").replace("\n", "\r\n")
    assert _joined(sources_of(fixed.decode("utf-8")), trailing_newline, crlf) == expected
    assert_only_sources_changed(raw, fixed)
    again = fix_notebook(Path("case.ipynb"), load_notebook(fixed), case.settings, unsafe=True)
    assert again.sources == {} and again.applied == 0
