"""Walking CPython `ast` trees: every node of a tree listed once per tree, and a fast unordered walk.

Many analyses filter a whole file by node type (argparse flags, assignments, loaders, loops). Each
`ast.walk` over the file costs far more than the filtering itself (generators per node, fields looked
up by name), so the walk is done once and its list kept on the tree's root.

A field a walk reads (`node_fields`) holds a node, None, or a list of nodes (Parser/Python.asdl), where only the
lists of `HOLES` may hold None too: the walks test a value against None and push a list whole, instead of asking
`isinstance(item, ast.AST)` of every item (tests/engine/test_cold_path.py checks it on the fixtures).

The walks here (and loader_flow's `_Flow`, AstContext's index) spell out the same few lines of field reading
rather than call one helper per node: they run over every node of every file, and a call per node costs more than
the walk (bench/RESULTS.md, perf20). What differs between them is the order, what is skipped (scopes, `None`
holes) and what is kept (parents, depth); tests/engine/test_cold_path.py checks each of them (the listed walk, the
depth walk, `fast_walk`, `code_children`, `own_nodes`, `_Flow`'s parents and calls) against `ast.walk`.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from typing import Iterable, Iterator, Optional

_KEY = "_gpulint_nodes"
_DEPTH_KEY = "_gpulint_depth"

# The fields CPython's grammar (Parser/Python.asdl) types as `identifier`, `string`, `constant` or `int`, by node
# type: they never hold a node, so a walk need not read them (a `Name`'s `id`, a `Constant`'s `value`: a third of
# the fields a walk reads). Python 3.13 lists field types in `_field_types`; this table holds for 3.8 on
# (tests/engine/test_cold_path.py checks it against each node type's signature).
_SCALAR_FIELDS = frozenset({
    ("AnnAssign", "simple"), ("Assign", "type_comment"), ("AsyncFor", "type_comment"),
    ("AsyncFunctionDef", "name"), ("AsyncFunctionDef", "type_comment"), ("AsyncWith", "type_comment"),
    ("Attribute", "attr"), ("ClassDef", "name"), ("Constant", "value"), ("Constant", "kind"),
    ("ExceptHandler", "name"), ("For", "type_comment"), ("FormattedValue", "conversion"), ("FunctionDef", "name"),
    ("FunctionDef", "type_comment"), ("Global", "names"), ("ImportFrom", "module"), ("ImportFrom", "level"),
    ("MatchAs", "name"), ("MatchClass", "kwd_attrs"), ("MatchMapping", "rest"), ("MatchSingleton", "value"),
    ("MatchStar", "name"), ("Name", "id"), ("Nonlocal", "names"), ("ParamSpec", "name"), ("TypeIgnore", "lineno"),
    ("TypeIgnore", "tag"), ("TypeVar", "name"), ("TypeVarTuple", "name"), ("With", "type_comment"),
    ("alias", "name"), ("alias", "asname"), ("arg", "arg"), ("arg", "type_comment"), ("comprehension", "is_async"),
    ("keyword", "arg"),
})


def node_fields(kind: type) -> tuple[str, ...]:
    """The fields of a node type that may hold nodes (a node, a list, None), in `_fields` order: what a walk
    reads to find a node's children, the same children in the same order as reading every field."""
    name = kind.__name__
    return tuple(f for f in kind._fields if (name, f) not in _SCALAR_FIELDS)  # type: ignore[attr-defined]


# the node types with an expression context (`ctx`): a `Load`, `Store` or `Del` one level under them
_WITH_CONTEXT = frozenset(kind for kind in vars(ast).values() if isinstance(kind, type)
                          and issubclass(kind, ast.AST) and "ctx" in getattr(kind, "_fields", ()))
# the node types one of whose lists may hold None: a dict's `**` entry (`keys`), a keyword-only parameter without
# a default (`kw_defaults`)
HOLES = frozenset({ast.Dict, ast.arguments})
# what owns a node's code for name binding (a comprehension is left to its function, as the analyses read it)
CODE_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_FIELDS: dict[type, tuple[str, ...]] = {}


def all_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes `ast.walk(tree)` yields but expression contexts and operators (`walk`), in its order (breadth
    first), kept on `tree`: a module, or a class or function that analyses read again and again (read the list,
    never change it); the tree must not change after."""
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
        fields = _FIELDS[kind] = node_fields(kind)
    out: list[ast.AST] = []
    for name in fields:
        value = getattr(node, name, None)
        if type(value) is list:
            out.extend(value if kind not in HOLES else [item for item in value if item is not None])
        elif value is not None:
            out.append(value)
    return out


def walk(root: ast.AST) -> list[ast.AST]:
    """`list(ast.walk(root))` but the expression contexts and operators (`code_fields`: shared `Load`, `Store`,
    `Add`... objects, which no analysis asks about as nodes): the other nodes in the same (breadth-first) order,
    several times faster; not kept (see `all_nodes` for a whole tree walked by many analyses)."""
    out: list[ast.AST] = [root]
    append, extend, fields_of, holes = out.append, out.extend, CODE_FIELDS, HOLES
    index = 0
    while index < len(out):
        node = out[index]
        index += 1
        kind = type(node)
        fields = fields_of.get(kind)
        if fields is None:
            fields = code_fields(kind)
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                extend(value if kind not in holes else [item for item in value if item is not None])
            elif value is not None:
                append(value)
    return out


def _walk_with_depth(root: ast.AST) -> tuple[list[ast.AST], int]:
    """`walk(root)`, and the depth of its deepest node: the root 1, a child one more than its parent, a
    `BoolOp` as many more as it has values (engine/guard.py `nesting_depth`: the same depths, the contexts `walk`
    leaves out counted; an operator is never deeper than its node's other children).
    A breadth-first walk lists the tree a level at a time, so the depth is the number of levels but where a
    `BoolOp` adds to it: only those subtrees are weighed node by node (`_bool_op_depth`)."""
    out: list[ast.AST] = [root]
    append, extend, fields_of, holes = out.append, out.extend, CODE_FIELDS, HOLES
    bool_op, with_context = ast.BoolOp, _WITH_CONTEXT
    bool_ops: list[tuple[ast.AST, int]] = []
    level, level_end = 1, 1  # out[:level_end] holds the nodes up to `level`
    context_level = 0  # the deepest level of a node with an expression context (left out of the list)
    index = 0
    while index < len(out):
        if index == level_end:
            level += 1
            level_end = len(out)
        node = out[index]
        index += 1
        kind = type(node)
        if kind is bool_op:
            bool_ops.append((node, level))
        elif kind in with_context:
            context_level = level
        fields = fields_of.get(kind)
        if fields is None:
            fields = code_fields(kind)
        for name in fields:  # `walk`'s loop, inlined: a call per node would cost what the walk saves
            value = getattr(node, name, None)
            if type(value) is list:
                extend(value if kind not in holes else [item for item in value if item is not None])
            elif value is not None:
                append(value)
    best = max(level, context_level + 1) if context_level else level  # a context is one deeper than its node
    for node, at in bool_ops:  # an outermost `BoolOp` weighs the ones inside it with their true depths
        best = max(best, _bool_op_depth(node, at))
    return out, best


def _bool_op_depth(root: ast.AST, level: int) -> int:
    """The depth of the deepest node under a `BoolOp` at `level` (itself included), counted as `_walk_with_depth`
    counts it from there (without `BoolOp`s above it: they make it deeper still, and are weighed themselves)."""
    best = 0
    stack = [(root, level)]
    bool_op = ast.BoolOp
    while stack:
        node, depth = stack.pop()
        if type(node) is bool_op:
            depth += len(node.values)
        if depth > best:
            best = depth
        stack.extend((child, depth + 1) for child in children(node))
    return best


def walk_with_parents(root: ast.AST) -> tuple[list[ast.AST], dict[int, ast.AST]]:
    """`walk(root)`, and each node's parent under `root` by the node's id (what `{id(child): node for node
    in walk(root) for child in code_children(node)}` gives), in one pass."""
    out: list[ast.AST] = [root]
    parents: dict[int, ast.AST] = {}
    append, fields_of = out.append, CODE_FIELDS
    index = 0
    while index < len(out):
        node = out[index]
        index += 1
        kind = type(node)
        fields = fields_of.get(kind)
        if fields is None:
            fields = code_fields(kind)
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if item is not None:
                        append(item)
                        parents[id(item)] = node
            elif value is not None:
                append(value)
                parents[id(value)] = node
    return out, parents


_SKIPPED_FIELDS = frozenset({"ctx", "op", "ops", "type_comment"})
# `code_fields` by node type, as far as asked: a walk of many nodes reads it, and calls `code_fields` on a miss
CODE_FIELDS: dict[type, tuple[str, ...]] = {}


def code_fields(kind: type) -> tuple[str, ...]:
    """`node_fields` but `ctx`, `op` and `ops`: what a walk that reads code follows. An expression context (`Load`,
    `Store`, `Del`) or an operator (`Add`, `Eq`, `And`...) is one object shared by every node of the tree that
    has it, and holds nothing; a third of the nodes have a context. (An analysis reads an operator where it reads
    its operation: `isinstance(node.op, ast.Mod)`.)"""
    fields = CODE_FIELDS.get(kind)
    if fields is None:
        fields = CODE_FIELDS[kind] = tuple(f for f in node_fields(kind) if f not in _SKIPPED_FIELDS)
    return fields


def fast_walk(root: ast.AST) -> Iterator[ast.AST]:
    """Every node under `root` (itself included) but expression contexts, in no particular order; several
    times cheaper than ast.walk, for a subtree walked once."""
    stack = [root]
    pop, push, extend, fields_of, holes = stack.pop, stack.append, stack.extend, CODE_FIELDS, HOLES
    while stack:
        node = pop()
        yield node
        kind = type(node)
        fields = fields_of.get(kind)
        if fields is None:
            fields = code_fields(kind)
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                extend(value if kind not in holes else [item for item in value if item is not None])
            elif value is not None:
                push(value)


_SCOPE_KINDS = frozenset(CODE_SCOPES)
_SCOPE_KINDS_OR_NONE = _SCOPE_KINDS | {type(None)}


def code_children(node: ast.AST) -> list[ast.AST]:
    """`children(node)` but its expression context (`code_fields`): for walks that ask nothing of contexts."""
    kind = type(node)
    fields = CODE_FIELDS.get(kind)
    if fields is None:
        fields = code_fields(kind)
    out: list[ast.AST] = []
    for name in fields:
        value = getattr(node, name, None)
        if type(value) is list:
            out.extend(value if kind not in HOLES else [item for item in value if item is not None])
        elif value is not None:
            out.append(value)
    return out


def own_nodes(roots: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """`roots` and the nodes under them but expression contexts (`code_fields`) and the functions, lambdas and
    classes they define, with what is inside those (a root itself is walked whatever it is); the last root's
    first, depth first, children last to first: an order for questions that read every node, or any one."""
    stack = list(roots)
    pop, push = stack.pop, stack.append
    scopes, fields_of = _SCOPE_KINDS_OR_NONE, CODE_FIELDS
    while stack:
        node = pop()
        yield node
        kind = type(node)
        fields = fields_of.get(kind)
        if fields is None:
            fields = code_fields(kind)
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if type(item) not in scopes:  # (nor None)
                        push(item)
            elif type(value) not in scopes:
                push(value)  # type: ignore[arg-type]  # (not None)


# the fields that list statements, or the clauses holding them (`except`, `case`)
_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
_BLOCKS: dict[type, tuple[str, ...]] = {}


def block_fields(kind: type) -> tuple[str, ...]:
    """The fields of a node type that may list statements or the clauses holding them, in `_fields` order (the
    order `ast.iter_child_nodes` reads them in)."""
    fields = _BLOCKS.get(kind)
    if fields is None:
        fields = _BLOCKS[kind] = tuple(f for f in kind._fields if f in _BLOCK_FIELDS)  # type: ignore[attr-defined]
    return fields


def class_defs(tree: ast.AST) -> list[ast.ClassDef]:
    """Every class defined under `tree`, nested ones too, in no particular order. Only a statement defines a
    class, and only statement lists hold statements: the walk follows those, not the expressions (a tenth of
    the nodes), for a question about classes alone."""
    found: list[ast.ClassDef] = []
    stack: list[ast.AST] = [tree]
    class_def, blocks_of = ast.ClassDef, _BLOCKS
    while stack:
        node = stack.pop()
        kind = type(node)
        names = blocks_of.get(kind)
        if names is None:
            names = block_fields(kind)
        for name in names:  # (none for most statements)
            block = getattr(node, name, None)
            if type(block) is list:  # (a lambda's `body` is an expression)
                for child in block:
                    if type(child) is class_def:
                        found.append(child)
                    stack.append(child)
    return found


def last_name(expr: ast.AST) -> Optional[str]:
    """The name an expression ends in: `env` for `env`, `env` for `self.env`; None for anything else."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


def spans_any(node: ast.AST, ordered: list[int]) -> bool:
    """One of the sorted line numbers lies within the node's lines (the lines of calls a walk kept: a function
    or class spanning none holds none of them)."""
    index = bisect_left(ordered, node.lineno)  # type: ignore[attr-defined]
    return index < len(ordered) and ordered[index] <= (node.end_lineno or node.lineno)  # type: ignore[attr-defined]
