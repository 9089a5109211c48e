"""Whether a training step can run at all: code nobody calls is not a training loop.

A script that keeps an old `def train_v1(...)` beside the one its `__main__` block calls, or a file
of helpers no script imports, holds steps that never run; advice about their speed pays off
nowhere. The project facts record, for each file that trains, the top-level functions nothing in
the file reaches (project/facts.py `unreached_functions`), and the project view keeps them only
for scripts no other project file imports, outside packages (`ProjectView.unreached`). Private
methods nothing calls are dead the same way: an evaluation class that copies `_select_optimizer`
from its training siblings and never calls it (project/methods.py, `ProjectView.uncalled_methods`).
This module answers the question for one node of a rule's `ast` tree.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable, Optional, Union

from gpulint.analysis.evidence import REFUTED, SHOWN, Evidence, Premise
from gpulint.project.env_loops import called_from_env, enclosing_key, in_env_loop, may_call_env, reached_within

if TYPE_CHECKING:
    from gpulint.analysis.ast_context import AstContext

RUNS = Premise(
    "runs",
    "the code can run: refuted when it lies in a top-level function nothing in its script reaches (no call "
    "from module-level code or from a function that is reached, no reference, decorator or name string, no "
    "dynamic dispatch such as `fire.Fire()` or `globals()[name]`), in a script no project file imports and "
    "outside a package, or in a module whose every import names other things (`from previous_chapters import "
    "GPTModel`, never the module itself or `*`): a training function kept beside the one `__main__` calls, or "
    "a helper module's training loop its importers do not use, never runs. Refuted too in a private method (one "
    "leading underscore, not a dunder or a `_hook_`; undecorated, static or class method) of a module-level class "
    "that nothing calls: no attribute of that name on any receiver, no bare name and no string equal to it or "
    "beginning it (`getattr(self, \"_select_\" + kind)`; in its module also none equal to it without the underscore) "
    "anywhere in its module, in the project modules that import it (transitively: a subclass there) or in those it "
    "imports (a base class calling its hooks); no class of its module derives from its class; no computed "
    "`getattr`, `dir()` or dynamic dispatch in its module; and the class's bases lead to `object` (or ABC) through "
    "the project's own classes, since a library base (`nn.Module`, a trainer) may call a hook by name. Read alone, "
    "without the project, only classes of no base but the module's own count (blind10: Time-Series-Library's "
    "zero-shot experiment class keeps a `_select_optimizer` it never calls: it only tests).")


def runs(ctx: AstContext, node: ast.AST) -> Evidence:
    """RUNS for a node of the context's tree: refuted inside code the project view says never runs."""
    return REFUTED if never_runs_ast(ctx.tree, node, ctx.parent, ctx.project.unreached) else SHOWN


def never_runs_ast(tree: ast.Module, node: ast.AST, parent: Callable[[ast.AST], Optional[ast.AST]],
                   unreached: frozenset[str]) -> Optional[str]:
    """The name of the unreached top-level function (or "Class._name" private method: ProjectView.unreached)
    `node` lies in (`parent` is the context's parent map); None when it lies in module-level code, or in a
    function or method something reaches."""
    if not unreached:
        return None
    outermost: Optional[ast.AST] = None
    below: Optional[ast.AST] = None  # the definition just inside `outermost` on the way to `node`
    current = parent(node)
    while current is not None:
        if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            outermost, below = current, outermost
        current = parent(current)
    if outermost is None or not any(outermost is s for s in tree.body):
        return None
    if isinstance(outermost, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return outermost.name if outermost.name in unreached else None
    if isinstance(outermost, ast.ClassDef) and isinstance(below, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            and any(below is s for s in outermost.body):
        key = f"{outermost.name}.{below.name}"
        return key if key in unreached else None
    return None


SELF_TEST = Premise(
    "not-a-self-test",
    "the code is the training, not a module's self-test: refuted inside the `if __name__ == \"__main__\":` "
    "block of a module that other project files import (a dataset module that iterates its own loader to "
    "count batches, a model file's smoke test): that block runs only when someone runs the module by hand.")


def in_main_block(tree: ast.Module, node: ast.AST, parent: Callable[[ast.AST], Optional[ast.AST]]) -> bool:
    """`node` lies in a module-level `if __name__ == "__main__":` block (its body, not its `else`)."""
    child, current = node, parent(node)
    while current is not None and current is not tree:
        child, current = current, parent(current)
    if not (isinstance(child, ast.If) and any(child is s for s in tree.body) and _is_main_test(child.test)):
        return False
    inner: Optional[ast.AST] = node
    while inner is not None and parent(inner) is not child:
        inner = parent(inner)
    return inner is not None and any(inner is s for s in child.body)


def _is_main_test(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


def not_self_test(tree: ast.Module, node: ast.AST, parent: Callable[[ast.AST], Optional[ast.AST]],
                  imported: bool) -> Evidence:
    """The SELF_TEST premise for a node of an `ast` tree (`imported`: ProjectView.imported)."""
    return REFUTED if imported and in_main_block(tree, node, parent) else SHOWN


LOADS_BATCHES = Premise(
    "loads-batches",
    "the loader's batches are drawn: refuted when the DataLoader is bound to a name whose every use in its "
    "scope is `len(name)` (a loader built only to count batches, to size a learning-rate schedule); a loader "
    "iterated, returned, stored, passed on or used through another name is shown.")


def draws_batches(ctx: AstContext, call: ast.Call) -> Evidence:
    """LOADS_BATCHES for a DataLoader(...) call: only `name = DataLoader(...)` in a function (or a script's
    `__main__` block), followed by nothing but `len(name)` there, is refuted; any other shape (a tuple target,
    an attribute, a module-level loader other files may import, a nested function reading the name) draws
    batches."""
    named = _named_loader(ctx, call)
    if named is None:
        return SHOWN
    statement, scope, uses = named
    if scope is ctx.tree and not in_main_block(ctx.tree, statement, ctx.parent):
        return SHOWN  # a module-level name other files may import (one bound under `__main__` never is)
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        return SHOWN
    if not uses or any(ctx.code_scope(n) is not scope for n in uses):
        return SHOWN
    return REFUTED if all(_counted(ctx, n) for n in uses) else SHOWN


def iterated_here(ctx: AstContext, call: ast.Call) -> bool:
    """`name = DataLoader(...)` in a function, whose every use there is `for ... in name`, `len(name)` or an
    attribute read (`name.batch_size`), at least one of them an iteration, and none in a nested scope: its
    batches are consumed where it is built."""
    return _loops_here(ctx, call, wrapped=False) is not None


Loop = Union[ast.For, ast.AsyncFor]


def _loops_here(ctx: AstContext, call: ast.Call, wrapped: bool) -> Optional[list[Loop]]:
    """`iterated_here`'s loops over the loader, or None when it is not so used; with `wrapped`, a loop over
    `enumerate(name)` or `tqdm(name)` counts as one over the name."""
    named = _named_loader(ctx, call)
    if named is None or not isinstance(named[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    statement, scope, uses = named
    if any(ctx.code_scope(n) is not scope for n in uses):
        return None
    if wrapped:
        # the names that read the binding before the loader's (its dataset: `ds = Ds(); ds = DataLoader(ds)`),
        # and a rebinding to a loop wrapper of itself (`it = it if quiet else tqdm(it, total=len(it))`)
        uses = [n for n in uses if not _earlier_binding(ctx, statement, scope, n)
                and not _rewrapped(ctx, n)]
    loops: dict[ast.Name, Loop] = {}
    for use in uses:
        above = ctx.parent(use)
        iterated: ast.AST = use
        if wrapped and isinstance(above, ast.Call) and above.args and above.args[0] is use \
                and _loop_wrapper(above.func):
            iterated, above = above, ctx.parent(above)
        if isinstance(use.ctx, ast.Load) and isinstance(above, (ast.For, ast.AsyncFor)) and above.iter is iterated:
            loops[use] = above
    if loops and all(n in loops or _counted(ctx, n) or _setting_read(ctx, n) for n in uses):
        return list(loops.values())
    return None


def _earlier_binding(ctx: AstContext, statement: ast.Assign, scope: ast.AST, use: ast.Name) -> bool:
    """`use` is the loader's name bound to something else before it: read in the loader's own call, or written
    or read before the statement in straight-line code (no loop around the statement in its scope)."""
    if any(n is use for n in ast.walk(statement.value)):
        return True
    if (use.lineno, use.col_offset) >= (statement.lineno, statement.col_offset):
        return False
    return not any(isinstance(a, (ast.For, ast.AsyncFor, ast.While)) for a in _ancestors_within(ctx, statement, scope))


def _ancestors_within(ctx: AstContext, node: ast.AST, scope: ast.AST) -> list[ast.AST]:
    found: list[ast.AST] = []
    current = ctx.parent(node)
    while current is not None and current is not scope:
        found.append(current)
        current = ctx.parent(current)
    return found


def _rewrapped(ctx: AstContext, use: ast.Name) -> bool:
    """`use` lies in `name = <value>` whose every branch is the name itself or a loop wrapper of it
    (`name if quiet else tqdm(name, total=len(name))`): the name stays the loader, iterated the same way."""
    statement = ctx.statement(use)
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name) and statement.targets[0].id == use.id):
        return False
    return _passes_through(statement.value, use.id)


def _passes_through(value: ast.expr, name: str) -> bool:
    if isinstance(value, ast.IfExp):
        return _passes_through(value.body, name) and _passes_through(value.orelse, name)
    if isinstance(value, ast.Name):
        return value.id == name
    if not (isinstance(value, ast.Call) and _loop_wrapper(value.func) and value.args
            and isinstance(value.args[0], ast.Name) and value.args[0].id == name):
        return False
    others = [*value.args[1:], *(k.value for k in value.keywords)]
    # beside the name, only `len(name)` or values that do not name it (`total=len(name)`, `desc="eval"`)
    return all(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len"
               or not any(isinstance(m, ast.Name) and m.id == name for m in ast.walk(n)) for n in others)


def _loop_wrapper(func: ast.expr) -> bool:
    """`enumerate(...)`, `tqdm(...)`, `tqdm.tqdm(...)`: a loop over the result is one over their argument."""
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return name in ("enumerate", "tqdm")


def evaluates_in_function(ctx: AstContext, call: ast.Call) -> bool:
    """FEEDS_TRAINING's evaluation function: in a file that trains nothing (`may_train` false), even one other
    files import, `name = DataLoader(...)` in a function that only iterates it there (`_loops_here`, also through
    `enumerate`/`tqdm`), whose every loop hands its batches to calls only with autograd off (`_grad_off_loop`)."""
    if ctx.project.may_train:
        return False
    loops = _loops_here(ctx, call, wrapped=True)
    return loops is not None and all(_grad_off_loop(ctx, loop) for loop in loops)


def _grad_off_loop(ctx: AstContext, loop: Loop) -> bool:
    """The loop runs with autograd off (its function decorated `@torch.no_grad()`, or the loop in such a `with`
    block), or its body turns it off in a block and, outside such blocks, passes the batch (the loop's names and
    names bound from them there) to no call: only its own methods (`batch.to(device)`) and `len` take it."""
    from gpulint.analysis.nn_modules import grad_off_decorated, under_grad_off

    function = ctx.enclosing_function(loop)
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if grad_off_decorated(ctx, function) or under_grad_off(ctx, function, loop):
        return True
    batch = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    turned_off = False
    pending: list[ast.AST] = list(loop.body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(_turns_grad_off(ctx, item.context_expr)
                                                                for item in node.items):
            turned_off = True
            continue  # the calls in the block run without autograd
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return False  # a nested scope may take the batch anywhere
        if isinstance(node, ast.Assign) and any(isinstance(n, ast.Name) and n.id in batch
                                                for n in ast.walk(node.value)):
            batch |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if isinstance(node, ast.Call) and _takes_batch(node, batch):
            return False
        pending.extend(ast.iter_child_nodes(node))
    return turned_off


def _turns_grad_off(ctx: AstContext, expr: ast.expr) -> bool:
    """`torch.no_grad()`, `torch.inference_mode()`, `torch.set_grad_enabled(False)`."""
    from gpulint.core.torch_api import GRAD_OFF, SET_GRAD_ENABLED

    if not isinstance(expr, ast.Call):
        return False
    qualified = ctx.qualname(expr.func)
    return qualified in GRAD_OFF or (qualified in SET_GRAD_ENABLED and len(expr.args) == 1 and not expr.keywords
                                     and isinstance(expr.args[0], ast.Constant) and expr.args[0].value is False)


def _takes_batch(call: ast.Call, batch: set[str]) -> bool:
    """A call given a batch name as an argument (a method of the batch itself, or `len`, is not)."""
    if isinstance(call.func, ast.Name) and call.func.id == "len":
        return False
    given = [*call.args, *(k.value for k in call.keywords)]
    return any(isinstance(n, ast.Name) and n.id in batch for arg in given for n in ast.walk(arg))


def _named_loader(ctx: AstContext, call: ast.Call) -> Optional[tuple[ast.Assign, ast.AST, list[ast.Name]]]:
    """For `name = DataLoader(...)`: the statement, the code scope it binds the name in (ctx.code_scope), and the
    other `Name` nodes of that spelling inside that scope, nested scopes included; None for any other shape."""
    statement = ctx.parent(call)
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)):
        return None
    target = statement.targets[0]
    scope = ctx.code_scope(statement)
    return statement, scope, [n for n in ctx.named_within(target.id, scope) if n is not target]


def _setting_read(ctx: AstContext, use: ast.Name) -> bool:
    """`loader.batch_size`: an attribute read, not called (no batch comes out of it)."""
    parent = ctx.parent(use)
    if not (isinstance(use.ctx, ast.Load) and isinstance(parent, ast.Attribute)):
        return False
    above = ctx.parent(parent)
    return not (isinstance(above, ast.Call) and above.func is parent)


def _counted(ctx: AstContext, use: ast.Name) -> bool:
    if not isinstance(use.ctx, ast.Load):
        return False  # rebound: a later binding is another loader, judged on its own
    parent = ctx.parent(use)
    return isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "len" \
        and len(parent.args) == 1 and parent.args[0] is use and not parent.keywords


FEEDS_TRAINING = Premise(
    "feeds-training",
    "the loader is on a path that may train: refuted for a loader built at the top level of a script or "
    "notebook that no project file imports, that trains nothing (no backward, optimizer, trainer or training "
    "call anywhere in it) and that turns autograd off (`torch.no_grad()`, `inference_mode`): an evaluation or "
    "inference pass (embeddings of a test set), not the training loop whose input pipeline the advice is for. "
    "In such a script, a loader a function binds to a name it only iterates there (`for x in loader`, and "
    "`len(loader)`, `loader.batch_size`) is refuted too (blind17: FragmentVC's preprocess.py extracts features "
    "under no_grad); one it returns, stores or hands on may reach code that trains: shown. In any file that "
    "trains nothing, one other files import included, a loader a function binds to a name it only iterates there "
    "(also through `enumerate(loader)`/`tqdm(loader)`, or the name rebound to a progress bar over itself, "
    "`loader = loader if quiet else tqdm(loader)`, its dataset bound to the same name before) is refuted when "
    "every loop over it hands its batches to "
    "calls only with autograd off: the function decorated `@torch.no_grad()`, the loop in a `no_grad()`/"
    "`inference_mode()` block, or such a block in the loop's body, outside which the batch and the names bound "
    "from it go to no call but their own methods (`batch.to(device)`) and `len` (blind21: U-ViT's "
    "tools/fid_score.py computes Inception features for FID, which the training scripts call at a save interval: "
    "an evaluation pass, not the training input pipeline; blind25: RL4LMs' preference_reward.py scores generated "
    "text with a frozen reward model under no_grad, and Comprehensive-Transformer-TTS's synthesize.py).")


def feeds_training(ctx: "AstContext", call: ast.Call) -> Evidence:
    """FEEDS_TRAINING for a DataLoader(...) call (GPU101, GPU102): refuted for a loader of an evaluation script
    built at its top level or only iterated where a function binds it, and for one a function of a file that
    trains nothing only iterates with autograd off (`evaluates_in_function`)."""
    if evaluates_only_here(ctx) and (ctx.enclosing_function(call) is None or iterated_here(ctx, call)):
        return REFUTED
    return REFUTED if evaluates_in_function(ctx, call) else SHOWN


def trains_nothing_here(ctx: "AstContext") -> bool:
    """A script or notebook no project file imports, that trains nothing: evaluation, inference or a demo."""
    project = ctx.project
    never_imported = project.script or (ctx.path.suffix == ".ipynb" and project.scanned and not project.imported)
    return never_imported and not project.may_train


def evaluates_only_here(ctx: "AstContext") -> bool:
    """`trains_nothing_here`, with evidence of evaluation: the file turns autograd off."""
    return trains_nothing_here(ctx) and ctx.project.own.grad_off


OFF_ENVIRONMENT = Premise(
    "off-environment",
    "the step is paced by the GPU, not by an environment: refuted where it runs inside a loop that calls an "
    "environment itself (`env.step(action)` or `env.reset()` on a receiver named like one, `env`, `eval_env`, "
    "`self.env`, `train_envs`, or bound to `gym.make(...)`), at any depth of the loop's body, or in a function or "
    "method such a loop calls: of the file, followed through the file's own calls, or of a project module that "
    "imports it (`policy.train(replay_buffer)` beside `env.step(action)` in main.py, for a `policy = "
    "DQN.DQN(...)` of the same function, one import deep; blind12: sfujim/BCQ's DQN); a method called on a "
    "receiver of unknown class (`agent.update(batch)`, an agent handed in, or an attribute, `self.agent.update(...)`) "
    "may be any class's of that name, and in a file that builds its objects from configuration "
    "(`hydra.utils.instantiate(cfg)`, whose class a YAML file names) any project module's, imported or not "
    "(blind13: facebookresearch/drqv2's Workspace.train); the methods so reached are followed through their own "
    "module's calls (`update` running `self.update_critic(...)`). One "
    "environment transition per iteration, simulated on the host, decides the loop's pace. A loop that reaches an "
    "environment only through a function it calls (an offline trainer evaluating its policy every few thousand "
    "updates) is not paced by it: shown.")


def waits_on_environment(ctx: AstContext, node: ast.AST) -> bool:
    """`node` (a training step's node or call) runs in a loop that calls an environment: one of its own
    function's loops does, or its function or method is one such a loop calls, in this file or in a module
    importing it (ProjectView.env_callers; project/env_loops.py recognises the calls)."""
    key = enclosing_key(ctx.tree, node, ctx.parent)
    if key is not None and ctx.project.env_callers and called_from_env(key, ctx.analysis(_env_reached)):
        return True
    return ctx.analysis(_may_call_env) and in_env_loop(ctx.tree, node, ctx.parent, ctx.names.qualified,
                                                       ctx.analysis(_env_loops_found))


def _may_call_env(ctx: AstContext) -> bool:
    """Some call of the file may be an environment's (`may_call_env`): without one no loop of it calls one."""
    return any(may_call_env(call) for call in ctx.nodes(ast.Call))  # type: ignore[arg-type]


def _env_loops_found(ctx: AstContext) -> dict[ast.AST, list[ast.AST]]:
    """The file's scopes -> their loops that call an environment, filled by `in_env_loop` as scopes are asked
    about (GPU001 and GPU201 ask about every step of the same training function)."""
    return {}


def _env_reached(ctx: AstContext) -> frozenset[str]:
    """ProjectView.env_callers closed over the file's own calls (project/env_loops.py `reached_within`)."""
    imported: set[str] = set()
    for node in ctx.nodes(ast.Import):
        imported.update((a.asname or a.name).partition(".")[0] for a in node.names)  # type: ignore[attr-defined]
    for node in ctx.nodes(ast.ImportFrom):
        imported.update(a.asname or a.name for a in node.names)  # type: ignore[attr-defined]
    return reached_within(ctx.tree, ctx.project.env_callers, frozenset(imported))


def off_environment(ctx: AstContext, node: ast.AST) -> Evidence:
    """OFF_ENVIRONMENT for a node of the context's tree."""
    return REFUTED if waits_on_environment(ctx, node) else SHOWN
