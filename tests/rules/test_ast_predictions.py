"""Rules on `ast` predict their fix's applicability (`check` shows it without building the fix): for
every fixture of such a rule, the prediction must equal what `build_fix` builds (issue 25)."""

from __future__ import annotations

import ast
import re

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



# -- GPU001/GPU002 on code LibCST reads by lines ----------------------------------------------------------
_HEADERS = re.compile(
    r"^\s*(if|for|while|with|def|class|try|except|else|elif|finally|return|async|import|from)\b|^\s*[@#]")
_OPEN = (":", ",", "(", "[", "{", "\\")


def _line_variants(text: str) -> list[str]:
    """The text with two neighbouring simple statements of a block joined by `;`, and with an optimizer step
    or a gradient clip moved onto a one-line suite (`if True: opt.step()`, an `elif`): LibCST holds such
    code in one line or in no block, which analysis/amp_fix.py must read alike (analysis/amp_regions.py)."""
    lines = text.split("\n")
    variants = []
    for i in range(len(lines) - 1):
        a, b = lines[i], lines[i + 1]
        indent = len(a) - len(a.lstrip())
        if indent == 0 or indent != len(b) - len(b.lstrip()) or not a.strip() or not b.strip() \
                or _HEADERS.match(a) or _HEADERS.match(b) or a.rstrip().endswith(_OPEN) or b.rstrip().endswith(_OPEN):
            continue
        variants.append("\n".join([*lines[:i], f"{a}; {b.strip()}", *lines[i + 2:]]))
    for i, line in enumerate(lines):
        step = re.match(r"^(\s+)(\w+(?:\.\w+)*\.step\(\)|.*clip_grad.*)\s*$", line)
        if step:
            pad, code = step.groups()
            variants.append("\n".join([*lines[:i], f"{pad}if True: {code}", *lines[i + 1:]]))
            variants.append("\n".join([*lines[:i], f"{pad}if False:", f"{pad}    pass", f"{pad}elif True: {code}",
                                       *lines[i + 1:]]))
    out = []
    for variant in variants:
        try:
            ast.parse(variant)
        except SyntaxError:
            continue
        out.append(variant)
    return out


AMP_CASES = [c for c in CASES if c.path.parent.name in ("GPU001", "GPU002")]


@pytest.mark.slow
@pytest.mark.parametrize("case", AMP_CASES, ids=[c.id for c in AMP_CASES])
def test_mixed_precision_prediction_holds_on_lines_and_suites(case: Case) -> None:
    codes = {"GPU001", "GPU002"}
    for text in _line_variants(case.path.read_text(encoding="utf-8")):
        predicted = lint_text(case.path, text, case.settings, edits=False).findings
        built = lint_text(case.path, text, case.settings, edits=True).findings  # raises where the two differ
        assert _fixes(predicted, codes) == _fixes(built, codes)
