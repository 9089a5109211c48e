"""docs/fix-safety.md is checked against the code: every row's fixture gives exactly the stated fix."""

from __future__ import annotations

import re

import pytest

from gpulint.engine.linter import lint_text
from tests.fixture_cases import ROOT, load_case

TABLE = ROOT / "docs" / "fix-safety.md"
_ROW = re.compile(r"^\| (GPU\d{3}) \| (.+?) \| (safe|unsafe|no fix) \| `([^`]+)` \|$")
ROWS = [m.groups() for m in map(_ROW.match, TABLE.read_text(encoding="utf-8").splitlines()) if m]


def test_the_table_covers_every_fixable_rule() -> None:
    from gpulint.rules import all_rules

    fixable = {r.code for r in all_rules() if r.fix is not None}
    assert fixable <= {code for code, *_ in ROWS}
    assert len(ROWS) >= 30


@pytest.mark.parametrize(("code", "case", "state", "fixture"), ROWS, ids=[f"{r[0]}-{r[3]}" for r in ROWS])
def test_row_matches_its_fixture(code: str, case: str, state: str, fixture: str) -> None:
    loaded = load_case(ROOT / fixture)
    findings = [f for f in lint_text(loaded.path, loaded.path.read_text(encoding="utf-8"), loaded.settings).findings
                if f.code == code]
    assert findings, f"{fixture} has no {code} finding"
    states = {f.fix.applicability.value if f.fix is not None else "no fix" for f in findings}
    assert states == {state}, f"{fixture}: {case}"
