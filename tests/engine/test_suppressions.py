"""Suppression comments: what each one covers, what counts as unused, and --add-noqa."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from gpulint.core.settings import Settings
from gpulint.engine.linter import fix_text, lint_text
from gpulint.engine.suppressions import add_noqa

HEADER = "import torch\nfrom torch.utils.data import DataLoader\n"
# the samples show no device: `pedantic` reports the undecided loader findings these tests suppress
DATA = Settings(select=("GPU101", "GPU102", "GPU900")).with_values({"strictness": "pedantic"})


def codes(source: str, settings: Settings = DATA) -> list[tuple[int, str]]:
    text = HEADER + textwrap.dedent(source)
    return [(f.location.row, f.code) for f in lint_text(Path("t.py"), text, settings).findings]


MULTILINE = """\
loader = DataLoader(
    ds,
    batch_size=32,
    num_workers=2,
)
"""


def test_multiline_call_is_flagged_without_comment() -> None:
    assert codes(MULTILINE) == [(3, "GPU101")]


@pytest.mark.parametrize("line", [0, 1, 2, 3, 4])
def test_comment_on_any_line_of_the_statement_covers_it(line: int) -> None:
    lines = MULTILINE.splitlines()
    lines[line] += "  # noqa: GPU101"
    assert codes("\n".join(lines) + "\n") == []


def test_own_line_comment_just_above_covers_the_statement() -> None:
    assert codes("# gpulint: ignore[GPU101]\n" + MULTILINE) == []


def test_comment_two_lines_above_does_not_cover() -> None:
    assert codes("# gpulint: ignore[GPU101]\n\n" + MULTILINE) == [(3, "GPU900"), (5, "GPU101")]


def test_trailing_comment_of_previous_statement_does_not_cover_next() -> None:
    source = "x = 1  # noqa: GPU101\nloader = DataLoader(ds, num_workers=2)\n"
    assert codes(source) == [(3, "GPU900"), (4, "GPU101")]


def test_comment_on_following_statement_does_not_cover() -> None:
    source = MULTILINE + "y = 2  # noqa: GPU101\n"
    assert codes(source) == [(3, "GPU101"), (8, "GPU900")]


def test_codes_are_matched_exactly() -> None:
    source = "loader = DataLoader(ds)  # gpulint: ignore[GPU102]\n"
    assert codes(source) == [(3, "GPU101")]
    source = "loader = DataLoader(ds)  # noqa: GPU1\n"  # a prefix is not a code: reported as unknown
    found = lint_text(Path("t.py"), HEADER + source, DATA).findings
    assert [f.code for f in found] == ["GPU101", "GPU102", "GPU900"]
    assert "GPU1: no such gpulint rule" in found[2].message


def test_bare_noqa_covers_every_code_and_is_never_unused() -> None:
    assert codes("loader = DataLoader(ds)  # noqa\n") == []
    assert codes("x = 1  # noqa\n") == []


def test_noqa_spelling_variants() -> None:
    assert codes("loader = DataLoader(ds)  # NOQA:GPU101,GPU102\n") == []
    assert codes("loader = DataLoader(ds)  #noqa: GPU101 GPU102 because the dataset is tiny\n") == []


def test_other_tools_noqa_is_left_alone() -> None:
    assert codes("x = 1  # noqa: E501\n") == []
    assert codes("loader = DataLoader(ds, num_workers=2)  # noqa: E501\n") == [(3, "GPU101")]


def test_comment_in_loop_body_does_not_cover_the_loop_header() -> None:
    source = "for batch in DataLoader(ds, num_workers=2):\n    step(batch)  # noqa: GPU101\n"
    assert codes(source) == [(3, "GPU101"), (4, "GPU900")]
    source = "for batch in DataLoader(ds, num_workers=2):  # noqa: GPU101\n    step(batch)\n"
    assert codes(source) == []


def test_file_level_noqa_with_and_without_codes() -> None:
    text = "# gpulint: noqa: GPU102\n" + HEADER + "loader = DataLoader(ds)\n"
    found = lint_text(Path("t.py"), text, DATA).findings
    assert [(f.location.row, f.code) for f in found] == [(4, "GPU101")]
    text = '"""Docstring first."""\n# gpulint: noqa\n' + HEADER + "loader = DataLoader(ds)\n"
    assert lint_text(Path("t.py"), text, DATA).findings == []


def test_file_level_noqa_below_code_has_no_effect() -> None:
    found = codes("# gpulint: noqa\nloader = DataLoader(ds, num_workers=2)\n")
    assert found == [(3, "GPU900"), (4, "GPU101")]


def test_syntax_errors_cannot_be_suppressed() -> None:
    text = "# gpulint: noqa\ndef broken(:  # noqa\n    pass\n"
    assert [f.code for f in lint_text(Path("t.py"), text, DATA).findings] == ["GPU000"]


def test_redundant_comments_on_one_statement_are_both_used() -> None:
    source = "loader = DataLoader(  # noqa: GPU101\n    ds, num_workers=2)  # noqa: GPU101\n"
    assert codes(source) == []


def test_gpu900_can_itself_be_suppressed() -> None:
    assert codes("x = 1  # noqa: GPU101, GPU900\n") == []


def test_unused_check_follows_selection() -> None:
    only_101 = Settings(select=("GPU101",))
    assert codes("x = 1  # noqa: GPU101\n", only_101) == []  # GPU900 not selected
    assert codes("x = 1  # noqa: GPU102\n", Settings(select=("GPU101", "GPU900"))) == []  # GPU102 did not run


def test_per_file_ignore_does_not_make_the_comment_unused_noise() -> None:
    # the rule is off for this file, so its comment is not judged
    settings = Settings(select=("GPU101", "GPU900"), per_file_ignores=("GPU101",))
    assert codes("loader = DataLoader(ds)  # noqa: GPU101\n", settings) == []


def test_fix_removes_unused_and_is_idempotent() -> None:
    text = HEADER + "x = 1  # noqa: GPU101\n# gpulint: ignore[GPU102]\ny = 2\n"
    outcome = fix_text(Path("t.py"), text, DATA, unsafe=False)
    assert outcome.text == HEADER + "x = 1\ny = 2\n"
    assert fix_text(Path("t.py"), outcome.text, DATA, unsafe=False).text == outcome.text


def test_crlf_file_keeps_its_newlines_when_a_line_is_removed() -> None:
    text = (HEADER + "# gpulint: ignore[GPU101]\ny = 2\n").replace("\n", "\r\n")
    outcome = fix_text(Path("t.py"), text, DATA, unsafe=False)
    assert outcome.text == (HEADER + "y = 2\n").replace("\n", "\r\n")


# --add-noqa --------------------------------------------------------------------------------

def _add(source: str) -> str:
    text = HEADER + textwrap.dedent(source)
    findings = lint_text(Path("t.py"), text, DATA).findings
    new, covered = add_noqa(text, findings)
    assert covered == len(findings)
    cst.parse_module(new)
    assert lint_text(Path("t.py"), new, DATA).findings == [], "added comments must silence every finding"
    again, _ = add_noqa(new, lint_text(Path("t.py"), new, DATA).findings)
    assert again == new
    return new[len(HEADER):]


def test_add_noqa_on_the_flagged_line() -> None:
    assert _add("loader = DataLoader(ds)\n") == "loader = DataLoader(ds)  # noqa: GPU101, GPU102\n"


def test_add_noqa_merges_into_existing_noqa() -> None:
    assert _add("loader = DataLoader(ds)  # noqa: E501\n") == "loader = DataLoader(ds)  # noqa: E501, GPU101, GPU102\n"


def test_add_noqa_after_existing_comment() -> None:
    assert _add("loader = DataLoader(ds, num_workers=2)  # why\n") == (
        "loader = DataLoader(ds, num_workers=2)  # why  # noqa: GPU101\n"
    )


def test_add_noqa_avoids_lines_inside_strings_and_continuations() -> None:
    source = 'loader = DataLoader(ds, """a\nb""", num_workers=2)\n'
    # the flagged line ends inside a string: the comment goes on the statement's last line
    assert _add(source) == 'loader = DataLoader(ds, """a\nb""", num_workers=2)  # noqa: GPU101\n'
    source = "loader = \\\n    DataLoader(ds, num_workers=2)\n"
    assert _add(source) == "loader = \\\n    DataLoader(ds, num_workers=2)  # noqa: GPU101\n"


def _fixture_cases():  # noqa: ANN202
    from tests.fixture_cases import all_cases

    # files that do not parse (GPU000) get no comments
    return [c for c in all_cases() if c.expected and all(code != "GPU000" for _, _, code in c.expected)]


@pytest.mark.parametrize("case", _fixture_cases(), ids=lambda c: c.id)
def test_add_noqa_silences_every_flagged_fixture(case) -> None:  # noqa: ANN001
    """Every rule's tricky cases: the comments land where Python allows them and hide everything."""
    from dataclasses import replace

    text = case.path.read_text(encoding="utf-8")
    settings = replace(case.settings, extend_select=("GPU900",))
    findings = lint_text(case.path, text, settings).findings
    new, covered = add_noqa(text, findings)
    assert covered == len([f for f in findings if f.code != "GPU900"])
    cst.parse_module(new)
    remaining = [(f.location.row, f.code) for f in lint_text(case.path, new, settings).findings]
    stale = [r for r in remaining if r[1] == "GPU900"]
    assert remaining == stale  # only suppressions that were already stale before
    assert len(stale) == len([f for f in findings if f.code == "GPU900"])
