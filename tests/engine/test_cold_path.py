"""The cold path's shortcuts change no finding.

- Rules that the project facts already silence (`Rule.may_report`: device scope, GPU301 on a file
  whose classes no one trains, GPU001 where 16-bit training is done another way) are dropped
  before the file's rules run. Without the shortcut (every rule's `may_report` back to the
  device check alone, which `applies()` did after the parse) the findings must be the same.
- The guard's depth walk, written without `ast.iter_child_nodes`, gives the same depth and row.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable, Iterator

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


def test_fixtures_same_findings_with_and_without_the_shortcut(monkeypatch: pytest.MonkeyPatch) -> None:
    paths = sorted((ROOT / "fixtures").rglob("*.py"))
    assert len(paths) > 100
    detected: list[str] = []
    for rule in all_rules():
        if "may_report" in vars(rule) and rule.on_ast:  # every rule detects on `ast` since GPU301's port
            monkeypatch.setattr(rule, "detect", _counted(rule.detect, rule.code, detected))
    fast = findings_of(paths)
    detected_fast = len(detected)
    without_shortcut(monkeypatch)
    slow = findings_of(paths)
    assert fast == slow
    assert sum(map(bool, fast.values())) > 50  # the comparison has findings to lose
    assert detected_fast < len(detected) - detected_fast  # and the shortcut kept some files from the detectors


def _counted(detect: Callable[..., None], code: str, calls: list[str]) -> Callable[..., None]:
    def counting(self: Rule, ctx: object) -> None:
        calls.append(code)
        detect(self, ctx)

    return counting


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


GPU301_TRAINED = "import torch\n" + GPU301_ONLY + (
    "\nmodel = Deep()\nopt = torch.optim.SGD(model.parameters())\nmodel(x).sum().backward()\n")


def test_gpu301_reports_without_parsing_libcst(parses: list[str]) -> None:
    """GPU301 detects on `ast` (issue 25): LibCST is parsed only to build its fix's edits."""
    settings = Settings(select=(DeepStackWithoutCheckpointing.code,), preview=True)
    assert DeepStackWithoutCheckpointing.on_ast
    assert lint_text(PATH, GPU301_ONLY, settings, edits=False).findings == []  # a model no one trains
    found = lint_text(PATH, GPU301_TRAINED, settings, edits=False).findings
    assert [f.code for f in found] == [DeepStackWithoutCheckpointing.code]
    assert found[0].fix is not None and not found[0].fix.edits  # the predicted fix, not built
    assert parses == []
    built = lint_text(PATH, GPU301_TRAINED, settings, edits=True).findings
    assert built[0].fix is not None and built[0].fix.edits
    assert len(parses) == 1


AMP_CODES = ("GPU001", "GPU002")


def test_gpu001_gpu002_predict_their_fixes_without_parsing_libcst(parses: list[str]) -> None:
    """GPU001/GPU002 decide their fix on `ast` (analysis/amp_fix.py, issue 25): every fixture of theirs is
    checked without a LibCST parse, whether its finding has a fix or says why not, except where the fix's
    device type decides (a file that uses Intel GPUs and never names CUDA)."""
    from gpulint.analysis.amp_fix import default_device
    from tests.fixture_cases import all_cases

    cases = [c for c in all_cases() if c.path.parent.name in AMP_CODES]
    predicted: dict[str, int] = {"fix": 0, "none": 0}
    for case in cases:
        text = case.path.read_text(encoding="utf-8")
        before = len(parses)
        found = [f for f in lint_text(case.path, text, case.settings, edits=False).findings if f.code in AMP_CODES]
        for finding in found:
            predicted["fix" if finding.fix is not None else "none"] += 1
            assert finding.fix is None or not finding.fix.edits
        if default_device(text) != "xpu":
            assert len(parses) == before, case.id
    assert predicted["fix"] > 20 and predicted["none"] > 5  # both answers were predicted
    fixed = next(c for c in cases if c.path.name == "fp16_autocast_without_scaler.py")
    built = lint_text(fixed.path, fixed.path.read_text(encoding="utf-8"), fixed.settings, edits=True).findings
    assert any(f.code == "GPU002" and f.fix is not None and f.fix.edits for f in built)
    assert parses[-1] == fixed.path.read_text(encoding="utf-8")  # the edits are built on LibCST


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


# -- one walk per tree, one scan per text -------------------------------------------------------

def _fixture_trees() -> Iterator[tuple[Path, ast.Module]]:
    """Every fixture that parses, with its tree."""
    for path in sorted((ROOT / "fixtures").rglob("*.py")):
        try:
            yield path, ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue


# what the walks leave out: one shared object per kind, under the nodes that have one
_SHARED_LEAVES = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


def test_the_listed_nodes_are_ast_walks_in_its_order() -> None:
    """Analyses filter `all_nodes(tree)` where they walked the tree: the same nodes but the expression
    contexts and operators (which no analysis asks about as nodes), in the same order; the depth kept with a
    module's list is the guard's, contexts counted."""
    from gpulint.project.ast_nodes import all_nodes, kept_depth, walk

    checked = 0
    for path, tree in _fixture_trees():
        listed = all_nodes(tree)
        expected = [id(n) for n in ast.walk(tree) if not isinstance(n, _SHARED_LEAVES)]
        assert [id(n) for n in listed] == expected, path
        assert [id(n) for n in walk(tree)] == expected, path
        assert all_nodes(tree) is listed  # kept on the tree: the second caller walks nothing
        assert kept_depth(tree) == nesting_depth(tree)[0], path
        checked += 1
    assert checked > 100


@pytest.mark.parametrize("code", [
    "x = " + " and ".join(["a"] * 500),
    "def f():\n    if a:\n        return [b or c or d for b in (1, 2)]\n",
    "x = " + "-" * 300 + "1",
    "x",  # the deepest node a name's context
    "x.y = (a or b).c",
    "",
])
def test_the_kept_depth_counts_the_contexts_left_out(code: str) -> None:
    from gpulint.project.ast_nodes import all_nodes, kept_depth

    tree = ast.parse(code)
    all_nodes(tree)
    assert kept_depth(tree) == nesting_depth(tree)[0] == reference_depth(tree)[0]


def test_the_loops_found_by_statements_are_every_loop_in_order() -> None:
    """`lr_sweep._loops_in_order` follows statement lists only: the loops of a walk of every node, in preorder."""
    from gpulint.analysis.lr_sweep import _loops_in_order

    def reference(node: ast.AST) -> Iterator[ast.AST]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.For, ast.AsyncFor, ast.While)):
                yield child
            yield from reference(child)

    checked = 0
    for path, tree in _fixture_trees():
        assert [id(n) for n in _loops_in_order(tree)] == [id(n) for n in reference(tree)], path
        checked += 1
    nested = ast.parse("def f():\n    try:\n        for a in b:\n            while c:\n                pass\n"
                       "        else:\n            for d in e: pass\n    except E:\n        while f: pass\n"
                       "    else:\n        async def g():\n            async for h in i: pass\n"
                       "    finally:\n        for j in k: pass\nmatch x:\n    case 1:\n        while l: pass\n")
    assert [n.lineno for n in _loops_in_order(nested)] == [3, 4, 7, 9, 12, 14, 17]
    assert checked > 100


def test_the_classes_found_by_statements_are_every_class() -> None:
    """`ast_nodes.class_defs` follows statement lists only: the same classes as a walk of every node."""
    from gpulint.project.ast_nodes import class_defs

    checked = 0
    for path, tree in _fixture_trees():
        expected = sorted(id(n) for n in ast.walk(tree) if isinstance(n, ast.ClassDef))
        assert sorted(id(n) for n in class_defs(tree)) == expected, path
        checked += 1
    nested = ast.parse("def f():\n    try:\n        class A: pass\n    except E:\n        class B:\n"
                       "            class C: pass\n    else:\n        class D: pass\n    finally:\n"
                       "        class F: pass\nmatch x:\n    case 1:\n        class G: pass\n")
    assert sorted(c.name for c in class_defs(nested)) == ["A", "B", "C", "D", "F", "G"]
    assert checked > 100


def test_a_walked_field_holds_a_node_none_or_a_list_of_nodes() -> None:
    """The walks push a field's value when it is not None and a list whole (ast_nodes.HOLES): every field they
    read holds a node, None or a list of nodes, and only the lists of HOLES' node types hold None too."""
    from gpulint.project.ast_nodes import HOLES, node_fields

    checked = 0
    for path, tree in _fixture_trees():
        for node in ast.walk(tree):
            for name in node_fields(type(node)):
                value = getattr(node, name, None)
                items = value if type(value) is list else [value]
                allowed = (ast.AST, type(None)) if type(value) is not list or type(node) in HOLES else ast.AST
                assert all(isinstance(item, allowed) for item in items), (path, type(node).__name__, name)
        checked += 1
    holes = ast.parse("f = lambda *, a, b=1: {**a, 'k': b}")
    assert any(None in getattr(n, f) for n in ast.walk(holes) for f in ("keys", "kw_defaults") if hasattr(n, f))
    assert checked > 100


def test_the_fields_walks_skip_never_hold_a_node() -> None:
    """`ast_nodes.node_fields` leaves out exactly the fields each node type's signature (its docstring, from
    Parser/Python.asdl) types as a builtin (`identifier`, `string`, `constant`, `int`), on this Python."""
    import re

    from gpulint.project.ast_nodes import node_fields

    checked = 0
    for kind in vars(ast).values():
        if not (isinstance(kind, type) and issubclass(kind, ast.AST) and kind._fields and kind.__doc__):
            continue
        signature = re.fullmatch(r"\w+\((.*)\)", kind.__doc__.splitlines()[0])
        if signature is None:
            continue
        types = dict(reversed(part.strip().split(" ")) for part in signature.group(1).split(","))
        builtin = ("identifier", "string", "constant", "int")
        scalar = {name for name, typ in types.items() if typ.rstrip("?*") in builtin}
        assert node_fields(kind) == tuple(f for f in kind._fields if f not in scalar), kind
        checked += 1
    assert checked > 60


def test_the_project_pass_facts_of_the_very_text_are_not_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpulint.engine import linter
    from gpulint.project.facts import facts_of_text

    for path in sorted((ROOT / "fixtures" / "rules" / "GPU001").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        own = facts_of_text(text)
        assert own is not None and own.source
        expected = lint_text(path, text, ALL, project=ProjectView.alone(own)).findings
        if expected:
            break
    assert expected  # a finding to lose
    scans: list[object] = []
    real_scan = linter.scan

    def counted(tree: ast.Module) -> FileFacts:
        scans.append(tree)
        return real_scan(tree)

    monkeypatch.setattr(linter, "scan", counted)
    assert lint_text(path, text, ALL, project=ProjectView.alone(own)).findings == expected
    assert scans == []  # the view's facts came from this text
    changed = text + "\n# edited after the project pass\n"
    lint_text(path, changed, ALL, project=ProjectView.alone(own))
    assert len(scans) == 1  # another text (a fix round, an editor's buffer): its facts are read again


def test_a_check_no_file_of_which_needs_libcst_never_loads_it(tmp_path: Path) -> None:
    """LibCST costs about 0.2 s to import: `check` loads it only to build edits (every rule detects on `ast`)."""
    import subprocess
    import sys

    (tmp_path / "train.py").write_text(
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "model = torch.nn.Linear(512, 512).cuda()\n"
        "opt = torch.optim.AdamW(model.parameters(), lr=1e-3)\n"
        "loader = DataLoader(list(range(10)), batch_size=2)\n", encoding="utf-8")
    probe = ("import sys, runpy\n"
             "sys.argv = ['gpulint', 'check', '--no-cache', '--isolated', '--exit-zero', '-j1', sys.argv[1]]\n"
             "try:\n    runpy.run_module('gpulint', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "print('LIBCST', 'libcst' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "train.py")], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert "GPU201" in out.stdout, out.stdout + out.stderr  # the rules ran and reported
    assert "LIBCST False" in out.stdout, out.stdout + out.stderr
    (tmp_path / "model.py").write_text(GPU301_TRAINED, encoding="utf-8")
    deep = subprocess.run([sys.executable, "-c", probe.replace("'-j1',", "'-j1', '--preview', '--select', 'GPU301',"),
                           str(tmp_path / "model.py")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "GPU301" in deep.stdout, deep.stdout + deep.stderr
    assert "LIBCST False" in deep.stdout, deep.stdout + deep.stderr  # GPU301 detects on `ast` too
    amp = tmp_path / "amp"  # GPU001/GPU002 findings, fixes predicted (unsafe) or none: LibCST never loaded
    amp.mkdir()
    for code in AMP_CODES:
        for path in (ROOT / "fixtures" / "rules" / code).glob("*.py"):
            if not path.name.endswith(".fixed.py") and "xpu" not in path.read_text(encoding="utf-8"):
                (amp / f"{code}_{path.name}").write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    checked = subprocess.run([sys.executable, "-c", probe.replace("'-j1',", "'-j1', '--select', 'GPU001,GPU002',"),
                              str(amp)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert "GPU001 " in checked.stdout and "GPU002 " in checked.stdout, checked.stdout + checked.stderr
    assert "fixable with `gpulint fix --unsafe-fixes`" in checked.stdout, checked.stdout + checked.stderr
    assert "LIBCST False" in checked.stdout, checked.stdout + checked.stderr
    shown = subprocess.run([sys.executable, "-c", probe.replace("'--exit-zero',", "'--exit-zero', '--diff',"),
                            str(tmp_path / "train.py")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "LIBCST True" in shown.stdout, shown.stdout + shown.stderr  # a diff builds the fix's edits on LibCST


def _reference_parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)
            if not isinstance(child, _SHARED_LEAVES)}


def test_the_spelled_out_walks_visit_what_ast_walk_visits() -> None:
    """The hot walks that read fields themselves (ast_nodes' docstring says why) against `ast.walk`: `fast_walk`
    every node but the shared leaves, `code_children` each node's children but those, `own_nodes` the nodes outside
    nested functions, lambdas and classes, and loader_flow's `_Flow` every node's parent and every call."""
    from gpulint.project.ast_nodes import CODE_SCOPES, code_children, fast_walk, own_nodes
    from gpulint.project.loader_flow import _Flow

    def outside_scopes(roots: list[ast.AST]) -> list[int]:
        found: list[int] = []
        stack = list(roots)
        while stack:
            node = stack.pop()
            found.append(id(node))
            stack.extend(c for c in ast.iter_child_nodes(node)
                         if not isinstance(c, CODE_SCOPES + _SHARED_LEAVES))
        return found

    checked = 0
    for path, tree in _fixture_trees():
        expected = sorted(id(n) for n in ast.walk(tree) if not isinstance(n, _SHARED_LEAVES))
        assert sorted(id(n) for n in fast_walk(tree)) == expected, path
        for node in ast.walk(tree):
            assert [id(c) for c in code_children(node)] == [
                id(c) for c in ast.iter_child_nodes(node) if not isinstance(c, _SHARED_LEAVES)], path
        for function in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)][:5]:
            assert sorted(id(n) for n in own_nodes(function.body)) == sorted(outside_scopes(function.body)), path
        assert isinstance(tree, ast.Module)
        flow = _Flow(tree)
        assert flow.parents == _reference_parents(tree), path
        assert sorted(id(c) for c in flow.calls) == sorted(id(n) for n in ast.walk(tree) if isinstance(n, ast.Call))
        checked += 1
    assert checked > 100
