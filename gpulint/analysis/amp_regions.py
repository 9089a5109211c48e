"""Where a training step's loss is computed and whether autocast covers it, on CPython's `ast` (issue 25).

The `ast` reading of analysis/training.py's autocast coverage and rewrites/amp_plan.py's loss statement
(the last statement of the region GPU001's fix wraps, else the line assigning the loss), for the rules
that ask "does this step run in float32 / under which autocast?" (GPU001, GPU002, GPU401), and the whole
region for analysis/amp_fix.py's decisions about GPU001's fix. The LibCST versions stay to build that
fix, which rewrites the region.
"""

from __future__ import annotations

import ast
import builtins
import re
from typing import Iterator, Optional

from gpulint.analysis.amp import ANY_AUTOCAST, BFLOAT16, FLOAT16, Coverage
from gpulint.analysis.amp_steps import AmpBackward, AmpStep, AmpSteps, amp_steps
from gpulint.analysis.ast_context import AstContext, dotted
from gpulint.project.ast_nodes import CODE_SCOPES, all_nodes
from gpulint.project.ast_nodes import children as child_nodes
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.records import dataclass

# names under which an unseen context manager may well be autocast
_LOOKS_LIKE_AMP = re.compile(r"autocast|(?<![a-z])amp|ctx|context|precision|mixed", re.IGNORECASE)
# context managers known not to be autocast
_KNOWN_CONTEXTS = ("torch.", "contextlib.", "builtins.", "tqdm.", "time.", "threading.", "warnings.")
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While,
             ast.With, ast.AsyncWith, ast.Try) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ()) + \
            ((ast.Match,) if hasattr(ast, "Match") else ())

# calls that only fetch, move or reshape a batch: a region never starts with them (rewrites/amp_plan.py)
_MOVING_METHODS = frozenset({
    "to", "cuda", "xpu", "mps", "cpu", "float", "double", "long", "int", "bool", "contiguous", "view", "reshape",
    "squeeze", "unsqueeze", "permute", "flatten", "pin_memory", "get", "items", "keys", "values",
})
_MOVING_FUNCTIONS = frozenset({"next", "iter", "len", "zip", "enumerate", "range", "tuple", "list", "dict"})
_BUILTINS = frozenset(dir(builtins))
_WAITS = frozenset({"wait", "wait_all", "to_here", "rpc_sync", "rpc_async", "collect_all"})
_TENSOR_METHODS = _MOVING_METHODS | frozenset({
    "argmax", "argmin", "sum", "mean", "max", "min", "abs", "exp", "log", "pow", "sqrt", "clamp", "softmax",
    "log_softmax", "sigmoid", "tanh", "round", "floor", "ceil", "masked_fill", "gather", "scatter", "index_select",
    "transpose", "t", "expand", "repeat", "split", "chunk", "detach", "clone", "type", "half", "bfloat16",
    "numpy", "tolist", "item", "size", "normal_", "uniform_", "fill_", "zero_", "manual_seed",
})


@dataclass(frozen=True)
class AstCover:
    coverage: Coverage
    # the autocast calls (or decorator expressions) that apply, when COVERED
    calls: tuple[ast.expr, ...] = ()


@dataclass(frozen=True)
class AstRegion:
    """Lines `start..end` (inclusive) of a block go under autocast; a line holds one statement, or several
    written on it (`a; b`) when read as LibCST does."""

    lines: list[list[ast.stmt]]
    start: int
    end: int

    @property
    def statements(self) -> list[ast.stmt]:
        return [s for line in self.lines[self.start:self.end + 1] for s in line]


class AmpRegions:
    """The file's training steps (analysis/amp_steps.py) with the facts about their precision."""

    def __init__(self, ctx: AstContext) -> None:
        self.ctx = ctx
        self.amp: AmpSteps = ctx.analysis(amp_steps)
        self.calls = self.amp.calls
        self.mentions_autocast = _mentions_autocast(ctx.tree, ctx.text)
        self.low_precision_model = any(self._casts_to_half(c) or self._built_in_half(c) for c in self.calls)

    @property
    def steps(self) -> list[AmpStep]:
        return self.amp.steps

    @property
    def framework_owned(self) -> bool:
        return self.amp.framework_owned

    # -- tree helpers ------------------------------------------------------------------------------
    def contains(self, outer: ast.AST, node: ast.AST) -> bool:
        return any(a is outer for a in self.ctx.ancestors(node))

    def scope_of(self, node: ast.AST) -> ast.AST:
        """The function, lambda, class or module whose code `node` is."""
        return next((a for a in self.ctx.ancestors(node) if isinstance(a, CODE_SCOPES)), self.ctx.tree)

    def before(self, a: ast.AST, b: ast.AST) -> bool:
        return (self.ctx.order(a) or 0) < (self.ctx.order(b) or 0)

    def _casts_to_half(self, call: ast.Call) -> bool:
        """`model.half()`, `.bfloat16()`, `.to(torch.float16)`: the model already trains in 16 bits."""
        func = call.func
        if not isinstance(func, ast.Attribute):
            return False
        if func.attr in ("half", "bfloat16") and not call.args and not call.keywords:
            return True
        if func.attr == "to":
            values = [a.value if isinstance(a, ast.Starred) else a for a in call.args]
            return any(self._half_dtype(v) for v in [*values, *(k.value for k in call.keywords)])
        return False

    def _half_dtype(self, expr: ast.expr) -> bool:
        """`torch.bfloat16`, or a name every binding of which is one (`param_dtype = torch.bfloat16`)."""
        if self.ctx.qualname(expr) in FLOAT16 | BFLOAT16:
            return True
        if not isinstance(expr, ast.Name):
            return False
        owner = self.ctx.names.binding_scope(expr)
        values = owner.values.get(expr.id, []) if owner is not None else []
        return bool(values) and all(v is not None and self.ctx.qualname(v) in FLOAT16 | BFLOAT16 for v in values)

    def _built_in_half(self, call: ast.Call) -> bool:
        """`load_model(..., param_dtype=torch.bfloat16)`: a project function that casts every parameter of the model
        it builds to a dtype it is handed (project/facts.py `_dtype_casts`), handed a 16-bit one."""
        project = self.ctx.project
        func = call.func
        names = self.ctx.names
        cast = None
        if isinstance(func, ast.Name) and names.binding_scope(func) is names.module_scope:
            cast = project.own.dtype_casts.get(func.id)
        if cast is None:
            cast = project.dtype_casts.get(self.ctx.qualname(func) or "")
        if cast is None:
            return False
        parameter, position = cast
        argument = next((k.value for k in call.keywords if k.arg == parameter), None)
        if argument is None and 0 <= position < len(call.args) \
                and not any(isinstance(a, ast.Starred) for a in call.args[:position + 1]):
            argument = call.args[position]
        return argument is not None and self._half_dtype(argument)

    # -- autocast coverage -------------------------------------------------------------------------
    def autocast_in(self, expr: ast.expr) -> list[ast.expr]:
        """Autocast calls (or bare autocast references) inside an expression, in source order."""
        found: list[ast.expr] = [n for n in _preorder(expr) if isinstance(n, ast.Call)
                                 and self.ctx.qualname(n.func) in ANY_AUTOCAST]
        if not found and self.ctx.qualname(expr) in ANY_AUTOCAST:
            found.append(expr)
        return found

    def _with_autocasts(self, item: ast.expr) -> tuple[list[ast.expr], bool]:
        direct = self.autocast_in(item)
        if direct:
            return direct, True
        if isinstance(item, ast.Name):  # nanoGPT: `ctx = nullcontext() if cpu else torch.amp.autocast(...)`
            owner = self.ctx.names.binding_scope(item)
            if owner is not None:
                found = [c for v in owner.values.get(item.id, []) if v is not None for c in self.autocast_in(v)]
                if found:
                    return found, True
        return [], self._might_be_autocast(item, depth=0)

    def _might_be_autocast(self, expr: ast.expr, depth: int) -> bool:
        """A context manager whose definition the file does not show, with nothing ruling autocast out."""
        if depth > 3:
            return True
        if isinstance(expr, ast.IfExp):
            return any(self._might_be_autocast(e, depth + 1) for e in (expr.body, expr.orelse))
        if isinstance(expr, ast.Call):
            expr = expr.func
        if isinstance(expr, ast.Name):
            owner = self.ctx.names.binding_scope(expr)
            if owner is None:
                return False  # a builtin such as `open`
            target = self.ctx.qualname(expr)
            if target is not None:
                return not target.startswith(_KNOWN_CONTEXTS)
            values = owner.values.get(expr.id, [])
            plain = [v for v in values if v is not None]
            if values and len(plain) == len(values):
                return any(self.autocast_in(v) or self._might_be_autocast(v, depth + 1) for v in plain)
            local = [t for t in owner.bindings.get(expr.id, []) if t is None]
            if local and not any(values):
                return bool(_LOOKS_LIKE_AMP.search(expr.id))
        target = self.ctx.qualname(expr)
        if target is not None:
            return not target.startswith(_KNOWN_CONTEXTS)
        return bool(_LOOKS_LIKE_AMP.search(self.ctx.segment(expr)))

    def coverage(self, node: ast.AST) -> AstCover:
        """Whether `node` (a loss statement) runs under autocast, as far as the file shows."""
        maybe = False
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, (ast.With, ast.AsyncWith)):
                for item in ancestor.items:
                    calls, looks_like = self._with_autocasts(item.context_expr)
                    if calls:
                        return AstCover(Coverage.COVERED, tuple(calls))
                    maybe = maybe or looks_like
            if isinstance(ancestor, _FUNCTIONS):
                for decorator in ancestor.decorator_list:
                    calls = self.autocast_in(decorator)
                    if calls:
                        return AstCover(Coverage.COVERED, tuple(calls))
        if maybe or self.mentions_autocast:
            return AstCover(Coverage.UNKNOWN)
        return AstCover(Coverage.NOT_COVERED)

    # -- the loss statement ------------------------------------------------------------------------
    def loss_statement(self, step: AmpStep, backward: AmpBackward) -> ast.stmt:
        """The statement that assigns the loss, else the one that calls backward (rewrites/amp_plan.py)."""
        region_end = self._region_end(step, backward)
        if region_end is not None and not isinstance(region_end, _COMPOUND):
            return region_end
        names = loss_names(backward.loss) or set()
        statement = self.ctx.statement(backward.call)
        if not names:
            return statement
        # the loss may be assigned inside a compound statement (`with ctx: loss = ...`): find that line
        last: Optional[ast.stmt] = None
        scope = self.scope_of(backward.call)
        for line in _simple_statements(step.node):
            if _uses(line)[1] & names and self.before(line, backward.call) and self.scope_of(line) is scope:
                last = line
        return last if last is not None else statement

    def loss_passed_in(self, backward: AmpBackward) -> bool:
        """The loss is a parameter of the function calling backward, never assigned there."""
        names = loss_names(backward.loss)
        if not names:
            return False
        function = next((a for a in self.ctx.ancestors(backward.call) if isinstance(a, (*_FUNCTIONS, ast.Lambda))),
                        None)
        if not isinstance(function, _FUNCTIONS):
            return False
        args = function.args
        params = {p.arg for p in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        if not names <= params:
            return False
        return not any(_uses(line)[1] & names for line in _simple_statements(function))

    def _region_end(self, step: AmpStep, backward: AmpBackward) -> Optional[ast.stmt]:
        """The last statement of the region GPU001's fix wraps, read statement by statement."""
        region = self._region(step, backward, by_line=False)
        return region.lines[region.end][-1] if region is not None else None

    def region(self, step: AmpStep, backward: AmpBackward) -> Optional["AstRegion"]:
        """The lines GPU001's fix wraps in autocast, as rewrites/amp_plan.py autocast_region finds them on
        LibCST for the edit: simple statements sharing a line (`a; b`) are one line there, and a one-line
        suite (`if done: ...`) is no block."""
        return self._region(step, backward, by_line=True)

    def _region(self, step: AmpStep, backward: AmpBackward, by_line: bool) -> Optional["AstRegion"]:
        """From the first statement the loss depends on that calls a model through the loss assignment, in
        one block; None when construction or waiting sits between them."""
        names = loss_names(backward.loss)
        if not names:
            return None
        child: ast.AST = self.ctx.statement(backward.call)
        for ancestor in self.ctx.ancestors(child):
            block = _block_holding(ancestor, child)
            if block is not None and by_line and self._suite(block):
                block = None
            if block is not None:
                lines = _lines(block) if by_line else [[s] for s in block]
                position = next(i for i, line in enumerate(lines) if any(s is child for s in line))
                uses = [name_uses(*line) for line in lines[:position]]
                ends = [k for k in range(position) if uses[k][1] & names]
                if ends:
                    end = max(ends)
                    start = _slice_start(lines, uses, end)
                    needed = _slice_members(uses, end)
                    while start < end and (start not in needed or self._not_forward(lines[start])
                                           or not self._calls_model(lines[start])):
                        start += 1
                    if any(self._not_forward(lines[k]) for k in range(start, end + 1)):
                        return None
                    return AstRegion(lines, start, end)
            if isinstance(ancestor, ast.stmt):
                child = ancestor
            if ancestor is step.node or isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                              ast.Lambda)):
                return None
        return None

    def _suite(self, block: list[ast.stmt]) -> bool:
        """The block is written on its header's line (`if done: a; b`): LibCST's SimpleStatementSuite."""
        first = block[0]
        if isinstance(self.ctx.parent(first), ast.Module):
            return False
        prefix = self.ctx.line(first.lineno)[:self.ctx.column(first.lineno, first.col_offset)]
        return bool(prefix.strip())

    def _calls_model(self, line: list[ast.stmt]) -> bool:
        return any(isinstance(n, ast.Call) and self._is_model_call(n) for s in line for n in walk_nodes(s))

    def _is_model_call(self, call: ast.Call) -> bool:
        func = call.func
        qualified = self.ctx.qualname(func)
        if qualified is not None:
            return qualified.split(".", 1)[0] not in ("torch", "numpy", "math", "random")
        if isinstance(func, ast.Name):
            return not (func.id in _BUILTINS and self.ctx.names.binding_scope(func) is None)
        return not (isinstance(func, ast.Attribute) and func.attr in _TENSOR_METHODS)

    def _not_forward(self, line: list[ast.stmt]) -> bool:
        """A line that builds a model or an optimizer, or waits on futures: never part of the forward pass."""
        return all(self._builds_or_waits(s) for s in line)

    def _builds_or_waits(self, statement: ast.stmt) -> bool:
        if isinstance(statement, _COMPOUND):
            return False
        value = statement.value if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.Expr)) else None
        if not isinstance(value, ast.Call):
            return False
        while isinstance(value.func, ast.Attribute) and value.func.attr in _MOVING_METHODS \
                and isinstance(value.func.value, ast.Call):
            value = value.func.value
        func = value.func
        last = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")
        qualified = self.ctx.qualname(func) or ""
        # `self.G(x)` calls a module the instance holds (autovc's generator), it does not build a class
        held = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"
        constructs = last[:1].isupper() and not held and not qualified.startswith("torch.Tensor")
        return constructs or last in _WAITS


def amp_regions(ctx: AstContext) -> AmpRegions:
    """The shared analysis: `ctx.analysis(amp_regions)`."""
    return AmpRegions(ctx)


def loss_names(expr: ast.expr) -> Optional[set[str]]:
    """Names a loss expression combines (`loss`, `loss / accum`, `loss.mean()`), None if it computes more."""
    if isinstance(expr, ast.Name):
        return {expr.id}
    if isinstance(expr, ast.Constant) and (expr.value is None or isinstance(expr.value, bool)):
        return {repr(expr.value)}  # LibCST reads `True`/`None` as names
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float)) or isinstance(expr, ast.Attribute):
        return set()
    if isinstance(expr, ast.BinOp):
        left, right = loss_names(expr.left), loss_names(expr.right)
        return None if left is None or right is None else left | right
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and not expr.args and not expr.keywords:
        return loss_names(expr.func.value)
    return None


def _block_holding(owner: ast.AST, child: ast.AST) -> Optional[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        block = getattr(owner, name, None)
        if isinstance(block, list) and any(s is child for s in block):
            return block
    return None


def _lines(block: list[ast.stmt]) -> list[list[ast.stmt]]:
    """The block's statements grouped as LibCST's lines: simple statements written on one line (`a; b`) are one."""
    lines: list[list[ast.stmt]] = []
    for statement in block:
        last = lines[-1][-1] if lines else None
        if last is not None and not isinstance(statement, _COMPOUND) and not isinstance(last, _COMPOUND) \
                and statement.lineno == last.end_lineno:
            lines[-1].append(statement)
        else:
            lines.append([statement])
    return lines


def _moves_data_only(line: list[ast.stmt]) -> bool:
    """A line that only unpacks, fetches, makes or moves a batch (no model, no loss)."""
    return all(_moves_data_only_statement(s) for s in line)


def _moves_data_only_statement(statement: ast.stmt) -> bool:
    if isinstance(statement, _COMPOUND):
        return False
    for call in (n for n in walk_nodes(statement) if isinstance(n, ast.Call)):
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in _MOVING_METHODS:
            continue
        if isinstance(func, ast.Name) and func.id in _MOVING_FUNCTIONS:
            continue
        values = [a.value if isinstance(a, ast.Starred) else a for a in call.args] + [k.value for k in call.keywords]
        if any(_names_device(v) for v in values):
            continue
        return False
    return True


def _names_device(expr: ast.expr) -> bool:
    name = dotted(expr)
    return name is not None and "device" in name.split(".")[-1].lower()


Uses = tuple[set[str], set[str]]  # (reads, writes)


def _slice_members(uses: list[Uses], end: int) -> set[int]:
    needed = set(uses[end][0])
    members = {end}
    for k in range(end - 1, -1, -1):
        if uses[k][1] & needed:
            needed |= uses[k][0]
            members.add(k)
    return members


def _slice_start(body: list[list[ast.stmt]], uses: list[Uses], end: int) -> int:
    needed = set(uses[end][0])
    start = end
    for k in range(end - 1, -1, -1):
        if uses[k][1] & needed:
            needed |= uses[k][0]
            if not _moves_data_only(body[k]):
                start = k
    return start


def _preorder(node: ast.AST) -> Iterator[ast.AST]:
    """`node` and its descendants in source order (ast.walk goes breadth first)."""
    yield node
    for child in child_nodes(node):
        yield from _preorder(child)


def _simple_statements(root: ast.AST) -> Iterator[ast.stmt]:
    """The simple statements under `root`, nested functions included, in source order."""
    for node in _preorder(root):
        if isinstance(node, ast.stmt) and not isinstance(node, _COMPOUND):
            yield node


def _mentions_autocast(tree: ast.Module, text: Optional[str] = None) -> bool:
    """An identifier of the file spells `autocast` (a name, attribute, def, parameter, keyword or import).
    `text`, the source of `tree`: an identifier is spelled in it as it is (NFKC, which Python applies to
    identifiers, leaves ASCII alone), so an ASCII text without the word answers without a walk."""
    if text is not None and text.isascii() and "autocast" not in text.lower():
        return False
    for node in all_nodes(tree):
        if isinstance(node, _SPELLING):  # most nodes spell no identifier: no generator for them
            for name in _identifiers(node):
                if "autocast" in name.lower():
                    return True
    return False


# the node types `_identifiers` reads a name from
_SPELLING = (ast.Name, ast.Attribute, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.arg, ast.keyword,
             ast.alias, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.ExceptHandler)


def _identifiers(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, ast.keyword) and node.arg:
        yield node.arg
    elif isinstance(node, ast.alias):
        yield node.name
        if node.asname:
            yield node.asname
    elif isinstance(node, ast.ImportFrom) and node.module:
        yield node.module
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        yield from node.names
    elif isinstance(node, ast.ExceptHandler) and node.name:
        yield node.name


# -- names read and written (core/names.py NameUses on LibCST, with its readings) -----------------
def _uses(statement: ast.stmt) -> Uses:
    return name_uses(statement)


def name_uses(*nodes: ast.AST) -> Uses:
    """The names these nodes read and bind, as core/names.py's NameUses reads them on LibCST."""
    reads: set[str] = set()
    writes: set[str] = set()
    visitor = _Uses(reads, writes)
    for node in nodes:
        visitor.visit(node)
    return reads, writes


class _Uses(ast.NodeVisitor):
    """What core/names.py's NameUses reports on the LibCST tree: a nested def or class binds its name and is
    not entered; a `for` target is both bound and read; comprehension targets and imported names are read."""

    def __init__(self, reads: set[str], writes: set[str]) -> None:
        self.reads = reads
        self.writes = writes

    def _bind(self, target: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.writes.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._bind(element)
        elif isinstance(target, ast.Starred):
            self._bind(target.value)
        else:
            self.visit(target)

    def visit_Name(self, node: ast.Name) -> None:
        self.reads.add(node.id)

    def visit_Constant(self, node: ast.Constant) -> None:
        if node.value is None or isinstance(node.value, bool) or node.value is Ellipsis:
            if node.value is not Ellipsis:
                self.reads.add(repr(node.value))  # LibCST's `True`, `None` are names

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._bind(target)
        self.visit(node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._bind(node.target)
        if node.value is not None:
            self.visit(node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._bind(node.target)
        if isinstance(node.target, ast.Name):
            self.reads.add(node.target.id)
        self.visit(node.value)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._bind(node.target)
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def visit_withitem(self, node: ast.withitem) -> None:
        self.visit(node.context_expr)
        if node.optional_vars is not None:
            self._bind(node.optional_vars)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._bind(node.target)
        self.visit(node.value)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.writes.add(node.name)

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_ClassDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        args = node.args
        for param in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if param is not None:
                self.reads.add(param.arg)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.reads.add(alias.name.split(".")[0])
            if alias.asname:
                self.writes.add(alias.asname)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module:
            self.reads.add(node.module.split(".")[0])
        for alias in node.names:
            if alias.name != "*":
                self.reads.add(alias.name)
            if alias.asname:
                self.writes.add(alias.asname)

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> None:
        self.reads.update(node.names)

    visit_Nonlocal = visit_Global

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.writes.add(node.name)
        for statement in node.body:
            self.visit(statement)
