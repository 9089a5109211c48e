"""GPU003 deprecated-cuda-amp: `torch.cuda.amp` / `torch.cpu.amp` API, deprecated since torch 2.4."""

from __future__ import annotations

import libcst as cst

from gpulint.analysis.amp import DEPRECATED_AMP, DEPRECATED_AMP_MODULES, Replacement
from gpulint.analysis.evidence import REFUTED, SHOWN, Decision, Premise
from gpulint.analysis.guards import version_guarded
from gpulint.analysis.training import training_facts
from gpulint.core import floors
from gpulint.core.context import FileContext
from gpulint.core.edits import Applicability
from gpulint.core.names import dotted
from gpulint.core.verification import NEUTRAL, Verification
from gpulint.rewrites.amp_api import DeprecatedAmpFixes
from gpulint.rules.base import Rule, RuleDocs, Target

DEPRECATED = Premise(
    "deprecated-api",
    "the code uses `torch.cuda.amp` / `torch.cpu.amp` (autocast, GradScaler, custom_fwd/custom_bwd), "
    "resolved through imports and aliases.")
NOT_FALLBACK = Premise(
    "not-fallback",
    "the use is not code kept for an older torch: not the fallback of `try: ... except (ImportError, "
    "AttributeError, TypeError)`, not a branch of a torch version test (`is_torch_version(...)`, "
    "`hasattr(torch, \"amp\")`, `version.parse(torch.__version__)`, or a flag computed once from "
    "`torch.__version__` or a `hasattr(torch, ...)` probe (also names unpacked from the version, and "
    "top-level functions that return such a test), here or in a module it is imported from).")
REPLACEMENT_EXISTS = Premise(
    "replacement-exists",
    "every torch the project supports has the replacement: the floor it declares is at least 1.10 "
    "(`torch.amp.autocast`), 2.3 (`torch.amp.GradScaler`) or 2.4 (`torch.amp.custom_fwd`), or it declares "
    "none. On an older floor the deprecated spelling is the one that works everywhere.")

WARNS = Premise(
    "runs-where-deprecated",
    "the code can run on a torch that deprecates the API (2.4 and later): refuted when it, or a module it "
    "imports, unconditionally imports a module torch removed before 2.4 (`from torch._six import inf`: gone "
    "in 2.0). Such code never sees the FutureWarning, and on every torch it runs on the replacement may be "
    "missing (`torch.amp.GradScaler` needs 2.3).")
# the release whose torch.cuda.amp / torch.cpu.amp emit the FutureWarning
DEPRECATED_SINCE = (2, 4)


class DeprecatedCudaAmp(Rule):
    code = "GPU003"
    name = "deprecated-cuda-amp"
    habit = "mixed-precision"
    summary = "torch.cuda.amp / torch.cpu.amp API (deprecated since torch 2.4)"
    impact = "hygiene: removes the FutureWarning; no speed change"
    needles = ("cuda.amp", "cpu.amp", "torch.cuda import", "torch.cpu import")
    ast_needles = (tuple(sorted(DEPRECATED_AMP_MODULES)),)
    target = Target.ANY
    fix = Applicability.SAFE
    verification = Verification(NEUTRAL, ("autocast", "grad_scaler", "custom_fwd"), "the renamed torch.amp call runs")
    docs = RuleDocs(
        what="""
        Checks for uses and imports of `torch.cuda.amp.autocast`, `torch.cuda.amp.GradScaler`,
        `torch.cuda.amp.custom_fwd` / `custom_bwd` and `torch.cpu.amp.*`, however they are
        imported or aliased.
        """,
        why="""
        These wrappers emit a `FutureWarning` on every construction since torch 2.4
        (pytorch/pytorch#126527) and are slated for removal; `torch.amp` is the one API for
        every device type. No speed changes: the wrappers are thin subclasses of the
        `torch.amp` objects, with the same defaults (float16 on CUDA, bfloat16 on CPU).
        """,
        example="""
        from torch.cuda.amp import autocast, GradScaler

        scaler = GradScaler()
        with autocast(True, torch.float16):
            loss = model(x)
        """,
        use_instead="""
        from torch.amp import autocast, GradScaler

        scaler = GradScaler("cuda")
        with autocast("cuda", enabled=True, dtype=torch.float16):
            loss = model(x)
        """,
        fix_safety="""
        Safe: behaviour is unchanged. Positional autocast arguments become keywords (the
        old order was `enabled, dtype, cache_enabled`; the new one starts with
        `device_type, dtype`), and an import and all its call sites are rewritten together.
        Replacements need torch 1.10 (`torch.amp.autocast`), 2.3 (`torch.amp.GradScaler`)
        and 2.4 (`torch.amp.custom_fwd/custom_bwd`): with a lower `torch-version` floor those
        rewrites are not offered. Uses other than calls and decorators (passing the class
        around, subclassing it) are reported without a fix. Code kept for an older torch is
        not reported: the fallback of `try: ... except (ImportError, AttributeError,
        TypeError)`, and the branches of a torch version test (`is_torch_version(...)`,
        `_TORCH_GREATER_EQUAL_2_4`, `hasattr(torch, "amp")`, `version.parse(torch.__version__)`).
        """,
        premises=(DEPRECATED, NOT_FALLBACK, REPLACEMENT_EXISTS, WARNS),
    )

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.fixes = DeprecatedAmpFixes(ctx)
        self._handled: set[int] = set()
        self._in_import = 0

    def visit_Import(self, node: cst.Import) -> None:
        self._in_import += 1

    def leave_Import(self, original_node: cst.Import) -> None:
        self._in_import -= 1

    def _guarded(self, node: cst.CSTNode) -> bool:
        """Inside code kept for an older torch (try/except ImportError, a version test): deliberate."""
        return version_guarded(self.ctx.analysis(training_facts), node)

    def _decision(self, node: cst.CSTNode, replacement: Replacement) -> Decision:
        floor = self.ctx.settings.torch_version
        ceiling = self.ctx.project.torch_ceiling
        return self.decide({
            DEPRECATED: SHOWN,
            NOT_FALLBACK: REFUTED if self._guarded(node) else SHOWN,
            REPLACEMENT_EXISTS: REFUTED if floor is not None and floor < replacement.since else SHOWN,
            WARNS: REFUTED if ceiling is not None and ceiling <= DEPRECATED_SINCE else SHOWN,
        })

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._in_import += 1
        module = dotted(node.module) if node.module is not None and not node.relative else None
        if module not in DEPRECATED_AMP_MODULES or isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = dotted(alias.name)
            replacement = DEPRECATED_AMP.get(f"{module}.{name}")
            if replacement is None:
                continue
            decision = self._decision(node, replacement)
            if not decision.report:
                continue
            self.report_decided(
                decision,
                alias,
                f"{module}.{name} is deprecated since torch 2.4: import {name} from torch.amp",
                self.fixes.for_import(node, alias), note=self._floor_note(replacement),
            )

    def leave_ImportFrom(self, original_node: cst.ImportFrom) -> None:
        self._in_import -= 1

    def _message(self, target: str) -> str:
        replacement = DEPRECATED_AMP[target]
        new = f"torch.amp.{replacement.name}"
        constructed = f'{new}("{replacement.device}", ...)'
        how = {"autocast": constructed, "GradScaler": constructed}.get(
            replacement.name, f'{new}(..., device_type="{replacement.device}")')
        return f"{target} is deprecated since torch 2.4: use {how}"

    def _floor_note(self, replacement: Replacement) -> str:
        too_new = floors.too_new(self.ctx.settings.torch_version, [replacement.symbol])
        return f"no fix: {too_new.reason()}" if too_new is not None else ""

    def visit_Call(self, node: cst.Call) -> None:
        if self._in_import or not isinstance(node.func, cst.Attribute):
            return
        target = self.ctx.qualname(node.func)
        if target not in DEPRECATED_AMP:
            return
        self._handled.add(id(node.func))
        decision = self._decision(node, DEPRECATED_AMP[target])
        self.report_decided(decision, node, self._message(target), self.fixes.for_call(node, target),
                            note=self._floor_note(DEPRECATED_AMP[target]))

    def visit_Decorator(self, node: cst.Decorator) -> None:
        expr = node.decorator
        if not isinstance(expr, cst.Attribute):
            return
        target = self.ctx.qualname(expr)
        if target not in DEPRECATED_AMP:
            return
        self._handled.add(id(expr))
        decision = self._decision(expr, DEPRECATED_AMP[target])
        self.report_decided(decision, expr, self._message(target), self.fixes.for_bare_decorator(expr, target),
                            note=self._floor_note(DEPRECATED_AMP[target]))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self._in_import or id(node) in self._handled:
            return
        target = self.ctx.qualname(node)
        if target in DEPRECATED_AMP:
            self.report_decided(self._decision(node, DEPRECATED_AMP[target]), node, self._message(target),
                                note="no fix: only calls, decorators and imports are rewritten; change this use "
                                     "by hand")
