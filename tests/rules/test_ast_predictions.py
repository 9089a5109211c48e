"""Rules on `ast` predict their fix's applicability (`check` shows it without building the fix): for
every fixture of such a rule, the prediction must equal what `build_fix` builds (issue 25)."""

from __future__ import annotations

import pytest

from gpulint.core.findings import Finding
from gpulint.engine.linter import enabled_rules, lint_text
from tests.fixture_cases import Case, all_cases

CASES = [c for c in all_cases() if any(r.on_ast for r in enabled_rules(c.settings))]


def _fixes(findings: list[Finding], codes: set[str]) -> list[tuple[object, ...]]:
    return [(f.location.row, f.location.column, f.code, f.message,
             f.fix.applicability.value if f.fix is not None else None, f.fix.message if f.fix is not None else None)
            for f in findings if f.code in codes]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_predicted_fix_equals_built_fix(case: Case) -> None:
    text = case.path.read_text(encoding="utf-8")
    codes = {r.code for r in enabled_rules(case.settings) if r.on_ast}
    predicted = lint_text(case.path, text, case.settings, edits=False).findings
    built = lint_text(case.path, text, case.settings, edits=True).findings
    assert _fixes(predicted, codes) == _fixes(built, codes)
    assert all(f.fix.edits for f in built if f.code in codes and f.fix is not None), "a built fix has no edits"
    assert all(not f.fix.edits for f in predicted if f.code in codes and f.fix is not None)

