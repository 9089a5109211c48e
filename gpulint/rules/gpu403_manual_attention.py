"""GPU403 manual-attention: softmax(q @ kᵀ) @ v written by hand in a model the project trains (preview)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from gpulint.analysis.attention import (
    CAUSAL,
    RETURNED,
    Attention,
    FusedOption,
    KeptWeights,
    attention_in_class,
    fused_options,
    has_fused_path,
)
from gpulint.analysis.benchmarks import benchmarks
from gpulint.analysis.device import accelerator_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Decision, Evidence, Premise
from gpulint.core import floors
from gpulint.core.edits import Applicability
from gpulint.core.torch_api import SDPA_MODULE, SDPA_NAME, SOFTMAX_FUNCTIONS, SOFTMAX_MODULES
from gpulint.core.verification import FUSED_KERNEL, Verification
from gpulint.project.facts import OPTION_ON, OPTION_UNKNOWN, SPLAT
from gpulint.project.view import ProjectView
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.analysis.ast_context import AstContext, Detection
    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix
    from gpulint.core.settings import Settings

TRAINED = Premise(
    "trained",
    "the project trains the model: the nn.Module class holding the attention is named in a file that runs a "
    "training step or builds an optimizer (this file or one that imports it). A class no file trains is a "
    "library's or an inference script's: refuted. Refuted too when no caller names it and every function of "
    "this file that names it is a benchmark (analysis/benchmarks.py: it times a loop over `range` on inputs "
    "made by torch factories): the hand-written attention is the thing measured.")
FUSED_KERNEL_EXISTS = Premise(
    "sdpa-available",
    "every torch the project supports has `F.scaled_dot_product_attention` (2.0): undecided when the torch "
    "floor the project declares (project/requirements.py, per folder) is older, where the advice needs an "
    "upgrade first.")
ON_ACCELERATOR = Premise(
    "on-accelerator",
    "training runs on an accelerator (CUDA, MPS, XPU, or one a framework picks), where the fused attention "
    "kernels run: shown by device evidence in the file or a caller; refuted where the code pins the CPU.")

OFF_BY_DEFAULT = Premise(
    "off-by-default",
    "for a model option that chooses between a fused kernel and a hand-written branch (`flash=False`): the "
    "project runs the hand-written branch. The option defaults to False (the parameter's default, or the "
    "field of the one config class that holds it) and every file around the model (its callers, what they "
    "import, what it imports) that constructs the class or config constructs it with keywords only and "
    "gives the option False, nothing, or an argparse `store_true` flag the file declares. Refuted where one "
    "gives it True; undecided where one passes it a value gpulint cannot read (a variable, `**kwargs`, a "
    "positional argument) or nothing constructs the class where gpulint can see it.")


class ManualAttention(Rule):
    code = "GPU403"
    name = "manual-attention"
    habit = "fused-kernels"
    summary = "Attention written by hand (softmax(q @ k^T) @ v) instead of F.scaled_dot_product_attention"
    impact = ("FlashAttention: 3x GPT-2 training speed at 1K tokens (Dao et al. 2022); measured on CPU: "
              "-94 % activation memory, 5.1x fwd+bwd at T=1024 (bench/attention_sdpa_cpu.py)")
    needles = ("softmax", "Softmax")
    ast_needles = ((".softmax(", *sorted(SOFTMAX_FUNCTIONS), *sorted(SOFTMAX_MODULES)),)
    target = Target.NOT_CPU_ONLY
    fix = Applicability.UNSAFE
    preview = True
    in_tests = False
    verification = Verification(
        FUSED_KERNEL, ("attention",), "F.scaled_dot_product_attention runs in the step",
        mismatch_hint="with dropout in the attention the fused kernel draws other dropout masks: compare "
                      "with the model's dropout at 0")
    docs = RuleDocs(
        what="""
        Checks the methods of `nn.Module` classes the project trains for attention written
        by hand: `softmax(q @ k.transpose(-2, -1) * scale [+ mask], dim=-1) [dropout] @ v`,
        also with `torch.matmul`, `torch.einsum`, `torch.bmm` on 3-D `(B*H, T, D)` tensors
        (`k.transpose(1, 2)`, `softmax(dim=2)`), `/ math.sqrt(d)`, `x.softmax(-1)`, an
        `nn.Softmax(dim=-1)` or `nn.Dropout` of `__init__`, and each step held in a name
        (`att = ...; att = att.masked_fill(...)`). Reported at the product with the values.

        Attention that also hands its weights out (returns them, alone or in a tuple,
        possibly under a flag such as `w = probs if self.vis else None` or in a tuple held
        in a name, `outputs = (ctx, probs) if output_attentions else (ctx,)`, or stores them
        on `self`, either one maybe through `.detach()`) is reported without a fix: the fused
        kernel never makes the weights, so it fits the calls that do not read them.

        A class that also calls a fused kernel (`scaled_dot_product_attention`, xFormers'
        `memory_efficient_attention`, `flash_attn`) keeps its hand-written path as a
        fallback, and is reported only when a model option chooses that fallback by
        default: `if self.flash: <fused> else: <hand-written>` (or the fused branch
        returning first), `self.flash` set in `__init__` from a parameter named like a
        fused-attention switch (`flash`, `use_flash_attn`, `fused_attn`, `use_sdpa`, ...)
        whose default is False, or from a config field (`config.use_flash_attn`) that the
        one config class holding it defaults to False. Reported at that default (or the
        config read), only when the files around the model (its callers, what they
        import, what it imports) build the class or config with keywords only and never
        give the option True or a value gpulint cannot read (`flash=args.flash` reads as
        the default of a `store_true` flag the same file declares), and the torch floor
        has SDPA.

        Not reported: attention whose weights feed another computation in the method (a
        second product, a loss term, an in-place change, a call that logs them: the fused
        kernel cannot replace that); a fallback no option chooses, one that hands out its
        weights (turning the option on changes what the method returns), or one whose
        option a caller turns on or may (`flash=True`, a variable, `**kwargs`, a YAML file
        unpacked into the config); models no file of the project trains, or that only
        benchmark functions use (a loop timed between two clock reads on inputs made by
        `torch.ones`/`randn`); projects whose torch floor predates SDPA (2.0); CPU-only
        files and test code.
        """,
        why="""
        Written by hand, attention materialises the T x T weight matrix of every head,
        reads and writes it several times (scale, mask, softmax, dropout) and keeps it for
        backward. `F.scaled_dot_product_attention` (torch 2.0) dispatches to fused kernels
        (FlashAttention, memory-efficient attention) that never store it: FlashAttention
        trains GPT-2 3x faster at 1K tokens and BERT-large 15 % faster end to end, with
        memory linear in the sequence length (Dao et al. 2022, "FlashAttention: Fast and
        Memory-Efficient Exact Attention with IO-Awareness", abstract). Measured on CPU
        (torch 2.13, 1 thread, batch 4, 8 heads of 64, causal, fwd+bwd): bytes kept for
        backward 129.0 -> 8.1 MiB and 2396 -> 468 ms (5.1x) at T=1024, 32.2 -> 4.1 MiB and
        3.0x at T=512, same output within 7.2e-07 (bench/attention_sdpa_cpu.py).
        """,
        example="""
        import math

        import torch
        import torch.nn.functional as F
        from torch import nn


        class SelfAttention(nn.Module):
            def __init__(self, dim=256, block_size=1024):
                super().__init__()
                self.qkv = nn.Linear(dim, 3 * dim)
                self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)))

            def forward(self, x):
                T = x.size(1)
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:T, :T] == 0, float("-inf"))
                att = F.softmax(att, dim=-1)
                return att @ v


        model = SelfAttention().cuda()
        optimizer = torch.optim.AdamW(model.parameters(), fused=True)
        model(x).sum().backward()
        optimizer.step()
        """,
        use_instead="""
        import torch
        import torch.nn.functional as F
        from torch import nn


        class SelfAttention(nn.Module):
            def __init__(self, dim=256):
                super().__init__()
                self.qkv = nn.Linear(dim, 3 * dim)

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)


        model = SelfAttention().cuda()
        optimizer = torch.optim.AdamW(model.parameters(), fused=True)
        model(x).sum().backward()
        optimizer.step()
        """,
        fix_safety="""
        Unsafe: the fused kernels round differently (the same output within 1e-6 in float32
        on CPU, wider in 16 bits) and draw other dropout masks. `gpulint verify` on the
        shipped two-layer causal LM (tests/verify/scripts/manual_attention_lm.py, CPU, 12
        steps): losses within 1.1e-07 relative, activation bytes saved for backward 0.46x. The fix replaces the product
        with `F.scaled_dot_product_attention(q, k, v, ...)` and removes the statements that
        only computed the weights. It is offered when the mask is absent or a visible causal
        `tril` (a buffer or name built from `torch.tril(torch.ones(n, n))`, applied with
        `masked_fill(M[..., :T, :T] == 0, -inf)`: `is_causal=True`); the scale is dropped when
        it is 1/sqrt of q's or k's last dimension (SDPA's default) and passed as `scale=`
        otherwise (torch 2.1); dropout becomes `dropout_p=(p if self.training else 0.0)`, from
        the `nn.Dropout` module's own `p`. No fix (a report with a note) for other masks
        (additive biases, padding masks: pass them as `attn_mask=`), casts around the softmax,
        einsum layouts other than `(..., T, head_dim)`, steps under a condition, scores read
        elsewhere, or a torch floor below 2.0 (2.1 with `scale=`). Weights that are returned
        or stored on `self` get no fix either: the note says to compute them only where they
        are read (the flag the code already tests, such as `self.vis`, or a new
        `need_weights`) and to call `F.scaled_dot_product_attention` otherwise, which
        changes the method's contract for its callers. The function is spelled
        through the file's own import of `torch.nn.functional` (`F`), adding one if needed.
        An option off by default is reported without a fix: whether the fused branch
        computes what the hand-written one does (mask, scale, dropout) is the author's to
        check before turning it on.
        """,
        premises=(TRAINED, ON_ACCELERATOR, OFF_BY_DEFAULT, FUSED_KERNEL_EXISTS),
        fix_cases=(
            FixCase("no mask or a visible causal `tril` mask: `F.scaled_dot_product_attention(q, k, v, "
                    "is_causal=True)`, dropout only while training, the weights' statements removed (preview)",
                    Applicability.UNSAFE, "nanogpt_causal_buffer.py"),
            FixCase("a scale other than 1/sqrt(head dim) passed as `scale=`",
                    Applicability.UNSAFE, "timm_scale_attribute.py"),
            FixCase("another mask (an additive bias, a padding mask): pass it as `attn_mask=`",
                    None, "additive_bias_reported_without_fix.py"),
            FixCase("a cast around the softmax (SDPA computes in the inputs' dtype)",
                    None, "softmax_in_float32_reported_without_fix.py"),
            FixCase('`torch-version` below 2.0 (reported only with `strictness = "pedantic"`)',
                    None, "old_torch_no_fix.py"),
        ),
    )

    @classmethod
    def may_report(cls, project: ProjectView, settings: Optional["Settings"] = None) -> bool:
        """Only classes the project trains are reported: with none in this file, nothing is."""
        return super().may_report(project, settings) and bool(project.trained)

    def detect(self, ctx: "AstContext") -> None:
        trained = ctx.project.trained
        for cls in ctx.tree.body:
            if not isinstance(cls, ast.ClassDef) or cls.name not in trained:
                continue
            facts = ctx.project.own.classes.get(cls.name)
            if facts is None or not facts.module:
                continue
            if cls.name not in ctx.project.trained_by_callers and _only_benchmarked(ctx, cls):
                continue  # TRAINED refuted: the file measures this attention as written
            sites = attention_in_class(cls, ctx.names, ctx.segment)
            if has_fused_path(ctx.segment(cls)):  # the hand-written chains are a fallback: is it the default?
                if floors.too_new(ctx.settings.torch_version, [floors.SDPA]) is None:
                    # a fallback that hands out its weights does what the fused branch cannot: not that option
                    for option in fused_options(cls, ctx.names, [s for s in sites if s.kept is None]):
                        self._check_option(ctx, cls, option)
                continue
            for site in sites:
                self._check(ctx, site)

    def _check_option(self, ctx: "AstContext", cls: ast.ClassDef, option: FusedOption) -> None:
        off, holder = _off_by_default(ctx.project, cls.name, option)
        decision = self.decide({TRAINED: SHOWN, ON_ACCELERATOR: accelerator_evidence(ctx.project), OFF_BY_DEFAULT: off})
        spelled = f"{holder}({option.option}=False)" if holder else f"{option.option}=False"
        where = "the config" if holder else "the model"
        ctx.report(self, option.node,
                   f"fused attention is off by default: `{spelled}` keeps the hand-written attention",
                   note=f"pass `{option.option}=True` where {where} is built, or default it to True (torch>=2.0)",
                   statement=ctx.statement(option.node), decision=decision)

    def _check(self, ctx: "AstContext", site: Attention) -> None:
        available = UNDECIDED if floors.too_new(ctx.settings.torch_version, [floors.SDPA]) is not None else SHOWN
        decision = self.decide({TRAINED: SHOWN, ON_ACCELERATOR: accelerator_evidence(ctx.project),
                                FUSED_KERNEL_EXISTS: available})
        note = ""
        fix: Optional[Applicability] = None
        data: Optional[dict[str, Any]] = None
        symbols = [floors.SDPA] + ([floors.SDPA_SCALE] if site.scale is not None else [])
        too_new = floors.too_new(ctx.settings.torch_version, symbols)
        if site.kept is not None:
            self._check_kept(ctx, site, site.kept, decision, floors.too_new(ctx.settings.torch_version, [floors.SDPA]))
            return
        if site.blockers:
            note = f"no fix: {site.blockers[0]}"
        elif too_new is not None:
            note = f"no fix: {too_new.reason()}"
        else:
            fix = Applicability.UNSAFE
            data = {"arguments": _arguments(ctx, site), "remove": [s.lineno for s in site.chain],
                    "output_row": site.statement.lineno}
        ctx.report(self, site.output,
                   "attention written by hand keeps a T x T weight matrix per head; a fused kernel never makes it",
                   fix=fix, fix_message="Use F.scaled_dot_product_attention (dropout only while training)",
                   data=data, statement=site.statement, note=note, decision=decision)

    def _check_kept(self, ctx: "AstContext", site: Attention, kept: KeptWeights, decision: "Decision",
                    too_new: Optional[floors.TooNew]) -> None:
        """The weights leave the method: the fused kernel serves the calls that do not read them (report only)."""
        verb = "returns" if kept.how == RETURNED else "stores"
        how = (f"`{kept.flag}` already says when they are read: compute them only then and call "
               "F.scaled_dot_product_attention when it is false" if kept.flag
               else "compute the weights only where they are read (a flag such as `need_weights`) and call "
                    "F.scaled_dot_product_attention otherwise")
        ctx.report(self, site.output,
                   f"attention written by hand {verb} its T x T weights; the calls that do not read them can use "
                   "a fused kernel",
                   note=f"no fix: {how}" + (f" ({too_new.reason()})" if too_new is not None else ""),
                   statement=site.statement, decision=decision)

    def build_fix(self, detection: "Detection", fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.core.pending import PendingFix, Replace

        data = detection.data or {}
        if "arguments" not in data:
            return None
        function = fctx.imports.reference(SDPA_MODULE, SDPA_NAME)
        call = cst.parse_expression(f"{function.expr}({data['arguments']})")  # a node: fitted to the line length
        edits: list[Any] = [function.edit, Replace(node, call)]
        lines = _statement_lines(fctx, {*data["remove"], data["output_row"]})
        removed = [line for line in lines if line.start_row in data["remove"]]
        for index, found in enumerate(removed):
            # the statements that only computed the weights go; the comment lines above them stay, and so do
            # the blank lines above the first one (a blank line may hold a form feed LibCST does not keep:
            # deleting it would lose a byte, so the fix never deletes one, with or without form feeds)
            kept = [e for e in found.line.leading_lines if e.comment is not None or index == 0]
            edits.append(Replace(found.line, kept))
        return PendingFix.unsafe("Use F.scaled_dot_product_attention (dropout only while training)", *edits)


def _only_benchmarked(ctx: "AstContext", cls: ast.ClassDef) -> bool:
    """Every function of the file that names the class (outside it) benchmarks, and no code outside a
    function names it: the file measures the class, it does not train it."""
    users: list[ast.AST] = []
    for node in ctx.nodes(ast.Name):
        assert isinstance(node, ast.Name)
        if node.id != cls.name:
            continue
        ancestors = list(ctx.ancestors(node))
        if any(a is cls for a in ancestors):
            continue  # `super(Name, self)` inside the class itself
        owner = next((a for a in ancestors if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))),
                     None)
        if not isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        users.append(owner)
    return bool(users) and all(benchmarks(ctx, u) for u in users)  # type: ignore[arg-type]


def _off_by_default(project: ProjectView, name: str, option: FusedOption) -> tuple[Evidence, str]:
    """Whether the project leaves the option at its default, False (see OFF_BY_DEFAULT), and the config
    class that holds it ("" for a parameter)."""
    values = project.option_values(option.option) | project.option_values(option.attribute)
    if OPTION_ON in values:
        return REFUTED, ""
    if OPTION_UNKNOWN in values:
        return UNDECIDED, ""
    if not option.config:
        calls = project.class_calls(name)
        if calls is None or calls == SPLAT or (option.position is not None and calls > option.position):
            return UNDECIDED, ""  # not built where gpulint sees it, or with arguments it does not read
        return SHOWN, ""
    holders = project.option_defaults(option.option)
    if any(True in defaults for defaults in holders.values()):
        return REFUTED, ""
    if len(holders) != 1:
        return UNDECIDED, ""  # no config class holds the field, or several do: which one is read is not known
    holder = next(iter(holders))
    return (SHOWN if project.class_calls(holder) == 0 else UNDECIDED), holder  # built with keywords only


def _arguments(ctx: "AstContext", site: Attention) -> str:
    parts = [ctx.segment(site.q), ctx.segment(site.k), ctx.segment(site.v)]
    if site.dropout is not None:
        parts.append(f"dropout_p=({site.dropout})")
    if site.mask == CAUSAL:
        parts.append("is_causal=True")
    if site.scale is not None:
        parts.append(f"scale={site.scale}")
    return ", ".join(parts)


class _Line(NamedTuple):
    line: "cst.SimpleStatementLine"
    start_row: int


def _statement_lines(fctx: "FileContext", rows: set[int]) -> list[_Line]:
    """The one-statement lines starting on these rows (the chain's statements, which stand alone, and the
    output's), in source order."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    positions = MetadataWrapper(fctx.module, unsafe_skip_copy=True).resolve(PositionProvider)
    found = [_Line(line, where.start.line) for line, where in positions.items()
             if isinstance(line, cst.SimpleStatementLine) and where.start.line in rows]
    return sorted(found, key=lambda f: f.start_row)
