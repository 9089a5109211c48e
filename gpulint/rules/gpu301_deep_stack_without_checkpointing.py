"""GPU301 deep-stack-without-checkpointing: a deep nn.Sequential/ModuleList trained without
activation checkpointing (preview)."""

from __future__ import annotations

import ast
import math
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

from gpulint.analysis.ast_context import AstContext, Detection
from gpulint.analysis.deep_stacks import (
    Run,
    Stack,
    checkpointed_elsewhere,
    inference_only_file,
    mentions_checkpointing,
    stack_use,
    stacks_in,
)
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Premise
from gpulint.analysis.nn_modules import is_module_class, self_name
from gpulint.core.edits import Applicability
from gpulint.core.options import Flag, Integer, Option
from gpulint.core.settings import Settings
from gpulint.core.torch_api import MODULE_LIST, NN_MODULE, SEQUENTIAL
from gpulint.core.verification import NEUTRAL, Verification
from gpulint.project.view import ProjectView
from gpulint.records import dataclass
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target
from gpulint.rules.gpu302_checkpoint_without_use_reentrant import (
    CHECKPOINT_MODULE,
    use_reentrant_too_new,
)

if TYPE_CHECKING:  # the fix is built on LibCST, loaded only when edits are needed
    import libcst as cst

    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingEdit, PendingFix, Reference, Replace

CHECKPOINT_MIN_DEPTH: Option[int] = Option(
    "checkpoint-min-depth", Integer(1), 8, "blocks in a stack before activation checkpointing is suggested")
CHECKPOINT_UNKNOWN_DEPTH: Option[bool] = Option(
    "checkpoint-unknown-depth", Flag(), False, "suggest checkpointing when the depth cannot be read from the code")

TRAINED = Premise(
    "trained",
    "the project trains the model: its class (or a registry or factory that builds it, or its module used "
    "as a registry) is named in a file that runs a training step or builds an optimizer, and the stack runs "
    "with grad enabled (not under no_grad/inference_mode, not in a file that only evaluates).")
DEEP = Premise(
    "deep",
    "the stack is deep: at least `checkpoint-min-depth` blocks, counted from literals, `range(N)`, default "
    "parameter values, or config values; the value a training script passes (`ModelArgs(n_layers=6)`) beats "
    "a dataclass default (`n_layers: int = 32`). A depth read at run time is undecided (reported with "
    "`checkpoint-unknown-depth = true`).")
NOT_CHECKPOINTED = Premise(
    "not-checkpointed",
    "nothing checkpoints the stack already: not torch's `checkpoint`/`checkpoint_sequential` on it or its "
    "blocks, not the class's own flag or helper, not a wrapper applied from outside.")


class DeepStackWithoutCheckpointing(Rule):
    code = "GPU301"
    name = "deep-stack-without-checkpointing"
    habit = "activation-checkpointing"
    summary = "Deep nn.Sequential/ModuleList stack trained without activation checkpointing"
    impact = "-49 to -70 % activation memory at +1 to +32 % step time (measured on CPU)"
    needles = ("Sequential", "ModuleList")
    # an nn.Module subclass (is_module_class) that builds a torch.nn container (analysis/modules.py)
    ast_needles = (tuple(sorted(NN_MODULE)), (f"torch.nn.*{SEQUENTIAL}", f"torch.nn.*{MODULE_LIST}"))
    target = Target.NOT_CPU_ONLY
    fix = Applicability.UNSAFE
    in_tests = False
    preview = True  # an opportunity, not a defect: it only pays when activations dominate memory
    options = (CHECKPOINT_MIN_DEPTH, CHECKPOINT_UNKNOWN_DEPTH)
    verification = Verification(NEUTRAL, ("checkpoint",), "the checkpointed forward runs")
    docs = RuleDocs(
        what="""
        Checks for `nn.Module` classes whose `__init__` builds a deep stack and whose
        `forward` (or a method it calls) runs it without activation checkpointing: an
        `nn.Sequential` with at least `checkpoint-min-depth` (default 8) blocks, or an
        `nn.ModuleList` of that many blocks iterated in `forward`. Reported at the
        construction.

        A block is a layer with parameters that saves activations: `Linear`, `Bilinear`,
        `Conv*`/`ConvTranspose*`, `MultiheadAttention`, the `Transformer*` layers, `RNN`/
        `LSTM`/`GRU`, an `nn.Sequential` holding one of these, and `nn.Module` classes of the
        same file that build one (or an `nn.Parameter`). A class imported from another
        module counts when it is repeated (`[Block() for _ in range(n)]`, an `append` in a
        loop). Activations, dropout, normalisation (it rides along with a compute layer),
        pooling, reshaping and embeddings do not count.

        The depth must be visible: literal children, `*[Block() for _ in range(24)]`,
        `range(N)` with `N` a literal or a module-level constant, a default parameter value
        (`def __init__(self, depth=16)`), the default of a dataclass field or command-line
        option of that name (`config.n_layer` with `n_layer: int = 12` defined once in the
        project), or `append`s in such loops. Any other depth read at run time is reported
        only with `checkpoint-unknown-depth = true`.

        Only models the project trains are reported: the class (or a registry or factory
        that builds it, or its whole module used as a registry, `models.__dict__[name]`) is
        named in a file that runs a training step or builds an optimizer, this one or one
        that imports it.

        Not reported: shallow stacks; stacks (or their blocks) already passed to
        `checkpoint`/`checkpoint_sequential`; classes that handle checkpointing their own way
        (a `use_checkpoint` flag, HF's `gradient_checkpointing`, another library's
        `checkpoint`); loops that run blocks side by side rather than as a chain; files that
        checkpoint whole models from outside (`checkpoint_wrapper`,
        `apply_activation_checkpointing`, `gradient_checkpointing_enable`, timm's
        `set_grad_checkpointing`); runs under `torch.no_grad()`/`inference_mode()`; files that
        only evaluate (no_grad/eval and no backward or optimizer anywhere).
        """,
        why="""
        Training keeps every block's activations alive until backward, so activation memory
        grows with depth. Checkpointing keeps only each segment's input and recomputes the
        rest during backward: O(sqrt n) activation memory for about one extra forward
        (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost"). Measured on
        CPU, 16 x [Linear(1024) + GELU + LayerNorm]: bytes saved for
        backward fell from 47 MiB to 24 MiB (-49 %) with 2 segments, 14 MiB (-70 %) with 4,
        15 MiB (-68 %) checkpointing each block, at +1..32 % step time; the profiler's peak
        at batch 2048 fell 464 -> 224 MiB. It only pays when activations dominate memory:
        at batch 256 the peak (params + grads) did not move. Use the memory to grow the
        batch or the model, or to stop running out of memory.
        """,
        example="""
        import torch
        from torch import nn


        class Model(nn.Module):
            def __init__(self, depth=16):
                super().__init__()
                self.blocks = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(depth)])

            def forward(self, x):
                x = self.blocks(x)
                return x


        model = Model()
        optimizer = torch.optim.AdamW(model.parameters(), fused=True)
        model(x).sum().backward()
        optimizer.step()
        """,
        use_instead="""
        import torch
        from torch import nn
        from torch.utils.checkpoint import checkpoint_sequential


        class Model(nn.Module):
            def __init__(self, depth=16):
                super().__init__()
                self.blocks = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(depth)])

            def forward(self, x):
                if self.training and torch.is_grad_enabled():
                    x = checkpoint_sequential(self.blocks, 4, x, use_reentrant=False)
                else:
                    x = self.blocks(x)
                return x


        model = Model()
        optimizer = torch.optim.AdamW(model.parameters(), fused=True)
        model(x).sum().backward()
        optimizer.step()

        # ModuleList loops checkpoint each block:
        # for blk in self.layers:
        #     x = checkpoint(blk, x, use_reentrant=False) if self.training and torch.is_grad_enabled() else blk(x)
        """,
        fix_safety="""
        Unsafe: it trades compute for memory (about one extra forward of the stack) and
        runs each block's forward twice, so blocks with side effects in forward (counters,
        in-place buffer updates other than BatchNorm's) change behaviour. Checkpointing is
        applied only while training with grad enabled, so evaluation is not slowed;
        `preserve_rng_state` keeps its default, so dropout masks match on recompute
        (losses were bit-identical in our tests). `nn.Sequential` stacks called with one
        input use `checkpoint_sequential` with round(sqrt(depth)) segments (computed from
        `len(...)` when the depth is not known); loops over blocks, which may take several
        inputs or keywords, use per-block `checkpoint`. Imports are added through the
        file's own aliases and never shadow a name of the file (such as a function of its
        own called `checkpoint`). No fix when the stack is also used in a way gpulint does
        not follow.
        """,
        premises=(TRAINED, DEEP, NOT_CHECKPOINTED),
        fix_cases=(
            FixCase("deep stack checkpointed while training (preview)",
                    Applicability.UNSAFE, "sequential_literal_children.py"),
            FixCase("`torch-version` below 1.13",
                    None, "old_torch_no_fix.py"),
        ),
    )

    @classmethod
    def may_report(cls, project: ProjectView, settings: Optional[Settings] = None) -> bool:
        """Only classes the project trains are reported: with none in this file, nothing is."""
        return super().may_report(project, settings) and bool(project.trained)

    def detect(self, ctx: AstContext) -> None:
        trained = ctx.project.trained
        # no file of the project trains the others (an inference-only model, a library's zoo)
        classes = [c for c in ctx.nodes(ast.ClassDef) if isinstance(c, ast.ClassDef) and c.name in trained]
        if not classes or checkpointed_elsewhere(ctx) or inference_only_file(ctx):
            return
        for cls in classes:
            if not is_module_class(ctx, cls) or mentions_checkpointing(ctx, cls):
                continue
            for stack in stacks_in(ctx, cls):
                self._check(ctx, cls, stack)

    def _check(self, ctx: AstContext, cls: ast.ClassDef, stack: Stack) -> None:
        settings = ctx.settings
        depth = stack.depth
        if depth.known >= settings.value(CHECKPOINT_MIN_DEPTH):
            deep = SHOWN
        elif depth.unknown:
            deep = SHOWN if settings.value(CHECKPOINT_UNKNOWN_DEPTH) else UNDECIDED
        else:
            deep = REFUTED
        use = stack_use(ctx, cls, stack.attr)
        if use.checkpointed:
            return
        runs = [r for r in use.runs if r.per_block or (stack.kind != MODULE_LIST and _single_input(r.call))]
        if not runs:
            return
        decision = self.decide({TRAINED: SHOWN, DEEP: deep, NOT_CHECKPOINTED: SHOWN})
        if not decision.report:
            return
        fixable = not use.unclear and len(runs) == len(use.runs)
        if depth.unknown:
            size = f"at least {depth.known} blocks" if depth.known else "a run-time number of blocks"
        else:
            size = f"{depth.known} blocks"
        note = ""
        if not fixable:
            note = "no fix: the stack is also run in a way gpulint cannot rewrite (not one input per block)"
        too_new = use_reentrant_too_new(ctx)
        if fixable and too_new is not None:
            note = f"no fix: {too_new.reason()}"
        fix = Applicability.UNSAFE if fixable and too_new is None else None
        ctx.report(
            self, stack.construction,
            f"nn.{stack.kind} of {size} trained without activation checkpointing: activations kept until backward",
            fix=fix, fix_message=_fix_message(any(r.per_block for r in runs)) if fix is not None else "",
            data={"known": depth.known, "unknown": depth.unknown, "runs": [_run_data(ctx, r) for r in runs]}
            if fix is not None else None,
            statement=stack.statement, note=note, decision=decision,
        )

    def build_fix(self, detection: Detection, fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        """Checkpoint each run of the stack while training: the runs are found on LibCST by their spans."""
        from gpulint.core.pending import PendingFix

        assert detection.data is not None
        runs = _cst_runs(fctx, detection.data["runs"])
        if runs is None:
            return None
        torch_ref = fctx.imports.module_alias("torch")
        edits: list[Optional[PendingEdit]] = [torch_ref.edit]
        for run in runs:
            condition = _parse(f"{run.me}.training and {torch_ref.expr}.is_grad_enabled()")
            if run.per_block:
                ref = _checkpoint_ref(fctx, "checkpoint")
                edits.append(ref.edit)
                edits.append(_replace(run.call, _per_block(run, ref.expr, condition)))
            else:
                ref = _checkpoint_ref(fctx, "checkpoint_sequential")
                edits.append(ref.edit)
                segments = _segments(fctx, detection.data, run)
                edits.append(_whole_stack(fctx.module, run, ref.expr, segments, condition))
        return PendingFix.unsafe(_fix_message(any(r.per_block for r in runs)), *_unique(edits))


def _fix_message(per_block: bool) -> str:
    how = "checkpoint each block" if per_block else "use checkpoint_sequential"
    return f"While training, {how} with use_reentrant=False (-50..70 % activation memory, about one extra forward pass)"


def _run_data(ctx: AstContext, run: Run) -> dict[str, Any]:
    """What the fix needs of a run: where its call is (rows, character columns: LibCST's positions)."""
    call = run.call
    end_row = call.end_lineno or call.lineno
    return {"span": [call.lineno, ctx.column(call.lineno, call.col_offset), end_row,
                     ctx.column(end_row, call.end_col_offset or 0)],
            "code": ctx.segment(call), "self": self_name(run.method), "per_block": run.per_block,
            "bare": run.bare_value}


@dataclass
class _CstRun:
    """A run of the stack on LibCST, for the fix."""

    me: Optional[str]  # the method's `self`
    call: "cst.Call"
    callee: "cst.BaseExpression"
    per_block: bool
    statement: "Optional[cst.SimpleStatementLine]"  # `y = self.X(x)` / `return self.X(x)` when it is the whole line
    bare_value: bool


def _cst_runs(fctx: "FileContext", runs: list[dict[str, Any]]) -> Optional[list[_CstRun]]:
    """The runs' calls on LibCST (by position) and the one-statement lines they are the value of."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    positions = MetadataWrapper(fctx.module, unsafe_skip_copy=True).resolve(PositionProvider)
    calls: dict[tuple[int, int, int, int], cst.Call] = {}
    by_rows: dict[tuple[int, int], list[cst.Call]] = {}
    lines: dict[int, cst.SimpleStatementLine] = {}
    for found, where in positions.items():
        if isinstance(found, cst.Call):
            calls[(where.start.line, where.start.column, where.end.line, where.end.column)] = found
            by_rows.setdefault((where.start.line, where.end.line), []).append(found)
        elif isinstance(found, cst.SimpleStatementLine) and len(found.body) == 1:
            small = found.body[0]
            if isinstance(small, (cst.AnnAssign, cst.Return)) or (isinstance(small, cst.Assign)
                                                                   and len(small.targets) == 1):
                if small.value is not None:
                    lines[id(small.value)] = found
    out = []
    for run in runs:
        call = calls.get(tuple(run["span"]))
        if call is None:  # columns LibCST counts otherwise (a form feed it drops): the same code on the same rows
            row, _, end_row, _ = run["span"]
            same = [c for c in by_rows.get((row, end_row), []) if _bare_code(fctx, c) == run["code"]]
            call = same[0] if len(same) == 1 else None
        if call is None:
            return None
        out.append(_CstRun(run["self"], call, call.func, run["per_block"], lines.get(id(call)), run["bare"]))
    return out


def _bare_code(fctx: "FileContext", node: "cst.BaseExpression") -> str:
    return fctx.code(_bare(node))


def _parse(code: str) -> "cst.BaseExpression":
    import libcst as cst

    return cst.parse_expression(code)


def _replace(node: "cst.CSTNode", new: "cst.CSTNode") -> "Replace":
    from gpulint.core.pending import Replace

    return Replace(node, new)


def _checkpoint_ref(fctx: "FileContext", name: str) -> "Reference":
    taken = any(name in scope.bindings for scope in fctx.names.scopes.values())
    return fctx.imports.reference(CHECKPOINT_MODULE, name, prefer_from=not taken)


def _segments(fctx: "FileContext", data: dict[str, Any], run: _CstRun) -> str:
    if data["unknown"]:
        return f"round(len({fctx.code(run.callee).strip()}) ** 0.5)"
    return str(max(1, round(math.sqrt(data["known"]))))


def _single_input(call: ast.Call) -> bool:
    """nn.Sequential takes exactly one input; checkpoint_sequential too."""
    return len(call.args) == 1 and not call.keywords and not isinstance(call.args[0], ast.Starred)


def _unique(edits: Sequence[Optional[PendingEdit]]) -> list[PendingEdit]:
    out: list[PendingEdit] = []
    for edit in edits:
        if edit is not None and edit not in out:
            out.append(edit)
    return out


def _bare(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=(), rpar=())


def _conditional(call: cst.Call, checkpointed: cst.BaseExpression, condition: cst.BaseExpression,
                 bare_value: bool) -> cst.IfExp:
    """`checkpointed if condition else call`, parenthesised unless it is a whole assigned/returned value."""
    import libcst as cst

    lpar, rpar = call.lpar, call.rpar
    if not lpar and not bare_value:
        lpar, rpar = (cst.LeftParen(),), (cst.RightParen(),)
    return cst.IfExp(test=condition, body=checkpointed, orelse=_bare(call), lpar=lpar, rpar=rpar)


def _per_block(run: _CstRun, checkpoint: str, condition: cst.BaseExpression) -> cst.IfExp:
    import libcst as cst

    from gpulint.core.rewrite import add_keyword

    call = run.call
    first = cst.Arg(value=_bare(run.callee) if isinstance(run.callee, cst.Name) else run.callee)
    if call.args:
        # lay the new first argument out like the others (one per line stays one per line)
        separator: cst.BaseParenthesizableWhitespace = cst.SimpleWhitespace(" ")
        if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
            separator = call.whitespace_before_args
        first = first.with_changes(comma=cst.Comma(whitespace_after=separator))
    checkpointed = cst.Call(func=cst.parse_expression(checkpoint), args=[first, *call.args],
                            whitespace_before_args=call.whitespace_before_args)
    checkpointed = add_keyword(checkpointed, "use_reentrant", "False")
    return _conditional(call, checkpointed, condition, run.bare_value)


def _whole_stack(module: "cst.Module", run: _CstRun, checkpoint: str, segments: str,
                 condition: cst.BaseExpression) -> Replace:
    import libcst as cst

    from gpulint.core.pending import Replace

    call = run.call
    stack_code = module.code_for_node(run.callee)
    input_code = module.code_for_node(call.args[0].value)
    checkpointed = cst.parse_expression(f"{checkpoint}({stack_code}, {segments}, {input_code}, use_reentrant=False)")
    line = run.statement
    if line is None:
        return Replace(call, _conditional(call, checkpointed, condition, run.bare_value))
    small = line.body[0]
    assert isinstance(small, (cst.Assign, cst.AnnAssign, cst.Return))
    training_line = cst.SimpleStatementLine(body=[small.with_changes(value=checkpointed)])
    plain_line = line.with_changes(leading_lines=())
    new: Union[cst.If, list[cst.BaseStatement]]
    if isinstance(small, cst.Return):
        guard = cst.If(test=condition, body=cst.IndentedBlock([training_line]), leading_lines=line.leading_lines)
        new = [guard, plain_line]
    else:
        new = cst.If(
            test=condition,
            body=cst.IndentedBlock([training_line]),
            orelse=cst.Else(body=cst.IndentedBlock([plain_line])),
            leading_lines=line.leading_lines,
        )
    return Replace(line, new)
