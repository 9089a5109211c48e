"""GPU003's rewrites: `torch.cuda.amp` / `torch.cpu.amp` objects to their `torch.amp` replacements.

An imported name (`from torch.cuda.amp import autocast`) is rewritten together with every
place it is used, in one fix, so the file never holds a half-migrated state such as
`autocast("cuda", "cuda")` or `amp.amp.autocast`.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gpulint.analysis.amp import OLD_AUTOCAST_ORDER, Replacement, replacement_for
from gpulint.analysis.training import TrainingFacts, training_facts
from gpulint.core import floors
from gpulint.core.context import FileContext
from gpulint.core.names import LOCAL, dotted
from gpulint.core.pending import PendingEdit, PendingFix, Replace
from gpulint.core.rewrite import add_keyword
from gpulint.core.walk import walk


def _no_space_equal() -> cst.AssignEqual:
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def _separator(call: cst.Call) -> cst.BaseParenthesizableWhitespace:
    """The whitespace the call puts after an argument's comma (comments never copied)."""
    for arg in call.args[:-1]:
        if isinstance(arg.comma, cst.Comma):
            ws = arg.comma.whitespace_after
            if isinstance(ws, cst.ParenthesizedWhitespace):
                return ws.with_changes(
                    first_line=ws.first_line.with_changes(comment=None, whitespace=cst.SimpleWhitespace("")),
                    empty_lines=())
            return ws
    ws = call.whitespace_before_args
    if isinstance(ws, cst.ParenthesizedWhitespace):
        return ws.with_changes(
            first_line=ws.first_line.with_changes(comment=None, whitespace=cst.SimpleWhitespace("")), empty_lines=())
    return cst.SimpleWhitespace(" ")


def _prepend(call: cst.Call, value: str, args: list[cst.Arg]) -> cst.Call:
    first = cst.Arg(value=cst.parse_expression(value))
    if args:
        first = first.with_changes(comma=cst.Comma(whitespace_after=_separator(call)))
    return call.with_changes(args=[first, *args])


def converted_call(call: cst.Call, replacement: Replacement, func: Optional[cst.BaseExpression] = None,
                   quote: str = '"') -> Optional[cst.Call]:
    """The same call against the torch.amp object, or None if it cannot be converted exactly."""
    device = f"{quote}{replacement.device}{quote}"
    keywords = {a.keyword.value for a in call.args if a.keyword is not None}
    if func is not None:
        call = call.with_changes(func=func)
    if replacement.name == "autocast":
        if "device_type" in keywords or any(a.star == "*" for a in call.args):
            return None
        args: list[cst.Arg] = []
        position = 0
        for arg in call.args:
            if arg.keyword is None and not arg.star:
                if position >= len(OLD_AUTOCAST_ORDER):
                    return None
                arg = arg.with_changes(keyword=cst.Name(OLD_AUTOCAST_ORDER[position]), equal=_no_space_equal())
                position += 1
            args.append(arg)
        return _prepend(call, device, args)
    if replacement.name == "GradScaler":
        if "device" in keywords:
            return None
        return _prepend(call, device, list(call.args))
    if "device_type" in keywords:
        return None
    return add_keyword(call, "device_type", device)  # custom_fwd / custom_bwd


def _decorator_call(func: cst.BaseExpression, replacement: Replacement, quote: str = '"') -> Optional[cst.Call]:
    """`@custom_fwd` -> `@custom_fwd(device_type="cuda")`; autocast/GradScaler are never bare decorators."""
    if replacement.name not in ("custom_fwd", "custom_bwd"):
        return None
    return cst.Call(func=func, args=[cst.Arg(keyword=cst.Name("device_type"), value=cst.SimpleString(
        f"{quote}{replacement.device}{quote}"), equal=_no_space_equal())])


class DeprecatedAmpFixes:
    """Builds GPU003's fixes; one per import statement, shared by its findings."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._imports: dict[int, tuple[Optional[PendingFix], list[cst.ImportAlias]]] = {}

    @property
    def facts(self) -> TrainingFacts:
        return self.ctx.analysis(training_facts)

    def _supported(self, replacement: Replacement) -> bool:
        return floors.too_new(self.ctx.settings.torch_version, [replacement.symbol]) is None

    def _replacement(self, target: str) -> Replacement:
        replacement = replacement_for(target, self.ctx.settings.torch_version)
        assert replacement is not None
        return replacement

    def for_call(self, call: cst.Call, target: str) -> Optional[PendingFix]:
        replacement = self._replacement(target)
        if not self._supported(replacement):
            return None
        reference = self.ctx.imports.reference(replacement.module, replacement.name)
        new = converted_call(call, replacement, cst.parse_expression(reference.expr), self.ctx.style.quote)
        if new is None:
            return None
        return PendingFix.safe(f"Use `{reference.expr}`", reference.edit, Replace(call, new))

    def for_bare_decorator(self, expr: cst.BaseExpression, target: str) -> Optional[PendingFix]:
        replacement = self._replacement(target)
        if not self._supported(replacement):
            return None
        reference = self.ctx.imports.reference(replacement.module, replacement.name)
        new = _decorator_call(cst.parse_expression(reference.expr), replacement, self.ctx.style.quote)
        if new is None:
            return None
        return PendingFix.safe(f"Use `{reference.expr}`", reference.edit, Replace(expr, new))

    def for_import(self, node: cst.ImportFrom, alias: cst.ImportAlias) -> Optional[PendingFix]:
        """The import statement's fix, offered on the findings of the names it moves to torch.amp."""
        if id(node) not in self._imports:
            self._imports[id(node)] = self._import_fix(node)
        fix, moved = self._imports[id(node)]
        return fix if any(a is alias for a in moved) else None

    # -- imports ---------------------------------------------------------------
    def _import_fix(self, node: cst.ImportFrom) -> tuple[Optional[PendingFix], list[cst.ImportAlias]]:
        assert node.module is not None and not isinstance(node.names, cst.ImportStar)
        module = dotted(node.module)
        moved: list[cst.ImportAlias] = []
        kept: list[cst.ImportAlias] = []
        edits: list[PendingEdit] = []
        modules: set[str] = set()  # where the moved names live now: torch.amp, or torch for torch.autocast
        for alias in node.names:
            name = dotted(alias.name)
            replacement = replacement_for(f"{module}.{name}", self.ctx.settings.torch_version)
            local = alias.asname.name.value if alias.asname is not None and isinstance(
                alias.asname.name, cst.Name) else name
            sites = None
            if replacement is not None and local is not None and self._supported(replacement):
                sites = self._use_sites(node, local, f"{module}.{name}", replacement)
            if sites is None:
                kept.append(alias)
            else:
                assert replacement is not None
                moved.append(alias)
                modules.add(replacement.module)
                edits.extend(sites)
        if not moved or len(modules) != 1:
            return None, []
        [new_module] = modules
        if not kept:
            edits.append(Replace(node.module, cst.parse_expression(new_module)))
        else:
            line = self.facts.parent(node)
            if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
                return None, []
            first = cst.parse_statement(f"from {new_module} import {self._names(moved)}\n")
            second = cst.parse_statement(f"from {module} import {self._names(kept)}\n")
            edits.append(Replace(line, [
                first.with_changes(leading_lines=line.leading_lines),
                second.with_changes(trailing_whitespace=line.trailing_whitespace),
            ]))
        return PendingFix.safe(f"Import from `{new_module}` and pass the device type at every use", *edits), moved

    def _names(self, aliases: list[cst.ImportAlias]) -> str:
        parts = []
        for alias in aliases:
            text = self.ctx.code(alias.name)
            if alias.asname is not None:
                text += " as " + self.ctx.code(alias.asname.name)
            parts.append(text)
        return ", ".join(parts)

    def _use_sites(self, node: cst.ImportFrom, local: str, target: str,
                   replacement: Replacement) -> Optional[list[PendingEdit]]:
        """Edits for every use of the imported name; None if one of them cannot be rewritten."""
        facts = self.facts
        names = self.ctx.names
        scope_node = facts.scope_of(node)
        scope = names.scopes.get(id(scope_node))
        if scope is None:
            return None
        bound = scope.bindings.get(local, [])
        if LOCAL in bound or set(bound) != {target}:
            return None  # the name is also bound some other way: its uses cannot be told apart
        calls: list[cst.Call] = []
        edits: list[PendingEdit] = []
        for use in self.ctx.analysis(name_loads).get(local, []):
            if names.resolve_name(use) != target:
                continue
            parent = facts.parent(use)
            if isinstance(parent, cst.Call) and parent.func is use:
                new = converted_call(parent, replacement, quote=self.ctx.style.quote)
                if new is None:
                    return None
                calls.append(parent)
                edits.append(Replace(parent, new))
            elif isinstance(parent, cst.Decorator) and parent.decorator is use:
                decorated = _decorator_call(use, replacement, self.ctx.style.quote)
                if decorated is None:
                    return None
                edits.append(Replace(use, decorated))
            else:
                return None  # passed around or subclassed: not a rewrite we can make exactly
        for call in calls:
            if any(facts.contains(other, call) for other in calls if other is not call):
                return None  # nested uses would need overlapping edits
        return edits


class _NameLoads:
    """Every name in load position (not attributes, keywords, parameters, definitions, imports), by spelling."""

    def __init__(self) -> None:
        self.by_name: dict[str, list[cst.Name]] = {}
        self._not_loads: set[int] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal)):
            return False
        if isinstance(node, cst.Name):
            if id(node) not in self._not_loads:
                self.by_name.setdefault(node.value, []).append(node)
            return False
        if isinstance(node, cst.Attribute):
            self._not_loads.add(id(node.attr))
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            self._not_loads.add(id(node.keyword))
        elif isinstance(node, (cst.Param, cst.FunctionDef, cst.ClassDef)):
            self._not_loads.add(id(node.name))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass


def name_loads(ctx: FileContext) -> dict[str, list[cst.Name]]:
    """Shared per file (`ctx.analysis(name_loads)`): one walk serves every imported name."""
    loads = _NameLoads()
    walk(ctx.module, loads)
    return loads.by_name
