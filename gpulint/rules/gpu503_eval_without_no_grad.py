"""GPU503 eval-without-no-grad: an evaluation loop that builds autograd graphs nobody uses."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional, Union

from gpulint.analysis.ast_context import arg
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence, Premise
from gpulint.analysis.steps import StepFacts, step_facts
from gpulint.core.edits import Applicability
from gpulint.core.torch_api import (
    AUTOGRAD_BACKWARD,
    DATALOADER,
    ENABLE_GRAD,
    GRAD_OFF,
    SET_GRAD_ENABLED,
    SET_GRAD_ENABLED_MODE,
)
from gpulint.core.verification import NEUTRAL, Verification
from gpulint.project.ast_nodes import all_nodes, last_name
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.analysis.ast_context import AstContext, Detection
    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

# words that name an evaluation function
_EVAL_WORDS = ("eval", "valid", "test", "predict", "infer", "score", "metric")
# calls that make a value a plain number or cut it from the graph
_HOST = frozenset({"item", "tolist", "numpy", "detach", "argmax", "argmin"})
# names of what a function needs gradients for
_NEEDS_GRAD_CALLS = frozenset({"backward", "requires_grad_", "retain_grad", "register_hook", "zero_grad"})
Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]

EVALUATES = Premise(
    "evaluates",
    "a `for` loop over a data loader (a DataLoader, or a name ending in `loader`/`dl`) calls the model, in a "
    "function that switches that model to eval mode (`model.eval()`) or whose name says it evaluates "
    "(`evaluate`, `validate`, `test`, `predict`, `infer`), or at module level after `model.eval()`.")
NO_GRAD_NEEDED = Premise(
    "no-grad-needed",
    "nothing in the function (or the functions of the file it calls) needs gradients: no backward(), "
    "`torch.autograd.grad`, `requires_grad`, `.grad`, `enable_grad`, optimizer step, hooks (saliency maps, "
    "adversarial examples, test-time training); no model output leaves the function with its graph "
    "(returned, yielded or stored on an object without `.item()`/`.detach()`).")
GRAD_ON = Premise(
    "grad-on",
    "gradients are on where the loop runs: it is not inside `no_grad`/`inference_mode`/`set_grad_enabled(False)` "
    "(a `with` block, a decorator of its function), the file never turns grad off globally, and every call of "
    "its function in the file runs with grad on. Undecided when nothing in the file calls the function (a "
    "caller elsewhere may turn grad off), and when the file freezes parameters (`requires_grad_(False)`, "
    "`p.requires_grad = False`: a frozen model builds no graph).")


class EvalWithoutNoGrad(Rule):
    code = "GPU503"
    name = "eval-without-no-grad"
    summary = "An evaluation loop runs the model with autograd on (no torch.no_grad())"
    impact = "no autograd graph: less memory and time per batch (Performance Tuning Guide)"
    needles = ("eval", "valid", "test", "predict", "infer")
    # a loop calls a module only if something is called on it that only modules have
    ast_needles = ((".eval(", ".train(", ".parameters(", ".named_parameters("),)
    target = Target.ANY
    in_tests = False
    preview = True
    fix = Applicability.SAFE
    # the wrapped loop evaluates: the training steps verify times and compares are the same code
    verification = Verification(NEUTRAL, (), "the training losses are unchanged: the wrapped loop only evaluates")
    docs = RuleDocs(
        what="""
        Checks for evaluation loops that run with gradients on: a `for` loop over a data
        loader that calls the model, in a function that calls `model.eval()` or is named
        for evaluation, with no backward or other use of gradients, not inside
        `torch.no_grad()`, `torch.inference_mode()` or `torch.set_grad_enabled(False)`.
        """,
        why="""
        `model.eval()` changes how dropout and batch norm behave; it does not turn autograd
        off. With grad on, every forward pass records the graph and keeps the activations
        that backward would need, until the outputs are freed. The Performance Tuning Guide
        recommends `torch.no_grad()` for inference and validation because it "accelerates
        execution and reduces the amount of required memory"; freed activation memory also
        lets evaluation use larger batches.
        """,
        example="""
        import torch

        def evaluate(model, loader):
            model.eval()
            correct = 0
            for x, y in loader:
                correct += (model(x.cuda()).argmax(1) == y.cuda()).sum().item()
            return correct

        print(evaluate(model, val_loader))
        """,
        use_instead="""
        import torch

        def evaluate(model, loader):
            model.eval()
            correct = 0
            with torch.no_grad():
                for x, y in loader:
                    correct += (model(x.cuda()).argmax(1) == y.cuda()).sum().item()
            return correct

        print(evaluate(model, val_loader))
        """,
        fix_safety="""
        Safe: the fix wraps the loop in `with torch.no_grad():` (importing torch in the
        file's own spelling if needed). The loop's results are the same numbers; only tensors
        computed inside no longer carry a graph, and the rule reports only when none of them
        leaves the function with one and nothing in it needs gradients.
        `torch.inference_mode()` is faster still but not offered: its tensors cannot be saved
        for backward or changed in place later. Not reported in generators (grad would stay
        off while the caller runs), in functions nothing in the file calls (a caller elsewhere
        may already turn grad off: reported only with `strictness = "pedantic"`), or in tests.
        """,
        premises=(EVALUATES, NO_GRAD_NEEDED, GRAD_ON),
        fix_cases=(
            FixCase("an evaluation loop over a loader wrapped in `with torch.no_grad():` (preview; nothing in it "
                    "needs gradients)",
                    Applicability.SAFE, "basic.py"),
        ),
    )

    def detect(self, ctx: "AstContext") -> None:
        facts: StepFacts = ctx.analysis(step_facts)
        checker = _EvalLoops(facts, ctx)
        if checker.global_grad_off():
            return
        reported: set[int] = set()  # loops reported: a loop inside one is covered by its fix
        for node in ctx.nodes(ast.For):
            assert isinstance(node, ast.For)
            if any(id(a) in reported for a in facts.ancestors(node)):
                continue
            evidence = checker.judge(node)
            if evidence is None:
                continue
            decision = self.decide(evidence)
            if not decision.report:
                continue
            reported.add(id(node))
            ctx.report(self, node, "evaluation loop runs the model with autograd on: wrap it in "
                       "`with torch.no_grad():`", fix=Applicability.SAFE,
                       fix_message="wrap the loop in `with torch.no_grad():`", decision=decision)

    def build_fix(self, detection: "Detection", fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.core.pending import PendingFix, Replace

        if not isinstance(node, cst.For):
            return None
        reference = fctx.imports.reference("torch", "no_grad")
        wrapped = cst.With(
            items=[cst.WithItem(item=cst.parse_expression(f"{reference.expr}()"))],
            body=cst.IndentedBlock(body=[node.with_changes(leading_lines=())]),
            leading_lines=node.leading_lines)  # the span replaced holds the comments above the loop: keep them
        return PendingFix.safe("wrap the loop in `with torch.no_grad():`", Replace(node, wrapped), reference.edit)


class _EvalLoops:
    """The questions GPU503 asks of a `for` loop."""

    def __init__(self, facts: StepFacts, ctx: "AstContext") -> None:
        self.facts = facts
        self.ctx = ctx
        self.tree = ctx.tree
        self._modules: Optional[set[str]] = None

    def global_grad_off(self) -> bool:
        """`torch.set_grad_enabled(False)` as a statement: grad is off for what follows."""
        for node in all_nodes(self.tree):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and self._grad_off(node.value):
                return True
        return False

    def judge(self, loop: ast.For) -> Optional[dict[Premise, Evidence]]:
        """Evidence for the premises, or None when the loop is not an evaluation loop at all."""
        function = next((a for a in self.facts.ancestors(loop) if isinstance(a, (ast.FunctionDef,
                                                                                  ast.AsyncFunctionDef))), None)
        for ancestor in self.facts.ancestors(loop):
            if ancestor is function:
                break
            if isinstance(ancestor, (ast.Lambda, ast.ClassDef)):
                return None
        scope: ast.AST = function if function is not None else self.tree
        if not self._over_loader(loop.iter):
            return None
        models = self._models_called(loop)
        if not models:
            return None
        evaluated = self._eval_calls(scope, loop)
        named = function is not None and any(w in function.name.lower() for w in _EVAL_WORDS) \
            and not function.name.lower().startswith(("train", "fit"))
        if not (models & evaluated) and not (named and function is not None):
            return None
        if self.facts.place(loop) is not None or self.facts.step_loop(loop) is not None:
            return None
        return {
            EVALUATES: SHOWN,
            NO_GRAD_NEEDED: self._no_grad_needed(scope, function, models),
            GRAD_ON: self._grad_on(loop, function),
        }

    # -- evaluation --------------------------------------------------------------------------------
    def _over_loader(self, iterable: ast.expr) -> bool:
        """`loader`, `val_loader`, `self.test_dl`, `enumerate(tqdm(loader))`, `DataLoader(...)`."""
        while isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) \
                and iterable.func.id in ("enumerate", "tqdm", "iter") and iterable.args:
            iterable = iterable.args[0]
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, (ast.Name, ast.Attribute)) \
                and (self.facts.qualname(iterable.func) or "").endswith("tqdm") and iterable.args:
            iterable = iterable.args[0]
        if isinstance(iterable, ast.Call):
            return self.facts.qualname(iterable.func) in DATALOADER
        name = last_name(iterable)
        if name is None:
            return False
        lower = name.lower()
        return lower.endswith(("loader", "_dl", "dataloader")) or lower in ("dl", "loader")

    def _models_called(self, loop: ast.For) -> set[str]:
        """Names of modules the loop calls: `model(x)`, `self.net(x)`, `model.forward(x)`; a module is a name
        that `.eval()`, `.train()`, `.parameters()` or `.to()`/`.cuda()` is called on somewhere in the file."""
        modules = self._module_names()
        called: set[str] = set()
        for node in walk_nodes(loop):
            if isinstance(node, ast.Call) and not self._under_grad_off(node, stop=loop):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr == "forward":
                    func = func.value  # (`generate()` of Hugging Face models runs under no_grad itself)
                name = last_name(func)
                if name is not None and name in modules:
                    called.add(name)
        return called

    def _module_names(self) -> set[str]:
        if self._modules is None:
            self._modules = self._find_module_names()
        return self._modules

    def _find_module_names(self) -> set[str]:
        names: set[str] = set()
        for node in all_nodes(self.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("eval", "parameters", "named_parameters", "train") and not node.args:
                name = last_name(node.func.value)
                if name is not None and name != "self":
                    names.add(name)
        return names

    def _eval_calls(self, scope: ast.AST, loop: ast.For) -> set[str]:
        """Modules switched to eval mode in `scope` before the loop."""
        found: set[str] = set()
        for node in walk_nodes(scope):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "eval" \
                    and not node.args and not node.keywords and (node.lineno, node.col_offset) < (loop.lineno,
                                                                                              loop.col_offset):
                name = last_name(node.func.value)
                if name is not None:
                    found.add(name)
        return found

    # -- gradients needed ----------------------------------------------------------------------------
    def _no_grad_needed(self, scope: ast.AST, function: Optional[Function], models: set[str]) -> Evidence:
        roots: list[ast.AST] = [scope]
        seen: set[int] = {id(scope)}
        while roots:
            root = roots.pop()
            for node in walk_nodes(root):
                if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
                    return REFUTED
                if isinstance(node, ast.Call):
                    target = self.facts.qualname(node.func) or ""
                    if target.startswith(("torch.autograd.grad", "torch.autograd.functional", "torch.func")) \
                            or target in ENABLE_GRAD or target == AUTOGRAD_BACKWARD:
                        return REFUTED
                    if isinstance(node.func, ast.Attribute) and node.func.attr in _NEEDS_GRAD_CALLS:
                        return REFUTED
                    if self.facts.optimizer_step_of(node) is not None:
                        return REFUTED
                    if any(k.arg == "requires_grad" for k in node.keywords):
                        return REFUTED
                    callee = self.facts.callee(node)
                    if callee is not None and id(callee) not in seen:
                        seen.add(id(callee))
                        roots.append(callee)
                if isinstance(node, ast.Attribute) and node.attr in ("grad", "requires_grad", "grad_fn"):
                    return REFUTED
        if function is not None and self._graph_escapes(function, models):
            return REFUTED
        return SHOWN

    def _graph_escapes(self, function: Function, models: set[str]) -> bool:
        """A model output (with its graph) is returned or stored on an object."""
        graph: set[str] = set()
        changed = True
        while changed:
            changed = False
            for node in walk_nodes(function):
                value: Optional[ast.expr] = None
                targets: list[ast.expr] = []
                if isinstance(node, ast.Assign):
                    value, targets = node.value, node.targets
                elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                    value, targets = node.value, [node.target]
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and node.func.attr in ("append", "extend", "insert", "add", "update") and node.args:
                    value, targets = node.args[-1], [node.func.value]
                if value is None or not self._graph_valued(value, models, graph):
                    continue
                for target in targets:
                    if isinstance(target, (ast.Attribute, ast.Subscript)) and not isinstance(target, ast.Name):
                        base = target.value
                        while isinstance(base, (ast.Attribute, ast.Subscript)):
                            base = base.value
                        if isinstance(base, ast.Name) and base.id == "self":
                            return True  # stored on the object: it outlives the call
                        if isinstance(base, ast.Name) and base.id not in graph:
                            graph.add(base.id)
                            changed = True
                    for name in walk_nodes(target):
                        if isinstance(name, ast.Name) and name.id not in graph:
                            graph.add(name.id)
                            changed = True
        for node in walk_nodes(function):
            if isinstance(node, ast.Return) and node.value is not None \
                    and self._graph_valued(node.value, models, graph):
                return True
        return False

    def _graph_valued(self, expr: ast.expr, models: set[str], graph: set[str]) -> bool:
        """`expr` may hold a tensor with an autograd graph: a model output or a value computed from one,
        not reduced to a number (`.item()`), detached, or compared."""
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute) and func.attr in _HOST:
                return False
            if isinstance(func, ast.Name) and func.id in ("float", "int", "len", "bool", "str", "round"):
                return False
            name = last_name(func.value if isinstance(func, ast.Attribute) and func.attr in ("forward", "generate")
                         else func)
            if name in models:
                return True
            parts: list[ast.expr] = list(expr.args) + [k.value for k in expr.keywords]
            if isinstance(func, ast.Attribute):
                parts.append(func.value)
            return any(self._graph_valued(p, models, graph) for p in parts)
        if isinstance(expr, ast.Compare):
            return False
        if isinstance(expr, ast.Name):
            return expr.id in graph
        if isinstance(expr, ast.Constant):
            return False
        return any(self._graph_valued(child, models, graph) for child in ast.iter_child_nodes(expr)
                   if isinstance(child, ast.expr))

    # -- grad mode -----------------------------------------------------------------------------------
    def _grad_on(self, loop: ast.For, function: Optional[Function]) -> Evidence:
        if self._under_grad_off(loop):
            return REFUTED
        if self._freezes_parameters():
            return UNDECIDED  # a frozen model builds no graph: whether this one is, the file does not say
        if function is None:
            return SHOWN
        return self._callers_grad_on(function, set())

    def _freezes_parameters(self) -> bool:
        """`requires_grad_(False)` or `p.requires_grad = False` somewhere in the file."""
        for node in all_nodes(self.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "requires_grad_" and node.args \
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value is False:
                return True
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is False \
                    and any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in node.targets):
                return True
        return False

    def _callers_grad_on(self, function: ast.AST, seen: set[int]) -> Evidence:
        """Every call of `function` in the file runs with grad on; undecided when none is seen."""
        if id(function) in seen:
            return UNDECIDED
        seen = seen | {id(function)}
        sites = self.facts.call_sites(function)
        if not sites:
            return UNDECIDED
        for call in sites:
            if self._under_grad_off(call):
                return REFUTED
            caller = next((a for a in self.facts.ancestors(call) if isinstance(a, (ast.FunctionDef,
                                                                                    ast.AsyncFunctionDef))), None)
            if caller is not None and self._callers_grad_on(caller, seen) is REFUTED:
                return REFUTED
        return SHOWN

    def _under_grad_off(self, node: ast.AST, stop: Optional[ast.AST] = None) -> bool:
        """Inside a grad-off `with` block or a function decorated with one (up to the module, or `stop`)."""
        for ancestor in self.facts.ancestors(node):
            if ancestor is stop:
                return False
            if isinstance(ancestor, (ast.With, ast.AsyncWith)):
                if any(self._grad_off(item.context_expr) or self._may_be_grad_off(item.context_expr)
                       for item in ancestor.items):
                    return True
            if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(self._grad_off(d) or self._may_be_grad_off(d) for d in ancestor.decorator_list):
                    return True
        return False

    def _grad_off(self, expr: ast.expr) -> bool:
        target = self.facts.qualname(expr.func if isinstance(expr, ast.Call) else expr)
        if target in GRAD_OFF:
            return True
        if target in SET_GRAD_ENABLED and isinstance(expr, ast.Call):
            flag = arg(expr, *SET_GRAD_ENABLED_MODE, self.ctx.kwargs(expr))
            return not (isinstance(flag, ast.Constant) and flag.value is True)  # False, or a run-time choice
        return False

    def _may_be_grad_off(self, expr: ast.expr) -> bool:
        """A context or decorator gpulint cannot resolve whose spelling says it may turn grad off
        (`with ctx:` where `ctx = torch.no_grad() if ... else nullcontext()`, a project's `@no_grad`)."""
        text = ast.unparse(expr)
        if isinstance(expr, ast.Name):
            value = self.facts.value_of(expr)
            if value is not None:
                text += " " + ast.unparse(value)
        return any(word in text for word in ("no_grad", "inference_mode", "grad_enabled", "inference"))
