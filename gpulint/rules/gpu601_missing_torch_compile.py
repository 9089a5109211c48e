"""GPU601 missing-torch-compile: a GPU training script whose model never goes through torch.compile."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional, Union

from gpulint.analysis.ast_context import AstContext, Detection
from gpulint.analysis.evidence import REFUTED, SHOWN, Evidence, Premise
from gpulint.analysis.reach import OFF_ENVIRONMENT, waits_on_environment
from gpulint.analysis.script_settings import own_steps, script_anchor, trains_on_cuda
from gpulint.analysis.steps import StepFacts
from gpulint.core import floors
from gpulint.core.edits import Applicability
from gpulint.core.torch_api import DATA_PARALLEL_WRAPPERS
from gpulint.core.verification import FUSED_OPTIMIZER, Verification
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.project.facts import SETTING_COMPILE
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

TRAINS_ON_CUDA = Premise(
    "trains-on-cuda",
    "the file runs a training step of its own (backward and an optimizer step; no framework owns the loop) "
    "and shows CUDA evidence, here or in a caller.")
NOT_COMPILED = Premise(
    "not-compiled",
    "nothing in the file, its callers, or the modules they import calls `torch.compile`, a module's "
    "`.compile()`, or configures `torch._dynamo` / `torch._inductor`.")
GPU_BOUND = Premise(
    "gpu-bound",
    "the loop waits on the model's GPU work: refuted in reinforcement-learning loops (the file imports an "
    "environment package, anywhere in the file, inside a function or a notebook cell too: the step waits on "
    "the simulator) and with sparse tensors (which torch.compile does not trace).")
COMPILE_EXISTS = Premise(
    "compile-exists",
    "every torch the project supports has `torch.compile` (2.0 on): refuted by a declared floor below it "
    "(`torch-version`, requirements, setup.py ...), where the advice could not be taken.")
# wrappers that should see the compiled module, or whose order with compile the fix cannot choose for the user


class MissingTorchCompile(Rule):
    code = "GPU601"
    name = "missing-torch-compile"
    habit = "fused-kernels"
    summary = "GPU training script that never calls torch.compile (select GPU601 to run it)"
    impact = "+43% training speed on average over 163 models on an A100 (+21% fp32, +51% AMP; PyTorch 2.0 release)"
    needles = ("backward",)
    ast_needles = ((".backward(", "torch.autograd.backward"), (".step(",))
    target = Target.GPU
    in_tests = False
    fix = Applicability.UNSAFE
    preview = True
    opt_in = True
    verification = Verification(FUSED_OPTIMIZER, ("optimizer",),
                                "the training steps run the compiled model",
                                mismatch_hint="compiled kernels fuse and reorder float operations: losses agree "
                                              "to the last bits, not bit for bit")
    docs = RuleDocs(
        what="""
        Checks for GPU training scripts that run their own loop and never compile their
        model: no `torch.compile`, no `module.compile()`, no dynamo or inductor
        configuration in the file, its callers or the modules they import. Reported once
        per file, on its first optimizer step. This rule runs only when selected by its
        code (`--select GPU601`), even with preview on: compiling is a choice with costs
        most projects make deliberately.
        """,
        why="""
        `torch.compile` traces the model into graphs and generates fused kernels, removing
        Python overhead and memory round trips between operations. Over 163 open-source
        models on an A100 the PyTorch 2.0 release measured training 43 % faster on average
        (21 % in float32, 51 % with AMP). The gain varies by model: little for models
        dominated by large matmuls, more for many small operations.
        """,
        example="""
        import torch

        model = Net().cuda()
        optimizer = torch.optim.AdamW(model.parameters())
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
        """,
        use_instead="""
        import torch

        model = Net().cuda()
        model = torch.compile(model)
        optimizer = torch.optim.AdamW(model.parameters())
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
        """,
        fix_safety="""
        Unsafe: the first steps pay the compilation (seconds to minutes), new input shapes
        recompile, some Python in `forward` causes graph breaks, and numerics differ in the
        last bits. The fix writes `model = torch.compile(model)` just before the optimizer
        is built from `model.parameters()` (after the model is built and moved), only when
        that is unambiguous: the optimizer's parameters come from one plain name, which the
        step calls and which is bound only by plain assignments before that line. No fix
        when the file saves or loads `model.state_dict()` (a compiled module's keys gain an
        `_orig_mod.` prefix), when it wraps the model in DDP, DataParallel or FSDP (the order
        of wrapping and compiling is the user's choice). Not reported with a torch floor
        below 2.0 (no torch.compile there), where a framework owns the loop, in reinforcement-learning loops (an
        environment package imported, or every training step of the file in a loop that waits on an environment:
        off-environment), with sparse tensors, in CPU-only files or in test files.
        """,
        premises=(TRAINS_ON_CUDA, NOT_COMPILED, GPU_BOUND, OFF_ENVIRONMENT, COMPILE_EXISTS),
        fix_cases=(
            FixCase("`model = torch.compile(model)` before the optimizer is built from `model.parameters()`",
                    Applicability.UNSAFE, "model_compiled_before_optimizer.py"),
            FixCase("the model's `state_dict` is saved or loaded (keys would gain `_orig_mod.`)",
                    None, "checkpoint_saved_reported_without_fix.py"),
            FixCase("the model is wrapped in DDP, DataParallel or FSDP",
                    None, "ddp_reported_without_fix.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        steps = own_steps(ctx)
        if steps is None:
            return
        decision = self.decide({
            TRAINS_ON_CUDA: trains_on_cuda(ctx, steps),
            NOT_COMPILED: REFUTED if SETTING_COMPILE in ctx.project.settings else SHOWN,
            GPU_BOUND: REFUTED if ctx.project.rl or ctx.project.own.sparse else SHOWN,
            OFF_ENVIRONMENT: _steps_off_environment(ctx, steps),
            COMPILE_EXISTS: REFUTED if floors.too_new(ctx.settings.torch_version, [floors.COMPILE]) else SHOWN,
        })
        if not decision.report:
            return
        fix: Optional[Applicability] = None
        fix_message, note, data = "", "", None
        placed = _compile_point(ctx, steps)
        if isinstance(placed, str):
            note = f"no fix: {placed}"
        else:
            name, line = placed
            fix, fix_message = Applicability.UNSAFE, f"Compile `{name}` before its optimizer is built"
            data = {"name": name, "line": line}
        anchor = script_anchor(steps)
        ctx.report(self, anchor, "GPU training without torch.compile: the model runs eagerly, one kernel per "
                                 "operation", fix=fix, fix_message=fix_message, data=data,
                   statement=ctx.statement(anchor), note=note, decision=decision)

    def build_fix(self, detection: Detection, fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst
        from libcst.metadata import MetadataWrapper, PositionProvider

        from gpulint.core.pending import InsertStatements, PendingFix

        assert detection.data is not None
        name, line = detection.data["name"], detection.data["line"]
        positions = MetadataWrapper(fctx.module, unsafe_skip_copy=True).resolve(PositionProvider)
        for each, where in positions.items():
            if isinstance(each, cst.SimpleStatementLine) and where.start.line == line:
                torch = fctx.imports.module_alias("torch")
                return PendingFix.unsafe(detection.fix_message, torch.edit,
                                         InsertStatements(each, f"{name} = {torch.expr}.compile({name})"))
        return None


def _steps_off_environment(ctx: AstContext, steps: Optional[StepFacts]) -> Evidence:
    """OFF_ENVIRONMENT for the file (one finding per script): refuted when every optimizer step of its own
    training steps (every backward where none steps in view) waits on an environment; one offline step left
    keeps the advice."""
    if steps is None:
        return SHOWN
    calls = [s.call for step in steps.steps for s in step.steps] or [b.call for step in steps.steps
                                                                     for b in step.backwards]
    return REFUTED if calls and all(waits_on_environment(ctx, call) for call in calls) else SHOWN


def _compile_point(ctx: AstContext, steps: StepFacts) -> Union[tuple[str, int], str]:
    """The model's name and the line of the optimizer's statement to compile it before, or why the fix is not
    offered."""
    if any(wrapper in ctx.text for wrapper in DATA_PARALLEL_WRAPPERS):
        return "the model is wrapped for data parallelism; compile it where the wrapping order is chosen"
    names: set[str] = set()
    built: Optional[ast.Call] = None
    for step in steps.steps:
        for optimizer_step in step.steps:
            value = _single_value(ctx, optimizer_step.optimizer)
            name = _parameters_of(value) if isinstance(value, ast.Call) else None
            if name is None or not any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == name
                                       for c in walk_nodes(step.loop)):
                return "the model whose parameters the optimizer steps is not one plain name the step calls"
            names.add(name)
            built = value  # type: ignore[assignment]
    if len(names) != 1 or built is None:
        return "the steps train more than one model"
    name = names.pop()
    if f"{name}.state_dict" in ctx.text or f"{name}.load_state_dict" in ctx.text:
        return f"`{name}` is saved or loaded by state_dict, whose keys compiling would prefix with `_orig_mod.`"
    statement = ctx.statement(built)
    if not isinstance(statement, (ast.Assign, ast.AnnAssign)):
        return "the optimizer is not built by a statement of its own"
    model = built.args[0].func.value  # type: ignore[attr-defined]  # `model` in `model.parameters()`
    owner = ctx.names.binding_scope(model)
    values = owner.values.get(name, []) if owner is not None else []
    if not values or any(v is None or v.lineno >= statement.lineno or ctx.enclosing_function(v)
                         is not ctx.enclosing_function(statement) for v in values):
        return f"`{name}` is bound other than by plain assignments before the optimizer is built"
    return name, statement.lineno


def _single_value(ctx: AstContext, expr: ast.expr) -> Optional[ast.expr]:
    """The one value a plain name is assigned, else None."""
    if not isinstance(expr, ast.Name):
        return None
    owner = ctx.names.binding_scope(expr)
    values = owner.values.get(expr.id, []) if owner is not None else []
    return values[0] if len(values) == 1 else None


def _parameters_of(call: ast.Call) -> Optional[str]:
    """`model` in `AdamW(model.parameters(), ...)`."""
    first = call.args[0] if call.args and not isinstance(call.args[0], ast.Starred) else None
    if isinstance(first, ast.Call) and isinstance(first.func, ast.Attribute) and first.func.attr == "parameters" \
            and isinstance(first.func.value, ast.Name) and not first.args:
        return first.func.value.id
    return None
