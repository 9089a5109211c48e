"""GPU501 host-sync-in-training-step: reading a GPU value on the host every step stalls the queue."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from gpulint.analysis.device import accelerator_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, Evidence, Premise
from gpulint.analysis.steps import STEP_AST_NEEDLES, Place, StepFacts, step_facts
from gpulint.core.torch_api import CUDA_SYNCHRONIZE
from gpulint.project.ast_nodes import all_nodes
from gpulint.rules.base import Rule, RuleDocs, Target

if TYPE_CHECKING:
    from gpulint.analysis.ast_context import AstContext

# tensor methods that copy the value to the host and wait for the GPU
SYNC_METHODS = ("item", "cpu", "tolist")
# methods only torch tensors have: a receiver that calls one is a tensor
_TORCH_ONLY_METHODS = frozenset({
    "detach", "cuda", "float", "half", "bfloat16", "softmax", "log_softmax", "numel", "eq", "ne", "gt", "lt",
    "ge", "le", "norm", "contiguous", "sigmoid", "relu", "abs_", "clamp", "type_as", "masked_fill", "argmax",
})
# reductions and elementwise methods that keep a tensor a tensor (evidence only when their receiver is one)
_TENSOR_PRESERVING = frozenset({
    "sum", "mean", "max", "min", "std", "var", "prod", "abs", "sqrt", "exp", "log", "pow", "clone", "float",
    "squeeze", "unsqueeze", "view", "reshape", "flatten", "round", "argmax", "argmin", "to", "detach", "mul",
    "div", "add", "sub", "sigmoid", "softmax", "norm", "long", "int", "double", "data",
})
# torch functions whose result is not a tensor
_TORCH_NON_TENSOR = ("torch.cuda.", "torch.backends.", "torch.distributed.", "torch.utils.", "torch.is_",
                     "torch.get_", "torch.set_", "torch.manual_seed", "torch.device", "torch.save", "torch.load",
                     "torch.no_grad", "torch.autocast", "torch.compile", "torch.numel")
# factories: their tensors are on the CPU unless `device=` says otherwise
_FACTORIES = frozenset({
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "arange", "linspace", "rand", "randn",
    "randint", "randperm", "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    "logspace", "Tensor", "LongTensor", "FloatTensor", "manual_seed"})

EVERY_STEP = Premise(
    "every-step",
    "the read runs on every step of a training loop the user writes: the innermost loop that (directly or "
    "through functions of the same file) calls backward() and steps an optimizer, not under a logging-interval "
    "condition (`if step % N == 0`, `if i == 0`), not in an `except` handler, not in a loop a framework runs "
    "(Lightning, Hugging Face Trainer, Accelerate, DeepSpeed).")
A_GPU_TENSOR = Premise(
    "gpu-tensor",
    "the value read is a tensor the step computes: the loss given to backward(), the output of the model or of "
    "a torch function, or a tensor method chain on one (`(pred == y).sum()`); not one already copied to the "
    "host (`.cpu()`, `.numpy()`), and not a plain Python number.")
NOT_CONTROL_FLOW = Premise(
    "not-control-flow",
    "the value does not decide what the step does: it is not read in an `if`/`while`/`assert` test (NaN "
    "abort, early stopping, `if loss.item() > limit: break`), directly or through the name it is stored in.")
ON_ACCELERATOR = Premise(
    "on-accelerator",
    "training runs on an accelerator, whose queue the read drains: shown by device evidence in the file or a "
    "caller; refuted where the code pins the CPU (a host read of a CPU tensor costs nothing).")
SYNC_SAVED = Premise(
    "sync-saved",
    "dropping the read saves a wait: refuted when the same step loop steps an optimizer through a GradScaler "
    "on every pass (`scaler.step(optimizer)` under no `if` in the loop, the name bound only to `GradScaler(...)` "
    "or a parameter annotated `GradScaler`), in a file that makes no fused optimizer: the "
    "scaler reads its inf check on the host every step, so the queue is drained there anyway.")


class HostSyncInTrainingStep(Rule):
    code = "GPU501"
    name = "host-sync-in-training-step"
    summary = "A GPU value is read on the host (.item(), .cpu(), print) on every training step"
    impact = "removes one GPU->CPU synchronisation per step (Performance Tuning Guide); no figure measured here"
    needles = ("backward",)
    ast_needles = STEP_AST_NEEDLES
    target = Target.NOT_CPU_ONLY
    in_tests = False
    preview = True
    docs = RuleDocs(
        what="""
        Checks for host reads of GPU tensors that run on every step of a training loop:
        `.item()`, `.cpu()`, `.tolist()`, `.numpy(force=True)`, `float(t)`, `int(t)`,
        `print(t)`, a tensor formatted in an f-string (`f"{loss:.3f}"`) and
        `torch.cuda.synchronize()`. The training loop
        is the innermost loop that calls `backward()` and steps an optimizer, directly or
        through functions of the same file; the read may sit in such a function.
        """,
        why="""
        CUDA runs asynchronously: Python queues kernels and moves on, so the CPU prepares
        step N+1 while the GPU computes step N. Reading a value on the host makes the CPU
        wait until every queued kernel has finished, and the GPU then idles while Python
        queues the next step. PyTorch's Performance Tuning Guide lists `tensor.item()`,
        `print(cuda_tensor)`, `cuda_tensor.cpu()` and explicit synchronisation under "Avoid
        unnecessary CPU-GPU synchronization"; `torch.cuda.set_sync_debug_mode("warn")`
        shows each one at run time. How much it costs depends on how long Python needs to
        queue a step: small models and short steps lose the most. There is no verify fixture
        for this rule: on a CPU every operation runs before Python moves on, so a host read
        waits for nothing and costs nothing to remove; the effect shows only on a GPU
        (`torch.cuda.set_sync_debug_mode("warn")`, or a profiler trace's idle gaps).
        """,
        example="""
        import torch

        model = torch.nn.Linear(10, 1).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step, (x, y) in enumerate(loader):
            loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            print(step, loss.item())
        """,
        use_instead="""
        import torch

        model = torch.nn.Linear(10, 1).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        running = torch.zeros((), device="cuda")
        for step, (x, y) in enumerate(loader):
            loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            running += loss.detach()
            if step % 100 == 0:
                print(step, running.item() / 100)
                running.zero_()
        """,
        fix_safety="""
        No fix: where the value is read once per interval, and what is logged meanwhile, is
        the user's choice. Accumulate `loss.detach()` on the device and read it under
        `if step % N == 0`. Not reported under a logging-interval condition (`step % N == 0`,
        `(i + 1) % accum == 0`, `i == 0`, the `else` of `step % N != 0`, after
        `if step % N: continue`), in `except` handlers, for values that decide control flow
        (NaN aborts, early stopping), for values not shown to be GPU tensors, in loops a
        framework runs, in CPU-only files, in benchmark or profiling functions
        (`torch.cuda.synchronize()` there is the measurement), in full-batch training (the
        step loop is `for epoch in range(...)`: one step, and one sync, per epoch), or in
        tests. Logging blocks under a helper count as interval conditions when the helper
        of the file returns one (`every_n_steps(state, freq)` testing `state.step % freq`),
        or when a helper of another module named for an interval (`every`, `interval`,
        `should_log`) is given the step counter.
        """,
        premises=(EVERY_STEP, A_GPU_TENSOR, NOT_CONTROL_FLOW, ON_ACCELERATOR, SYNC_SAVED),
    )

    def detect(self, ctx: "AstContext") -> None:
        facts: StepFacts = ctx.analysis(step_facts)
        if not facts.steps or all(s.framework_owned for s in facts.steps):
            return
        reads = HostReads(facts, ctx.tree)
        for node in ctx.nodes(ast.Call, ast.JoinedStr):
            if isinstance(node, ast.Call):
                found = reads.sync_of(node)
            else:
                assert isinstance(node, ast.JoinedStr)
                found = reads.formatted(node)
            if found is None:
                continue
            spelled, tensor = found
            place = facts.place(node)
            if place is None or place.step.framework_owned or not place.every_step:
                continue
            if reads.in_benchmark(node) or _one_step_per_epoch(place.step.loop):
                continue
            decision = self.decide({
                EVERY_STEP: SHOWN,
                A_GPU_TENSOR: SHOWN,
                NOT_CONTROL_FLOW: reads.control_flow(node, place),
                ON_ACCELERATOR: accelerator_evidence(ctx.project),
                SYNC_SAVED: REFUTED if _scaler_syncs(ctx, place.step.loop) else SHOWN,
            })
            if not decision.report:
                continue
            ctx.report(self, node, _message(spelled, tensor), decision=decision)


def _scaler_syncs(ctx: "AstContext", loop: ast.AST) -> bool:
    """The step loop calls `scaler.step(optimizer)` (a GradScaler's step reads `found_inf` on the host unless the
    optimizer is fused, and the file makes none)."""
    if "fused=True" in ctx.text:
        return False
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step"
               and len(n.args) == 1 and isinstance(n.func.value, ast.Name) and _a_grad_scaler(ctx, n.func.value)
               and _unconditional(ctx, n, loop) for n in ast.walk(loop))


def _a_grad_scaler(ctx: "AstContext", name: ast.Name) -> bool:
    """The name is a GradScaler on every binding: `scaler = GradScaler(...)` (not `enabled=False`), or a
    parameter annotated `GradScaler`. A stand-in on another branch (`DummyGradScaler()`) does not sync."""
    owner = ctx.names.binding_scope(name)
    if owner is None:
        return False
    function = owner.node
    if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        arguments = function.args
        for parameter in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            if parameter.arg == name.id:
                return parameter.annotation is not None and _last(parameter.annotation) == "GradScaler"
    values = owner.values.get(name.id, [])
    return bool(values) and all(
        isinstance(v, ast.Call) and _last(v.func) == "GradScaler" and not any(
            k.arg == "enabled" and isinstance(k.value, ast.Constant) and k.value.value is False for k in v.keywords)
        for v in values)


def _unconditional(ctx: "AstContext", node: ast.AST, loop: ast.AST) -> bool:
    """No `if`/`try` between the loop and `node`: it runs on every pass (a scaler made only for float16,
    `if scaler is not None: scaler.step(opt)`, may not exist)."""
    for ancestor in ctx.ancestors(node):
        if ancestor is loop:
            return True
        if isinstance(ancestor, (ast.If, ast.Try, ast.IfExp, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
    return False


def _one_step_per_epoch(loop: ast.AST) -> bool:
    """Full-batch training: the step loop is the epoch loop (`for epoch in range(...)` whose body, or the
    function it calls, steps once on the whole data set), so a host read costs one sync per epoch."""
    if not isinstance(loop, ast.For):
        return False
    target = loop.target.id if isinstance(loop.target, ast.Name) else ""
    iterable = loop.iter
    while isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) \
            and iterable.func.id in ("tqdm", "enumerate") and iterable.args:
        iterable = iterable.args[0]
    return "epoch" in target.lower() and isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) \
        and iterable.func.id in ("range", "trange")


def _host_value(value: ast.expr) -> bool:
    """`loss.item()`, `float(loss)`: a Python number, not a tensor."""
    if isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr in ("item", "tolist", "cpu", "numpy"):
            return True
        return isinstance(func, ast.Name) and func.id in ("float", "int")
    return isinstance(value, ast.Constant)


def _message(spelled: str, tensor: Optional[ast.expr]) -> str:
    """One claim under 120 characters, and the habit that avoids it."""
    head = f"`{spelled}` syncs with the GPU every training step"
    if tensor is None:
        return f"{head}: synchronise only where you measure"
    name = ast.unparse(tensor)
    if spelled.endswith((".cpu()", ".tolist()", ".numpy()")):
        specific = f"{head}: keep `{name}` on the GPU, copy it once per log interval"
        generic = f"{head}: keep it on the GPU, copy it once per log interval"
    else:
        specific = f"{head}: accumulate `{name}.detach()`, read it once per log interval"
        generic = f"{head}: accumulate it on the GPU, read it once per log interval"
    if len(specific) <= 120:
        return specific
    return generic if len(generic) <= 120 else (
        "a host read syncs with the GPU every training step: read once per log interval")


class HostReads:
    """Which calls read a GPU tensor on the host, and whether the value decides control flow."""

    def __init__(self, facts: StepFacts, tree: ast.Module) -> None:
        self.facts = facts
        self.tree = tree
        self.rebound = _bound_names(tree)
        # (scope, spelling) of every loss given to backward(): a `loss` elsewhere may be a number
        self.losses = {(id(facts.scope_of(b.loss)), ast.unparse(b.loss)) for s in facts.steps for b in s.backwards}
        self.models = _model_names(tree)

    def sync_of(self, call: ast.Call) -> Optional[tuple[str, Optional[ast.expr]]]:
        """(how the read is spelled, the tensor read) when `call` is a host read of a tensor."""
        func = call.func
        if self.facts.qualname(func) in CUDA_SYNCHRONIZE:
            return "torch.cuda.synchronize()", None
        if isinstance(func, ast.Attribute):
            method = func.attr
            force = any(k.arg == "force" and isinstance(k.value, ast.Constant) and k.value.value is True
                        for k in call.keywords)
            if method in SYNC_METHODS and not call.args and not call.keywords or method == "numpy" and force:
                receiver = func.value
                if self.is_tensor(receiver):
                    spelled = ast.unparse(receiver)
                    spelled = f"{spelled}.{method}()" if len(spelled) <= 30 else f".{method}()"
                    return spelled, _root_tensor(receiver)
            return None
        if isinstance(func, ast.Name) and func.id not in self.rebound:
            if func.id in ("float", "int") and len(call.args) == 1 and not call.keywords:
                arg = call.args[0]
                if self.is_tensor(arg):
                    return f"{func.id}({_short(arg)})", _root_tensor(arg)
            if func.id == "print":
                for arg in call.args:
                    tensor = self._printed_tensor(arg)
                    if tensor is not None:
                        return f"print({_short(tensor)})", _root_tensor(tensor)
        return None

    def formatted(self, text: ast.JoinedStr) -> Optional[tuple[str, Optional[ast.expr]]]:
        """An f-string that formats a tensor (`f"{loss:.3f}"` copies it to the host), outside `print(...)`
        (reported as the print)."""
        parent = self.facts.parent(text)
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "print" \
                and "print" not in self.rebound:
            return None
        for part in text.values:
            if isinstance(part, ast.FormattedValue) and self.is_tensor(part.value):
                return f"f\"{{{_short(part.value)}}}\"", _root_tensor(part.value)
        return None

    def _printed_tensor(self, arg: ast.expr) -> Optional[ast.expr]:
        if isinstance(arg, ast.JoinedStr):
            for part in arg.values:
                if isinstance(part, ast.FormattedValue) and self.is_tensor(part.value):
                    return part.value
            return None
        return arg if self.is_tensor(arg) else None

    def is_tensor(self, expr: ast.expr, depth: int = 0) -> bool:
        """Evidence that `expr` is a tensor on the device: the loss, a model output, a torch function's
        result, or a tensor method chain on one. A value copied to the host is not."""
        if depth > 6:
            return False
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute):
                if func.attr in ("cpu", "numpy", "tolist", "item"):
                    return False  # already on the host (its own read is reported where it happens)
                if func.attr in _TORCH_ONLY_METHODS and func.attr not in ("float", "argmax"):
                    return True
                if func.attr in _TENSOR_PRESERVING:
                    return self.is_tensor(func.value, depth + 1)
                return self._model_call(expr) or self._torch_function(expr)
            return self._model_call(expr) or self._torch_function(expr)
        if isinstance(expr, ast.Attribute):
            if expr.attr in ("data", "grad"):
                return self.is_tensor(expr.value, depth + 1) or _last(expr.value) in self.models
            return self._is_loss(expr)
        if isinstance(expr, ast.Subscript):
            return self.is_tensor(expr.value, depth + 1)
        if isinstance(expr, ast.BinOp):
            return self.is_tensor(expr.left, depth + 1) or self.is_tensor(expr.right, depth + 1)
        if isinstance(expr, ast.Compare) and len(expr.comparators) == 1:
            return self.is_tensor(expr.left, depth + 1) or self.is_tensor(expr.comparators[0], depth + 1)
        if isinstance(expr, ast.Name):
            values = self._assignments(expr)
            if self._is_loss(expr):  # the loss, unless it is also given a host value (`loss = loss.item()`)
                return values is None or not any(_host_value(v) for v in values)
            # every value it is given is a tensor (`out = net(x).view(-1)` ... `out = net(fake).view(-1)`)
            return bool(values) and all(self.is_tensor(v, depth + 1) for v in values or ())
        return False

    def _is_loss(self, expr: ast.expr) -> bool:
        return (id(self.facts.scope_of(expr)), ast.unparse(expr)) in self.losses

    def _value(self, name: ast.Name) -> Optional[ast.expr]:
        """The value `name` holds: its one plain assignment in its scope; None when it is bound otherwise."""
        values = self._assignments(name)
        return values[0] if values is not None and len(values) == 1 else None

    def _assignments(self, name: ast.Name) -> Optional[list[ast.expr]]:
        """Every value assigned to `name` in its scope; None when it is also bound another way (a parameter,
        a loop target, `+=`, a tuple)."""
        scope = self.facts.scope_of(name) or self.tree
        values: list[ast.expr] = []
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id == name.id:
                        values.append(node.value)
                    elif any(isinstance(n, ast.Name) and n.id == name.id for n in ast.walk(target)):
                        return None
            elif isinstance(node, ast.Name) and node.id == name.id and isinstance(node.ctx, (ast.Store, ast.Del)) \
                    and not isinstance(self.facts.parent(node), ast.Assign):
                return None
            elif isinstance(node, ast.arg) and node.arg == name.id:
                return None
        return values

    def _model_call(self, call: ast.Call) -> bool:
        """`model(x)`, `self.model(x)`, `criterion(out, y)` with `criterion = nn.CrossEntropyLoss()`."""
        name = _last(call.func)
        if name is not None and name in self.models:
            return True
        if isinstance(call.func, ast.Name):
            value = self._value(call.func)
            if isinstance(value, ast.Call):
                target = self.facts.qualname(value.func) or ""
                return target.startswith("torch.nn.") and not target.startswith(("torch.nn.parallel", "torch.nn.utils"))
        return False

    def _torch_function(self, call: ast.Call) -> bool:
        target = self.facts.qualname(call.func)
        if target is None or not target.startswith("torch."):
            return False
        if target.startswith(_TORCH_NON_TENSOR):
            return False
        if target.split(".")[-1] in _FACTORIES:  # on the device only when `device=` (or a `*_like` input) says so
            return any(k.arg == "device" for k in call.keywords)
        return target.startswith("torch.nn.functional.") or target.count(".") == 1

    def control_flow(self, node: ast.AST, place: Place) -> Evidence:
        """Refuted when the value read decides a test of the step: directly (`if loss.item() > x:`), in an
        `assert`/`raise`, or through the name it is stored in (`v = loss.item()` ... `if not isfinite(v):`)."""
        statement: Optional[ast.stmt] = None
        for ancestor in self.facts.ancestors(node):
            if isinstance(ancestor, (ast.If, ast.While, ast.IfExp, ast.Assert)) and _within(node, ancestor.test):
                return REFUTED
            if isinstance(ancestor, ast.Raise) or _steers(ancestor, node):
                return REFUTED
            if isinstance(ancestor, ast.stmt):
                statement = ancestor
                break
        names = _stored_names(statement) if statement is not None else set()
        if names and statement is not None:
            loop = place.step.loop
            scope = loop if _within(statement, loop) else (self.facts.scope_of(statement) or self.tree)
            for test in _tests(scope):
                if any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(test)):
                    return REFUTED
            for use in ast.walk(scope):
                if isinstance(use, ast.Name) and use.id in names and isinstance(use.ctx, ast.Load):
                    parent = self.facts.parent(use)
                    if parent is not None and _steers(parent, use):
                        return REFUTED
        return SHOWN

    def in_benchmark(self, node: ast.AST) -> bool:
        """In a function named for measuring (`benchmark`, `profile`, `timeit`): syncs there are the point."""
        for ancestor in self.facts.ancestors(node):
            if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    w in ancestor.name.lower() for w in ("bench", "profil", "timeit", "timing", "measure", "speed")):
                return True
        return False


def _steers(parent: ast.AST, child: ast.AST) -> bool:
    """`child` is a host value the code needs as a number: an argument of a `.step(...)` (an environment's
    action, ReduceLROnPlateau's metric), an index (`labels[int(i)]`), what a `for` iterates or `range()` counts."""
    if isinstance(parent, ast.Call) and child is not parent.func:
        if isinstance(parent.func, ast.Attribute) and parent.func.attr == "step":
            return True
        return isinstance(parent.func, ast.Name) and parent.func.id == "range"
    if isinstance(parent, ast.keyword):
        return False
    if isinstance(parent, ast.Subscript) and child is parent.slice:
        return True
    return isinstance(parent, (ast.For, ast.comprehension)) and child is parent.iter


def _within(node: ast.AST, root: ast.AST) -> bool:
    return any(n is node for n in ast.walk(root))


def _stored_names(statement: ast.AST) -> set[str]:
    if isinstance(statement, ast.Assign):
        return {n.id for t in statement.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(statement, (ast.AugAssign, ast.AnnAssign)) and isinstance(statement.target, ast.Name):
        return {statement.target.id}
    return set()


def _tests(scope: ast.AST) -> list[ast.expr]:
    found: list[ast.expr] = []
    for node in ast.walk(scope):
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            found.append(node.test)
    return found


def _bound_names(tree: ast.Module) -> set[str]:
    """Names the file binds itself (a user's own `print`/`float` is not the builtin)."""
    bound: set[str] = set()
    for node in all_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return bound


def _model_names(tree: ast.Module) -> set[str]:
    """Names of the modules the file trains: what `.parameters()`, `.train()`, `.eval()` are called on."""
    names: set[str] = set()
    for node in all_nodes(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("parameters", "named_parameters", "train", "eval") \
                and not node.args:
            name = _last(node.func.value)
            if name is not None and name != "self":
                names.add(name)
    return names


def _last(expr: ast.AST) -> Optional[str]:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


def _root_tensor(expr: ast.expr) -> ast.expr:
    """The tensor to accumulate: `loss` for `loss.detach()`; the expression itself otherwise."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("detach",):
        expr = expr.func.value
    return expr


def _short(expr: ast.expr) -> str:
    text = ast.unparse(expr)
    return text if len(text) <= 30 else "..."
