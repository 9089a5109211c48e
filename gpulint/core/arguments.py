"""Keyword arguments of a call, looking through `**kwargs` dicts that are visible in the file."""

from __future__ import annotations

from typing import Literal, Optional, overload

import libcst as cst

from gpulint.core.names import NameTable
from gpulint.core.values import string_value
from gpulint.records import dataclass


@dataclass(frozen=True)
class KeywordArgs:
    """The keywords a call passes. `complete` is False when some `**x` cannot be seen through."""

    values: dict[str, Optional[cst.BaseExpression]]  # None: passed, value not visible
    complete: bool
    from_splat: frozenset[str]  # keys that come from a `**dict`, not from the call itself

    def has(self, key: str) -> bool:
        return key in self.values

    def get(self, key: str) -> Optional[cst.BaseExpression]:
        return self.values.get(key)


def _dict_keys(expr: cst.BaseExpression, names: NameTable,
               depth: int = 0) -> Optional[dict[str, Optional[cst.BaseExpression]]]:
    """Keys of a dict literal or `dict(k=v)` call, also through `**other` dicts visible in the file;
    None when not fully known."""
    if depth > 4:
        return None
    if isinstance(expr, cst.Dict):
        out: dict[str, Optional[cst.BaseExpression]] = {}
        for element in expr.elements:
            if isinstance(element, cst.StarredDictElement):  # `{**base, "lr": lr}`
                inner = _splat_keys(element.value, names, depth)
                if inner is None:
                    return None
                out.update(inner)
                continue
            assert isinstance(element, cst.DictElement)
            key = string_value(element.key)
            if key is None:
                return None
            out[key] = element.value
        return out
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "dict":
        if names.resolve_name(expr.func) is not None or names.binding_scope(expr.func) is not None:
            return None  # a user's own `dict`
        out = {}
        for arg in expr.args:
            if arg.star == "**" or (arg.keyword is None and not arg.star):
                inner = _splat_keys(arg.value, names, depth)  # `dict(**base, lr=lr)`, `dict(base, lr=lr)`
                if inner is None:
                    return None
                out.update(inner)
                continue
            if arg.keyword is None or arg.star:
                return None
            out[arg.keyword.value] = arg.value
        return out
    return None


def _splat_keys(expr: cst.BaseExpression, names: NameTable,
                depth: int) -> Optional[dict[str, Optional[cst.BaseExpression]]]:
    if isinstance(expr, cst.Name):
        return visible_dict_keys(expr, names, depth + 1)
    return _dict_keys(expr, names, depth + 1)


def _mutation_keys(node: cst.CSTNode, names: NameTable) -> Optional[dict[str, Optional[cst.BaseExpression]]]:
    if isinstance(node, cst.Subscript):  # kw["key"] = value
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            key = string_value(node.slice[0].slice.value)
            if key is not None:
                return {key: None}
        return None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        method = node.func.attr.value
        if method == "update":
            if len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star:
                return _dict_keys(node.args[0].value, names)
            if all(a.keyword is not None for a in node.args):
                return {a.keyword.value: a.value for a in node.args if a.keyword is not None}
            return None
        if method in {"get", "keys", "values", "items", "copy", "__contains__", "pop"}:
            return {}  # reads (and removals: `pop` adds no key) do not add keys
        if method == "setdefault" and node.args and string_value(node.args[0].value) is not None:
            return {string_value(node.args[0].value): None}  # type: ignore[dict-item]
        return None  # clear, popitem, ...: not tracked
    return None


def visible_dict_keys(name: cst.Name, names: NameTable,
                      depth: int = 0) -> Optional[dict[str, Optional[cst.BaseExpression]]]:
    """Keys of the dict bound to `name`, when every binding and change of it is visible. A key removed
    with `pop`/`del` may still be listed: a superset, never missing a key that is there."""
    owner = names.binding_scope(name)
    if owner is None:
        return None
    keys: dict[str, Optional[cst.BaseExpression]] = {}
    for target, value in zip(owner.bindings[name.value], owner.values[name.value]):
        if target is not None or value is None:
            return None
        found = _dict_keys(value, names, depth)
        if found is None:
            return None
        for key, val in found.items():
            keys[key] = val if key not in keys else None
    for node in names.mutations_of(owner, name.value):
        found = _mutation_keys(node, names)
        if found is None:
            return None
        for key in found:
            keys[key] = None
    return keys


def keyword_args(call: cst.Call, names: NameTable) -> KeywordArgs:
    values: dict[str, Optional[cst.BaseExpression]] = {}
    splat: set[str] = set()
    complete = True
    for arg in call.args:
        if arg.keyword is not None:
            values[arg.keyword.value] = arg.value
        elif arg.star == "**":
            found = None
            if isinstance(arg.value, cst.Name):
                found = visible_dict_keys(arg.value, names)
            elif isinstance(arg.value, (cst.Dict, cst.Call)):
                found = _dict_keys(arg.value, names)
            if found is None:
                complete = False
            else:
                values.update(found)
                splat.update(found)
    return KeywordArgs(values=values, complete=complete, from_splat=frozenset(splat))


@overload
def positional_args(call: cst.Call) -> Optional[list[cst.BaseExpression]]: ...


@overload
def positional_args(call: cst.Call, ignore_starred: Literal[True]) -> list[cst.BaseExpression]: ...


def positional_args(call: cst.Call, ignore_starred: bool = False) -> Optional[list[cst.BaseExpression]]:
    """The positional arguments; None when a `*args` hides how many there are, unless
    `ignore_starred` (then the ones written out, in order)."""
    out = []
    for arg in call.args:
        if arg.keyword is not None or arg.star == "**":
            continue
        if arg.star == "*":
            if ignore_starred:
                continue
            return None
        out.append(arg.value)
    return out
