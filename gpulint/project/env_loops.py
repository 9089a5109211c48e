"""Loops that wait on an environment: a reinforcement-learning agent's training steps are paced by its simulator.

A loop that calls `env.step(action)` (or `env.reset()`) runs one environment transition per iteration: the
simulator, often a CPU process, decides its pace, and a train step the loop calls between transitions (a DQN
update every fourth frame on a batch of 32) is a small share of it. Advice that speeds up the GPU's share
(autocast, TF32) pays off nowhere there (blind12: sfujim/BCQ's `DQN.train`, called only from main.py's
`interact_with_environment`, one `env.step` per frame).

How an environment is recognised, from CPython's `ast` alone (project/facts.py's layer):

- the receiver of `.step(<action>)` (at least one argument: an optimizer's or a scheduler's `step()` takes
  none that matters here, and is never named like an environment) or `.reset(...)` is named like one: a name or
  attribute whose snake-case words hold `env` or `envs` (`env`, `eval_env`, `self.env`, `train_envs`), or a
  name the same scope binds to `gym.make(...)`/`gymnasium.make(...)` (`make_vec` too);
- the loop calls it itself, at any depth of its body (an inner `while not done:` counts), but not through a
  function it calls: an offline trainer that evaluates its policy in a fresh environment every 5,000 updates
  (BCQ's `train_BCQ` calling `eval_policy`) is not paced by it.

The file's facts (`FileFacts.env_calls`) keep what such loops call: the file's own functions and methods they
reach, transitively through the file ("f", "Class.method"), and the calls of other modules' code as the file
spells them ("trainer.train_step", and "DQN.DQN#train" for `policy.train(...)` on a `policy = DQN.DQN(...)`
of the same scope; "#update" for `agent.update(...)` or `self.agent.update(...)` on an agent of unknown class,
handed in or held by an attribute, which may be the method of any class of the file or of the modules it
imports; and the DYNAMIC marker when the file builds objects from configuration, `hydra.utils.instantiate(cfg)`,
so that its "#update" reaches every project module, imported or not: blind13's drqv2). project/view.py
resolves the spelled ones into the modules they name (`ProjectView.env_callers`), one import deep;
`reached_within` follows those through the callee file's own calls (`Agent.update` running
`self.update_critic(...)`); `called_from_env` matches a function.
"""

from __future__ import annotations

import ast
import re
from typing import Callable, Iterator, Optional

from gpulint.project.ast_nodes import CODE_SCOPES, code_children, fast_walk, last_name
from gpulint.project.loader_flow import dotted

ENV_METHODS = frozenset({"step", "reset"})
# constructors of environments, as the qualified names a call may stand for
ENV_MAKERS = frozenset({"gym.make", "gymnasium.make", "gym.vector.make", "gymnasium.make_vec", "envpool.make"})
# "DQN.DQN#train": the method `train` called on an instance of the class spelled `DQN.DQN`; "#update": on a
# receiver of unknown class (`agent.update(...)`, an agent handed in), which may be any class's method
INSTANCE = "#"
ANY_CLASS = "*"  # ProjectView.env_callers' "*.update": the method `update` of any class of the file
# FileFacts.env_calls' marker for a file that builds objects from configuration (`hydra.utils.instantiate(cfg)`):
# the class of a receiver it calls a method on may be any project module's, imported or not
DYNAMIC = "**"
DYNAMIC_MAKERS = frozenset({"hydra.utils.instantiate", "hydra.utils.call"})
_ENV_WORD = re.compile(r"(?:^|_)envs?(?:_|$)", re.IGNORECASE)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
Qualify = Callable[[ast.AST], set[str]]  # the qualified names an expression may stand for (facts._Aliases)
Parent = Callable[[ast.AST], Optional[ast.AST]]


def env_named(name: str) -> bool:
    """A name that reads as an environment: `env`, `envs`, `eval_env`, `train_envs`, `env_fn` (not `envelope`,
    `environ`, `inventory`)."""
    return bool(_ENV_WORD.search(name))



def is_env_call(call: ast.Call, made: frozenset[str] = frozenset()) -> bool:
    """`env.step(action)` or `env.reset(...)` on a receiver named like an environment, or on a name in `made`
    (bound by its scope to an environment constructor)."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in ENV_METHODS:
        return False
    if func.attr == "step" and not (call.args or call.keywords):
        return False
    name = last_name(func.value)
    return name is not None and (env_named(name) or (isinstance(func.value, ast.Name) and name in made))


def may_call_env(call: ast.Call) -> bool:
    """`is_env_call(call, made)` for some `made`: a file none of whose calls may be one has no environment loop
    (`env_loops` finds none in any scope), whatever its scopes bind."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in ENV_METHODS:
        return False
    if func.attr == "step" and not (call.args or call.keywords):
        return False
    name = last_name(func.value)
    return name is not None and (isinstance(func.value, ast.Name) or env_named(name))


def _own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of `body`, not those of the functions, lambdas and classes it defines."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, CODE_SCOPES):
            continue
        stack.extend(reversed(code_children(node)))  # (expression contexts left out: nothing asks about them)


def _made_envs(body: list[ast.stmt], qualified: Qualify) -> frozenset[str]:
    """The names `body` (one scope) binds to an environment constructor (`env = gym.make("CartPole-v1")`)."""
    made: set[str] = set()
    for node in _own_nodes(body):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and qualified(node.value.func) & ENV_MAKERS:
            made.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return frozenset(made)


def env_loops(body: list[ast.stmt], qualified: Qualify) -> list[ast.AST]:
    """The loops of one scope's `body` (not of the functions it defines) that call an environment themselves."""
    made = _made_envs(body, qualified)
    # One walk of the scope (as `_own_nodes`, in its order), each node with the loops whose body holds it: an
    # environment call marks them all. Walking each loop's body again cost a nested loop's nodes once per level.
    loops: list[ast.AST] = []
    calling: set[int] = set()  # indexes in `loops`
    stack: list[tuple[ast.AST, tuple[int, ...]]] = [(node, ()) for node in reversed(body)]
    while stack:
        node, inside = stack.pop()
        if inside and isinstance(node, ast.Call) and is_env_call(node, made):
            calling.update(inside)
        if isinstance(node, CODE_SCOPES):
            continue
        if isinstance(node, _LOOPS):
            loops.append(node)
            mine = (*inside, len(loops) - 1)
            in_body = {id(statement) for statement in node.body}
            stack.extend((child, mine if id(child) in in_body else inside)
                         for child in reversed(code_children(node)))
        else:
            stack.extend((child, inside) for child in reversed(code_children(node)))
    return [loop for number, loop in enumerate(loops) if number in calling]


class _File:
    """The file's functions and methods by key ("f", "Class.method"), and what each scope binds to classes."""

    def __init__(self, tree: ast.Module, imported: frozenset[str]) -> None:
        self.imported = imported
        self.functions: dict[str, ast.AST] = {}
        self.classes: set[str] = set()
        for statement in tree.body:
            if isinstance(statement, _FUNCTIONS):
                self.functions[statement.name] = statement
            elif isinstance(statement, ast.ClassDef):
                self.classes.add(statement.name)
                for item in statement.body:
                    if isinstance(item, _FUNCTIONS):
                        self.functions[f"{statement.name}.{item.name}"] = item

    @staticmethod
    def instances(body: list[ast.stmt]) -> dict[str, str]:
        """Names `body` (one scope) binds only to a call of one class spelled with a capital (`DQN.DQN(...)`):
        name -> the class as spelled."""
        seen: dict[str, set[Optional[str]]] = {}
        for node in _own_nodes(body):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = node.value
                spelled = dotted(value.func) if isinstance(value, ast.Call) and not isinstance(node, ast.AugAssign) \
                    else None
                if spelled is not None and not spelled.rpartition(".")[2][:1].isupper():
                    spelled = None
                for target in targets:
                    if isinstance(target, ast.Name):
                        seen.setdefault(target.id, set()).add(spelled)
                    elif isinstance(target, (ast.Tuple, ast.List)):
                        for element in target.elts:
                            if isinstance(element, ast.Name):
                                seen.setdefault(element.id, set()).add(None)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
                bound: list[ast.AST] = [node.target] if isinstance(node, (ast.For, ast.AsyncFor)) \
                    else [i.optional_vars for i in node.items if i.optional_vars is not None]
                for each in bound:
                    for inner in fast_walk(each):
                        if isinstance(inner, ast.Name):
                            seen.setdefault(inner.id, set()).add(None)
        return {name: next(iter(kinds)) for name, kinds in seen.items()  # type: ignore[misc]
                if len(kinds) == 1 and None not in kinds}

    def any_class(self, names: set[str]) -> list[str]:
        """The methods of the file's classes that "#method" entries (a receiver of unknown class) may call."""
        wanted = {name[len(INSTANCE):] for name in names if name.startswith(INSTANCE)}
        return [key for key in self.functions if "." in key and key.partition(".")[2] in wanted]

    def follow(self, names: set[str], found: Optional[set[str]] = None) -> set[str]:
        """The file's own functions and methods `names` lead to ("f", "Class.method", "#method" for any
        class's), followed through the calls they make; what those calls name is added to `found`."""
        reached: set[str] = set()
        pending = [name for name in names if name in self.functions]
        pending += self.any_class(names)
        while pending:
            key = pending.pop()
            if key in reached:
                continue
            reached.add(key)
            function = self.functions[key]
            owner = key.partition(".")[0] if "." in key else None
            body = function.body  # type: ignore[attr-defined]
            callees = self.callees(_own_nodes(body), owner, self.instances(body))
            pending += [callee for callee in callees if callee in self.functions] + self.any_class(callees)
            if found is not None:
                found |= callees
        return reached

    def callees(self, nodes: Iterator[ast.AST], owner: Optional[str], instances: dict[str, str]) -> set[str]:
        """What the calls among `nodes` name: local keys where they are the file's own code, else as spelled."""
        out: set[str] = set()
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute) \
                    and func.attr not in ENV_METHODS and _root(func.value) is not None \
                    and _root(func.value) not in self.imported:
                out.add(f"{INSTANCE}{func.attr}")  # `self.agent.update(...)`: an attribute holding any class's
                continue
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                receiver = func.value.id
                if receiver == "self" and owner is not None:
                    out.add(f"{owner}.{func.attr}")
                    continue
                spelled_class = instances.get(receiver)
                if spelled_class is not None:
                    out.add(f"{spelled_class}.{func.attr}" if spelled_class in self.classes
                            else f"{spelled_class}{INSTANCE}{func.attr}")
                    continue
                if receiver not in self.imported and func.attr not in ENV_METHODS:
                    out.add(f"{INSTANCE}{func.attr}")  # `agent.update(...)` on an agent handed in: any class's
                    continue
            spelled = dotted(func)
            if spelled is not None:
                out.add(spelled)
        return out


def env_calls(tree: ast.Module, qualified: Qualify, imported: frozenset[str]) -> tuple[str, ...]:
    """FileFacts.env_calls: what the file's environment loops call (the module docstring): its own functions
    and methods they reach through the file ("f", "Class.method"), and the code of other modules as the file
    spells it, through a name its imports bind (`imported`: "DQN.DQN#train", "trainer.train_step")."""
    calls = [n for n in fast_walk(tree) if isinstance(n, ast.Call)]
    makers = any(qualified(c.func) & ENV_MAKERS for c in calls)
    if not any(is_env_call(c) or makers and isinstance(c.func, ast.Attribute) and c.func.attr in ENV_METHODS
               for c in calls):
        return ()  # no call of an environment anywhere: most files, answered in one walk
    index = _File(tree, imported)
    scopes: list[tuple[list[ast.stmt], Optional[str]]] = [(tree.body, None)]
    for key, function in index.functions.items():
        owner = key.partition(".")[0] if "." in key else None
        scopes.append((function.body, owner))  # type: ignore[attr-defined]
    found: set[str] = set()
    for body, owner in scopes:
        loops = env_loops(body, qualified)
        if loops:
            instances = index.instances(body)
            for loop in loops:
                found |= index.callees(_own_nodes(loop.body), owner, instances)  # type: ignore[attr-defined]
    if not found:
        return ()
    reached = index.follow(found, found)
    kept = {name for name in found - reached
            if name.startswith(INSTANCE) or name.partition(".")[0].partition(INSTANCE)[0] in imported}
    if any(n.startswith(INSTANCE) for n in kept) and any(qualified(c.func) & DYNAMIC_MAKERS for c in calls):
        kept.add(DYNAMIC)
    return tuple(sorted(kept | reached))


def _root(expr: ast.expr) -> Optional[str]:
    """The name an attribute chain starts from (`self` for `self.agent.critic`); None for a call's result."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def reached_within(tree: ast.Module, callers: frozenset[str], imported: frozenset[str]) -> frozenset[str]:
    """`callers` (ProjectView.env_callers: "f", "Class.method", "*.method") with the file's own functions and
    methods they reach through the file's calls: `Agent.update` that an importer's environment loop calls runs
    `self.update_critic(...)`, whose optimizer steps wait on the environment too (blind13: drqv2)."""
    if not callers:
        return callers
    index = _File(tree, imported)
    names = {f"{INSTANCE}{name[len(ANY_CLASS) + 1:]}" if name.startswith(f"{ANY_CLASS}.") else name
             for name in callers}
    return callers | frozenset(index.follow(names))


def enclosing_key(tree: ast.Module, node: ast.AST, parent: Parent) -> Optional[str]:
    """The key ("f", "Class.method") of the module-level function or method `node` lies in; None in
    module-level code or deeper nesting (a class inside a function)."""
    chain: list[ast.AST] = []
    current = parent(node)
    while current is not None and current is not tree:
        if isinstance(current, (*_FUNCTIONS, ast.ClassDef)):
            chain.append(current)
        current = parent(current)
    if not chain:
        return None
    outermost = chain[-1]
    if not any(outermost is s for s in tree.body):
        return None
    if isinstance(outermost, _FUNCTIONS):
        return outermost.name
    if isinstance(outermost, ast.ClassDef) and len(chain) >= 2 and isinstance(chain[-2], _FUNCTIONS) \
            and any(chain[-2] is s for s in outermost.body):
        return f"{outermost.name}.{chain[-2].name}"
    return None


def in_env_loop(tree: ast.Module, node: ast.AST, parent: Parent, qualified: Qualify,
                known: Optional[dict[ast.AST, list[ast.AST]]] = None) -> bool:
    """`node` lies in a loop, of its own function (or of module-level code), that calls an environment.
    `known`: each scope's `env_loops` found before for this tree and `qualified` (filled here), as a rule asks
    about every step of the same function."""
    loops: list[ast.AST] = []
    scope: ast.AST = tree
    current = parent(node)
    while current is not None:
        if isinstance(current, _LOOPS):
            loops.append(current)
        elif isinstance(current, CODE_SCOPES):
            scope = current
            break
        current = parent(current)
    if not loops:
        return False
    found = None if known is None else known.get(scope)
    if found is None:
        body = scope.body if isinstance(scope, (ast.Module, *_FUNCTIONS)) else []
        found = env_loops(body, qualified)
        if known is not None:
            known[scope] = found
    return any(loop is f for loop in loops for f in found)



def called_from_env(key: str, callers: frozenset[str]) -> bool:
    """The function or method `key` ("f", "Class.method") is among `callers` (ProjectView.env_callers), a
    method also as "*.method" (a call on a receiver of unknown class)."""
    if key in callers:
        return True
    owner, _, method = key.partition(".")
    return bool(method) and f"{ANY_CLASS}.{method}" in callers
