"""Training-step detection and autocast coverage (gpulint.analysis.training)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from gpulint.analysis.amp import ANY_AUTOCAST
from gpulint.analysis.training import AutocastCover, Coverage, TrainingFacts, TrainingStep, training_facts
from gpulint.core.context import FileContext
from gpulint.core.settings import Settings
from gpulint.rewrites.amp_device import device_type_code
from gpulint.rewrites.amp_plan import (
    autocast_region,
    loss_statement,
    scaler_anchor,
    scaler_name,
)


def facts_of(source: str) -> TrainingFacts:
    text = textwrap.dedent(source)
    ctx = FileContext(Path("t.py"), text, cst.parse_module(text), Settings())
    return ctx.analysis(training_facts)


def code(facts: TrainingFacts, node: cst.CSTNode) -> str:
    return facts.ctx.code(node).strip()


def only_step(facts: TrainingFacts) -> TrainingStep:
    assert len(facts.steps) == 1, f"expected one training step, found {len(facts.steps)}"
    return facts.steps[0]


LOOP = """
import torch
for x, y in loader:
    opt.zero_grad()
    loss = crit(model(x), y)
    loss.backward()
    opt.step()
"""


def test_for_loop_is_a_training_step() -> None:
    facts = facts_of(LOOP)
    step = only_step(facts)
    assert isinstance(step.node, cst.For)
    assert [code(facts, b.loss) for b in step.backwards] == ["loss"]
    assert [code(facts, s.optimizer) for s in step.steps] == ["opt"]


def test_shared_analysis_is_computed_once() -> None:
    text = textwrap.dedent(LOOP)
    ctx = FileContext(Path("t.py"), text, cst.parse_module(text), Settings())
    assert ctx.analysis(training_facts) is ctx.analysis(training_facts)


def test_while_loop_is_a_training_step() -> None:
    facts = facts_of("""
        step = 0
        while step < 10:
            loss = model(next(it)).sum()
            loss.backward()
            optimizer.step()
            step += 1
    """)
    assert isinstance(only_step(facts).node, cst.While)


def test_function_without_loop_is_a_training_step() -> None:
    facts = facts_of("""
        def train_step(model, batch, opt):
            loss = model(batch).mean()
            loss.backward()
            opt.step()
            return loss
    """)
    step = only_step(facts)
    assert isinstance(step.node, cst.FunctionDef) and step.node.name.value == "train_step"


def test_conditional_step_for_gradient_accumulation() -> None:
    facts = facts_of("""
        for i, batch in enumerate(loader):
            loss = model(batch).mean() / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
    """)
    assert isinstance(only_step(facts).node, cst.For)


def test_innermost_loop_holding_backward_and_step() -> None:
    facts = facts_of("""
        for epoch in range(3):
            for batch in loader:
                loss = model(batch).mean()
                loss.backward()
                optimizer.step()
    """)
    step = only_step(facts)
    assert code(facts, step.node).startswith("for batch in loader")


def test_micro_batches_backward_in_inner_loop_step_in_outer() -> None:
    facts = facts_of("""
        for batch in loader:
            for micro in batch.split(4):
                loss = model(micro).mean()
                loss.backward()
            optimizer.step()
    """)
    assert code(facts, only_step(facts).node).startswith("for batch in loader")


@pytest.mark.parametrize("backward, loss, scaled, autograd", [
    ("loss.backward()", "loss", False, False),
    ("scaler.scale(loss).backward()", "loss", True, False),
    ("(loss / accum).backward()", "(loss / accum)", False, False),
    ("loss.backward(retain_graph=True)", "loss", False, False),
    ("torch.autograd.backward(loss)", "loss", False, True),
    ("torch.autograd.backward(tensors=loss)", "loss", False, True),
])
def test_backward_spellings(backward: str, loss: str, scaled: bool, autograd: bool) -> None:
    facts = facts_of(f"""
        import torch
        for batch in loader:
            loss = model(batch).mean()
            {backward}
            optimizer.step()
    """)
    found = only_step(facts).backwards
    assert [(code(facts, b.loss), b.scaled, b.autograd) for b in found] == [(loss, scaled, autograd)]


def test_scaler_step_is_an_optimizer_step() -> None:
    facts = facts_of("""
        for batch in loader:
            loss = model(batch).mean()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    """)
    [step] = only_step(facts).steps
    assert step.via_scaler and code(facts, step.optimizer) == "optimizer"


def test_optimizer_known_by_its_constructor_or_zero_grad() -> None:
    facts = facts_of("""
        import torch
        w = torch.optim.Adam(params)
        g = make_optimizer()
        for batch in loader:
            loss = model(batch).mean()
            loss.backward()
            w.step()
            g.step()
            g.zero_grad()
    """)
    assert sorted(code(facts, s.optimizer) for s in only_step(facts).steps) == ["g", "w"]


@pytest.mark.parametrize("source", [
    # the framework owns backward and precision
    """
    from accelerate import Accelerator
    accelerator = Accelerator()
    for batch in loader:
        loss = model(batch).mean()
        accelerator.backward(loss)
        optimizer.step()
    """,
    """
    for batch in loader:
        loss = model(batch).mean()
        fabric.backward(loss)
        optimizer.step()
    """,
    # Lightning: training_step returns the loss, the Trainer does backward
    """
    import lightning.pytorch as pl
    class M(pl.LightningModule):
        def training_step(self, batch, idx):
            return self.model(batch).mean()
    """,
    # an evaluation loop
    """
    import torch
    with torch.no_grad():
        for batch in loader:
            loss = model(batch).mean()
    """,
    # backward without an optimizer step: a scheduler or an environment is no optimizer
    """
    for batch in loader:
        loss = model(batch).mean()
        loss.backward()
        scheduler.step()
        env.step(action)
    """,
    # the step lives in another function
    """
    def outer():
        def closure():
            loss = model(x).mean()
            loss.backward()
            return loss
        optimizer.step(closure)
    """,
])
def test_not_training_steps(source: str) -> None:
    assert facts_of(source).steps == []


def test_lightning_override_of_backward_is_not_ours() -> None:
    facts = facts_of("""
        import lightning.pytorch as pl
        class M(pl.LightningModule):
            def training_step(self, batch, idx):
                opt = self.optimizers()
                loss = self.model(batch).mean()
                loss.backward()
                opt.step()
    """)
    assert facts.steps == []


def test_framework_imports_mark_the_file() -> None:
    assert facts_of("import deepspeed\n").framework_owned
    assert facts_of("from lightning.fabric import Fabric\n").framework_owned
    assert not facts_of("import torch\nfrom transformers import AutoModel\n").framework_owned


# -- autocast coverage --------------------------------------------------------------
def coverage_of(source: str) -> AutocastCover:
    facts = facts_of(source)
    step = only_step(facts)
    backward = step.backwards[0]
    statement = loss_statement(facts, step, backward)
    assert statement is not None
    return facts, facts.coverage(statement)


@pytest.mark.parametrize("with_line", [
    'with torch.autocast("cuda"):',
    'with torch.amp.autocast(device_type="cuda", dtype=torch.float16):',
    "with torch.cuda.amp.autocast():",
    'with ac("cuda"), open("log") as log:',
])
def test_with_autocast_covers(with_line: str) -> None:
    facts, cover = coverage_of(f"""
        import torch
        from torch.amp import autocast as ac
        for x in loader:
            {with_line}
                loss = model(x).mean()
            loss.backward()
            opt.step()
    """)
    assert cover.coverage is Coverage.COVERED
    assert len(cover.calls) == 1 and facts.ctx.qualname(cover.calls[0].func) in ANY_AUTOCAST


def test_nanogpt_context_name_covers() -> None:
    facts, cover = coverage_of("""
        from contextlib import nullcontext
        import torch
        ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
        for x in loader:
            with ctx:
                logits = model(x)
                loss = logits.mean()
            loss.backward()
            opt.step()
    """)
    assert cover.coverage is Coverage.COVERED
    assert [facts.ctx.qualname(c.func) for c in cover.calls] == ["torch.amp.autocast"]


def test_autocast_decorator_covers() -> None:
    _, cover = coverage_of("""
        import torch
        @torch.autocast(device_type="cuda")
        def step(x):
            loss = model(x).mean()
            loss.backward()
            opt.step()
    """)
    assert cover.coverage is Coverage.COVERED


def test_no_autocast_anywhere_is_not_covered() -> None:
    _, cover = coverage_of(LOOP)
    assert cover.coverage is Coverage.NOT_COVERED


@pytest.mark.parametrize("source", [
    # autocast used elsewhere in the file: the link to this step cannot be proven
    """
    import torch
    def compute(x):
        with torch.autocast("cuda"):
            return model(x).mean()
    for x in loader:
        loss = compute(x)
        loss.backward()
        opt.step()
    """,
    # a context manager that looks like mixed precision but is not visible here
    """
    from project import amp_context
    for x in loader:
        with amp_context():
            loss = model(x).mean()
        loss.backward()
        opt.step()
    """,
])
def test_unproven_link_is_unknown(source: str) -> None:
    _, cover = coverage_of(source)
    assert cover.coverage is Coverage.UNKNOWN


def test_sample_context_is_not_mistaken_for_amp() -> None:
    _, cover = coverage_of("""
        for x in loader:
            with sample_context():
                loss = model(x).mean()
            loss.backward()
            opt.step()
    """)
    assert cover.coverage is Coverage.NOT_COVERED


# -- what the rewrite builds on ------------------------------------------------------
def region_code(source: str) -> list[str]:
    facts = facts_of(source)
    step = only_step(facts)
    region = autocast_region(facts, step, step.backwards[0])
    assert region is not None
    return [code(facts, s) for s in region.container.body[region.start:region.end + 1]]


def test_region_starts_after_data_movement() -> None:
    assert region_code("""
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = criterion(output, target)
            loss.backward()
            optimizer.step()
    """) == ["output = model(data)", "loss = criterion(output, target)"]


def test_region_is_contiguous_and_ends_at_the_last_loss_assignment() -> None:
    assert region_code("""
        for x, y in loader:
            out = model(x)
            log(out)
            loss = crit(out, y)
            loss = loss / accum
            (loss).backward()
            opt.step()
    """) == ["out = model(x)", "log(out)", "loss = crit(out, y)", "loss = loss / accum"]


def test_no_region_for_an_inline_loss() -> None:
    facts = facts_of("""
        for x, y in loader:
            crit(model(x), y).backward()
            opt.step()
    """)
    step = only_step(facts)
    assert autocast_region(facts, step, step.backwards[0]) is None


@pytest.mark.parametrize("setup, expected", [
    ('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")', "device.type"),
    ('device = "cuda" if torch.cuda.is_available() else "cpu"', "device"),
    ('device = "cuda"', "device"),
    ('device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")', "device.type"),
    # a mix, an index, a value from elsewhere: torch.device(...).type works for every one of them
    ('device = torch.device("cuda") if ok else "cpu"', "torch.device(device).type"),
    ('device = "cuda:0"', "torch.device(device).type"),
    ("device = args.device", "torch.device(device).type"),
])
def test_device_type_code(setup: str, expected: str) -> None:
    facts = facts_of(f"""
        import torch
        {setup}
        for x in loader:
            loss = model(x.to(device)).mean()
            loss.backward()
            opt.step()
    """)
    step = only_step(facts)
    assert device_type_code(facts, step, scaler_anchor(facts, step.node)) == expected


def test_a_device_parameter_is_the_scripts_own_device() -> None:
    facts = facts_of("""
        import torch
        def train(device):
            for x in loader:
                loss = model(x.to(device)).mean()
                loss.backward()
                opt.step()
    """)
    step = only_step(facts)
    assert device_type_code(facts, step, scaler_anchor(facts, step.node)) == "torch.device(device).type"


def test_a_dtype_is_not_a_device() -> None:
    facts = facts_of("""
        import torch
        dtype = torch.bfloat16
        for x in loader:
            loss = model(x.to(dtype)).mean()
            loss.backward()
            opt.step()
    """)
    step = only_step(facts)
    assert device_type_code(facts, step, scaler_anchor(facts, step.node)) == '"cuda"'


def test_device_bound_after_the_loop_is_not_used() -> None:
    facts = facts_of("""
        import torch
        for x in loader:
            loss = model(x.to(device)).mean()
            loss.backward()
            opt.step()
        device = torch.device("cuda")
    """)
    step = only_step(facts)
    assert device_type_code(facts, step, scaler_anchor(facts, step.node)) == '"cuda"'


def test_scaler_goes_before_the_outermost_loop_of_the_function() -> None:
    facts = facts_of("""
        def train():
            for epoch in range(3):
                for x in loader:
                    loss = model(x).mean()
                    loss.backward()
                    opt.step()
    """)
    anchor = scaler_anchor(facts, only_step(facts).node)
    assert code(facts, anchor).startswith("for epoch in range(3)")


def test_scaler_name_avoids_existing_names() -> None:
    facts = facts_of("scaler = 1\ndef f(grad_scaler):\n    pass\n")
    assert scaler_name(facts.ctx) == "amp_scaler"


@pytest.mark.parametrize("with_line, coverage", [
    ("with torch.no_grad():", Coverage.NOT_COVERED),
    ('with open("log.txt") as log:', Coverage.NOT_COVERED),
    ("with model.no_sync():", Coverage.NOT_COVERED),
    ("with lock:", Coverage.NOT_COVERED),
    ("with ctx:", Coverage.UNKNOWN),  # a parameter: it may be autocast
    ("with self.amp_context():", Coverage.UNKNOWN),
    ("with project_precision():", Coverage.UNKNOWN),  # imported: its definition is not in this file
])
def test_other_context_managers(with_line: str, coverage: Coverage) -> None:
    _, cover = coverage_of(f"""
        import torch
        from project import project_precision
        def train(self, model, ctx, lock):
            for x in loader:
                {with_line}
                    loss = model(x).mean()
                loss.backward()
                opt.step()
    """)
    assert cover.coverage is coverage
