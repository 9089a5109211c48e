"""Every rule case in fixtures/rules: exact findings, exact fixed output, fixes idempotent."""

from __future__ import annotations

import libcst as cst
import pytest

from gpulint.engine.linter import fix_text, lint_text
from gpulint.rules import all_rules
from gpulint.rules.gpu000_invalid_file import InvalidFile
from tests.fixture_cases import Case, all_cases

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_findings_exact(case: Case) -> None:
    text = case.path.read_text(encoding="utf-8")
    findings = lint_text(case.path, text, case.settings).findings
    got = tuple(sorted((f.location.row, f.location.column, f.code) for f in findings))
    assert got == case.expected


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fix_output(case: Case) -> None:
    text = case.path.read_text(encoding="utf-8")
    outcome = fix_text(case.path, text, case.settings, unsafe=True)
    cst.parse_module(outcome.text)
    if case.fixed_path.exists():
        assert outcome.text == case.fixed_path.read_text(encoding="utf-8")
    else:
        assert outcome.text == text, f"fix changed the file; add {case.fixed_path.name} with the expected result"
    again = fix_text(case.path, outcome.text, case.settings, unsafe=True)
    assert again.text == outcome.text, "a second fix run changed the file"


def test_every_rule_has_cases() -> None:
    """GPU000 is the engine's own (a file that does not parse): tests/engine/test_hostile*.py cover it."""
    covered = {c.path.parent.name for c in CASES}
    missing = [r.code for r in all_rules() if r is not InvalidFile and r.code not in covered]
    assert not missing, f"rules without fixture cases: {missing}"


def test_a_case_named_not_flagged_expects_no_finding() -> None:
    """The name is the first thing a reader sees: `*_not_flagged` must mean no finding, and no fix."""
    misnamed = [c.id for c in CASES if c.path.stem.endswith("_not_flagged") and (c.expected or c.fixed_path.exists())]
    assert misnamed == []
    assert any(c.path.stem.endswith("_not_flagged") for c in CASES)
