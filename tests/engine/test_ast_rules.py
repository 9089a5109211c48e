"""Rules that detect on CPython's `ast` (issue 25): names, keyword arguments, columns, `# noqa`,
test functions and notebooks, with a toy rule that exists only in this file."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import ClassVar, Optional

import libcst as cst
import pytest

from gpulint.analysis.ast_context import AstContext, AstNames, Detection, arg, keyword_args
from gpulint.analysis.evidence import Evidence, Premise
from gpulint.core.context import FileContext
from gpulint.core.edits import Applicability
from gpulint.core.pending import PendingFix, Replace
from gpulint.core.rewrite import add_keyword
from gpulint.core.settings import Settings
from gpulint.engine import libcst_pass, linter
from gpulint.engine.linter import fix_text, lint_text
from gpulint.notebook.lint import lint_notebook
from gpulint.notebook.model import load_notebook
from gpulint.rules.base import Rule, RuleDocs
from tests.notebook.nbfiles import notebook

UNFUSED = Premise("unfused", "the optimizer is not fused")


class ToyAdam(Rule):
    """Flags `torch.optim.Adam(...)` without `fused`: the smallest rule on `ast`."""

    code: ClassVar[str] = "GPU990"
    name: ClassVar[str] = "toy-adam"
    summary: ClassVar[str] = "toy"
    in_tests: ClassVar[bool] = False
    docs: ClassVar[RuleDocs] = RuleDocs("what", "why", "x", "y", "safe", premises=(UNFUSED,))

    def detect(self, ctx: AstContext) -> None:
        for call in ctx.nodes(ast.Call):
            assert isinstance(call, ast.Call)
            if not ctx.names.is_(call.func, "torch.optim.Adam"):
                continue
            kwargs = ctx.kwargs(call)
            if kwargs.has("fused"):
                continue
            decision = self.decide({UNFUSED: Evidence.of(True)})
            ctx.report(self, call, "Adam without fused", fix=Applicability.SAFE, fix_message="add fused=True",
                       decision=decision)

    def build_fix(self, detection: Detection, fctx: FileContext, node: cst.CSTNode) -> Optional[PendingFix]:
        assert isinstance(node, cst.Call)
        return PendingFix.safe("add fused=True", Replace(node, add_keyword(node, "fused", "True")))


SETTINGS = Settings(select=("GPU990",))


def findings(source: str, settings: Settings = SETTINGS) -> list[tuple[int, int, int, int]]:
    text = textwrap.dedent(source)
    return [(f.location.row, f.location.column, f.end_location.row, f.end_location.column)
            for f in lint_text(Path("train.py"), text, settings, rules=[ToyAdam]).findings]


def test_the_base_marks_rules_that_override_detect() -> None:
    assert ToyAdam.on_ast
    assert not Rule.on_ast


def test_names_resolve_through_imports_and_aliases() -> None:
    assert findings("""\
        import torch
        import torch.optim as optim
        from torch.optim import Adam as A
        from torch import optim as o2
        a = torch.optim.Adam(p)
        b = optim.Adam(p)
        c = A(p)
        d = o2.Adam(p)
        """) == [(5, 5, 5, 24), (6, 5, 6, 18), (7, 5, 7, 9), (8, 5, 8, 15)]


def test_a_users_own_class_is_not_torchs() -> None:
    assert findings("""\
        from torch.optim import Adam
        class Adam:
            pass
        a = Adam(p)
        """) == []
    assert findings("""\
        import torch
        def f(torch):
            return torch.optim.Adam(p)
        """) == []


def test_function_level_imports_resolve_in_their_scope() -> None:
    assert findings("""\
        def f(p):
            from torch import optim
            return optim.Adam(p)
        def g(p):
            return optim.Adam(p)
        """) == [(3, 12, 3, 25)]


def test_kwargs_dicts_visible_in_the_file_are_looked_through() -> None:
    assert findings("""\
        import torch
        kw = dict(lr=1e-3, fused=True)
        a = torch.optim.Adam(p, **kw)
        kw2 = {"lr": 1e-3}
        kw2["fused"] = True
        b = torch.optim.Adam(p, **kw2)
        kw3 = {"lr": 1e-3}
        c = torch.optim.Adam(p, **kw3)
        d = torch.optim.Adam(p, **unknown)
        """) == [(8, 5, 8, 31)]


def test_keyword_args_and_arg_helper() -> None:
    tree = ast.parse("import torch\nd = {'b': 2}\nf(1, 2, a=3, **d)\ng(*xs, a=1)\n")
    names = AstNames(tree)
    call = tree.body[2].value  # type: ignore[attr-defined]
    kwargs = keyword_args(call, names)
    assert set(kwargs.explicit) == {"a", "b"} and not kwargs.unknown and kwargs.from_splat == {"b"}
    assert isinstance(arg(call, "x", 1, kwargs), ast.Constant)
    assert arg(call, "x", 2, kwargs) is None
    assert isinstance(arg(call, "a", 0, kwargs), ast.Constant) and arg(call, "a", 0, kwargs).value == 3  # type: ignore[union-attr]
    starred = tree.body[3].value  # type: ignore[attr-defined]
    assert arg(starred, "x", 0, keyword_args(starred, names)) is None  # `*xs` hides what lands there
    assert names.alias_for("torch.optim.Adam") == "torch.optim.Adam"


def test_columns_are_characters_not_utf8_bytes() -> None:
    # `é` is two bytes and `𝔵` four in UTF-8; columns count characters, as for every other rule
    assert findings("""\
        import torch
        s = "é𝔵"; a = torch.optim.Adam(p)  # ü
        """) == [(2, 15, 2, 34)]


def test_noqa_on_the_reported_statement_silences_it() -> None:
    source = """\
        import torch
        a = torch.optim.Adam(  # noqa: GPU990
            p,
        )
        b = torch.optim.Adam(
            p,
        )  # noqa: GPU990
        c = torch.optim.Adam(p)  # noqa: GPU123
        """
    assert [row for row, *_ in findings(source)] == [8]


def test_noqa_on_a_block_header_covers_the_header() -> None:
    assert findings("""\
        import torch
        for opt in [torch.optim.Adam(p)]:  # noqa: GPU990
            pass
        with (
            x
        ):  # noqa: GPU990
            pass
        if torch.optim.Adam(q):
            pass  # noqa: GPU990
        """) == [(8, 4, 8, 23)]


def test_test_functions_that_compare_results_are_silent() -> None:
    assert findings("""\
        import torch
        def test_adam():
            opt = torch.optim.Adam(p)
            assert opt is not None
        def helper():
            return torch.optim.Adam(p)
        """) == [(6, 12, 6, 31)]
    lint = Settings(select=("GPU990",)).with_values({"lint-tests": True})
    assert len(findings("import torch\ndef test_a():\n    torch.optim.Adam(p)\n    assert 1\n", lint)) == 1


def test_a_predicted_fix_is_reported_without_libcst() -> None:
    found = lint_text(Path("t.py"), "import torch\ntorch.optim.Adam(p)\n", SETTINGS, rules=[ToyAdam],
                      edits=False).findings
    assert len(found) == 1 and found[0].fix is not None and found[0].fix.edits == ()
    assert found[0].fix.applicability is Applicability.SAFE and found[0].fix.message == "add fused=True"


def test_fixes_are_built_on_the_libcst_node_at_the_detections_span() -> None:
    text = 'import torch\ns = "é"; a = (torch.optim.Adam(p))  # ü\nb = [torch.optim.Adam(\n    q)]\n'
    found = lint_text(Path("t.py"), text, SETTINGS, rules=[ToyAdam]).findings
    assert [f.fix.applicability for f in found if f.fix is not None and f.fix.edits] == [Applicability.SAFE] * 2
    fixed = fix_text(Path("t.py"), text, SETTINGS, unsafe=False, rules=[ToyAdam])
    assert fixed.text == ('import torch\ns = "é"; a = (torch.optim.Adam(p, fused=True))  # ü\n'
                          'b = [torch.optim.Adam(\n    q,\n    fused=True)]\n')
    assert fixed.applied == 2 and fixed.findings == []


def test_a_fix_built_differently_from_its_prediction_is_a_bug() -> None:
    class Liar(ToyAdam):
        def build_fix(self, detection: Detection, fctx: FileContext, node: cst.CSTNode) -> Optional[PendingFix]:
            fix = super().build_fix(detection, fctx, node)
            assert fix is not None
            return PendingFix.unsafe(fix.message, *fix.edits)

    with pytest.raises(linter.InternalError, match="predicted a safe fix"):
        lint_text(Path("t.py"), "import torch\ntorch.optim.Adam(p)\n", SETTINGS, rules=[Liar])
    assert lint_text(Path("t.py"), "import torch\ntorch.optim.Adam(p)\n", SETTINGS, rules=[Liar],
                     edits=False).findings  # without edits the prediction stands (the fixture test checks it)


def test_a_detection_in_a_notebook_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(linter, "enabled_rules", lambda settings, rules=None: [ToyAdam])
    raw = notebook([
        "%matplotlib inline\nimport torch",
        "x = 1",
        "model = f()\nopt = torch.optim.Adam(model.parameters())",
        "opt2 = torch.optim.Adam(q)  # noqa: GPU990",
    ]).encode()
    found = lint_notebook(Path("nb.ipynb"), load_notebook(raw), SETTINGS)
    assert [(f.code, f.cell.number if f.cell else None, f.location.row, f.location.column) for f in found] \
        == [("GPU990", 3, 2, 7)]


def test_nodes_are_in_source_order_and_match_base_classes() -> None:
    tree = ast.parse("@dec\ndef f(a=g()):\n    return h(i())\nx = {k(): v()}\n")
    ctx = AstContext(Path("t.py"), "", tree, SETTINGS, None)  # type: ignore[arg-type]
    calls = [c.func.id for c in ctx.nodes(ast.Call)]  # type: ignore[attr-defined]
    assert calls == ["g", "h", "i", "k", "v"]
    assert [type(n).__name__ for n in ctx.nodes(ast.stmt)] == ["FunctionDef", "Return", "Assign"]
    mixed = [type(n).__name__ for n in ctx.nodes(ast.Return, ast.Call)]
    assert mixed == ["Call", "Return", "Call", "Call", "Call", "Call"]
    ret = next(ctx.nodes(ast.Return))
    assert ctx.enclosing_function(ret) is tree.body[0] and ctx.statement(ret.value) is ret  # type: ignore[attr-defined]


def test_the_cache_never_serves_a_predicted_fix_where_edits_are_needed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpulint.dispatch.jobs import cached_result, run_job
    from gpulint.engine.cache import ResultCache
    from gpulint.engine.runner import Job, Mode

    monkeypatch.setattr(linter, "enabled_rules", lambda settings, rules=None: [ToyAdam])
    source = tmp_path / "train.py"
    source.write_text("import torch\ntorch.optim.Adam(p)\n")
    cache = ResultCache.open(tmp_path / "cache")
    check = Job(source, SETTINGS, Mode.CHECK, cache=cache, edits=False)
    first = run_job(check)
    assert first.findings[0].fix is not None and first.findings[0].fix.edits == ()
    assert cached_result(check) is not None  # a later text `check` is answered from the cache
    json_check = Job(source, SETTINGS, Mode.CHECK, cache=cache, edits=True)
    assert cached_result(json_check) is None  # the predicted fix has no edits to show
    built = run_job(json_check)
    assert built.findings[0].fix is not None and built.findings[0].fix.edits
    assert cached_result(check) is not None and cached_result(json_check) is not None  # built edits serve both


def test_a_text_check_of_ported_rules_never_parses_libcst(monkeypatch: pytest.MonkeyPatch) -> None:
    """GPU201 and GPU102 run on `ast`: without edits nothing reaches LibCST's parser; with edits it does."""
    from gpulint.rules.gpu102_dataloader_without_workers import DataLoaderNumWorkers
    from gpulint.rules.gpu201_non_fused_optimizer import NonFusedOptimizer

    text = textwrap.dedent("""\
        import torch
        from torchvision.datasets import CIFAR10
        from torch.utils.data import DataLoader
        model = torch.nn.Linear(8, 8).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        loader = DataLoader(CIFAR10("data"), batch_size=64)
        """)
    rules = [NonFusedOptimizer, DataLoaderNumWorkers]
    settings = Settings(select=("GPU201", "GPU102"))
    parsed: list[str] = []
    real_parse = libcst_pass.parse

    def counted(source: str) -> cst.Module:
        parsed.append(source)
        return real_parse(source)

    monkeypatch.setattr(libcst_pass, "parse", counted)
    predicted = lint_text(Path("train.py"), text, settings, rules=rules, edits=False).findings
    assert [f.code for f in predicted] == ["GPU201", "GPU102"] and parsed == []
    built = lint_text(Path("train.py"), text, settings, rules=rules, edits=True).findings
    assert len(parsed) == 1
    assert [(f.code, f.fix.applicability if f.fix else None) for f in built] == \
        [(f.code, f.fix.applicability if f.fix else None) for f in predicted]
    assert all(f.fix is not None and f.fix.edits for f in built)
