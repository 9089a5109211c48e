"""Every rule case in fixtures/rules: exact findings, exact fixed output, fixes idempotent."""

from __future__ import annotations

import re
from pathlib import Path

import libcst as cst
import pytest

from gpulint.engine.linter import fix_text, lint_text
from gpulint.rules import all_rules
from gpulint.rules.gpu000_invalid_file import InvalidFile
from tests.fixture_cases import Case, CaseError, all_cases, load_case

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_findings_exact(case: Case) -> None:
    text = case.path.read_text(encoding="utf-8")
    findings = lint_text(case.path, text, case.settings).findings
    got = tuple(sorted((f.location.row, f.location.column, f.code) for f in findings))
    assert got == case.expected
    said = sorted((f.location.row, f.location.column, f.code, f.message) for f in findings)
    pinned = [m for m in case.messages if m[3] is not None]
    assert [m for m in said if m[:3] in {p[:3] for p in pinned}] == pinned, "a finding's message changed"


def test_every_expectation_pins_its_message() -> None:
    """A message is what users read and tools match on: a change to it is a change to review."""
    unpinned = [f"{c.id}:{row}:{column} {code}" for c in CASES for row, column, code, message in c.messages
                if message is None]
    assert not unpinned, f"run: python scripts/update_fixed_fixtures.py <case>.py ({unpinned[:10]})"


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
    """The name is the first thing a reader sees: `*_not_flagged` must mean no finding, and no fix.
    The file is read as text, so an `expect:` line the loader would not parse counts too."""
    not_flagged = [c for c in CASES if c.path.stem.endswith("_not_flagged")]
    misnamed = [c.id for c in not_flagged if c.expected or c.fixed_path.exists()
                or re.search(r"expect\s*:", c.path.read_text(encoding="utf-8"), re.IGNORECASE)]
    assert misnamed == []
    assert len(not_flagged) >= len({c.path.parent.name for c in not_flagged}) >= 5


@pytest.mark.parametrize("header, problem", [
    ("# expect: 3:1 GPU101 (the loader)\n", "not `# expect: ROW:COL GPUnnn: message`"),
    ("# expect: 3:1 GPU101:\n", "not `# expect: ROW:COL GPUnnn: message`"),
    ("# Expect: 3 GPU101\n", "not `# expect: ROW:COL GPUnnn: message`"),
    ("# gpulint-test: select=GPU101\nimport torch\n# expect: 3:1 GPU101\n", "below the header"),
])
def test_an_expectation_the_loader_cannot_read_is_an_error(tmp_path: Path, header: str, problem: str) -> None:
    """A dropped `expect:` line would turn a flagged case into a clean one without a word."""
    case = tmp_path / "GPU101" / "dropped.py"
    case.parent.mkdir()
    case.write_text(header + "x = 1\n", encoding="utf-8")
    with pytest.raises(CaseError, match=re.escape(problem)):
        load_case(case)


def test_the_loader_reads_expectations_and_settings(tmp_path: Path) -> None:
    case = tmp_path / "GPU102" / "two.py"
    case.parent.mkdir()
    case.write_text("# gpulint-test: select=GPU101,GPU102\n# expect: 9:5 GPU102: no workers: here\n"
                    "# expect: 4:1 GPU101\n\nx = 1\n", encoding="utf-8")
    loaded = load_case(case)
    assert loaded.expected == ((4, 1, "GPU101"), (9, 5, "GPU102"))
    assert loaded.messages == ((4, 1, "GPU101", None), (9, 5, "GPU102", "no workers: here"))
    assert loaded.settings.select == ("GPU101", "GPU102")
