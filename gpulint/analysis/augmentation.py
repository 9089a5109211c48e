"""Per-sample CPU image augmentation on CPython's `ast` (GPU106).

A pipeline is a `Compose([...])` of torchvision (`transforms` or `transforms.v2`) or
albumentations. Its ops are read through lists held in names of the same scope and through
`RandomApply`/`RandomChoice`/`RandomOrder`/`OneOf`/`SomeOf` wrappers. An op is heavy when one call
costs about as much as decoding the JPEG it works on or more, measured on CPU
(bench/augmentation_cpu_cost.py, 500x375 RGB PIL image, one thread, torch 2.13 / torchvision 0.28,
medians on a busy shared machine): decode 4.4 ms; ColorJitter 23 ms, GaussianBlur(23) 175 ms, AugMix
115 ms, ElasticTransform 169 ms, RandomPerspective 14 ms, RandAugment 4.0 ms. Measured cheap and
never reported alone: ToTensor, Normalize, flips, RandomCrop (< 0.1 ms), RandomResizedCrop 0.95 ms
(it crops before it resizes), RandomRotation 1.3 ms, RandomAffine 0.75 ms, AutoAugment 1.3 ms,
TrivialAugmentWide 0.74 ms, RandomGrayscale 0.7 ms, RandomErasing 0.46 ms. Albumentations (OpenCV)
ops were not measured: only its geometric warps, the torchvision ElasticTransform's kind, count.

The pipeline's way to a loader is followed within one scope: the pipeline (or a name holding it)
is an argument, at any depth, of a call (the dataset, maybe wrapping it as MoCo's
`TwoCropsTransform(...)` does) whose result is, directly or through one name, the dataset of a
`DataLoader(...)`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Union

from gpulint.core.torch_api import (
    COMPOSE,
    DATALOADER,
    HEAVY_ALBUMENTATIONS,
    HEAVY_TORCHVISION,
    TORCHVISION_TRANSFORMS,
)

QualName = Callable[[ast.expr], Optional[str]]

Scope = Union[ast.Module, ast.FunctionDef, ast.AsyncFunctionDef]


@dataclass(frozen=True)
class Pipeline:
    compose: ast.Call  # the Compose(...) call
    heavy: tuple[str, ...]  # the heavy ops it holds, by class name, in order
    loader: Optional[ast.Call]  # the DataLoader its dataset reaches in the same scope; None: not seen


def heavy_op(qualname: Optional[str]) -> Optional[str]:
    """The op's class name when it is a heavy augmentation of torchvision or albumentations."""
    if qualname is None:
        return None
    name = qualname.rsplit(".", 1)[-1]
    if qualname.startswith(TORCHVISION_TRANSFORMS) and name in HEAVY_TORCHVISION:
        return name
    if qualname.startswith("albumentations.") and name in HEAVY_ALBUMENTATIONS:
        return name
    return None


def pipelines(tree: ast.Module, qualname: QualName) -> list[Pipeline]:
    """Every Compose(...) holding a heavy op, with the DataLoader its dataset reaches (if seen)."""
    found: list[Pipeline] = []
    for scope in _scopes(tree):
        parents = _parents(scope)
        for node in _own_nodes(scope):
            if not (isinstance(node, ast.Call) and qualname(node.func) in COMPOSE):
                continue
            ops = sorted(_heavy_ops(node, scope, qualname), key=lambda op: (op[0].lineno, op[0].col_offset))
            heavy = tuple(dict.fromkeys(name for _, name in ops))
            if heavy:
                found.append(Pipeline(node, heavy, _loader_of(node, scope, parents, qualname)))
    return found


def _heavy_ops(compose: ast.Call, scope: Scope, qualname: QualName) -> Iterator[tuple[ast.Call, str]]:
    yield from _ops_in([*compose.args, *(k.value for k in compose.keywords)], scope, qualname, set())


def _ops_in(roots: list[ast.AST], scope: Scope, qualname: QualName, seen: set[str]) -> Iterator[tuple[ast.Call, str]]:
    """Heavy ops in these expressions; a name counts with the ops every one of its assignments in the scope
    holds (`augmentation = [...]` in both branches of an `if`: the ops both lists share)."""
    stack = list(roots)
    while stack:
        node = stack.pop(0)
        if isinstance(node, ast.Name):
            if node.id in seen:
                continue
            seen.add(node.id)
            values = _assignments(scope, node.id)
            found = [list(_ops_in([v], scope, qualname, seen)) for v in values
                     if isinstance(v, (ast.List, ast.Tuple, ast.Call, ast.BinOp))]
            if found and len(found) == len(values):
                common = set.intersection(*({name for _, name in ops} for ops in found))
                yield from ((call, name) for call, name in found[0] if name in common)
            continue
        if isinstance(node, (ast.List, ast.Tuple)):
            stack.extend(node.elts)
        elif isinstance(node, ast.Starred):
            stack.append(node.value)
        elif isinstance(node, ast.Call):
            op = heavy_op(qualname(node.func))
            if op is not None:
                yield node, op
            else:  # RandomApply([...]), RandomChoice([...]), A.OneOf([...]): ops inside count
                stack.extend(node.args)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # [...] + [...]
            stack.extend((node.left, node.right))


def _loader_of(compose: ast.Call, scope: Scope, parents: dict[int, ast.AST], qualname: QualName) -> Optional[ast.Call]:
    holders: list[ast.expr] = [compose]
    name = _assigned_name(compose, parents)
    if name is not None:
        holders.extend(_loads(scope, name))
    for holder in holders:
        dataset = _enclosing_call(holder, parents, qualname)
        if dataset is None:
            continue
        loader = _dataloader_taking(dataset, scope, parents, qualname)
        if loader is not None:
            return loader
    return None


def _enclosing_call(node: ast.expr, parents: dict[int, ast.AST], qualname: QualName) -> Optional[ast.Call]:
    """The outermost call whose arguments hold `node`, short of a DataLoader: the dataset (or its wrapper)."""
    found: Optional[ast.Call] = None
    child: ast.AST = node
    parent = parents.get(id(node))
    while isinstance(parent, (ast.Call, ast.keyword, ast.List, ast.Tuple, ast.Starred)):
        if isinstance(parent, ast.Call):
            if child is parent.func or qualname(parent.func) in DATALOADER:
                break
            found = parent
        child, parent = parent, parents.get(id(parent))
    return found


def _dataloader_taking(dataset: ast.Call, scope: Scope, parents: dict[int, ast.AST],
                       qualname: QualName) -> Optional[ast.Call]:
    """The DataLoader whose dataset is `dataset` itself or the one name it is assigned to."""
    candidates: list[ast.expr] = [dataset]
    name = _assigned_name(dataset, parents)
    if name is not None:
        candidates.extend(_loads(scope, name))
    for candidate in candidates:
        parent = parents.get(id(candidate))
        if isinstance(parent, ast.keyword) and parent.arg == "dataset":
            parent = parents.get(id(parent))
        elif not (isinstance(parent, ast.Call) and parent.args and parent.args[0] is candidate):
            continue
        if isinstance(parent, ast.Call) and qualname(parent.func) in DATALOADER:
            return parent
    return None


def _assigned_name(node: ast.expr, parents: dict[int, ast.AST]) -> Optional[str]:
    parent = parents.get(id(node))
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        return parent.targets[0].id
    if isinstance(parent, ast.AnnAssign) and isinstance(parent.target, ast.Name):
        return parent.target.id
    return None


def _assignments(scope: Scope, name: str) -> list[ast.expr]:
    """The values `name = ...` binds in the scope; empty when anything else binds it too."""
    values: list[ast.expr] = []
    for node in _own_nodes(scope):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == name:
            values.append(node.value)
    stores = [n for n in _own_nodes(scope) if isinstance(n, ast.Name) and n.id == name
              and isinstance(n.ctx, (ast.Store, ast.Del))]
    return values if len(stores) == len(values) else []


def _loads(scope: Scope, name: str) -> list[ast.Name]:
    return [n for n in _own_nodes(scope) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]


def _scopes(tree: ast.Module) -> Iterator[Scope]:
    yield tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _own_nodes(scope: Scope) -> Iterator[ast.AST]:
    """The scope's nodes, not those of functions or classes nested in it."""
    stack: list[ast.AST] = list(scope.body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _parents(scope: Scope) -> dict[int, ast.AST]:
    out: dict[int, ast.AST] = {}
    for node in _own_nodes(scope):
        for child in ast.iter_child_nodes(node):
            out[id(child)] = node
    return out
