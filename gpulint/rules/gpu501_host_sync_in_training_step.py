"""GPU501 host-sync-in-training-step: reading a GPU value on the host every step stalls the queue."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from gpulint.analysis.device import accelerator_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, Evidence, Premise
from gpulint.analysis.frameworks import TORCH_CODE, torch_code
from gpulint.analysis.reach import SELF_TEST, not_self_test
from gpulint.analysis.step_passes import TRAINING_PASS, StepPasses
from gpulint.analysis.steps import STEP_AST_NEEDLES, Place, StepFacts, StepLoop, step_facts
from gpulint.core.torch_api import CUDA_SYNCHRONIZE
from gpulint.project.ast_nodes import all_nodes, last_name
from gpulint.project.ast_nodes import walk as walk_nodes
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
# methods that keep a host tensor on the host (`torch.from_numpy(a).float()`)
_HOST_KEEPING = frozenset({"float", "long", "int", "double", "half", "bool", "view", "reshape", "unsqueeze",
                           "squeeze", "contiguous", "type", "permute", "transpose", "flatten"})
# torch functions whose result is not a tensor
_TORCH_NON_TENSOR = ("torch.cuda.", "torch.backends.", "torch.distributed.", "torch.utils.", "torch.is_",
                     "torch.get_", "torch.set_", "torch.manual_seed", "torch.device", "torch.save", "torch.load",
                     "torch.no_grad", "torch.autocast", "torch.compile", "torch.numel")
# factories: their tensors are on the CPU unless `device=` says otherwise
_FACTORIES = frozenset({
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "arange", "linspace", "rand", "randn",
    "randint", "randperm", "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    "logspace", "Tensor", "LongTensor", "FloatTensor", "manual_seed"})
# the factories a step's host data goes through before it is copied to the device (all make host tensors)
_HOST_FACTORIES = _FACTORIES - {"manual_seed", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
                                "randn_like"}

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
    "scaler reads its inf check on the host every step, so the queue is drained there anyway. Refuted too when, "
    "before the read and before the backward, every iteration (no `if`, inner loop or handler on the way, "
    "through same-file calls too) copies to the device, without `non_blocking=True`, a tensor the step makes "
    "from host data (`torch.from_numpy(a).float().to(device)`, `torch.tensor(xs).cuda()`, a factory without "
    "`device=`): a blocking copy waits for the queue, and such memory is pageable, where `non_blocking` gains "
    "nothing, so the copy stays a sync whatever the read does. A batch's copy is not counted: pinning the loader "
    "and `non_blocking=True` (GPU101, GPU104) take that sync away. (An earlier host read is first-read's case.)")
FIRST_READ = Premise(
    "first-read",
    "the read is the first of its step to wait for the queue: refuted for a read that another host read of the "
    "same step precedes on every iteration that runs it, under no condition the later read does not share; the "
    "earlier one may be reported or not (a NaN check's `loss.item()` before the backward): the step drains the "
    "queue there on every pass, so dropping the later read alone removes no wait. One finding "
    "per step, at its first read; the message counts the step's other reads (`... and 2 more reads in this "
    "step`), which the same advice removes.")


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
        `if step % N == 0`. One finding per step, at its first read; the message counts the
        reads after it (`and 2 more reads in this step`), which the first has waited for. Not
        reported in a branch that excludes the backward (`else:` of `if train:`, `phase ==
        "val"`: an evaluation pass), in the `__main__` self-test of a module other files
        import, after a blocking copy the step makes before its backward on every pass (a
        host tensor made from numpy copied without `non_blocking`, a NaN check's read), under
        a logging-interval condition (`step % N == 0`,
        `(i + 1) % accum == 0`, `i == 0`, the `else` of `step % N != 0`, after
        `if step % N: continue`), in `except` handlers, for values that decide control flow
        (NaN aborts, early stopping), for values not shown to be GPU tensors, in loops a
        framework runs, in CPU-only files, in files that import another deep-learning framework
        (PaddlePaddle, OneFlow, ...) and torch nowhere, in benchmark or profiling functions
        (`torch.cuda.synchronize()` there is the measurement), in full-batch training (the
        step loop is `for epoch in range(...)`: one step, and one sync, per epoch), or in
        tests. Logging blocks under a helper count as interval conditions when the helper
        of the file returns one (`every_n_steps(state, freq)` testing `state.step % freq`),
        or when a helper of another module named for an interval (`every`, `interval`,
        `should_log`) is given the step counter.
        """,
        premises=(TORCH_CODE, EVERY_STEP, A_GPU_TENSOR, NOT_CONTROL_FLOW, ON_ACCELERATOR, SYNC_SAVED, TRAINING_PASS,
                  SELF_TEST, FIRST_READ),
    )

    def detect(self, ctx: "AstContext") -> None:
        facts: StepFacts = ctx.analysis(step_facts)
        if not facts.steps or all(s.framework_owned for s in facts.steps):
            return
        reads = HostReads(facts, ctx.tree)
        passes = StepPasses(facts)
        found_reads: list[_Read] = []
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
            step = place.step
            evidence = {
                TORCH_CODE: torch_code(ctx.project),
                EVERY_STEP: SHOWN,
                A_GPU_TENSOR: SHOWN,
                NOT_CONTROL_FLOW: reads.control_flow(node, place),
                ON_ACCELERATOR: accelerator_evidence(ctx.project),
                SYNC_SAVED: REFUTED if _scaler_syncs(ctx, step.loop) else SHOWN,
                TRAINING_PASS: passes.trains(node, step),
                SELF_TEST: not_self_test(ctx.tree, node, ctx.parent, ctx.project.imported),
            }
            found_reads.append(_Read(node, spelled, tensor, step, evidence))
        copies: dict[int, list[ast.Call]] = {}
        for read in found_reads:
            if read.evidence[SYNC_SAVED] is SHOWN and read.evidence[TRAINING_PASS] is SHOWN:
                if id(read.step) not in copies:
                    copies[id(read.step)] = _blocking_copies(ctx, facts, passes, read.step)
                if _copied_before(passes, read, copies[id(read.step)]):
                    read.evidence[SYNC_SAVED] = REFUTED
        # the first read of each step is the finding; the later ones it dominates are counted in its message
        firsts: dict[int, _Read] = {}
        for read in found_reads:
            if read.evidence[TRAINING_PASS] is not SHOWN:
                read.evidence[FIRST_READ] = SHOWN  # not a training pass: silent on its own premise
                continue
            earlier = [r for r in found_reads if r is not read and r.step is read.step
                       and r.evidence[TRAINING_PASS] is SHOWN and passes.dominates(r.node, read.node, read.step)]
            if earlier:
                read.evidence[FIRST_READ] = REFUTED
                firsts[id(read)] = min(earlier, key=lambda r: passes.order(r.node, r.step) or ())
            else:
                read.evidence[FIRST_READ] = SHOWN
        more: dict[int, int] = {}  # the first read -> how many later reads of its step it stands for
        for read in found_reads:
            if id(read) not in firsts:
                continue
            alone = {premise: found for premise, found in read.evidence.items() if premise is not FIRST_READ}
            if self.decide(alone).report:  # a finding of its own, were it the first
                first = firsts[id(read)]
                while id(first) in firsts:
                    first = firsts[id(first)]
                more[id(first)] = more.get(id(first), 0) + 1
        for read in found_reads:
            decision = self.decide(read.evidence)
            if not decision.report:
                continue
            ctx.report(self, read.node, _message(read.spelled, read.tensor, more.get(id(read), 0)),
                       decision=decision)


class _Read:
    """A host read in a step loop, and the evidence for its premises."""

    def __init__(self, node: ast.AST, spelled: str, tensor: Optional[ast.expr], step: StepLoop,
                 evidence: dict[Premise, Evidence]) -> None:
        self.node = node
        self.spelled = spelled
        self.tensor = tensor
        self.step = step
        self.evidence = evidence


def _copied_before(passes: StepPasses, read: _Read, copies: list[ast.Call]) -> bool:
    """A blocking copy runs on every iteration before the step's first backward and before the read."""
    order = passes.order(read.node, read.step)
    backwards = [o for o in (passes.order(b.call, read.step) for b in read.step.backwards) if o is not None]
    if order is None or not backwards:
        return False
    first_backward = min(backwards)
    for copy in copies:
        copied = passes.order(copy, read.step)
        if copied is not None and copied < first_backward and copied < order:
            return True
    return False


def _blocking_copies(ctx: "AstContext", facts: StepFacts, passes: StepPasses, step: StepLoop) -> list[ast.Call]:
    """Copies to the device that wait for the queue on every iteration of `step`: `.to(device)`/`.cuda()`
    without `non_blocking=True` of a tensor made from host data in the same function."""
    found: list[ast.Call] = []
    for node in all_nodes(ctx.tree):
        if isinstance(node, ast.Call) and _pageable_copy(facts, node) and passes.unconditional(node, step):
            found.append(node)
    return found


def _pageable_copy(facts: StepFacts, call: ast.Call) -> bool:
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in ("to", "cuda"):
        return False
    if any(k.arg == "non_blocking" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
           for k in call.keywords):
        return False
    if func.attr == "to":
        target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device"), None)
        if target is None or not _names_device(facts, target):
            return False
    return _fresh_host_tensor(facts, func.value, 0)


def _names_device(facts: StepFacts, expr: ast.expr) -> bool:
    """`device`, `self.device`, `args.dev`, `"cuda"`, `torch.device(...)`: a device, not a dtype."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, str) and expr.value.startswith("cuda")
    if isinstance(expr, ast.Call):
        return facts.qualname(expr.func) == "torch.device"
    last = last_name(expr)
    return last is not None and ("device" in last.lower() or last.lower() in ("dev", "cuda", "gpu"))


def _fresh_host_tensor(facts: StepFacts, expr: ast.expr, depth: int) -> bool:
    """A tensor made on the host from host data: `torch.from_numpy(a)`, `torch.tensor(xs)`, a factory with no
    `device=`, a dtype or shape method on one, or a name whose one value in its scope is one."""
    if depth > 4:
        return False
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in _HOST_KEEPING:
            return _fresh_host_tensor(facts, func.value, depth + 1)
        target = facts.qualname(func) or ""
        return target.startswith("torch.") and target.count(".") == 1 and target.split(".")[-1] in _HOST_FACTORIES \
            and not any(k.arg == "device" for k in expr.keywords)
    if isinstance(expr, ast.Name):
        value = facts.value_of(expr)
        return value is not None and _fresh_host_tensor(facts, value, depth + 1)
    return False


def _scaler_syncs(ctx: "AstContext", loop: ast.AST) -> bool:
    """The step loop calls `scaler.step(optimizer)` (a GradScaler's step reads `found_inf` on the host unless the
    optimizer is fused, and the file makes none)."""
    if "fused=True" in ctx.text:
        return False
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step"
               and len(n.args) == 1 and isinstance(n.func.value, ast.Name) and _a_grad_scaler(ctx, n.func.value)
               and _unconditional(ctx, n, loop) for n in walk_nodes(loop))


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
                return parameter.annotation is not None and last_name(parameter.annotation) == "GradScaler"
    values = owner.values.get(name.id, [])
    return bool(values) and all(
        isinstance(v, ast.Call) and last_name(v.func) == "GradScaler" and not any(
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


def _message(spelled: str, tensor: Optional[ast.expr], more: int = 0) -> str:
    """One claim under 120 characters, and the habit that avoids it; `more`: the step's later reads."""
    if more:
        reads = f"{more} more read{'s' if more > 1 else ''} in this step"
        head = f"`{spelled}` and {reads} sync with the GPU every training step"
        for text in (f"{head}: read them once per log interval", head,
                     f"a host read and {reads} sync with the GPU every training step"):
            if len(text) <= 120:
                return text
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
                return self.is_tensor(expr.value, depth + 1) or last_name(expr.value) in self.models
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
        for node in walk_nodes(scope):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id == name.id:
                        values.append(node.value)
                    elif any(isinstance(n, ast.Name) and n.id == name.id for n in walk_nodes(target)):
                        return None
            elif isinstance(node, ast.Name) and node.id == name.id and isinstance(node.ctx, (ast.Store, ast.Del)) \
                    and not isinstance(self.facts.parent(node), ast.Assign):
                return None
            elif isinstance(node, ast.arg) and node.arg == name.id:
                return None
        return values

    def _model_call(self, call: ast.Call) -> bool:
        """`model(x)`, `self.model(x)`, `criterion(out, y)` with `criterion = nn.CrossEntropyLoss()`."""
        name = last_name(call.func)
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
                if any(isinstance(n, ast.Name) and n.id in names for n in walk_nodes(test)):
                    return REFUTED
            for use in walk_nodes(scope):
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
    return any(n is node for n in walk_nodes(root))


def _stored_names(statement: ast.AST) -> set[str]:
    if isinstance(statement, ast.Assign):
        return {n.id for t in statement.targets for n in walk_nodes(t) if isinstance(n, ast.Name)}
    if isinstance(statement, (ast.AugAssign, ast.AnnAssign)) and isinstance(statement.target, ast.Name):
        return {statement.target.id}
    return set()


def _tests(scope: ast.AST) -> list[ast.expr]:
    found: list[ast.expr] = []
    for node in walk_nodes(scope):
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
            name = last_name(node.func.value)
            if name is not None and name != "self":
                names.add(name)
    return names



def _root_tensor(expr: ast.expr) -> ast.expr:
    """The tensor to accumulate: `loss` for `loss.detach()`; the expression itself otherwise."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("detach",):
        expr = expr.func.value
    return expr


def _short(expr: ast.expr) -> str:
    text = ast.unparse(expr)
    return text if len(text) <= 30 else "..."
