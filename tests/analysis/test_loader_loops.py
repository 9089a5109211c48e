"""analysis/holders.py and analysis/loader_loops.py on small sources: what a variable holds, which
DataLoader a loop iterates, the batch names it binds, the moves of them and the loops around it."""

from __future__ import annotations

import ast
import textwrap

from gpulint.analysis.ast_context import AstContext
from gpulint.analysis.holders import held_values, holder_of, same_variable
from gpulint.analysis.loader_loops import loader_loops, move_of
from tests.analysis.contexts import ast_context


def context(source: str) -> AstContext:
    return ast_context(textwrap.dedent(source))


def calls(ctx: AstContext, name: str) -> list[ast.Call]:
    return [c for c in ctx.nodes(ast.Call) if isinstance(c, ast.Call) and ctx.segment(c.func).endswith(name)]


def test_a_parameter_holds_what_every_call_passes() -> None:
    ctx = context("""\
        import torch
        def train(opt):
            opt.step()
        a = torch.optim.SGD(p)
        train(a)
        train(opt=torch.optim.Adam(p))
        """)
    step = calls(ctx, "opt.step")[0]
    assert isinstance(step.func, ast.Attribute)
    values = held_values(ctx, step.func.value)
    assert values is not None and [ctx.segment(v) for v in values] == ["torch.optim.SGD(p)", "torch.optim.Adam(p)"]


def test_unknown_bindings_hold_nothing_known() -> None:
    ctx = context("""\
        def train(opt):
            opt.step()
        train(*args)
        for x in xs:
            x.step()
        """)
    for call in calls(ctx, ".step"):
        assert isinstance(call.func, ast.Attribute)
        assert held_values(ctx, call.func.value) is None


def test_self_attributes_are_one_variable_per_class() -> None:
    ctx = context("""\
        class A:
            def __init__(self):
                self.loader = make()
            def run(self):
                return self.loader
        class B:
            def run(self):
                return self.loader
        """)
    make = calls(ctx, "make")[0]
    holder = holder_of(ctx, make)
    returns = [n.value for n in ctx.nodes(ast.Return) if isinstance(n, ast.Return) and n.value is not None]
    assert holder is not None and same_variable(ctx, holder, returns[0]) and not same_variable(ctx, holder, returns[1])
    assert held_values(ctx, returns[0]) == [make] and held_values(ctx, returns[1]) is None


def test_loops_over_a_loader_bind_batches_and_find_their_moves() -> None:
    ctx = context("""\
        import torch
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, pin_memory=True)
        device = torch.device("cuda")
        for epoch in range(3):
            for i, batch in enumerate(loader):
                x, y = batch
                image = batch["image"].to(device)
                extra = {k: v.cuda() for k, v in batch.items()}
                x = x.to(device, non_blocking=True)
                y = y.to(torch.float16)
                z = y.cpu()
                w = model(x).to(device)
        """)
    (loop,) = ctx.analysis(loader_loops).loops
    assert loop.complete and len(loop.outer) == 1 and loop.function is None
    assert {"batch", "x", "y", "k", "v"} <= loop.batch and "i" not in loop.batch and loop.whole == {"batch"}
    moved = [(ctx.segment(m.call), m.target, m.non_blocking) for m in loop.moves]
    assert moved == [('batch["image"].to(device)', "device", False), ("v.cuda()", '"cuda"', False),
                     ("x.to(device, non_blocking=True)", "device", True)]


def test_moves_are_host_to_device_only() -> None:
    ctx = context("""\
        import torch
        x.to("cpu"); x.to(torch.bfloat16); x.to(other); x.to(x.dtype); x.cpu()
        x.to("cuda:1"); x.to(0); x.to(args.device); x.to(torch.device("cuda")); x.cuda(1)
        """)
    found = {ctx.segment(c): move_of(ctx, c) for c in ctx.nodes(ast.Call) if isinstance(c, ast.Call)}
    assert [text for text, move in found.items() if move is not None] == [
        'x.to("cuda:1")', "x.to(0)", "x.to(args.device)", 'x.to(torch.device("cuda"))', "x.cuda(1)"]
    assert found["x.to(args.device)"].accelerator is False  # type: ignore[union-attr]
    assert found["x.cuda(1)"].simple is False  # type: ignore[union-attr]


def test_a_loop_over_something_else_too_is_incomplete() -> None:
    ctx = context("""\
        from torch.utils.data import DataLoader
        def run(loader):
            for batch in loader:
                pass
        run(DataLoader(a))
        run([1, 2])
        """)
    (loop,) = ctx.analysis(loader_loops).loops
    assert not loop.complete and len(loop.loaders) == 1


def test_an_argument_that_cannot_be_followed_hides_the_loop() -> None:
    ctx = context("""\
        from torch.utils.data import DataLoader
        def run(loader):
            for batch in loader:
                pass
        run(DataLoader(a))
        run(unbound_name)
        """)
    assert ctx.analysis(loader_loops).loops == []
