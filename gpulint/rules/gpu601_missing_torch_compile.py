"""GPU601 missing-torch-compile: a GPU training script whose model never goes through torch.compile."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gpulint.analysis.evidence import REFUTED, SHOWN, Premise
from gpulint.analysis.gpu_scripts import own_training_loop, script_anchor, trains_on_cuda
from gpulint.analysis.training import TRAINING_STEP_NEEDLES, TrainingFacts
from gpulint.core import floors
from gpulint.core.edits import Applicability
from gpulint.core.pending import InsertStatements, PendingFix
from gpulint.core.values import single_value
from gpulint.core.verification import FUSED_OPTIMIZER, Verification
from gpulint.project.facts import SETTING_COMPILE
from gpulint.rules.base import Rule, RuleDocs, Target

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
    "environment package: the step waits on the simulator) and with sparse tensors (which torch.compile "
    "does not trace).")
# wrappers that should see the compiled module, or whose order with compile the fix cannot choose for the user
_WRAPPERS = ("DistributedDataParallel", "DataParallel", "FullyShardedDataParallel", "fully_shard", "DDP(", "FSDP(")


class MissingTorchCompile(Rule):
    code = "GPU601"
    name = "missing-torch-compile"
    summary = "GPU training script that never calls torch.compile (select GPU601 to run it)"
    impact = "+43% training speed on average over 163 models on an A100 (+21% fp32, +51% AMP; PyTorch 2.0 release)"
    needles = ("backward",)
    ast_needles = TRAINING_STEP_NEEDLES
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
        of wrapping and compiling is the user's choice), or with a torch floor below 2.0.
        Not reported where a framework owns the loop, in reinforcement-learning loops, with
        sparse tensors, in CPU-only files or in test files.
        """,
        premises=(TRAINS_ON_CUDA, NOT_COMPILED, GPU_BOUND),
    )

    def visit_Module(self, node: cst.Module) -> None:
        facts = own_training_loop(self.ctx)
        if facts is None:
            return
        decision = self.decide({
            TRAINS_ON_CUDA: trains_on_cuda(self.ctx, facts),
            NOT_COMPILED: REFUTED if SETTING_COMPILE in self.ctx.project.settings else SHOWN,
            GPU_BOUND: REFUTED if self.ctx.project.rl or self.ctx.project.own.sparse else SHOWN,
        })
        if not decision.report:
            return
        fix, note = None, ""
        too_new = floors.too_new(self.ctx.settings.torch_version, [floors.COMPILE])
        placed = _compile_point(self.ctx.text, facts)
        if too_new is not None:
            note = f"no fix: {too_new.reason()}"
        elif isinstance(placed, str):
            note = f"no fix: {placed}"
        else:
            name, statement = placed
            torch = self.ctx.imports.module_alias("torch")
            fix = PendingFix.unsafe(f"Compile `{name}` before its optimizer is built", torch.edit,
                                    InsertStatements(statement, f"{name} = {torch.expr}.compile({name})"))
        anchor = script_anchor(facts)
        self.report_decided(decision, anchor, "GPU training without torch.compile: the model runs eagerly, one "
                                              "kernel per operation", fix, statement=facts.statement_of(anchor),
                            note=note)


def _compile_point(text: str, facts: TrainingFacts) -> "tuple[str, cst.SimpleStatementLine] | str":
    """The model's name and the optimizer's statement to compile it before, or why the fix is not offered."""
    if any(wrapper in text for wrapper in _WRAPPERS):
        return "the model is wrapped for data parallelism; compile it where the wrapping order is chosen"
    names: set[str] = set()
    built: Optional[cst.Call] = None
    for step in facts.steps:
        for optimizer_step in step.steps:
            optimizer = optimizer_step.optimizer
            value = single_value(optimizer, facts.ctx.names) if isinstance(optimizer, cst.Name) else None
            name = _parameters_of(value) if isinstance(value, cst.Call) else None
            if name is None or not _calls(facts, step.node, name):
                return "the model whose parameters the optimizer steps is not one plain name the step calls"
            names.add(name)
            built = value  # type: ignore[assignment]
    if len(names) != 1 or built is None:
        return "the steps train more than one model"
    name = names.pop()
    if f"{name}.state_dict" in text or f"{name}.load_state_dict" in text:
        return f"`{name}` is saved or loaded by state_dict, whose keys compiling would prefix with `_orig_mod.`"
    statement = facts.statement_of(built)
    if not isinstance(statement, cst.SimpleStatementLine):
        return "the optimizer is not built by a statement of its own"
    scope = facts.scope_of(built)
    bindings = _bindings(scope, name)
    if not bindings or any(not isinstance(b, cst.Assign) or not facts.before(b, statement) for b in bindings):
        return f"`{name}` is bound other than by plain assignments before the optimizer is built"
    return name, statement


def _parameters_of(call: cst.Call) -> Optional[str]:
    """`model` in `AdamW(model.parameters(), ...)`."""
    first = call.args[0].value if call.args and call.args[0].keyword is None and not call.args[0].star else None
    if isinstance(first, cst.Call) and isinstance(first.func, cst.Attribute) and first.func.attr.value == "parameters" \
            and isinstance(first.func.value, cst.Name) and not first.args:
        return first.func.value.value
    return None


def _calls(facts: TrainingFacts, node: cst.CSTNode, name: str) -> bool:
    return any(isinstance(c.func, cst.Name) and c.func.value == name and facts.contains(node, c) for c in facts.calls)


class _Bindings(cst.CSTVisitor):
    """Statements of one scope that bind `name` (nested functions and classes are other scopes)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.found: list[cst.CSTNode] = []

    def parameters(self, node: cst.FunctionDef) -> None:
        """The scope's own parameters bind the name too."""
        params = node.params
        if any(p.name.value == self.name for p in (*params.params, *params.kwonly_params, *params.posonly_params)):
            self.found.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(isinstance(t.target, cst.Name) and t.target.value == self.name for t in node.targets):
            self.found.append(node)
        elif any(self._mentions(t.target) for t in node.targets):
            self.found.extend(node.targets)  # `model, opt = ...`: not a plain binding

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._mentions(node.target):
            self.found.append(node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self._mentions(node.target):
            self.found.append(node)

    def visit_For(self, node: cst.For) -> None:
        if self._mentions(node.target):
            self.found.append(node)

    def visit_AsName(self, node: cst.AsName) -> None:
        if self._mentions(node.name):
            self.found.append(node)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        if self._mentions(node.target):
            self.found.append(node)

    def _mentions(self, target: cst.BaseExpression) -> bool:
        if isinstance(target, cst.Name):
            return target.value == self.name
        if isinstance(target, (cst.Tuple, cst.List)):
            return any(self._mentions(e.value) for e in target.elements)
        if isinstance(target, cst.StarredElement):
            return self._mentions(target.value)
        return False


def _bindings(scope: cst.CSTNode, name: str) -> list[cst.CSTNode]:
    visitor = _Bindings(name)
    if isinstance(scope, cst.FunctionDef):
        visitor.parameters(scope)
        scope.body.visit(visitor)
    else:
        scope.visit(visitor)
    return visitor.found
