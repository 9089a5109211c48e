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

The way from a loader to its pipeline starts at each `DataLoader(...)` of the file: its dataset as
analysis/loaders.py follows it (names, `self.x`, factories, Subset/random_split), then the Compose among
that dataset call's arguments, at any depth (MoCo's `TwoCropsTransform(Compose(...))`) and through names.
"""

from __future__ import annotations

import ast
from typing import Callable, Iterator, Optional, Union

from gpulint.analysis.ast_context import AstContext
from gpulint.analysis.ast_values import value_at
from gpulint.analysis.loaders import dataloader_call
from gpulint.core.torch_api import COMPOSE, HEAVY_ALBUMENTATIONS, HEAVY_TORCHVISION, TORCHVISION_TRANSFORMS
from gpulint.project.ast_nodes import children as child_nodes
from gpulint.records import dataclass

QualName = Callable[[ast.expr], Optional[str]]

Scope = Union[ast.Module, ast.FunctionDef, ast.AsyncFunctionDef]


@dataclass(frozen=True)
class Pipeline:
    compose: ast.Call  # the Compose(...) call
    heavy: tuple[str, ...]  # the heavy ops it holds, by class name, in order
    loader: ast.Call  # the DataLoader that loads its dataset


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


def pipelines(ctx: AstContext) -> list[Pipeline]:
    """Every Compose(...) holding a heavy op that a DataLoader of the file loads through its dataset (the
    dataset as analysis/loaders.py follows it: names, `self.x`, factories, Subset/random_split)."""
    found: dict[int, Pipeline] = {}
    for node in ctx.nodes(ast.Call):
        assert isinstance(node, ast.Call)
        loader = dataloader_call(ctx, node)
        if loader is None:
            continue
        for alternative in loader.alternatives():
            dataset = alternative.dataset
            if not isinstance(dataset, ast.Call):
                continue
            for compose in _composes_in(ctx, dataset):
                if id(compose) in found:
                    continue
                scope = ctx.enclosing_function(compose) or ctx.tree
                ops = sorted(_heavy_ops(compose, scope, ctx.qualname), key=lambda op: (op[0].lineno, op[0].col_offset))
                heavy = tuple(dict.fromkeys(name for _, name in ops))
                if heavy:
                    found[id(compose)] = Pipeline(compose, heavy, node)
    return sorted(found.values(), key=lambda p: (p.compose.lineno, p.compose.col_offset))


def _composes_in(ctx: AstContext, dataset: ast.Call) -> Iterator[ast.Call]:
    """Compose calls among the dataset call's arguments, at any depth (MoCo's `TwoCropsTransform(Compose(...))`),
    also through a name holding one (`ImageFolder(root, transform=train_tf)`)."""
    stack: list[ast.AST] = [*dataset.args, *(k.value for k in dataset.keywords)]
    depth = 0
    while stack and depth < 64:
        depth += 1
        node = stack.pop()
        if isinstance(node, ast.Name):
            value = value_at(ctx, node)
            if value is not None:
                stack.append(value)
        elif isinstance(node, ast.Call) and ctx.qualname(node.func) in COMPOSE:
            yield node
        elif isinstance(node, (ast.Call, ast.List, ast.Tuple, ast.Starred, ast.keyword)):
            stack.extend(child_nodes(node))


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


def _own_nodes(scope: Scope) -> Iterator[ast.AST]:
    """The scope's nodes, not those of functions or classes nested in it."""
    stack: list[ast.AST] = list(scope.body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(child_nodes(node))


