"""Walking CPython `ast` trees: every node of a tree listed once per tree, and a fast unordered walk.

Many analyses filter a whole file by node type (argparse flags, assignments, loaders, loops). Each
`ast.walk` over the file costs far more than the filtering itself (generators per node, fields looked
up by name), so the walk is done once and its list kept on the tree's root.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

_KEY = "_gpulint_nodes"
_DEPTH_KEY = "_gpulint_depth"
_FIELDS: dict[type, tuple[str, ...]] = {}


def all_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes `ast.walk(tree)` yields, in its order (breadth first), kept on `tree`: a module, or a class or
    function that analyses read again and again (read the list, never change it); the tree must not change after."""
    cached = tree.__dict__.get(_KEY)
    if cached is not None:
        return cached
    if type(tree) is ast.Module:
        out, depth = _walk_with_depth(tree)
        setattr(tree, _DEPTH_KEY, depth)
    else:
        out = walk(tree)
    setattr(tree, _KEY, out)
    return out


def kept_depth(tree: ast.AST) -> Optional[int]:
    """The depth of the deepest node of a module whose nodes `all_nodes` kept, counted as engine/guard.py's
    `nesting_depth` counts it (a chain of `and`/`or` as deep as LibCST nests it); None when none was kept."""
    return tree.__dict__.get(_DEPTH_KEY)


def kept_nodes(tree: ast.AST) -> Optional[list[ast.AST]]:
    """The list `all_nodes` kept on this tree, when an analysis made it (None otherwise: nothing is walked), for
    a pass that reads every node in any order and would otherwise walk the tree again."""
    return tree.__dict__.get(_KEY)


def children(node: ast.AST) -> list[ast.AST]:
    """`list(ast.iter_child_nodes(node))`, expression contexts included, without a generator per node."""
    kind = type(node)
    fields = _FIELDS.get(kind)
    if fields is None:
        fields = _FIELDS[kind] = tuple(kind._fields)
    out: list[ast.AST] = []
    append, AST = out.append, ast.AST
    for name in fields:
        value = getattr(node, name, None)
        if isinstance(value, AST):
            append(value)
        elif type(value) is list:
            for item in value:  # (a loop: a list comprehension per field costs more than its items)
                if isinstance(item, AST):
                    append(item)
    return out


def walk(root: ast.AST) -> list[ast.AST]:
    """`list(ast.walk(root))`: the same nodes in the same (breadth-first) order, expression contexts included,
    several times faster; not kept (see `all_nodes` for a whole tree walked by many analyses)."""
    out: list[ast.AST] = [root]
    append, AST, fields_of = out.append, ast.AST, _FIELDS
    index = 0
    while index < len(out):
        node = out[index]
        index += 1
        kind = type(node)
        fields = fields_of.get(kind)
        if fields is None:
            fields = fields_of[kind] = tuple(kind._fields)
        for name in fields:
            value = getattr(node, name, None)
            if isinstance(value, AST):
                append(value)
            elif type(value) is list:
                for item in value:  # (a loop: a list comprehension per field costs more than its items)
                    if isinstance(item, AST):
                        append(item)
    return out


def _walk_with_depth(root: ast.AST) -> tuple[list[ast.AST], int]:
    """`walk(root)`, and the depth of its deepest node: the root 1, a child one more than its parent, a
    `BoolOp` as many more as it has values (engine/guard.py `nesting_depth`: the same nodes, the same depths)."""
    out: list[ast.AST] = [root]
    depths: list[int] = [1]
    append, AST, fields_of, bool_op = out.append, ast.AST, _FIELDS, ast.BoolOp
    best = 0
    index = 0
    while index < len(out):
        node = out[index]
        depth = depths[index]
        index += 1
        kind = type(node)
        if kind is bool_op:
            depth += len(node.values)  # type: ignore[attr-defined]
        if depth > best:
            best = depth
        depth += 1
        fields = fields_of.get(kind)
        if fields is None:
            fields = fields_of[kind] = tuple(kind._fields)
        before = len(out)
        for name in fields:
            value = getattr(node, name, None)
            if isinstance(value, AST):
                append(value)
            elif type(value) is list:
                for item in value:
                    if isinstance(item, AST):
                        append(item)
        if len(out) > before:
            depths.extend([depth] * (len(out) - before))
    return out, best


def walk_with_parents(root: ast.AST) -> tuple[list[ast.AST], dict[int, ast.AST]]:
    """`walk(root)`, and each node's parent under `root` by the node's id (what `{id(child): node for node
    in walk(root) for child in children(node)}` gives), in one pass."""
    out: list[ast.AST] = [root]
    parents: dict[int, ast.AST] = {}
    append, AST, fields_of = out.append, ast.AST, _FIELDS
    index = 0
    while index < len(out):
        node = out[index]
        index += 1
        kind = type(node)
        fields = fields_of.get(kind)
        if fields is None:
            fields = fields_of[kind] = tuple(kind._fields)
        for name in fields:
            value = getattr(node, name, None)
            if isinstance(value, AST):
                append(value)
                parents[id(value)] = node
            elif type(value) is list:
                for item in value:
                    if isinstance(item, AST):
                        append(item)
                        parents[id(item)] = node
    return out, parents


_SKIPPED_FIELDS = frozenset({"ctx", "type_comment"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def fast_walk(root: ast.AST) -> Iterator[ast.AST]:
    """Every node under `root` (itself included) but expression contexts, in no particular order; several
    times cheaper than ast.walk, for a subtree walked once."""
    stack = [root]
    pop, push = stack.pop, stack.append
    AST, fields_of = ast.AST, _CHILD_FIELDS
    while stack:
        node = pop()
        yield node
        kind = type(node)
        fields = fields_of.get(kind)
        if fields is None:
            fields = fields_of[kind] = tuple(f for f in kind._fields if f not in _SKIPPED_FIELDS)
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, AST):
                        push(item)
            elif isinstance(value, AST):
                push(value)


def last_name(expr: ast.AST) -> Optional[str]:
    """The name an expression ends in: `env` for `env`, `env` for `self.env`; None for anything else."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None
