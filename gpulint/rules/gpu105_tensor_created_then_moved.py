"""GPU105 tensor-created-then-moved: a tensor filled on the CPU and copied to the device, on every call."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from gpulint.analysis.ast_context import AstContext
from gpulint.analysis.device import accelerator_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, Premise
from gpulint.analysis.loader_loops import move_of
from gpulint.core.edits import Applicability
from gpulint.core.torch_api import DETERMINISTIC_FACTORIES, RANDOM_FACTORIES
from gpulint.core.verification import NEUTRAL, Verification
from gpulint.rules.base import Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.analysis.ast_context import Detection
    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

FACTORY_MOVED = Premise(
    "factory-moved",
    "a torch tensor factory (`torch.zeros/ones/full/empty/arange/eye`, their `*_like` forms, "
    "or a random one) resolved through imports, whose result is moved at once by `.cuda()` or by `.to()` "
    "to a device: a device string, `torch.device(...)`, an index, or a name or attribute that names a "
    "device (`device`, `args.device`, `x.device`, `local_rank`); never a dtype or another tensor.")
REPEATED = Premise(
    "repeated",
    "the expression runs again and again: inside a `for`/`while` loop of the same function, or in a "
    "method that runs on every step (`forward`, `training_step`, ...). Refuted in set-up code that runs "
    "once (a comprehension alone, a loop in `__init__`/`setup`/`build*`), where the copy costs nothing "
    "that matters.")
ON_ACCELERATOR = Premise(
    "on-accelerator",
    "the target is an accelerator: shown by `.cuda()`, a \"cuda\"/\"xpu\"/\"mps\" string or device "
    "evidence in the file or a caller; refuted where the code pins the CPU.")

_PER_STEP_METHODS = frozenset({"forward", "training_step", "validation_step", "train_step", "step",
                               "compute_loss", "__call__"})
_SET_UP = frozenset({"__init__", "setup", "reset_parameters", "_reset_parameters", "__post_init__"})
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
        runs once is not reported, nor `torch.tensor(data)`: with `device=` it still builds the
        data on the host and copies it, so moving the argument buys nothing.
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
        code that runs once, for `.to()` a dtype or a tensor, for non-torch factories
        (`np.zeros`), or in test functions.
        """,
        premises=(FACTORY_MOVED, REPEATED, ON_ACCELERATOR),
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
                FACTORY_MOVED: SHOWN,
                REPEATED: SHOWN if _repeated(ctx, call) else REFUTED,
                ON_ACCELERATOR: SHOWN if accelerator else accelerator_evidence(ctx.project),
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


def _repeated(ctx: AstContext, node: ast.AST) -> bool:
    function = ctx.enclosing_function(node)
    if function is not None and (function.name in _SET_UP or function.name.startswith(("build", "init"))):
        return False  # a loop in a constructor builds buffers once
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (ast.For, ast.AsyncFor)) and child is ancestor.iter:
            child = ancestor
            continue  # a loop's iterable is built once
        if isinstance(ancestor, (ast.For, ast.AsyncFor, ast.While)):
            return True  # (a comprehension alone is not: set-up code builds lists of tensors once)
        child = ancestor
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parent = ctx.parent(ancestor)
            return isinstance(parent, ast.ClassDef) and ancestor.name in _PER_STEP_METHODS
        if isinstance(ancestor, (ast.Lambda, ast.ClassDef)):
            return False
    return False


def _floating(ctx: AstContext, factory: ast.Call) -> bool:
    """A float literal among arange's arguments, or a floating dtype."""
    for value in [*factory.args, *(k.value for k in factory.keywords)]:
        for node in ast.walk(value):
            if isinstance(node, ast.Constant) and isinstance(node.value, float):
                return True
            if isinstance(node, (ast.Attribute, ast.Name)):
                qualified = ctx.names.qualname(node) or ""
                if qualified.startswith("torch.") and qualified.split(".")[-1] in _FLOAT_DTYPES:
                    return True
    return False
