"""The cold path's shortcuts change no finding.

- Rules that the project facts already silence (`Rule.may_report`: device scope, GPU301 on a file
  whose classes no one trains, GPU001 where 16-bit training is done another way) are dropped
  before LibCST parses the file. Without the shortcut (every rule's `may_report` back to the
  device check alone, which `applies()` did after the parse) the findings must be the same.
- The guard's depth walk, written without `ast.iter_child_nodes`, gives the same depth and row.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given

from gpulint.core.findings import Finding
from gpulint.core.settings import Settings
from gpulint.engine.guard import nesting_depth
from gpulint.engine.linter import lint_text
from gpulint.project.facts import FileFacts
from gpulint.project.view import ProjectView
from gpulint.rules import all_rules
from gpulint.rules.base import Rule
from gpulint.rules.gpu001_missing_autocast import MissingAutocast
from gpulint.rules.gpu301_deep_stack_without_checkpointing import DeepStackWithoutCheckpointing
from tests.engine.test_properties import ci, training_programs

ROOT = Path(__file__).resolve().parents[2]
ALL = Settings(preview=True)
PATH = Path("train.py")


def without_shortcut(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rule decides after the parse again, as it did before `may_report` existed."""
    for rule in all_rules():
        if "may_report" in vars(rule):
            monkeypatch.setattr(rule, "may_report", classmethod(Rule.may_report.__func__))  # type: ignore[attr-defined]


def findings_of(paths: list[Path]) -> dict[Path, list[Finding]]:
    return {path: lint_text(path, path.read_text(encoding="utf-8"), ALL).findings for path in paths}


def test_some_rules_decide_before_the_parse() -> None:
    overriding = {rule for rule in all_rules() if "may_report" in vars(rule)}
    assert {MissingAutocast, DeepStackWithoutCheckpointing} <= overriding


def test_fixtures_same_findings_with_and_without_the_shortcut(monkeypatch: pytest.MonkeyPatch,
                                                              parses: list[str]) -> None:
    paths = sorted((ROOT / "fixtures").rglob("*.py"))
    assert len(paths) > 100
    fast = findings_of(paths)
    parsed_fast = len(parses)
    without_shortcut(monkeypatch)
    slow = findings_of(paths)
    assert fast == slow
    assert sum(map(bool, fast.values())) > 50  # the comparison has findings to lose
    assert parsed_fast < len(parses) - parsed_fast  # and the shortcut kept some files from LibCST


@ci(100)
@given(training_programs())
def test_generated_training_code_same_findings(text: str) -> None:
    fast = lint_text(PATH, text, ALL).findings
    with pytest.MonkeyPatch.context() as patch:
        without_shortcut(patch)
        assert lint_text(PATH, text, ALL).findings == fast


GPU301_ONLY = """\
import torch.nn as nn


class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[nn.Linear(8, 8) for _ in range(32)])

    def forward(self, x):
        return self.blocks(x)
"""


def test_a_model_no_one_trains_is_not_parsed_for_gpu301(parses: list[str]) -> None:
    settings = Settings(select=(DeepStackWithoutCheckpointing.code,), preview=True)
    assert lint_text(PATH, GPU301_ONLY, settings).findings == []
    assert parses == []
    trained = GPU301_ONLY + "\nmodel = Deep()\nopt = torch.optim.SGD(model.parameters())\nmodel(x).sum().backward()\n"
    trained = "import torch\n" + trained
    assert [f.code for f in lint_text(PATH, trained, settings).findings] == [DeepStackWithoutCheckpointing.code]
    assert len(parses) == 1


def test_gpu001_is_silent_before_the_parse_where_mixed_precision_is_done_elsewhere() -> None:
    on_gpu = FileFacts(gpu=True)
    assert MissingAutocast.may_report(ProjectView.alone(on_gpu))
    assert not MissingAutocast.may_report(ProjectView(own=on_gpu, mixed_elsewhere=("fsdp-mixed-precision",)))
    # a GradScaler alone is not 16-bit compute: a step that scales but never enters autocast trains in fp32
    assert MissingAutocast.may_report(ProjectView(own=on_gpu, mixed_elsewhere=("grad-scaler",)))
    assert not MissingAutocast.may_report(ProjectView.alone(FileFacts()))  # no GPU evidence: a GPU rule


# -- the guard's depth walk ---------------------------------------------------------------------

def reference_depth(tree: ast.AST) -> tuple[int, int]:
    """The depth walk as it was written first, on `ast.iter_child_nodes`."""
    best, row = 0, 1
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, ast.BoolOp):
            depth += len(node.values)
        if depth > best:
            best, row = depth, getattr(node, "lineno", row)
        for child in ast.iter_child_nodes(node):
            stack.append((child, depth + 1))
    return best, row


def test_depth_walk_agrees_with_the_reference_on_every_fixture() -> None:
    paths = sorted((ROOT / "fixtures").rglob("*.py"))
    checked = 0
    for path in paths:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        assert nesting_depth(tree) == reference_depth(tree), path
        checked += 1
    assert checked > 100


@pytest.mark.parametrize("code", [
    "x = " + " and ".join(["a"] * 500),
    "def f():\n    if a:\n        return [b or c or d for b in (1, 2)]\n",
    "x = " + "-" * 300 + "1",
    "",
])
def test_depth_walk_agrees_with_the_reference(code: str) -> None:
    tree = ast.parse(code)
    assert nesting_depth(tree) == reference_depth(tree)
