"""The mixed-precision training steps on `ast` (analysis/amp_steps.py) find what analysis/training.py finds on
LibCST: GPU201 asks them whether GPU001/GPU002's float16 fix adds a GradScaler, without parsing LibCST."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from gpulint.analysis.amp_steps import amp_steps
from gpulint.analysis.ast_context import AstContext
from gpulint.analysis.training import training_facts
from gpulint.core.context import FileContext
from gpulint.core.settings import Settings
from gpulint.project.facts import facts_of_text
from gpulint.project.view import ProjectView

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures"


def _contexts(text: str, path: Path = Path("train.py")) -> tuple[AstContext, FileContext]:
    project = ProjectView.alone(facts_of_text(text))  # type: ignore[arg-type]
    settings = Settings(preview=True)
    return (AstContext(path, text, ast.parse(text), settings, project),
            FileContext(path, text, cst.parse_module(text), settings, project))


def _unscaled(text: str) -> bool:
    return amp_steps(_contexts(textwrap.dedent(text))[0]).unscaled


def test_a_step_function_without_a_loop_is_a_step() -> None:
    assert _unscaled("""
        import torch
        def train_step(model, opt, x):
            loss = model(x).sum()
            loss.backward()
            opt.step()
    """)


def test_a_scaled_backward_is_not_unscaled() -> None:
    assert not _unscaled("""
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for x in loader:
            loss = model(x).sum()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    """)


def test_a_framework_import_owns_the_loop() -> None:
    assert not _unscaled("""
        from transformers import Trainer
        for x in loader:
            model(x).sum().backward()
            optimizer.step()
    """)


def test_a_backward_without_a_step_in_the_same_code_is_no_step() -> None:
    assert not _unscaled("""
        def compute(model, x):
            model(x).sum().backward()
        def train(opt):
            for x in loader:
                compute(model, x)
                opt.step()
    """)


CASES = sorted(p for p in FIXTURES.rglob("*.py") if "backward" in p.read_text(encoding="utf-8"))


def test_a_half_model_is_low_precision() -> None:
    from gpulint.analysis.amp_regions import amp_regions

    def low(text: str) -> bool:
        return amp_regions(_contexts(text)[0]).low_precision_model

    assert low("model = net.cuda().half()\n")
    assert low("import torch\nmodel = net.to(torch.bfloat16)\n")
    assert not low("model = net.to(device)\n")


@pytest.mark.parametrize("path", CASES, ids=[str(p.relative_to(FIXTURES)) for p in CASES])
def test_the_same_answer_as_libcst_on_every_fixture(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    actx, fctx = _contexts(text, path)
    facts = training_facts(fctx)
    expected = not facts.framework_owned and any(not b.scaled for s in facts.steps for b in s.backwards)
    assert amp_steps(actx).unscaled == expected


@pytest.mark.parametrize("path", CASES, ids=[str(p.relative_to(FIXTURES)) for p in CASES])
def test_steps_and_coverage_match_libcst_on_every_fixture(path: Path) -> None:
    """analysis/amp_regions.py (GPU001, GPU002, GPU401 on `ast`) reads each step as analysis/training.py does
    on LibCST, whose steps and loss coverage GPU001/GPU002's fixes edit: the same steps, backward calls and
    loss coverage (analysis/training.py libcst_backward matches the two trees' backward calls)."""
    from gpulint.analysis.amp_regions import amp_regions
    from gpulint.rewrites.amp_plan import loss_statement

    text = path.read_text(encoding="utf-8")
    actx, fctx = _contexts(text, path)
    facts, regions = training_facts(fctx), amp_regions(actx)
    assert (regions.framework_owned, regions.mentions_autocast) == (facts.framework_owned, facts.mentions_autocast)
    expected, found = [], []
    for step in facts.steps:
        for b in step.backwards:
            statement = loss_statement(facts, step, b)
            cover = facts.coverage(statement) if statement is not None else None
            expected.append((fctx.code(b.call), cover.coverage if cover else None, len(cover.calls) if cover else 0))
        expected.append(len(step.steps))
    for astep in regions.steps:
        for ab in astep.backwards:
            acover = regions.coverage(regions.loss_statement(astep, ab))
            found.append((actx.segment(ab.call), acover.coverage, len(acover.calls)))
        found.append(len(astep.steps))
    assert found == expected


AUTOCAST_CASES = sorted(p for p in FIXTURES.rglob("*.py") if "autocast" in p.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", AUTOCAST_CASES, ids=[str(p.relative_to(FIXTURES)) for p in AUTOCAST_CASES])
def test_autocast_arguments_match_libcst_on_every_fixture(path: Path) -> None:
    """analysis/amp_dtypes.py (GPU002, GPU004, GPU404 on `ast`) maps each autocast's arguments as its LibCST
    twin (GPU002's fix, which reads the autocast's device type on LibCST) does."""
    from gpulint.analysis import amp_dtypes, autocast_dtype

    text = path.read_text(encoding="utf-8")
    actx, fctx = _contexts(text, path)
    expected = []
    for call in training_facts(fctx).calls:
        args = autocast_dtype.autocast_arguments(fctx, call)
        expected.append(None if args is None else sorted(args))
    found = []
    for call in actx.nodes(ast.Call):
        assert isinstance(call, ast.Call)
        aargs = amp_dtypes.autocast_arguments(actx, call)
        found.append(None if aargs is None else sorted(aargs))
    assert found == expected
