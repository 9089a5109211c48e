"""Activation checkpointing rules (GPU301 deep stacks without it, GPU302 implicit use_reentrant)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional, Sequence, Union

import libcst as cst

from gpulint.analysis.kwargs import positional_args, visible_dict_keys
from gpulint.analysis.modules import (
    CHECKPOINT_FUNCTIONS,
    CHECKPOINT_SEQUENTIAL,
    MODULE_LIST,
    NN_MODULE,
    SEQUENTIAL,
    Run,
    Stack,
    checkpointed_elsewhere,
    inference_only_file,
    is_module_class,
    mentions_checkpointing,
    self_name,
    stack_use,
    stacks_in,
)
from gpulint.analysis.guards import version_guarded
from gpulint.analysis.training import training_facts
from gpulint.engine.fixes import Applicability
from gpulint.engine.pending import PendingEdit, PendingFix, Reference, Replace
from gpulint.engine.rewrite import add_keyword, is_literal, set_keyword
from gpulint.rules.base import Rule, RuleDocs, Target

if TYPE_CHECKING:
    from gpulint.engine.context import FileContext

CHECKPOINT_MODULE = "torch.utils.checkpoint"
# `use_reentrant=` exists on both checkpoint functions from torch 1.13; a project supporting an
# older torch gets the finding without a fix.
USE_REENTRANT_SINCE = (1, 13)
HF_ENABLE = "gradient_checkpointing_enable"
HF_KWARGS = "gradient_checkpointing_kwargs"
NON_REENTRANT_DICT = '{"use_reentrant": False}'


def _too_old(rule: Rule) -> bool:
    floor = rule.ctx.settings.torch_version
    return floor is not None and floor < USE_REENTRANT_SINCE


class DeepStackWithoutCheckpointing(Rule):
    code = "GPU301"
    name = "deep-stack-without-checkpointing"
    summary = "Deep nn.Sequential/ModuleList stack trained without activation checkpointing"
    impact = "-49 to -70 % activation memory at +1 to +32 % step time (CPU, torch 2.14)"
    needles = ("Sequential", "ModuleList")
    # an nn.Module subclass (is_module_class) that builds a torch.nn container (analysis/modules.py)
    ast_needles = (tuple(sorted(NN_MODULE)), (f"torch.nn.*{SEQUENTIAL}", f"torch.nn.*{MODULE_LIST}"))
    target = Target.NOT_CPU_ONLY
    fix = Applicability.UNSAFE
    in_tests = False
    preview = True  # an opportunity, not a defect: it only pays when activations dominate memory
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
        CPU with torch 2.14, 16 x [Linear(1024) + GELU + LayerNorm]: bytes saved for
        backward fell from 47 MiB to 24 MiB (-49 %) with 2 segments, 14 MiB (-70 %) with 4,
        15 MiB (-68 %) checkpointing each block, at +1..32 % step time; the profiler's peak
        at batch 2048 fell 464 -> 224 MiB. It only pays when activations dominate memory:
        at batch 256 the peak (params + grads) did not move. Use the memory to grow the
        batch or the model, or to stop running out of memory.
        """,
        example="""
        class Model(nn.Module):
            def __init__(self, depth=16):
                super().__init__()
                self.blocks = nn.Sequential(*[Block() for _ in range(depth)])

            def forward(self, x):
                x = self.blocks(x)
                return x
        """,
        use_instead="""
        class Model(nn.Module):
            def __init__(self, depth=16):
                super().__init__()
                self.blocks = nn.Sequential(*[Block() for _ in range(depth)])

            def forward(self, x):
                if self.training and torch.is_grad_enabled():
                    x = checkpoint_sequential(self.blocks, 4, x, use_reentrant=False)
                else:
                    x = self.blocks(x)
                return x

        # ModuleList loops checkpoint each block:
        for blk in self.layers:
            x = checkpoint(blk, x, use_reentrant=False) if self.training and torch.is_grad_enabled() else blk(x)
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
    )

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        ctx = self.ctx
        if node.name.value not in ctx.project.trained:
            return  # no file of the project trains it (an inference-only model, a library's zoo)
        if not is_module_class(ctx, node) or mentions_checkpointing(ctx, node):
            return
        if checkpointed_elsewhere(ctx) or inference_only_file(ctx):
            return
        for stack in stacks_in(ctx, node):
            self._check(node, stack)

    def _check(self, cls: cst.ClassDef, stack: Stack) -> None:
        settings = self.ctx.settings
        depth = stack.depth
        if depth.known < settings.checkpoint_min_depth and not (depth.unknown and settings.checkpoint_unknown_depth):
            return
        use = stack_use(self.ctx, cls, stack.attr)
        if use.checkpointed:
            return
        runs = [r for r in use.runs if r.per_block or (stack.kind != MODULE_LIST and _single_input(r.call))]
        if not runs:
            return
        fixable = not use.unclear and len(runs) == len(use.runs)
        if depth.unknown:
            size = f"at least {depth.known} blocks" if depth.known else "a run-time number of blocks"
        else:
            size = f"{depth.known} blocks"
        self.report(
            stack.construction,
            f"nn.{stack.kind} of {size} trained without activation checkpointing: every block's activations "
            "stay in memory until backward; checkpoint it while training (-50..70 % activation memory, "
            "about one extra forward)",
            self._fix(stack, runs) if fixable else None,
            statement=stack.statement,
        )

    def _fix(self, stack: Stack, runs: list[Run]) -> Optional[PendingFix]:
        if _too_old(self):
            return None
        imports = self.ctx.imports
        torch_ref = imports.module_alias("torch")
        edits: list[Optional[PendingEdit]] = [torch_ref.edit]
        per_block = False
        for run in runs:
            me = self_name(run.method)
            condition = cst.parse_expression(f"{me}.training and {torch_ref.expr}.is_grad_enabled()")
            if run.per_block:
                per_block = True
                ref = self._checkpoint_ref("checkpoint")
                edits.append(ref.edit)
                edits.append(Replace(run.call, _per_block(run, ref.expr, condition)))
            else:
                ref = self._checkpoint_ref("checkpoint_sequential")
                edits.append(ref.edit)
                segments = self._segments(stack, run)
                edits.append(_whole_stack(self.ctx.module, run, ref.expr, segments, condition))
        how = "checkpoint each block" if per_block else "use checkpoint_sequential"
        return PendingFix.unsafe(f"While training, {how} with use_reentrant=False", *_unique(edits))

    def _checkpoint_ref(self, name: str) -> Reference:
        taken = any(name in scope.bindings for scope in self.ctx.names.scopes.values())
        return self.ctx.imports.reference(CHECKPOINT_MODULE, name, prefer_from=not taken)

    def _segments(self, stack: Stack, run: Run) -> str:
        if stack.depth.unknown:
            return f"round(len({self.ctx.code(run.callee).strip()}) ** 0.5)"
        return str(max(1, round(math.sqrt(stack.depth.known))))


def _single_input(call: cst.Call) -> bool:
    """nn.Sequential takes exactly one input; checkpoint_sequential too."""
    return len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star


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
    lpar, rpar = call.lpar, call.rpar
    if not lpar and not bare_value:
        lpar, rpar = (cst.LeftParen(),), (cst.RightParen(),)
    return cst.IfExp(test=condition, body=checkpointed, orelse=_bare(call), lpar=lpar, rpar=rpar)


def _per_block(run: Run, checkpoint: str, condition: cst.BaseExpression) -> cst.IfExp:
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


def _whole_stack(module: cst.Module, run: Run, checkpoint: str, segments: str,
                 condition: cst.BaseExpression) -> Replace:
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


class CheckpointWithoutUseReentrant(Rule):
    code = "GPU302"
    name = "checkpoint-without-use-reentrant"
    summary = "checkpoint/checkpoint_sequential without an explicit use_reentrant"
    impact = "correctness: reentrant mode silently drops parameter gradients when inputs need no grad"
    needles = ("checkpoint",)
    ast_needles = ((*sorted(CHECKPOINT_FUNCTIONS), f".{HF_ENABLE}("),)
    target = Target.ANY
    fix = Applicability.UNSAFE
    docs = RuleDocs(
        what="""
        Checks for `torch.utils.checkpoint.checkpoint(...)` and `checkpoint_sequential(...)`
        calls (through any import alias) that do not pass `use_reentrant`, looking through
        `**kwargs` dicts visible in the file; and for Hugging Face's
        `model.gradient_checkpointing_enable()` without
        `gradient_checkpointing_kwargs={"use_reentrant": ...}`, since Transformers then
        passes `use_reentrant=True` itself. `checkpoint_wrapper` and
        `apply_activation_checkpointing` are not reported: they default to the
        non-reentrant implementation. A function of your own called `checkpoint` is never
        reported.
        """,
        why="""
        Without `use_reentrant`, torch (2.1 through 2.14) warns and still selects the
        reentrant implementation. There, a checkpointed block whose inputs do not require
        grad (frozen embeddings, a first block fed raw data, adapters on a frozen model)
        silently gets no parameter gradients: its weights never train, and nothing fails.
        The non-reentrant mode has no such trap, supports keyword arguments,
        `torch.autograd.grad` and nested checkpoints, and gave bit-identical losses over 30
        training steps with dropout on CPU (torch 2.14). See the torch.utils.checkpoint
        documentation and pytorch/pytorch#100551.
        """,
        example="""
        x = checkpoint(block, x)
        model.gradient_checkpointing_enable()
        """,
        use_instead="""
        x = checkpoint(block, x, use_reentrant=False)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        """,
        fix_safety="""
        Unsafe: adds `use_reentrant=False`, which changes semantics in rare cases (tensors
        detached or modified in place inside the block behave differently, and the block's
        parameters now do get gradients when its inputs do not require grad). The strictly
        behaviour-preserving choice is `use_reentrant=True`, which silences the warning and
        keeps the trap; write it yourself if you need it (e.g. for DeepSpeed ZeRO-3). Calls in
        code kept for an older torch (the branches of a torch version test, `try/except
        ImportError`) are not reported: `use_reentrant` may not exist there.
        """,
    )

    def __init__(self, ctx: "FileContext") -> None:
        super().__init__(ctx)
        # a class of the file defines its own `gradient_checkpointing_enable`: not Hugging Face's
        self._own_hf_method = HF_ENABLE in ctx.text and any(
            fn.name.value == HF_ENABLE for fn in _all_functions(ctx.module)
        )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.ctx.qualname(node.func)
        if qualified not in CHECKPOINT_FUNCTIONS and not (
                isinstance(node.func, cst.Attribute) and node.func.attr.value == HF_ENABLE):
            return
        if version_guarded(self.ctx.analysis(training_facts), node):
            return  # the branch an older torch takes: use_reentrant may not exist there
        if qualified in CHECKPOINT_FUNCTIONS:
            self._torch_checkpoint(node, qualified == CHECKPOINT_SEQUENTIAL)
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == HF_ENABLE and not self._own_hf_method:
            self._hf_enable(node)

    def _torch_checkpoint(self, node: cst.Call, sequential: bool) -> None:
        kwargs = self.ctx.kwargs(node)
        if not kwargs.complete or kwargs.has("use_reentrant"):
            return
        if sequential:
            positional = positional_args(node)
            if positional is None or len(positional) > 3:
                return  # checkpoint_sequential(functions, segments, input, use_reentrant)
        name = "checkpoint_sequential" if sequential else "checkpoint"
        fix = None
        if not _too_old(self):
            new = add_keyword(node, "use_reentrant", "False")
            fix = PendingFix.unsafe("Add `use_reentrant=False`", Replace(node, new))
        self.report(
            node,
            f"{name} without use_reentrant: torch still uses the reentrant mode, where a block whose inputs "
            "don't require grad silently gets no parameter gradients; pass use_reentrant=False",
            fix,
        )

    def _hf_enable(self, node: cst.Call) -> None:
        kwargs = self.ctx.kwargs(node)
        positional = positional_args(node)
        if not kwargs.complete or positional is None:
            return
        fix: Optional[PendingFix] = None
        message = "Pass `gradient_checkpointing_kwargs={\"use_reentrant\": False}`"
        if kwargs.has(HF_KWARGS) or positional:
            value = kwargs.get(HF_KWARGS) if kwargs.has(HF_KWARGS) else positional[0]
            if value is None:
                return  # hidden in a `**dict`
            keys = _dict_literal_keys(value) if isinstance(value, cst.Dict) else None
            if isinstance(value, cst.Name) and not is_literal(value, "None"):
                keys = visible_dict_keys(value, self.ctx.names)
            if keys is None and not is_literal(value, "None"):
                return  # a dict we cannot see
            if keys is not None and "use_reentrant" in keys:
                return
            if _too_old(self) or HF_KWARGS in kwargs.from_splat:
                fix = None
            elif isinstance(value, cst.Dict):
                fix = PendingFix.unsafe("Add `\"use_reentrant\": False`", Replace(value, _add_dict_entry(value)))
            elif is_literal(value, "None") and kwargs.has(HF_KWARGS):
                fix = PendingFix.unsafe(message, Replace(node, set_keyword(node, HF_KWARGS, NON_REENTRANT_DICT)))
        elif not _too_old(self):
            fix = PendingFix.unsafe(message, Replace(node, add_keyword(node, HF_KWARGS, NON_REENTRANT_DICT)))
        self.report(
            node,
            "gradient_checkpointing_enable() without use_reentrant: Transformers then checkpoints in reentrant "
            "mode, where a block whose inputs don't require grad silently gets no parameter gradients; pass "
            "gradient_checkpointing_kwargs={\"use_reentrant\": False}",
            fix,
        )


def _all_functions(module: cst.Module) -> list[cst.FunctionDef]:
    found: list[cst.FunctionDef] = []

    class _Defs(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            found.append(node)

    module.visit(_Defs())
    return found


def _dict_literal_keys(value: cst.Dict) -> Optional[set[str]]:
    keys: set[str] = set()
    for element in value.elements:
        if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
            return None
        key = element.key.evaluated_value
        if not isinstance(key, str):
            return None
        keys.add(key)
    return keys


def _add_dict_entry(value: cst.Dict) -> cst.Dict:
    entry = cst.DictElement(
        key=cst.SimpleString('"use_reentrant"'),
        value=cst.Name("False"),
        whitespace_before_colon=cst.SimpleWhitespace(""),
        whitespace_after_colon=cst.SimpleWhitespace(" "),
    )
    elements = list(value.elements)
    if elements:
        last = elements[-1]
        if isinstance(last.comma, cst.Comma):
            entry = entry.with_changes(comma=cst.Comma(whitespace_after=last.comma.whitespace_after))
            elements[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=cst.SimpleWhitespace(" ")))
        else:
            elements[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    elements.append(entry)
    return value.with_changes(elements=elements)
