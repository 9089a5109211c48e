"""Each fix case a rule declares (`RuleDocs.fix_cases`, printed in docs/fix-safety.md) holds on its fixture."""

from __future__ import annotations

import pytest

from gpulint.engine.linter import lint_text
from gpulint.output.docs import fixture_path
from gpulint.rules import all_rules
from gpulint.rules.base import FixCase
from tests.fixture_cases import ROOT, load_case

CASES = [(rule.code, case) for rule in all_rules() for case in rule.docs.fix_cases]


def test_every_fixable_rule_declares_its_cases() -> None:
    fixable = {r.code for r in all_rules() if r.fix is not None}
    assert fixable <= {code for code, _ in CASES}
    assert len(CASES) >= 30


def test_no_fixture_is_named_twice_for_one_rule() -> None:
    names = [(code, case.fixture) for code, case in CASES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(("code", "case"), CASES, ids=[f"{code}-{case.fixture}" for code, case in CASES])
def test_case_holds_on_its_fixture(code: str, case: FixCase) -> None:
    path = ROOT / fixture_path(code, case.fixture)
    assert path.is_file(), f"{code} names a fixture that does not exist: {path}"
    loaded = load_case(path)
    findings = [f for f in lint_text(loaded.path, loaded.path.read_text(encoding="utf-8"), loaded.settings).findings
                if f.code == code]
    assert findings, f"{path.name} has no {code} finding"
    states = {f.fix.applicability.value if f.fix is not None else "no fix" for f in findings}
    assert states == {case.gives_text}, f"{path.name}: {case.case}"
