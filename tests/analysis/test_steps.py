"""The ast training-step analysis: which loops are steps, what runs on every step, who owns the loop."""

from __future__ import annotations

import ast
import textwrap
from typing import Optional

from gpulint.analysis.ast_context import AstNames
from gpulint.analysis.steps import StepFacts, step_facts_of


def facts(source: str) -> StepFacts:
    tree = ast.parse(textwrap.dedent(source))
    return step_facts_of(tree, AstNames(tree).qualname)


def node_at(f: StepFacts, text: str) -> ast.AST:
    """The first call whose source is `text`."""
    for node in ast.walk(f.tree):
        if isinstance(node, ast.expr) and ast.unparse(node) == text:
            return node
    raise AssertionError(text)


def every_step(f: StepFacts, text: str) -> Optional[bool]:
    place = f.place(node_at(f, text))
    return None if place is None else place.every_step


BASIC = """
import torch
model = torch.nn.Linear(2, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    for step, (x, y) in enumerate(loader):
        loss = model(x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(loss.item())
        if step % 10 == 0:
            print(loss.detach().item())
        if step % 10 != 0:
            pass
        else:
            log(loss.cpu())
    print(epoch_loss.item())
"""


def test_step_loop_epoch_loop_and_counters() -> None:
    f = facts(BASIC)
    assert len(f.steps) == 1
    step = f.steps[0]
    assert step.loop.lineno == 6
    assert [loop.lineno for loop in step.epoch_loops] == [5]
    assert {"step", "epoch", "x", "y"} <= step.counters
    assert step.owner is None and not step.framework_owned
    assert [ast.unparse(s.optimizer) for s in step.steps] == ["opt"]
    assert [ast.unparse(b.loss) for b in step.backwards] == ["loss"]


def test_every_step_and_interval() -> None:
    f = facts(BASIC)
    assert every_step(f, "loss.item()") is True
    assert every_step(f, "loss.detach().item()") is False
    assert every_step(f, "loss.cpu()") is False  # the else of `step % 10 != 0`
    assert every_step(f, "epoch_loss.item()") is None  # the epoch loop, once per epoch


def test_per_step_statements() -> None:
    f = facts(BASIC)
    lines = [s.lineno for s in f.per_step_statements(f.steps[0])]
    assert 8 in lines and 11 in lines and 13 not in lines and 17 not in lines


def test_interval_spellings() -> None:
    f = facts("")
    for text in ("step % 10 == 0", "(i + 1) % accum == 0", "i % args.log_interval == 0",
                 "rank == 0 and step % N == 0", "not it % 100", "i == 0", "step == total_steps - 1",
                 "(i + 1) % accum == 0 or i == len(loader) - 1", "batch_idx == 0", "step < 5"):
        assert f.is_interval(ast.parse(text, mode="eval").body), text
    timed = facts("import time\nif time.time() - last > 30:\n    pass\n")
    assert timed.is_interval(timed.tree.body[1].test)  # type: ignore[attr-defined]
    for text in ("step % 10 != 0", "step % 10", "args.verbose", "rank == 0", "loss > 3",
                 "rank == 0 or step % N == 0", "i >= warmup", "step < warmup",
                 "loss > 3.0"):
        assert not f.is_interval(ast.parse(text, mode="eval").body), text


def test_interval_helpers() -> None:
    """A helper of the file whose returns test the step counter (lingua's every_n_steps) is an interval; so is a
    helper of another module named for one, given the step counter; a helper given no counter is not."""
    f = facts("""
        def every_n_steps(state, freq, acc_step=None):
            test = state.step % freq == 0
            if acc_step is not None:
                test = test and state.acc_step == acc_step
            return test

        def widened(state, freq):
            test = state.step % freq == 0
            test = test or state.force
            return test

        every_n_steps(train_state, 10, acc_step=0)
        widened(train_state, 10)
        every_n_steps_elsewhere(global_step, 10)
        at_interval(self.iteration, 10)
        every_n_steps_elsewhere(config, 10)
    """)
    calls = [s.value for s in f.tree.body if isinstance(s, ast.Expr)]
    assert [f.is_interval(c) for c in calls] == [True, False, True, True, False]


def test_interval_through_a_flag_and_continue() -> None:
    f = facts("""
        for i, b in enumerate(loader):
            loss = model(b).sum()
            loss.backward()
            optimizer.step()
            do_log = i % 50 == 0
            if do_log:
                print(loss.item())
            if i % 20 != 0:
                continue
            writer.add_scalar("x", loss.cpu())
    """)
    assert every_step(f, "loss.item()") is False
    assert every_step(f, "loss.cpu()") is False


def test_except_handler_is_not_every_step() -> None:
    f = facts("""
        for b in loader:
            try:
                loss = model(b).sum(); loss.backward(); opt.step()
            except RuntimeError:
                print(loss.item())
    """)
    assert every_step(f, "loss.item()") is False


def test_through_calls_in_the_same_file() -> None:
    f = facts("""
        import torch

        def train_step(model, batch, optimizer, scaler):
            loss = model(batch).mean()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            report(loss)
            return loss

        def report(loss):
            print(loss.item())

        def train_epoch(model, loader, optimizer, scaler):
            for batch in loader:
                train_step(model, batch, optimizer, scaler)

        def main():
            for epoch in range(10):
                train_epoch(model, loader, optimizer, scaler)
    """)
    assert len(f.steps) == 1
    step = f.steps[0]
    assert step.loop.lineno == 16
    assert [loop.lineno for loop in step.epoch_loops] == [20]
    assert step.backwards[0].scaled and step.steps[0].via_scaler
    assert every_step(f, "loss.item()") is True
    lines = [s.lineno for s in f.per_step_statements(step)]
    assert 5 in lines and 13 in lines


def test_interval_around_the_call() -> None:
    f = facts("""
        def log(loss):
            print(loss.item())

        for i, b in enumerate(loader):
            loss = model(b).sum()
            loss.backward()
            opt.step()
            if i % 100 == 0:
                log(loss)
    """)
    assert every_step(f, "loss.item()") is False


def test_accumulation_micro_loop_is_inside_the_step() -> None:
    f = facts("""
        for batch in loader:
            for micro in batch.chunk(4):
                loss = model(micro).sum() / 4
                loss.backward()
                print(loss.item())
            opt.step()
    """)
    assert len(f.steps) == 1 and f.steps[0].loop.lineno == 2
    assert every_step(f, "loss.item()") is True


def test_no_step_without_optimizer_or_backward() -> None:
    assert not facts("""
        for b in loader:
            loss = model(b).sum()
            loss.backward()
            scheduler.step()
    """).steps
    assert not facts("""
        for b in loader:
            out = model(b)
            opt.step()
    """).steps
    assert not facts("""
        def training_step(self, batch):
            loss = self.model(batch).sum()
            loss.backward()
            self.opt.step()
    """).steps  # a step function with no loop in the file


def test_framework_owned_loops() -> None:
    f = facts("""
        from accelerate import Accelerator
        accelerator = Accelerator()
        for b in loader:
            loss = model(b).sum()
            accelerator.backward(loss)
            optimizer.step()
    """)
    assert [s.owner for s in f.steps] == ["accelerate"]
    f = facts("""
        import deepspeed
        engine, opt, _, _ = deepspeed.initialize(model=model)
        for b in loader:
            loss = engine(b)
            engine.backward(loss)
            engine.step()
    """)
    assert [s.owner for s in f.steps] == ["deepspeed"]
    f = facts("""
        import lightning as L
        class M(L.LightningModule):
            def train_manually(self):
                for b in self.loader:
                    loss = self(b).sum()
                    self.manual_backward(loss)
                    self.opt.step()
    """)
    assert [s.owner for s in f.steps] == ["lightning"]


def test_own_class_named_trainer_is_not_a_framework() -> None:
    f = facts("""
        class Trainer:
            pass
        class MyTrainer(Trainer):
            def fit(self):
                for b in self.loader:
                    loss = self.model(b).sum()
                    loss.backward()
                    self.optimizer.step()
    """)
    assert [s.owner for s in f.steps] == [None]


def test_backward_with_an_argument_and_no_framework_is_not_ours() -> None:
    assert not facts("""
        for b in loader:
            loss = model(b).sum()
            thing.backward(loss)
            optimizer.step()
    """).steps


def test_loop_else_and_iterable_are_not_the_step() -> None:
    f = facts("""
        for b in load(x.item()):
            loss = model(b).sum(); loss.backward(); opt.step()
        else:
            print(loss.item())
    """)
    assert every_step(f, "x.item()") is None
    assert every_step(f, "loss.item()") is None


def test_methods_through_self_and_a_transformers_trainer_subclass() -> None:
    f = facts("""
        class Loop:
            def fit(self):
                for epoch in range(3):
                    for batch in self.loader:
                        self.train_step(batch)

            def train_step(self, batch):
                loss = self.model(batch).sum()
                loss.backward()
                self.optimizer.step()
                self.log(loss)

            def log(self, loss):
                print(loss.item())
    """)
    assert [(s.loop.lineno, s.owner) for s in f.steps] == [(5, None)]
    assert [loop.lineno for loop in f.steps[0].epoch_loops] == [4]
    assert every_step(f, "loss.item()") is True
    f = facts("""
        from transformers import Trainer
        class MyTrainer(Trainer):
            def custom_loop(self):
                for batch in self.loader:
                    loss = self.model(batch).sum()
                    loss.backward()
                    self.optimizer.step()
    """)
    assert [s.owner for s in f.steps] == ["transformers"]
