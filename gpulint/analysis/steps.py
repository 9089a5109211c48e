"""Training steps on `ast`: the loops that run one optimizer step per iteration, and what runs on every step.

A *step loop* is the innermost `for`/`while` loop whose body, directly or through calls to functions
of the same file, calls `.backward()` on a loss and steps an optimizer (`opt.step()`,
`scaler.step(opt)`). Loops around it that (directly or through calls) hold a step loop are its
*epoch loops*. The rules about per-step costs (host syncs, `empty_cache`, ...) ask two questions
of a node: does it run inside a step loop, and does it run on *every* step, or only under a
logging-interval condition (`if step % N == 0`, `if (i + 1) % accum == 0`, `if i == 0`).

Frameworks: in a `LightningModule` or a `transformers.Trainer` subclass the framework runs the loop
(Lightning's `training_step` has no user loop at all, so it makes no step here). Where the user
writes the loop but the framework performs backward (`accelerator.backward(loss)`,
`fabric.backward(loss)`, DeepSpeed's `engine.backward(loss)` + `engine.step()`), the loop is a step
loop whose `owner` names the framework: those frameworks own precision, scaling and sync points
(gradient accumulation, logging across ranks), so rules stay silent there unless they say why not.

This module only reads `ast` trees; names are resolved through a `qualname` callable (the file's
`AstNames.qualname`), so it can be tested on `ast.parse` output.
"""

from __future__ import annotations

import ast
from dataclasses import field
from typing import TYPE_CHECKING, Callable, Iterator, Optional, TypeVar, Union

from gpulint.core.torch_api import AUTOGRAD_BACKWARD, LIGHTNING_MODULES, optimizer_name
from gpulint.project.ast_nodes import CODE_SCOPES, all_nodes, code_children, last_name
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.project.facts import HF_TRAINERS
from gpulint.project.loader_flow import dotted
from gpulint.records import dataclass

if TYPE_CHECKING:
    from gpulint.analysis.ast_context import AstContext

Qualname = Callable[[ast.expr], Optional[str]]
# what a training step spells, as `Rule.ast_needles` groups: a backward call and an optimizer step
STEP_AST_NEEDLES = ((".backward(", ".manual_backward(", AUTOGRAD_BACKWARD), (".step(",))
Loop = Union[ast.For, ast.AsyncFor, ast.While]
Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)

# Base classes whose subclasses' methods run inside a framework's own loop
_OWNING_BASES = {
    "lightning": tuple(sorted(LIGHTNING_MODULES)),
    "transformers": tuple(sorted(HF_TRAINERS)),
}
# packages whose objects perform backward for the user: `accelerator.backward(loss)` and the like
_BACKWARD_OWNERS = ("accelerate", "lightning", "lightning_fabric", "pytorch_lightning", "deepspeed", "mmengine")


@dataclass(frozen=True)
class Backward:
    """A backward pass: `loss.backward()`, `scaler.scale(loss).backward()`, `torch.autograd.backward(loss)`,
    or a framework's `accelerator.backward(loss)` (then `owner` names the framework)."""

    call: ast.Call
    loss: ast.expr
    scaled: bool
    owner: Optional[str] = None


@dataclass(frozen=True)
class OptimizerStep:
    call: ast.Call
    optimizer: ast.expr
    via_scaler: bool  # `scaler.step(opt)`


@dataclass(eq=False)
class StepLoop:
    """One training-step loop: each iteration is one step."""

    loop: Loop
    function: Optional[Function]  # the function whose code holds the loop (None: module level)
    backwards: list[Backward] = field(default_factory=list)
    steps: list[OptimizerStep] = field(default_factory=list)
    epoch_loops: list[Loop] = field(default_factory=list)  # loops around it in the same code, outermost first
    counters: frozenset[str] = frozenset()  # names that count steps: loop targets, `global_step += 1`
    owner: Optional[str] = None  # the framework that runs backward/the loop ("accelerate", "lightning", ...)

    @property
    def framework_owned(self) -> bool:
        return self.owner is not None


@dataclass(frozen=True)
class Place:
    """Where a node runs relative to a step loop."""

    step: StepLoop
    every_step: bool  # no interval condition, `except` handler or once-only branch between it and the loop
    condition: Optional[ast.AST] = None  # the interval condition (or handler) that limits it, when not every step


class StepFacts:
    """The step loops of one module and the questions rules ask about them."""

    def __init__(self, tree: ast.Module, qualname: Qualname) -> None:
        self.tree = tree
        self.qualname = qualname
        self.parents: dict[int, ast.AST] = {}
        for node in all_nodes(tree):
            for child in code_children(node):  # (no question asks for an expression context's parent)
                self.parents[id(child)] = node
        self.functions: dict[str, list[Function]] = {}  # module-level functions and methods, by name
        self.methods: dict[int, dict[str, Function]] = {}  # class id -> method name -> def
        for node in all_nodes(tree):
            if isinstance(node, _FUNCTIONS):
                self.functions.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.ClassDef):
                self.methods[id(node)] = {s.name: s for s in node.body if isinstance(s, _FUNCTIONS)}
        self.zero_grad_receivers = {
            ast.dump(n.func.value) for n in all_nodes(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "zero_grad"}
        self._code_cache: dict[int, tuple[list[Backward], list[OptimizerStep], list[ast.AST]]] = {}
        self._in_progress: set[int] = set()
        self._helpers_in_progress: set[int] = set()  # interval helpers being read (a recursive one is not one)
        self.steps: list[StepLoop] = []
        self._by_loop: dict[int, StepLoop] = {}
        self._callers = self._call_sites()
        self._find()

    # -- tree helpers -----------------------------------------------------------------------------
    def parent(self, node: ast.AST) -> Optional[ast.AST]:
        return self.parents.get(id(node))

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        current = self.parent(node)
        while current is not None:
            yield current
            current = self.parent(current)

    def scope_of(self, node: ast.AST) -> Optional[ast.AST]:
        """The function, lambda or class whose code `node` is (None: the module)."""
        return next((a for a in self.ancestors(node) if isinstance(a, CODE_SCOPES)), None)

    def _own_nodes(self, root: ast.AST) -> Iterator[ast.AST]:
        """Nodes under `root` that are its own code: not inside a nested def, lambda or class."""
        stack = code_children(root)  # (expression contexts left out: no question asks about them)
        while stack:
            node = stack.pop()
            yield node
            if not isinstance(node, CODE_SCOPES):
                stack.extend(code_children(node))

    # -- calls ------------------------------------------------------------------------------------
    def backward_of(self, call: ast.Call) -> Optional[Backward]:
        func = call.func
        if self.qualname(func) == AUTOGRAD_BACKWARD:
            loss = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "tensors"), None)
            return Backward(call, loss, scaled=False) if loss is not None else None
        if not isinstance(func, ast.Attribute) or func.attr not in ("backward", "manual_backward"):
            return None
        if func.attr == "manual_backward" or call.args:  # `accelerator.backward(loss)`, `self.manual_backward(loss)`
            if not call.args or isinstance(call.args[0], ast.Starred):
                return None
            owner = self._backward_owner(func.value)
            return Backward(call, call.args[0], scaled=False, owner=owner) if owner else None
        receiver = func.value
        if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) \
                and receiver.func.attr == "scale" and len(receiver.args) == 1:
            return Backward(call, receiver.args[0], scaled=True)
        return Backward(call, receiver, scaled=False)

    def _backward_owner(self, receiver: ast.expr) -> Optional[str]:
        """The framework whose object `receiver` is, from its construction or the file's imports."""
        imported = self.imported_frameworks()
        value = self._single_value(receiver) if isinstance(receiver, ast.Name) else None
        if isinstance(value, ast.Call):
            target = self.qualname(value.func) or ""
            if isinstance(value.func, ast.Attribute) and value.func.attr == "initialize" and "deepspeed" in imported:
                return "deepspeed"
            for package in _BACKWARD_OWNERS:
                if target == package or target.startswith(package + "."):
                    return package
        if isinstance(receiver, ast.Name) and receiver.id == "self":
            return "lightning" if "lightning" in imported or "pytorch_lightning" in imported else None
        return sorted(imported)[0] if imported else None

    def imported_frameworks(self) -> set[str]:
        """Frameworks (of `_BACKWARD_OWNERS`) the module imports."""
        return self._imported_tops() & set(_BACKWARD_OWNERS)

    def _imported_tops(self) -> set[str]:
        found: set[str] = set()
        for node in self.tree.body:
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            elif isinstance(node, (ast.If, ast.Try)):
                names = [a.name if isinstance(n, ast.Import) else (n.module or "")
                         for n in walk_nodes(node) if isinstance(n, (ast.Import, ast.ImportFrom))
                         for a in n.names]
            for name in names:
                found.add(name.split(".")[0])
        return found

    def value_of(self, name: ast.Name) -> Optional[ast.expr]:
        """The value of the one plain assignment to `name` in its scope (None when bound otherwise or twice)."""
        return self._single_value(name)

    def _single_value(self, name: ast.Name) -> Optional[ast.expr]:
        """The value of the one plain assignment to `name` in its scope (None when bound otherwise or twice)."""
        scope = self.scope_of(name) or self.tree
        values: list[ast.expr] = []
        for node in self._own_nodes(scope):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id == name.id:
                        values.append(node.value)
                    elif isinstance(target, ast.Tuple) and any(
                            isinstance(e, ast.Name) and e.id == name.id for e in target.elts):
                        if isinstance(node.value, ast.Call):
                            values.append(node.value)  # `engine, opt, _, _ = deepspeed.initialize(...)`
                        else:
                            return None
        return values[0] if len(values) == 1 else None

    def optimizer_step_of(self, call: ast.Call) -> Optional[OptimizerStep]:
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr != "step":
            return None
        if len(call.args) == 1 and self._is_scaler(func.value):
            return OptimizerStep(call, call.args[0], via_scaler=True)
        if len(call.args) <= 1 and self._is_optimizer(func.value):
            return OptimizerStep(call, func.value, via_scaler=False)
        return None

    def _is_scaler(self, expr: ast.expr) -> bool:
        last = last_name(expr)
        if last is not None and "scaler" in last.lower():
            return True
        value = self._single_value(expr) if isinstance(expr, ast.Name) else None
        return isinstance(value, ast.Call) and (self.qualname(value.func) or "").endswith("GradScaler")

    def _is_optimizer(self, expr: ast.expr) -> bool:
        last = last_name(expr)
        if last is None:
            return False
        lower = last.lower()
        if "sched" in lower or "scaler" in lower or lower in ("lr", "env", "self", "trainer"):
            return False
        value = self._single_value(expr) if isinstance(expr, ast.Name) else None
        if isinstance(value, ast.Call):
            target = self.qualname(value.func) or ""
            if target.startswith("torch.optim.lr_scheduler"):
                return False
            if target.startswith("torch.optim."):
                return True
        if optimizer_name(dotted(expr) or last):
            return True
        if lower in ("engine", "model_engine") or lower.endswith("_engine"):
            return "deepspeed" in self.imported_frameworks()
        return ast.dump(expr) in self.zero_grad_receivers

    def callee(self, call: ast.Call) -> Optional[Function]:
        """The function of this file a call runs: `f(...)` (one def of that name at module level) or
        `self.m(...)` (a method of the enclosing class)."""
        func = call.func
        if isinstance(func, ast.Name):
            defs = [d for d in self.functions.get(func.id, []) if self.parent(d) is self.tree]
            return defs[0] if len(defs) == 1 else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            cls = next((a for a in self.ancestors(call) if isinstance(a, ast.ClassDef)), None)
            if cls is not None:
                return self.methods.get(id(cls), {}).get(func.attr)
        return None

    # -- finding step loops -----------------------------------------------------------------------
    def _code_facts(self, root: ast.AST) -> tuple[list[Backward], list[OptimizerStep], list[ast.AST]]:
        """Backward calls, optimizer steps and the loops that run, in `root`'s own code and in the
        same-file functions it calls (transitively)."""
        cached = self._code_cache.get(id(root))
        if cached is not None:
            return cached
        if id(root) in self._in_progress:  # recursion: what the cycle adds is counted at its entry
            return [], [], []
        self._in_progress.add(id(root))
        backwards: list[Backward] = []
        steps: list[OptimizerStep] = []
        loops: list[ast.AST] = []
        for node in self._own_nodes(root):
            if isinstance(node, ast.Call):
                backward = self.backward_of(node)
                if backward is not None:
                    backwards.append(backward)
                step = self.optimizer_step_of(node)
                if step is not None:
                    steps.append(step)
                target = self.callee(node)
                if target is not None and target is not root:
                    b, s, inner = self._code_facts(target)
                    backwards += b
                    steps += s
                    loops += inner
            elif isinstance(node, _LOOPS):
                loops.append(node)
        self._in_progress.discard(id(root))
        result = (backwards, steps, loops)
        self._code_cache[id(root)] = result
        return result

    def _find(self) -> None:
        # a loop is a step loop when it runs backward and a step, and no loop it runs (lexically or
        # through calls) does both
        candidates: dict[int, tuple[Loop, list[Backward], list[OptimizerStep], list[ast.AST]]] = {}
        for loop in all_nodes(self.tree):
            if isinstance(loop, _LOOPS):
                backwards, steps, inner = self._code_facts(loop)
                if backwards and steps:
                    candidates[id(loop)] = (loop, backwards, steps, inner)
        for loop, backwards, steps, inner in candidates.values():
            if any(id(i) in candidates and i is not loop for i in inner):
                continue
            function = next((a for a in self.ancestors(loop) if isinstance(a, _FUNCTIONS)), None)
            step = StepLoop(loop, function, _unique(backwards), _unique(steps), owner=self._owner(loop, backwards))
            self._by_loop[id(loop)] = step
            self.steps.append(step)
        for step in self.steps:
            step.epoch_loops = self._epoch_loops(step)
            step.counters = self._counters(step)
        self.steps.sort(key=lambda s: (s.loop.lineno, s.loop.col_offset))

    def _owner(self, loop: Loop, backwards: list[Backward]) -> Optional[str]:
        """The framework running this loop's backward or the loop itself (a method of its subclass)."""
        imported = self._imported_tops()
        for ancestor in self.ancestors(loop):
            if not isinstance(ancestor, ast.ClassDef):
                continue
            for base in ancestor.bases:
                target = self.qualname(base)
                last = last_name(base) or ""
                for framework, names in _OWNING_BASES.items():
                    if target in names:
                        return framework
                    if target is None and last in {n.split(".")[-1] for n in names} \
                            and imported & {n.split(".")[0] for n in names}:
                        return framework
        owners = {b.owner for b in backwards if b.owner is not None}
        return sorted(owners)[0] if owners else None

    def _epoch_loops(self, step: StepLoop) -> list[Loop]:
        """Loops that run the step loop: around it in its function, or around calls to its function."""
        found: list[Loop] = [a for a in self.ancestors(step.loop) if isinstance(a, _LOOPS)
                             and self.scope_of(a) is self.scope_of(step.loop)]
        seen: set[int] = set()
        frontier = [step.function] if step.function is not None and self.scope_of(step.loop) is step.function else []
        while frontier:
            function = frontier.pop()
            if id(function) in seen:
                continue
            seen.add(id(function))
            for call in self._calls_to(function):
                found += [a for a in self.ancestors(call) if isinstance(a, _LOOPS)
                          and a not in found and id(a) not in self._by_loop]
                caller = next((a for a in self.ancestors(call) if isinstance(a, _FUNCTIONS)), None)
                if caller is not None:
                    frontier.append(caller)
        found.sort(key=lambda n: (n.lineno, n.col_offset))
        return found

    def _calls_to(self, function: Function) -> Iterator[ast.Call]:
        yield from self._callers.get(id(function), [])

    def _counters(self, step: StepLoop) -> frozenset[str]:
        names: set[str] = set()
        for loop in [step.loop, *step.epoch_loops]:
            if isinstance(loop, (ast.For, ast.AsyncFor)):
                names |= {n.id for n in walk_nodes(loop.target) if isinstance(n, ast.Name)}
        for node in walk_nodes(step.loop):
            if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
                target = node.target
                if isinstance(target, ast.Name):
                    names.add(target.id)
                elif isinstance(target, ast.Attribute):
                    names.add(target.attr)
        return frozenset(names)

    def _call_sites(self) -> dict[int, list[ast.Call]]:
        sites: dict[int, list[ast.Call]] = {}
        for node in all_nodes(self.tree):
            if isinstance(node, ast.Call):
                target = self.callee(node)
                if target is not None:
                    sites.setdefault(id(target), []).append(node)
        return sites

    # -- questions rules ask ----------------------------------------------------------------------
    def call_sites(self, function: ast.AST) -> list[ast.Call]:
        """The calls of this file that run `function` (`f(...)`, `self.f(...)` in its class)."""
        return list(self._callers.get(id(function), []))

    def step_loop(self, loop: ast.AST) -> Optional[StepLoop]:
        return self._by_loop.get(id(loop))

    def place(self, node: ast.AST) -> Optional[Place]:
        """Where `node` runs relative to a step loop: lexically in the loop's body, or in a same-file
        function called from it (through any chain of calls). When several paths lead to a step, an
        every-step path wins. None: not inside any step."""
        return self._place(node, set())

    def _place(self, node: ast.AST, seen: set[int]) -> Optional[Place]:
        limited: Optional[Place] = None
        child: ast.AST = node
        condition: Optional[ast.AST] = None
        for ancestor in self.ancestors(node):
            if condition is None:
                condition = self.limits(ancestor, child)
            if isinstance(ancestor, _LOOPS) and id(ancestor) in self._by_loop:
                if child in getattr(ancestor, "orelse", []) or child is getattr(ancestor, "test", None) \
                        or child is getattr(ancestor, "iter", None):
                    return None  # the loop's `else`, test or iterable: not the per-step body
                step = self._by_loop[id(ancestor)]
                return Place(step, condition is None, condition)
            if isinstance(ancestor, (ast.Lambda, ast.ClassDef)):
                return None
            if isinstance(ancestor, _FUNCTIONS):
                if id(ancestor) in seen:
                    return None
                seen = seen | {id(ancestor)}
                for call in self._callers.get(id(ancestor), []):
                    found = self._place(call, seen)
                    if found is None:
                        continue
                    if condition is not None or not found.every_step:
                        found = Place(found.step, False, condition or found.condition)
                    if found.every_step:
                        return found
                    limited = limited or found
                return limited
            child = ancestor
        return None

    def limits(self, ancestor: ast.AST, child: ast.AST) -> Optional[ast.AST]:
        """The condition by which `ancestor` runs `child` on only some steps, if it does."""
        if isinstance(ancestor, ast.If) and child in ancestor.body and self.is_interval(ancestor.test):
            return ancestor.test
        if isinstance(ancestor, ast.IfExp) and child is ancestor.body and self.is_interval(ancestor.test):
            return ancestor.test
        if isinstance(ancestor, ast.ExceptHandler):
            return ancestor
        if isinstance(ancestor, (ast.If,)) and child in ancestor.orelse and self._is_skip_interval(ancestor.test):
            return ancestor.test
        if isinstance(ancestor, list):  # pragma: no cover - ast parents are nodes
            return None
        body = _block_of(ancestor, child)
        if body is not None:
            index = next(i for i, s in enumerate(body) if s is child)
            for earlier in body[:index]:
                if isinstance(earlier, ast.If) and not earlier.orelse and self._is_skip_interval(earlier.test) \
                        and earlier.body and isinstance(earlier.body[-1], (ast.Continue, ast.Return)):
                    return earlier.test
        return None

    def is_interval(self, test: ast.AST) -> bool:
        """A condition true on only some steps: `step % N == 0`, `(i + 1) % accum == 0`, `not step % N`,
        `i == 0`, `step == total - 1`, a conjunction holding one, a name assigned one (`do_log`)."""
        if isinstance(test, ast.BoolOp):
            if isinstance(test.op, ast.And):
                return any(self.is_interval(v) for v in test.values)
            return all(self.is_interval(v) for v in test.values)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return _is_modulo(test.operand)
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, right, op = test.left, test.comparators[0], test.ops[0]
            if isinstance(op, ast.Eq):
                if _is_modulo(left) or _is_modulo(right):
                    return True
                return _looks_like_counter(left) or _looks_like_counter(right)
            if isinstance(op, (ast.Lt, ast.LtE)) and _looks_like_counter(left) and isinstance(right, ast.Constant):
                return True  # the first few steps only: `if step < 5:`
            if isinstance(op, (ast.Gt, ast.GtE)):
                return self._clock(left)  # `if time.time() - last_log > 30:`
        if isinstance(test, ast.Name):
            value = self._single_value(test)
            return value is not None and self.is_interval(value)
        if isinstance(test, ast.Call) and isinstance(test.func, (ast.Name, ast.Attribute)):
            last = last_name(test.func) or ""
            if last.startswith(("should_log", "should_eval", "should_save", "is_log", "log_step")):
                return True
            helper = self.callee(test)
            if helper is not None:
                return self._returns_interval(helper)
            # a helper of another module named for an interval, given the step counter: `every_n_steps(step, 100)`
            return any(word in last.lower() for word in ("every", "interval")) and any(
                _names_counter(a) for a in (*test.args, *(k.value for k in test.keywords)))
        return False

    def _returns_interval(self, function: Function) -> bool:
        """A same-file helper whose every `return` gives an interval condition (`return state.step % freq == 0`),
        or a name first assigned one and afterwards only narrowed (`test = test and acc_step == 0`)."""
        if id(function) in self._helpers_in_progress:
            return False
        self._helpers_in_progress.add(id(function))
        try:
            returns = [n.value for n in self._own_nodes(function) if isinstance(n, ast.Return)]
            if not returns or any(r is None for r in returns):
                return False
            return all(self._interval_value(function, r) for r in returns if r is not None)
        finally:
            self._helpers_in_progress.discard(id(function))

    def _interval_value(self, function: Function, value: ast.expr) -> bool:
        if not isinstance(value, ast.Name):
            return self.is_interval(value)
        assigned = sorted((n for n in self._own_nodes(function) if isinstance(n, (ast.Assign, ast.AugAssign,
                                                                                   ast.AnnAssign))
                           and any(isinstance(t, ast.Name) and t.id == value.id
                                   for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))),
                          key=lambda n: (n.lineno, n.col_offset))
        if not assigned or not all(isinstance(n, ast.Assign) and len(n.targets) == 1 for n in assigned):
            return False
        first, *later = assigned
        narrowed = all(isinstance(n.value, ast.BoolOp) and isinstance(n.value.op, ast.And)
                       and any(isinstance(v, ast.Name) and v.id == value.id for v in n.value.values)
                       for n in later)
        return narrowed and first.value is not None and self.is_interval(first.value)

    def _clock(self, expr: ast.AST) -> bool:
        """`expr` reads a clock: a time interval between logs."""
        for node in walk_nodes(expr):
            if isinstance(node, ast.Call) and (self.qualname(node.func) or "").startswith(("time.", "datetime.")):
                return True
        return False

    def _is_skip_interval(self, test: ast.AST) -> bool:
        """A condition true on most steps, whose `else` (or what follows its `continue`) runs on some:
        `step % N != 0`, `step % N`."""
        if _is_modulo(test):
            return True
        return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotEq) \
            and (_is_modulo(test.left) or _is_modulo(test.comparators[0]))

    def per_step_statements(self, step: StepLoop) -> Iterator[ast.stmt]:
        """Statements of the step loop's body (nested blocks included, not nested defs) that run on
        every step, and those of same-file functions it calls on every step."""
        seen: set[int] = set()

        def visit(root: ast.AST) -> Iterator[ast.stmt]:
            for node in self._own_nodes(root):
                if isinstance(node, ast.stmt):
                    place = self.place(node)
                    if place is not None and place.step is step and place.every_step:
                        yield node
                if isinstance(node, ast.Call):
                    target = self.callee(node)
                    if target is not None and id(target) not in seen:
                        seen.add(id(target))
                        yield from visit(target)

        body = ast.Module(body=step.loop.body, type_ignores=[])
        yield from sorted(visit(body), key=lambda s: (s.lineno, s.col_offset))


_Call = TypeVar("_Call", Backward, OptimizerStep)


def _unique(items: list[_Call]) -> list[_Call]:
    """Items once each, in order (a helper reached from two call sites counts once)."""
    seen: set[int] = set()
    out: list[_Call] = []
    for item in items:
        if id(item.call) not in seen:
            seen.add(id(item.call))
            out.append(item)
    return out


def _names_counter(expr: ast.AST) -> bool:
    """`step`, `global_step`, `self.iteration`, `state.step`: an argument that names a step counter."""
    last = last_name(expr)
    return last is not None and any(word in last.lower() for word in ("step", "iter"))



def _is_modulo(expr: ast.AST) -> bool:
    return isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod) and not isinstance(expr.left, ast.Constant)


_COUNTER_WORDS = ("step", "iter", "idx", "index", "batch", "epoch", "it", "i", "global_step", "n_iter", "itr")


def _looks_like_counter(expr: ast.AST) -> bool:
    """`i`, `step`, `batch_idx`, `self.global_step`, `it + 1`: a step or iteration counter."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        return _looks_like_counter(expr.left)
    name = last_name(expr)
    if name is None:
        return False
    lower = name.lower()
    return lower in _COUNTER_WORDS or any(lower.endswith(w) or lower.startswith(w + "_")
                                          for w in ("step", "iter", "idx", "iteration"))


def _block_of(parent: ast.AST, child: ast.AST) -> Optional[list[ast.stmt]]:
    """The statement list of `parent` that holds `child`."""
    for name in ("body", "orelse", "finalbody"):
        block = getattr(parent, name, None)
        if isinstance(block, list) and any(s is child for s in block):
            return block
    return None


def step_facts_of(tree: ast.Module, qualname: Qualname) -> StepFacts:
    """The analysis for a bare tree (tests, tools)."""
    return StepFacts(tree, qualname)


def step_facts(ctx: "AstContext") -> StepFacts:
    """The shared analysis: `ctx.analysis(step_facts)`."""
    return StepFacts(ctx.tree, ctx.names.qualname)
