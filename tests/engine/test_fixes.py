"""Applying text edits: collisions, merged identical edits, minimal edits."""

from __future__ import annotations

from gpulint.core.edits import (
    Applicability,
    Edit,
    Fix,
    apply_edits,
    minimize,
    select_edits,
)


def apply_fixes(text: str, fixes: list[Fix[Edit]]) -> tuple[str, int]:
    """What one fix round does: the edits of the fixes that do not collide, applied together."""
    edits, applied = select_edits(fixes)
    return apply_edits(text, edits), applied


def fix(*edits: Edit) -> Fix[Edit]:
    return Fix(Applicability.SAFE, "fix", tuple(edits))


def test_non_overlapping_fixes_apply_in_one_pass() -> None:
    text = "a(1)\nb(2)\n"
    new, applied = apply_fixes(text, [fix(Edit(3, 3, ", x")), fix(Edit(8, 8, ", y"))])
    assert new == "a(1, x)\nb(2, y)\n"
    assert applied == 2


def test_overlapping_fix_is_left_for_the_next_round() -> None:
    text = "abcdef"
    new, applied = apply_fixes(text, [fix(Edit(0, 4, "X")), fix(Edit(2, 5, "Y"))])
    assert (new, applied) == ("Xef", 1)


def test_identical_import_edits_merge() -> None:
    text = "x = 1\ny = 1\n"
    imp = Edit(0, 0, "import torch\n")
    new, applied = apply_fixes(text, [fix(imp, Edit(4, 5, "2")), fix(imp, Edit(10, 11, "3"))])
    assert new == "import torch\nx = 2\ny = 3\n"
    assert applied == 2


def test_an_insertion_at_the_edge_of_a_replacement_waits_for_the_next_round() -> None:
    """One fix lays a call out anew, another appends an argument right where that layout ends: applied
    together they would leave `,\n, x`; the second is left for the next round, on the new text."""
    text = "f(a, b)\n"
    new, applied = apply_fixes(text, [fix(Edit(2, 6, "\n    a,\n    b,\n")), fix(Edit(6, 6, ", c"))])
    assert (new, applied) == ("f(\n    a,\n    b,\n)\n", 1)


def test_two_different_insertions_at_one_point_conflict() -> None:
    new, applied = apply_fixes("ab", [fix(Edit(1, 1, "X")), fix(Edit(1, 1, "Y"))])
    assert applied == 1 and new in {"aXb", "aYb"}


def test_insertion_inside_a_replacement_conflicts() -> None:
    new, applied = apply_fixes("abcdef", [fix(Edit(1, 4, "Z")), fix(Edit(2, 2, "Q"))])
    assert applied == 1


def test_minimize_keeps_only_the_changed_middle() -> None:
    edit = minimize("DataLoader(ds)", "DataLoader(ds, pin_memory=True)", 10)
    assert edit == Edit(23, 23, ", pin_memory=True")
    assert minimize("abc", "abc", 0) == Edit(3, 3, "")
