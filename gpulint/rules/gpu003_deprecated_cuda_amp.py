"""GPU003 deprecated-cuda-amp: `torch.cuda.amp` / `torch.cpu.amp` API, deprecated since torch 2.4."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from gpulint.analysis.amp import DEPRECATED_AMP_MODULES, OLD_AUTOCAST_ORDER, Replacement, replacement_for
from gpulint.analysis.ast_context import AstContext, Detection
from gpulint.analysis.evidence import REFUTED, SHOWN, Decision, Premise
from gpulint.analysis.guards import version_guarded
from gpulint.core import floors
from gpulint.core.edits import Applicability
from gpulint.core.verification import NEUTRAL, Verification
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

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
    "(autocast: `torch.amp.autocast` from 1.12, and on a 1.10 or 1.11 floor, which has no `torch.amp` package, "
    "`torch.autocast`), 2.3 (`torch.amp.GradScaler`) or 2.4 (`torch.amp.custom_fwd`), or it declares "
    "none. On an older floor the deprecated spelling is the one that works everywhere.")

WARNS = Premise(
    "runs-where-deprecated",
    "the code can run on a torch that deprecates the API (2.4 and later): refuted when it, or a module it "
    "imports, unconditionally imports a module torch, or the torchtext released with it, removed before 2.4 "
    "(`from torch._six import inf`: gone in 2.0; `torchtext.legacy`: gone with 1.11), or any torchtext (its last "
    "release, 0.18, pairs with torch 2.3), or when a file of the "
    "project builds its extension with `torch.utils.ffi` (gone in 1.0), or when it asserts an older major "
    "version at module level (`assert torch.__version__.split('.')[0] == '1'`: below 2.0; also in the "
    "`__main__` block of a script no project file imports), or when it, or a module it imports, fills with uint8 "
    "masks it makes (`x.masked_fill(m.byte(), v)`, an error from 2.1) or reads a loss it calls `.backward()` on "
    "as `loss.data[0]` (an error from 1.0), or when it builds or imports a native extension pinned to C++14 "
    "(`cpp_extension.load(..., extra_cflags=['-std=c++14'])`, or a setup.py `CUDAExtension`/`CppExtension` "
    "whose `extra_compile_args` name `-std=c++14`: torch 2.1's headers need C++17, so the ops build only "
    "against 2.0 or older), through any chain of imports that always run (a `try`/`except ImportError` or "
    "`if`/`else` counts where every branch imports such code), or when it is a helper module that only defines "
    "(optional imports in a `try` count), outside any package others install (no `__init__.py` beside it, or "
    "no setup.py, setup.cfg or pyproject.toml that builds a distribution at or above its folder), and each "
    "project file that imports it is such code. Such code never sees "
    "the FutureWarning, and on every torch it runs on the replacement may be "
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
    # a test function that compares results may exercise the old API on purpose (detectron2's `test_autocast`):
    # silent there unless `lint-tests = true`; a test file's other code (LeViT's speed_test.py) is still read
    in_test_functions = False
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
        Replacements need torch 1.12 (`torch.amp.autocast`), 2.3 (`torch.amp.GradScaler`)
        and 2.4 (`torch.amp.custom_fwd/custom_bwd`): with a lower `torch-version` floor those
        rewrites are not offered, except that on a 1.10 or 1.11 floor (no `torch.amp` package)
        autocast becomes `torch.autocast("cuda", ...)` (`from torch import autocast` for an
        imported name), in torch since 1.10 with the same arguments. Uses other than calls and
        decorators (passing the class around, subclassing it) are reported without a fix. Code
        kept for an older torch is not reported: the fallback of `try: ... except (ImportError,
        AttributeError, TypeError)`, and the branches of a torch version test (`is_torch_version(...)`,
        `_TORCH_GREATER_EQUAL_2_4`, `hasattr(torch, "amp")`, `version.parse(torch.__version__)`).
        """,
        premises=(DEPRECATED, NOT_FALLBACK, REPLACEMENT_EXISTS, WARNS),
        fix_cases=(
            FixCase("`torch.cuda.amp` import and every use rewritten to `torch.amp` with the device type",
                    Applicability.SAFE, "from_import_rewrites_import_and_call_sites.py"),
            FixCase("positional autocast arguments become keywords (the old order differs)",
                    Applicability.SAFE, "positional_autocast_args_become_keywords.py"),
            FixCase("on a torch 1.10 or 1.11 floor (no `torch.amp` package), autocast becomes `torch.autocast`",
                    Applicability.SAFE, "torch_version_1_11_autocast_becomes_torch_autocast.py"),
            FixCase("the class passed around or subclassed",
                    None, "reference_without_call_reported_without_fix.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        for node in ctx.nodes(ast.ImportFrom, ast.Call, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                              ast.Attribute):
            if isinstance(node, ast.ImportFrom):
                self._import(ctx, node)
            elif isinstance(node, ast.Call):
                self._call(ctx, node)
            elif isinstance(node, ast.Attribute):
                self._attribute(ctx, node)
            else:
                assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                for decorator in node.decorator_list:
                    self._decorator(ctx, decorator)

    def _decision(self, ctx: AstContext, node: ast.AST, replacement: Replacement) -> Decision:
        floor = ctx.settings.torch_version
        ceiling = ctx.project.torch_ceiling
        return self.decide({
            DEPRECATED: SHOWN,
            # inside code kept for an older torch (try/except ImportError, a version test): deliberate
            NOT_FALLBACK: REFUTED if version_guarded(ctx, node) else SHOWN,
            REPLACEMENT_EXISTS: REFUTED if floor is not None and floor < replacement.since else SHOWN,
            WARNS: REFUTED if ceiling is not None and ceiling <= DEPRECATED_SINCE else SHOWN,
        })

    def _import(self, ctx: AstContext, node: ast.ImportFrom) -> None:
        module = node.module if not node.level else None
        if module not in DEPRECATED_AMP_MODULES or any(alias.name == "*" for alias in node.names):
            return
        moved: Optional[set[int]] = None
        for alias in node.names:
            replacement = replacement_for(f"{module}.{alias.name}", ctx.settings.torch_version)
            if replacement is None:
                continue
            decision = self._decision(ctx, node, replacement)
            if not decision.report:
                continue
            if moved is None:
                moved = _moved_imports(ctx, node)
            ctx.report(self, alias, f"{module}.{alias.name} is deprecated since torch 2.4: import {alias.name} "
                                    f"from {replacement.module}",
                       fix=Applicability.SAFE if id(alias) in moved else None,
                       fix_message=f"Import from `{replacement.module}` and pass the device type at every use",
                       data={"kind": "import"}, note=self._floor_note(ctx, replacement), decision=decision)

    def _message(self, target: str, replacement: Replacement) -> str:
        new = f"{replacement.module}.{replacement.name}"
        constructed = f'{new}("{replacement.device}", ...)'
        how = {"autocast": constructed, "GradScaler": constructed}.get(
            replacement.name, f'{new}(..., device_type="{replacement.device}")')
        return f"{target} is deprecated since torch 2.4: use {how}"

    def _floor_note(self, ctx: AstContext, replacement: Replacement) -> str:
        too_new = floors.too_new(ctx.settings.torch_version, [replacement.symbol])
        return f"no fix: {too_new.reason()}" if too_new is not None else ""

    def _call(self, ctx: AstContext, node: ast.Call) -> None:
        if not isinstance(node.func, ast.Attribute):
            return
        target = ctx.qualname(node.func)
        replacement = replacement_for(target, ctx.settings.torch_version) if target is not None else None
        if target is None or replacement is None:
            return
        fixed = _supported(ctx, replacement) and _convertible(node, replacement)
        ctx.report(self, node, self._message(target, replacement), fix=Applicability.SAFE if fixed else None,
                   fix_message=f"Use `{ctx.names.reference(replacement.module, replacement.name)}`",
                   data={"kind": "call", "target": target}, note=self._floor_note(ctx, replacement),
                   decision=self._decision(ctx, node, replacement))

    def _decorator(self, ctx: AstContext, expr: ast.expr) -> None:
        if not isinstance(expr, ast.Attribute):
            return
        target = ctx.qualname(expr)
        replacement = replacement_for(target, ctx.settings.torch_version) if target is not None else None
        if target is None or replacement is None:
            return
        fixed = _supported(ctx, replacement) and replacement.name in _DECORATORS
        ctx.report(self, expr, self._message(target, replacement), fix=Applicability.SAFE if fixed else None,
                   fix_message=f"Use `{ctx.names.reference(replacement.module, replacement.name)}`",
                   data={"kind": "decorator", "target": target}, note=self._floor_note(ctx, replacement),
                   decision=self._decision(ctx, expr, replacement))

    def _attribute(self, ctx: AstContext, node: ast.Attribute) -> None:
        parent = ctx.parent(node)
        if isinstance(parent, ast.Call) and parent.func is node:
            return  # the call's finding
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and any(d is node for d in parent.decorator_list):
            return  # the decorator's finding
        target = ctx.qualname(node)
        replacement = replacement_for(target, ctx.settings.torch_version) if target is not None else None
        if target is not None and replacement is not None:
            ctx.report(self, node, self._message(target, replacement),
                       note="no fix: only calls, decorators and imports are rewritten; change this use by hand",
                       decision=self._decision(ctx, node, replacement))

    def build_fix(self, detection: Detection, fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.analysis.training import training_facts
        from gpulint.rewrites.amp_api import DeprecatedAmpFixes

        assert detection.data is not None
        fixes = fctx.analysis(DeprecatedAmpFixes)  # one per file: an import's findings share its fix
        kind = detection.data["kind"]
        if kind == "import":
            assert isinstance(node, cst.ImportAlias)
            statement = fctx.analysis(training_facts).parent(node)
            assert isinstance(statement, cst.ImportFrom)
            return fixes.for_import(statement, node)
        if kind == "decorator":
            assert isinstance(node, cst.Attribute)
            return fixes.for_bare_decorator(node, detection.data["target"])
        assert isinstance(node, cst.Call)
        return fixes.for_call(node, detection.data["target"])


# the objects that are rewritten when used as a bare decorator (`@custom_fwd` -> `@custom_fwd(device_type=...)`)
_DECORATORS = frozenset({"custom_fwd", "custom_bwd"})


def _supported(ctx: AstContext, replacement: Replacement) -> bool:
    return floors.too_new(ctx.settings.torch_version, [replacement.symbol]) is None


def _convertible(call: ast.Call, replacement: Replacement) -> bool:
    """rewrites/amp_api.py `converted_call` can rewrite the call exactly (the prediction of its fix)."""
    keywords = {k.arg for k in call.keywords if k.arg is not None}
    if replacement.name == "autocast":
        if "device_type" in keywords or any(isinstance(a, ast.Starred) for a in call.args):
            return False
        return len(call.args) <= len(OLD_AUTOCAST_ORDER)  # the old positional order becomes keywords
    if replacement.name == "GradScaler":
        return "device" not in keywords
    return "device_type" not in keywords


def _moved_imports(ctx: AstContext, node: ast.ImportFrom) -> set[int]:
    """The names (ids of `ast.alias`) that the import's fix moves to torch.amp: those whose every use is a
    call or a decorator it can rewrite (rewrites/amp_api.py `_import_fix`, predicted on `ast`)."""
    module = node.module
    moved: set[int] = set()
    kept = 0
    for alias in node.names:
        target = f"{module}.{alias.name}"
        replacement = replacement_for(target, ctx.settings.torch_version)
        local = alias.asname or alias.name
        if replacement is not None and _supported(ctx, replacement) and _rewritable_uses(ctx, node, local, target):
            moved.add(id(alias))
        else:
            kept += 1
    if moved and kept and not _alone_on_its_line(ctx, node):
        return set()  # the import is split in two statements: only a statement alone on its line is
    return moved


def _rewritable_uses(ctx: AstContext, node: ast.ImportFrom, local: str, target: str) -> bool:
    """Every use of the imported name is a call or a bare decorator the fix rewrites, none inside another."""
    names = ctx.names
    scope = names.scopes.get(id(_scope_node(ctx, node)))
    if scope is None:
        return False
    bound = scope.bindings.get(local, [])
    if None in bound or set(bound) != {target}:
        return False  # the name is also bound some other way: its uses cannot be told apart
    replacement = replacement_for(target, ctx.settings.torch_version)
    assert replacement is not None
    calls: list[ast.Call] = []
    for use in ctx.nodes(ast.Name):
        assert isinstance(use, ast.Name)
        if use.id != local or names.resolve_name(use) != target:
            continue
        parent = ctx.parent(use)
        if isinstance(parent, ast.Call) and parent.func is use:
            if not _convertible(parent, replacement):
                return False
            calls.append(parent)
        elif isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and any(d is use for d in parent.decorator_list):
            if replacement.name not in _DECORATORS:
                return False
        else:
            return False  # passed around or subclassed: not a rewrite that can be made exactly
    ids = {id(call) for call in calls}
    return not any(id(a) in ids for call in calls for a in ctx.ancestors(call))  # nested: overlapping edits


def _scope_node(ctx: AstContext, node: ast.AST) -> ast.AST:
    """The function, lambda, class or module whose code `node` is."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return ancestor
    return ctx.tree


def _alone_on_its_line(ctx: AstContext, node: ast.stmt) -> bool:
    """No other statement shares the import's line (`x = 1; from ... import ...`, `if c: from ...`)."""
    before = ctx.text[ctx.offset(node.lineno, 0):ctx.offset(node.lineno, node.col_offset)]
    if before.strip():
        return False
    parent = ctx.parent(node)
    for name in ("body", "orelse", "finalbody"):
        block = getattr(parent, name, None)
        if isinstance(block, list) and any(s is node for s in block):
            index = next(i for i, s in enumerate(block) if s is node)
            return index + 1 == len(block) or block[index + 1].lineno != node.end_lineno
    return True
