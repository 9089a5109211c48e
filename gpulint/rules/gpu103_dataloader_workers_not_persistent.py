"""GPU103 dataloader-workers-not-persistent: worker processes started again for every epoch."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from gpulint.analysis.ast_context import AstContext, arg
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence, Premise, all_of, any_of
from gpulint.analysis.holders import held_values, same_variable
from gpulint.analysis.loader_loops import LoaderLoop, loader_loops
from gpulint.analysis.loaders import UNATTENDED, paced_by_a_person
from gpulint.core import floors
from gpulint.core.edits import Applicability
from gpulint.core.torch_api import DATALOADER, DATALOADER_DATASET, DATALOADER_NUM_WORKERS
from gpulint.core.verification import NEUTRAL, RANDOM_STREAMS, Verification
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.analysis.ast_context import Detection
    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

WORKERS = Premise(
    "workers",
    "the DataLoader starts worker processes: `num_workers` above zero as a literal, a name assigned only "
    "such literals, `min(N, os.cpu_count() or 1)`, or `args.x` whose argparse `default=` in the file is "
    "above zero; and it does not pass `persistent_workers` (by keyword or in a `**dict` in view).")
EVERY_EPOCH = Premise(
    "iterated-every-epoch",
    "a `for` loop over this loader (followed through names, `self.x`, function parameters, "
    "`enumerate`/`tqdm`) runs inside an outer loop of its function, or in a function of the file called "
    "from inside a loop; and the loader is built outside that outer loop (a loader rebuilt every epoch "
    "loses its workers anyway).")
EPOCH_STATE = Premise(
    "no-epoch-state",
    "the dataset carries no state the main process changes between epochs: it is not an IterableDataset "
    "(by the project's class facts), and no loop of the file calls a per-epoch method on it "
    "(`set_epoch`, `update`, ...: a sampler's `set_epoch` is fine) or assigns its attributes (persistent "
    "workers keep the copy they started with); set-up outside loops does not count.")

API_EXISTS = Premise(
    "api-exists",
    "every torch the project supports has `persistent_workers` (1.7): refuted when the floor it declares is "
    "older (`torch==1.4.0`: the keyword is a TypeError there, and the advice cannot be followed), or when its "
    "code runs only on an older torch.")

_MESSAGE = "DataLoader worker processes are started again for every epoch: persistent_workers=True keeps them"
_PER_EPOCH_CALLS = frozenset({"set_epoch", "set_stage", "set_resolution", "update", "reset", "shuffle"})


class DataLoaderWorkersNotPersistent(Rule):
    code = "GPU103"
    name = "dataloader-workers-not-persistent"
    habit = "data-loading"
    summary = "DataLoader with workers iterated every epoch without persistent_workers=True"
    impact = "saves the worker start-up (fork + dataset copy + first batches) at every epoch (PyTorch DataLoader docs)"
    needles = ("DataLoader",)
    ast_needles = (tuple(sorted(DATALOADER)),)
    target = Target.NOT_CPU_ONLY
    in_tests = False
    preview = True
    fix = Applicability.SAFE
    verification = Verification(
        NEUTRAL, ("dataloader",), "the DataLoader with persistent_workers=True yields batches",
        lambda kind, details: details.get("persistent_workers") is True,
        mismatch_hint="persistent workers keep their random state across epochs: a Dataset that draws from the "
                      "global RNG in __getitem__ gets other numbers from the second epoch on",
        changes=(RANDOM_STREAMS,))
    docs = RuleDocs(
        what="""
        Checks for `torch.utils.data.DataLoader(...)` calls with `num_workers > 0` and no
        `persistent_workers`, whose loader is iterated by a `for` loop that runs inside an
        outer loop (an epoch loop), in the same function or through a function of the file
        called from a loop.
        """,
        why="""
        Without `persistent_workers=True`, every `for batch in loader` starts `num_workers`
        new processes (forked or spawned, each with its own copy of the dataset) and shuts
        them down when the pass ends; the first batches of every epoch wait for that start-up
        and for the workers' prefetch to fill. PyTorch's DataLoader documentation (torch 2.13):
        with `persistent_workers=True` "the data loader will not shut down the worker processes
        after a dataset has been consumed once. This allows to maintain the workers `Dataset`
        instances alive" (available since torch 1.7). The cost grows with the dataset object
        each worker copies and with the start method (spawn re-imports the script); gpulint
        measured no figure for it.
        """,
        example="""
        from torch.utils.data import DataLoader

        loader = DataLoader(dataset, batch_size=64, num_workers=8, pin_memory=True)
        for epoch in range(90):
            for images, labels in loader:
                train_step(images, labels)
        """,
        use_instead="""
        from torch.utils.data import DataLoader

        loader = DataLoader(dataset, batch_size=64, num_workers=8, pin_memory=True, persistent_workers=True)
        for epoch in range(90):
            for images, labels in loader:
                train_step(images, labels)
        """,
        fix_safety="""
        Safe: the batches are the same ones, in the same order for a sampler's order. A worker
        count chosen at run time (`num_workers=args.workers`, whose default is above zero) gets
        `persistent_workers=args.workers > 0`, so that `--workers 0` still runs (torch raises
        `ValueError` for persistent workers without workers). Two
        things change and are worth a look: the workers stay alive (with their memory) between
        epochs, also while other loaders run; and workers keep their random state, so a
        `Dataset` that draws augmentations from the global RNG gets other (equally random)
        numbers from the second epoch on. Not reported where the declared torch is older than
        1.7 (no `persistent_workers` there), for IterableDatasets, for a dataset the file changes between epochs
        (`dataset.set_epoch(e)`, `dataset.size = ...`; workers would keep their first copy),
        for a loader rebuilt inside the epoch loop, a loader only an interactive viewer iterates
        (every batch waits for a key press), an explicit `persistent_workers` (also
        `False`), a `**dict` that may pass it, a worker count chosen at run time with no
        visible default, nor in test functions.
        """,
        premises=(WORKERS, EVERY_EPOCH, EPOCH_STATE, UNATTENDED, API_EXISTS),
        fix_cases=(
            FixCase("`persistent_workers=True` on a loader with workers iterated every epoch (preview)",
                    Applicability.SAFE, "basic.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        loops = ctx.analysis(loader_loops)
        for call in ctx.nodes(ast.Call):
            assert isinstance(call, ast.Call)
            if ctx.names.qualname(call.func) not in DATALOADER:
                continue
            kwargs = ctx.kwargs(call)
            if "persistent_workers" in kwargs.explicit:
                continue  # the user's choice
            count = arg(call, *DATALOADER_NUM_WORKERS, kwargs)
            workers = _positive(ctx, count) if count is not None else (UNDECIDED if kwargs.unknown else REFUTED)
            if kwargs.unknown:
                workers = all_of(workers, UNDECIDED)  # a `**dict` may pass persistent_workers
            epochs = any_of(*(_every_epoch(ctx, call, loop) for loop in loops.over(call))) \
                if loops.over(call) else UNDECIDED
            missing = floors.unavailable(ctx.settings.torch_version, ctx.project.torch_ceiling,
                                         [floors.PERSISTENT_WORKERS])
            decision = self.decide({WORKERS: workers, EVERY_EPOCH: epochs, EPOCH_STATE: _epoch_state(ctx, call),
                                    UNATTENDED: REFUTED if paced_by_a_person(ctx, call) else SHOWN,
                                    API_EXISTS: REFUTED if missing is not None else SHOWN})
            value = _persistent_value(ctx, count)
            ctx.report(self, call, _MESSAGE, fix=Applicability.SAFE,
                       fix_message=f"Keep the workers between epochs: `persistent_workers={value}`",
                       data={"value": value}, decision=decision)

    def build_fix(self, detection: "Detection", fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.core.pending import PendingFix, Replace
        from gpulint.core.rewrite import add_keyword

        if detection.fix is None or not isinstance(node, cst.Call) or not detection.data:
            return None
        value = str(detection.data["value"])
        return PendingFix.safe(detection.fix_message, Replace(node, add_keyword(node, "persistent_workers", value)))


def _persistent_value(ctx: AstContext, count: Optional[ast.expr]) -> str:
    """`True` when the worker count is positive whatever the run; `<count> > 0` for a count chosen at run
    time (`args.workers`, default 4: `--workers 0` must still work, and persistent_workers=True with no
    workers raises ValueError)."""
    if count is None:
        return "True"
    values = held_values(ctx, count) if isinstance(count, ast.Name) else [count]
    if values and all(isinstance(v, (ast.Constant, ast.Call)) for v in values):
        return "True"  # positive literals, `min(N, os.cpu_count() or 1)`: never zero
    return f"{ctx.segment(count)} > 0"


def _int(expr: ast.AST) -> Optional[int]:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
        return expr.value
    return None


def _cpu_count(expr: ast.AST) -> bool:
    """`os.cpu_count() or 1`, `multiprocessing.cpu_count()`: at least one."""
    if isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.Or):
        last = _int(expr.values[-1])
        return last is not None and last > 0
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "cpu_count"


def _positive(ctx: AstContext, expr: ast.expr) -> Evidence:
    """More than zero workers, as far as the file shows."""
    values = held_values(ctx, expr) if isinstance(expr, ast.Name) else [expr]
    if not values:
        return UNDECIDED
    found: list[Evidence] = []
    for value in values:
        number = _int(value)
        if number is not None:
            found.append(SHOWN if number > 0 else REFUTED)
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "min" \
                and value.args and all((_int(a) or 0) > 0 or _cpu_count(a) for a in value.args):
            found.append(SHOWN)  # `min(4, os.cpu_count() or 1)`, as GPU102's fix writes
        elif isinstance(value, ast.Attribute):
            found.append(_argparse_default(ctx, value.attr))
        else:
            found.append(UNDECIDED)
    if REFUTED in found and SHOWN in found:
        return UNDECIDED
    return all_of(*found)


def _argparse_default(ctx: AstContext, dest: str) -> Evidence:
    """`args.workers` whose `parser.add_argument("--workers", default=4)` is in the file."""
    defaults: list[Optional[int]] = []
    for call in ctx.nodes(ast.Call):
        assert isinstance(call, ast.Call)
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"):
            continue
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        named = _string(keywords.get("dest")) or next(
            (s.lstrip("-").replace("-", "_") for s in (_string(a) for a in call.args) if s and s.startswith("--")),
            None)
        if named != dest:
            continue
        default = keywords.get("default")
        defaults.append(_int(default) if default is not None else None)
    if not defaults or any(d is None for d in defaults):
        return UNDECIDED
    return SHOWN if all(d is not None and d > 0 for d in defaults) else UNDECIDED  # 0: the CLI may still ask


def _string(expr: Optional[ast.AST]) -> Optional[str]:
    return expr.value if isinstance(expr, ast.Constant) and isinstance(expr.value, str) else None


def _inside(ctx: AstContext, node: ast.AST, container: ast.AST) -> bool:
    return any(a is container for a in ctx.ancestors(node))


def _every_epoch(ctx: AstContext, loader: ast.Call, loop: LoaderLoop) -> Evidence:
    """The loop over the loader runs inside an outer loop that does not also rebuild the loader."""
    if loop.outer:
        return REFUTED if any(_inside(ctx, loader, outer) for outer in loop.outer) else SHOWN
    function = loop.function
    if function is None or ctx.parent(function) is not ctx.tree:
        return UNDECIDED  # a method, a nested function: its callers are not followed
    found: list[Evidence] = []
    for call in ctx.nodes(ast.Call):
        assert isinstance(call, ast.Call)
        if not (isinstance(call.func, ast.Name) and call.func.id == function.name
                and ctx.names.binding_scope(call.func) is ctx.names.module_scope):
            continue
        outer = [a for a in _ancestors_in_function(ctx, call) if isinstance(a, (ast.For, ast.AsyncFor, ast.While))]
        if outer:
            found.append(REFUTED if any(_inside(ctx, loader, o) for o in outer) else SHOWN)
    return any_of(*found) if found else UNDECIDED


def _ancestors_in_function(ctx: AstContext, node: ast.AST) -> list[ast.AST]:
    out: list[ast.AST] = []
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            break
        out.append(ancestor)
    return out


def _epoch_state(ctx: AstContext, loader: ast.Call) -> Evidence:
    dataset = arg(loader, *DATALOADER_DATASET, ctx.kwargs(loader))
    if dataset is None:
        return UNDECIDED
    for value in held_values(ctx, dataset) or [dataset]:
        if isinstance(value, ast.Call) and _iterable_class(ctx, value.func):
            return REFUTED
    for node in ctx.nodes(ast.Call, ast.Assign):
        if not any(isinstance(a, (ast.For, ast.AsyncFor, ast.While)) for a in ctx.ancestors(node)):
            continue  # set-up before any loop: the workers start with it
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in _PER_EPOCH_CALLS and _is_dataset(ctx, node.func.value, dataset):
            return REFUTED  # `dataset.set_epoch(epoch)`: workers would keep their first copy
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and _is_dataset(ctx, t.value, dataset)
                                                for t in node.targets):
            return REFUTED
    return SHOWN


def _is_dataset(ctx: AstContext, expr: ast.expr, dataset: ast.expr) -> bool:
    """`expr` is the dataset: the same variable, or `<loader>.dataset`."""
    if isinstance(expr, ast.Attribute) and expr.attr == "dataset":
        return True
    return same_variable(ctx, expr, dataset)


def _iterable_class(ctx: AstContext, func: ast.expr) -> bool:
    qualified = ctx.names.qualname(func)
    if qualified is not None:
        if "Iterable" in qualified.split(".")[-1]:
            return True
        found = ctx.project.class_facts(qualified)
        return found is not None and found.iterable
    if isinstance(func, ast.Name) and ctx.names.binding_scope(func) is ctx.names.module_scope:
        own = ctx.project.own.classes.get(func.id)
        return own is not None and own.iterable
    return False
