"""GPU105 tensor-created-then-moved: a tensor filled on the CPU and copied to the device, on every call."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from gpulint.analysis.ast_context import AstContext
from gpulint.analysis.device import accelerator_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence, Premise
from gpulint.analysis.loader_loops import loader_loops, move_of
from gpulint.analysis.nn_modules import grad_off_decorated, under_grad_off
from gpulint.analysis.reach import SELF_TEST, evaluates_only_here, not_self_test, trains_nothing_here
from gpulint.analysis.steps import StepFacts, step_facts
from gpulint.core.edits import Applicability
from gpulint.core.torch_api import DETERMINISTIC_FACTORIES, RANDOM_FACTORIES
from gpulint.core.verification import NEUTRAL, Verification
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.analysis.ast_context import Detection
    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

FACTORY_MOVED = Premise(
    "factory-moved",
    "a torch tensor factory (`torch.zeros/ones/full/empty/arange/eye`, their `*_like` forms, "
    "or a random one) resolved through imports, that creates on the CPU (a `*_like` form creates where its "
    "argument lives: shown only for a factory made there or a `.cpu()` result, undecided for any other "
    "tensor, which may already be on the device), whose result is moved at once by `.cuda()` or by `.to()` "
    "to a device: a device string, `torch.device(...)`, an index, or a name or attribute that names a "
    "device (`device`, `args.device`, `x.device`, `local_rank`); never a dtype or another tensor.")
REPEATED = Premise(
    "repeated",
    "the expression runs again and again: inside a `for`/`while` loop of the same function, or in a "
    "method that runs on every step (`forward`, `training_step`, ...). Refuted in set-up code that runs "
    "once (a comprehension alone, a loop in `__init__`/`setup`/`build*`), where the copy costs nothing "
    "that matters; under `if x is None:` whose body binds `x`, where `x` keeps its value between runs (a "
    "name bound in the loop only there, or `self.x` no other method resets); under `if len(state) == 0:` (or "
    "`if not state:`) whose body stores into `state`, an entry of an attribute of `self` (`state = "
    "self.state[p]`: an optimizer's lazy per-parameter state, made on the first step only); in once-an-epoch "
    "code of a file "
    "whose step loops gpulint reads (reached only from an epoch loop, or from the step loop's function "
    "outside the step loop, with no loop over a DataLoader on the way: a clustering pass before the "
    "epoch's steps); and in the `forward` of a module class no training reaches (every file importing its "
    "module names what it takes, and the class, or a factory of it, is taken only by files that train "
    "nothing and that no file imports: a predictor, a demo), or of a class defined in such a file, where that "
    "method turns autograd off (decorated `@torch.no_grad()`/`@torch.inference_mode()`, or the expression "
    "inside such a `with`): an inference or generation pass (blind19: sd-scripts' gen_img.py draws each "
    "image's starting latents in its pipeline's `__call__`, once per image generated, in no training step); "
    "and in a loop at the top level of a script or notebook that trains nothing "
    "and that no file imports (a demo looping over a few example inputs).")
ON_ACCELERATOR = Premise(
    "on-accelerator",
    "the target is an accelerator: shown by `.cuda()`, a \"cuda\"/\"xpu\"/\"mps\" string or device "
    "evidence in the file or a caller; refuted where the code pins the CPU.")

_PER_STEP_METHODS = frozenset({"forward", "training_step", "validation_step", "train_step", "step",
                               "compute_loss", "__call__"})
_SET_UP = frozenset({"__init__", "setup", "reset_parameters", "_reset_parameters", "__post_init__"})
# spellings of code that reaches classes by a computed name: any class of the file may then be built
_DYNAMIC = ("globals()", "locals()", "vars()", "eval(", "exec(", "sys.modules", "__dict__", "import_module(")
_FLOAT_DTYPES = frozenset({"float", "float16", "float32", "float64", "half", "double", "bfloat16"})


class TensorCreatedThenMoved(Rule):
    code = "GPU105"
    name = "tensor-created-then-moved"
    habit = "data-loading"
    summary = "tensor created on the CPU, then copied to the device (device= creates it there)"
    impact = "one CPU fill + host-to-device copy per call saved (PyTorch Tuning Guide)"
    needles = (".cuda(", ".to(")
    ast_needles = (tuple(sorted(DETERMINISTIC_FACTORIES | RANDOM_FACTORIES)), (".cuda(", ".to("))
    target = Target.NOT_CPU_ONLY
    in_tests = False
    preview = True
    fix = Applicability.SAFE
    fix_detail = "safe (deterministic factories); report only (random factories, `.to()` that also casts)"
    verification = Verification(NEUTRAL, (), "the tensor created with device= holds the same values")
    docs = RuleDocs(
        what="""
        Checks for a torch tensor factory (`torch.zeros`, `ones`, `full`, `empty`, `arange`,
        `eye`, `zeros_like`/`ones_like`/`full_like`/`empty_like`, and the random `rand`,
        `randn`, `randint`, `randperm`, `normal`, `rand_like`...) whose result is moved at once
        with `.cuda()` or `.to(device)`, in code that runs repeatedly: a loop, or a method that
        runs every step (`forward`, `training_step`).
        """,
        why="""
        `torch.zeros(n).cuda()` allocates and fills the tensor in host memory, then copies it
        to the device from pageable memory, a blocking copy: the host waits for it, and so for
        the work queued before it (PyTorch's pin_memory/non_blocking tutorial), instead of
        queueing the next kernels; `torch.zeros(n, device="cuda")` is one fill kernel queued
        like any other. The PyTorch Performance Tuning Guide ("Create tensors directly on the
        target device") names this pattern; in a `forward` or a loop it is paid on every step.
        gpulint measured no figure for it (a CPU has no device to copy to). Set-up code that
        runs once is not reported, nor a tensor made lazily under `if x is None:`, nor work done
        once an epoch beside thousands of steps, nor the `forward` of a model only a predictor,
        demo or generation script uses, nor the `__main__` self-test of a module other files
        import (random stand-in inputs that check a network's memory and speed by hand); nor
        `torch.tensor(data)`: with `device=` it still builds the data on the host and copies
        it, so moving the argument buys nothing.
        """,
        example="""
        import torch

        class Gate(torch.nn.Module):
            def forward(self, x):
                mask = torch.ones(x.shape[0], x.shape[1]).to(x.device)
                return x * mask

        model = Gate().cuda()
        """,
        use_instead="""
        import torch

        class Gate(torch.nn.Module):
            def forward(self, x):
                mask = torch.ones(x.shape[0], x.shape[1], device=x.device)
                return x * mask

        model = Gate().cuda()
        """,
        fix_safety="""
        Safe for the deterministic factories moved by `.cuda()` (written `device="cuda"`) or by
        `.to(device)` / `.to(device=device)` (a `non_blocking=` the move passed is dropped: a
        tensor made on the device needs no copy): the same values, created where they are used.
        `arange` with a float literal or a floating `dtype` is the exception, reported without
        a fix: CPU and CUDA accumulate its steps at different precisions. Random factories
        are reported without a fix: the device's generator draws other numbers than the
        CPU's, so a seeded run would change. No fix either for `.cuda(index)`, a `.to()` that
        also casts (`.to(device, torch.float16)`: casting after creation rounds twice) or takes
        other arguments, or a factory whose keywords a `**dict` hides. Not reported in set-up
        code that runs once, for a `*_like` of a tensor not shown on the CPU (it is made where
        that tensor lives), for `.to()` a dtype or a tensor, for non-torch factories
        (`np.zeros`), or in test functions.
        """,
        premises=(FACTORY_MOVED, REPEATED, ON_ACCELERATOR, SELF_TEST),
        fix_cases=(
            FixCase("`device=` on a deterministic factory moved at once (preview)",
                    Applicability.SAFE, "basic.py"),
            FixCase("random factories, moves that also cast, floating `arange`, `.cuda(index)`",
                    None, "random_and_casts_reported_without_fix.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        for call in ctx.nodes(ast.Call):
            assert isinstance(call, ast.Call)
            func = call.func
            if not (isinstance(func, ast.Attribute) and func.attr in ("cuda", "to")
                    and isinstance(func.value, ast.Call)):
                continue
            factory = func.value
            name = ctx.names.qualname(factory.func)
            if name not in DETERMINISTIC_FACTORIES and name not in RANDOM_FACTORIES:
                continue
            move = move_of(ctx, call)
            if move is None:
                continue  # a dtype, a tensor, the CPU, or a form not read
            target, simple, accelerator = move.target, move.simple, move.accelerator
            decision = self.decide({
                FACTORY_MOVED: _on_host(ctx, factory) if name.endswith("_like") else SHOWN,
                REPEATED: _repetition(ctx, call),
                ON_ACCELERATOR: SHOWN if accelerator else accelerator_evidence(ctx.project),
                SELF_TEST: not_self_test(ctx.tree, call, ctx.parent, ctx.project.imported),
            })
            short = name.split(".")[-1]
            note = ""
            fixable = False
            if name in RANDOM_FACTORIES:
                note = ("no fix: the device's random generator draws other numbers than the CPU's, so a seeded "
                        "run would change; pass device= if that is acceptable")
            elif not simple:
                note = "no fix: the move also casts or takes other arguments; pass device= (and dtype=) to the factory"
            elif ctx.kwargs(factory).unknown or "device" in ctx.kwargs(factory).from_splat:
                note = "no fix: a `**dict` may already pass device="
            elif short == "arange" and _floating(ctx, factory):
                note = "no fix: a floating arange accumulates at different precisions on the CPU and on CUDA"
            else:
                fixable = True
            ctx.report(self, call, f"torch.{short}() is made on the CPU and copied to the device each time it runs: "
                                   "create it there with device=",
                       fix=Applicability.SAFE if fixable else None,
                       fix_message=f"Create it on the device: `device={target}`",
                       data={"device": target} if fixable else None, note=note, decision=decision)

    def build_fix(self, detection: "Detection", fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.core.pending import PendingFix, Replace
        from gpulint.core.rewrite import add_keyword, set_keyword

        if detection.fix is None or not detection.data or not isinstance(node, cst.Call) \
                or not isinstance(node.func, cst.Attribute) or not isinstance(node.func.value, cst.Call):
            return None
        factory = node.func.value
        device = str(detection.data["device"])
        if any(a.keyword is not None and a.keyword.value == "device" for a in factory.args):
            new = set_keyword(factory, "device", device)
        else:
            new = add_keyword(factory, "device", device)
        # the move's own parentheses and comments go; the factory keeps its layout
        return PendingFix.safe(detection.fix_message, Replace(node, new.with_changes(lpar=node.lpar, rpar=node.rpar)))


def _repetition(ctx: AstContext, call: ast.Call) -> Evidence:
    """REPEATED: where the expression runs again and again, and not only once or once an epoch."""
    where = _repeated(ctx, call)
    if where is None or _made_once(ctx, call):
        return REFUTED
    if isinstance(where, ast.ClassDef):
        return REFUTED if _untrained(ctx, where) or _inference_pass(ctx, where, call) else SHOWN
    return REFUTED if _per_epoch(ctx, call) or _demo_loop(ctx, where) else SHOWN


def _demo_loop(ctx: AstContext, loop: ast.AST) -> bool:
    """A loop at the top level of a script or notebook that trains nothing and that no file imports: a demo
    over a few examples or a one-off inference pass, where one small copy per pass is not what it waits on."""
    return trains_nothing_here(ctx) and ctx.enclosing_function(loop) is None


def _repeated(ctx: AstContext, node: ast.AST) -> Optional[ast.AST]:
    """The loop that repeats `node`, or the class whose per-step method holds it; None: neither."""
    function = ctx.enclosing_function(node)
    if function is not None and (function.name in _SET_UP or function.name.startswith(("build", "init"))):
        return None  # a loop in a constructor builds buffers once
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (ast.For, ast.AsyncFor)) and child is ancestor.iter:
            child = ancestor
            continue  # a loop's iterable is built once
        if isinstance(ancestor, (ast.For, ast.AsyncFor, ast.While)):
            return ancestor  # (a comprehension alone is not: set-up code builds lists of tensors once)
        child = ancestor
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parent = ctx.parent(ancestor)
            if isinstance(parent, ast.ClassDef) and ancestor.name in _PER_STEP_METHODS:
                return parent
            return None
        if isinstance(ancestor, (ast.Lambda, ast.ClassDef)):
            return None
    return None


def _made_once(ctx: AstContext, call: ast.Call) -> bool:
    """Created lazily under `if x is None:` whose body binds `x`, where `x` keeps its value between runs:
    a name bound inside a loop of its own function (not reset to None in that loop), or `self.x` (not
    reset to None outside the constructor). The guard is false from the second run on."""
    child: ast.AST = call
    for ancestor in ctx.ancestors(call):
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(ancestor, ast.If) and any(s is child for s in ancestor.body):
            for guarded in _none_tests(ancestor.test):
                if _binds(ancestor.body, guarded) and _persists(ctx, ancestor, guarded):
                    return True
            state = _empty_test(ancestor.test)
            if state is not None and _fills(ancestor.body, state.id) and _kept_on_self(ctx, state):
                return True
        child = ancestor
    return False


def _empty_test(test: ast.expr) -> Optional[ast.Name]:
    """`state` of `len(state) == 0` or `not state`: a container's first use."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Name):
        return test.operand
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == 0 \
            and isinstance(test.left, ast.Call) and isinstance(test.left.func, ast.Name) \
            and test.left.func.id == "len" and len(test.left.args) == 1 and isinstance(test.left.args[0], ast.Name):
        return test.left.args[0]
    return None


def _fills(body: list[ast.stmt], name: str) -> bool:
    """`state["exp_avg"] = ...` directly in the guard's body: the container is not empty afterwards."""
    return any(isinstance(s, ast.Assign) and any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                                                 and t.value.id == name for t in s.targets) for s in body)


def _kept_on_self(ctx: AstContext, name: ast.Name) -> bool:
    """The container is an entry of an attribute of `self` (`state = self.state[p]`, an optimizer's per-parameter
    state), its one binding in its function: it keeps what the guard's body stored until the next run. The
    first step makes the tensors; every later step skips them."""
    owner = ctx.names.binding_scope(name)
    values = owner.values.get(name.id, []) if owner is not None else []
    if owner is None or not isinstance(owner.node, (ast.FunctionDef, ast.AsyncFunctionDef)) or len(values) != 1:
        return False
    value = values[0]
    while isinstance(value, ast.Subscript):
        value = value.value
    return isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "self"


def _none_tests(test: ast.expr) -> list[ast.expr]:
    """`x` of each `x is None` that must hold for the test to pass (alone or in an `and`)."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    return [p.left for p in parts if isinstance(p, ast.Compare) and len(p.ops) == 1 and isinstance(p.ops[0], ast.Is)
            and isinstance(p.comparators[0], ast.Constant) and p.comparators[0].value is None
            and isinstance(p.left, (ast.Name, ast.Attribute))]


def _binds(body: list[ast.stmt], target: ast.expr) -> bool:
    spelled = ast.unparse(target)
    return any(isinstance(s, (ast.Assign, ast.AnnAssign)) and any(
        ast.unparse(t) == spelled for t in (s.targets if isinstance(s, ast.Assign) else [s.target])) for s in body)


def _bound_outside(root: ast.AST, guard: ast.If, target: ast.expr) -> bool:
    """`root` binds (or deletes) `target` somewhere outside the guard's body: it may be None again."""
    spelled = ast.unparse(target)
    inside = {id(n) for s in guard.body for n in walk_nodes(s)}
    return any(isinstance(n, (ast.Name, ast.Attribute)) and not isinstance(n.ctx, ast.Load)
               and id(n) not in inside and ast.unparse(n) == spelled for n in walk_nodes(root))


def _persists(ctx: AstContext, guard: ast.If, target: ast.expr) -> bool:
    if isinstance(target, ast.Name):
        loop = next((a for a in ctx.ancestors(guard) if isinstance(a, (ast.For, ast.AsyncFor, ast.While))
                     or isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))), None)
        if not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
            return False  # a parameter or a fresh local: None again on every call
        return not _bound_outside(loop, guard, target)
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        cls = next((a for a in ctx.ancestors(guard) if isinstance(a, ast.ClassDef)), None)
        if cls is None:
            return False
        return not any(_bound_outside(m, guard, target) for m in cls.body
                       if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name not in _SET_UP)
    return False


def _untrained(ctx: AstContext, cls: ast.ClassDef) -> bool:
    """A module class of this file that no training reaches (`ProjectView.untrained`): its `forward` runs
    once per request of a predictor or demo, not on every step. A class registered by a decorator, or a
    file that may build classes by a computed name, is left unknown."""
    if ctx.parent(cls) is not ctx.tree or cls.decorator_list or cls.name not in ctx.project.untrained:
        return False
    return not any(word in ctx.text for word in _DYNAMIC)


def _inference_pass(ctx: AstContext, cls: ast.ClassDef, call: ast.Call) -> bool:
    """A top-level class of a script or notebook that trains nothing, turns autograd off and that no file imports
    (`evaluates_only_here`: only that inference pass builds the class), whose per-step method turns autograd off
    around the call (a `@torch.no_grad()` pipeline `__call__`): it runs once per request or generated image."""
    method = ctx.enclosing_function(call)
    if ctx.parent(cls) is not ctx.tree or not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            or not evaluates_only_here(ctx):
        return False
    return grad_off_decorated(ctx, method) or under_grad_off(ctx, method, call)


def _per_epoch(ctx: AstContext, call: ast.Call) -> bool:
    """Code that runs once an epoch, not once a step: the file's step loops are known, the call is in
    none of them (directly or through same-file calls), and every path to it starts in an epoch loop
    around a step loop or in a step loop's function outside that loop, with no loop over a DataLoader
    on the way (an evaluation pass over a loader is per batch)."""
    facts: StepFacts = ctx.analysis(step_facts)
    if not facts.steps or any(s.framework_owned for s in facts.steps) or facts.place(call) is not None:
        return False
    epochs = {id(loop) for step in facts.steps for loop in step.epoch_loops}
    holders = {id(step.function) for step in facts.steps if step.function is not None}
    over_loaders = {id(loop.loop) for loop in ctx.analysis(loader_loops).loops}
    return _reached_per_epoch(ctx, facts, call, epochs, holders, over_loaders, set())


def _reached_per_epoch(ctx: AstContext, facts: StepFacts, node: ast.AST, epochs: set[int], holders: set[int],
                       over_loaders: set[int], seen: set[int]) -> bool:
    for ancestor in ctx.ancestors(node):
        if id(ancestor) in over_loaders:
            return False
        if id(ancestor) in epochs:
            return True
        if isinstance(ancestor, (ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if id(ancestor) in holders:
                return True
            sites = facts.call_sites(ancestor)
            if not sites or id(ancestor) in seen:
                return False
            seen = seen | {id(ancestor)}
            return all(_reached_per_epoch(ctx, facts, site, epochs, holders, over_loaders, seen) for site in sites)
    return False


def _on_host(ctx: AstContext, factory: ast.Call) -> Evidence:
    """For `torch.*_like(x)`: the result is on the CPU only where `x` is (and no `device=` says otherwise)."""
    if not factory.args or any(k.arg in ("device", None) for k in factory.keywords):
        return UNDECIDED
    source = factory.args[0]
    if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and source.func.attr == "cpu":
        return SHOWN
    if isinstance(source, ast.Call):
        name = ctx.names.qualname(source.func)
        if (name in DETERMINISTIC_FACTORIES or name in RANDOM_FACTORIES) and not name.endswith("_like") \
                and not any(k.arg in ("device", None) for k in source.keywords):
            return SHOWN
    return UNDECIDED  # a tensor of unknown device: on the device already, `.to()` copies nothing


def _floating(ctx: AstContext, factory: ast.Call) -> bool:
    """A float literal among arange's arguments, or a floating dtype."""
    for value in [*factory.args, *(k.value for k in factory.keywords)]:
        for node in walk_nodes(value):
            if isinstance(node, ast.Constant) and isinstance(node.value, float):
                return True
            if isinstance(node, (ast.Attribute, ast.Name)):
                qualified = ctx.names.qualname(node) or ""
                if qualified.startswith("torch.") and qualified.split(".")[-1] in _FLOAT_DTYPES:
                    return True
    return False
