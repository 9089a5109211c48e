"""Plain JSON for the project facts, derived from their dataclass declarations.

A fact added to `FileFacts` (or to a dataclass it holds) is cached and sent to worker processes
by declaring the field, nothing else: the encoding follows the field's type annotation. Nested
dataclasses are written as lists of their fields in declaration order (compact: a project holds
thousands of import bindings), the top-level facts as an object keyed by field name, so a cache
entry stays readable. Anything the annotations do not describe is refused here, at the first
run of the tests, not later as a cache that decodes to the wrong thing.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from functools import lru_cache
from typing import Any, Union

_PRIMITIVES = (bool, int, float, str)


def encode(value: Any) -> Any:
    """`value` as JSON-able data: dataclasses as lists of fields, tuples and sets as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [encode(getattr(value, f.name)) for f in dataclasses.fields(value)]
    if isinstance(value, (tuple, list, frozenset, set)):
        items = sorted(value) if isinstance(value, (frozenset, set)) else value
        return [encode(item) for item in items]
    if isinstance(value, dict):
        return {str(key): encode(item) for key, item in value.items()}
    if value is None or isinstance(value, _PRIMITIVES):
        return value
    raise TypeError(f"the project facts cannot encode a {type(value).__name__}")


def encode_fields(value: Any) -> dict[str, Any]:
    """A dataclass as an object keyed by field name (the top level of a cache entry)."""
    return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}


def decode_fields(cls: type, data: dict[str, Any]) -> Any:
    """The inverse of `encode_fields`; a field missing from `data` keeps its default."""
    hints = _hints(cls)
    values = {f.name: decode(hints[f.name], data[f.name]) for f in dataclasses.fields(cls) if f.name in data}
    return cls(**values)


def decode(tp: Any, data: Any) -> Any:
    """`data` (from `encode`) as a value of the annotated type `tp`."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return data
    if origin is Union:
        if data is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) != 1:
            raise TypeError(f"the project facts cannot decode the union {tp}")
        return decode(options[0], data)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        cls: Any = tp
        hints = _hints(cls)
        return cls(*(decode(hints[f.name], item) for f, item in zip(dataclasses.fields(cls), data)))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(args[0], item) for item in data)
        return tuple(decode(a, item) for a, item in zip(args, data))
    if origin is frozenset:
        return frozenset(decode(args[0], item) for item in data)
    if origin is list:
        return [decode(args[0], item) for item in data]
    if origin is dict:
        return {decode(args[0], key): decode(args[1], item) for key, item in data.items()}
    if tp in _PRIMITIVES:
        if not isinstance(data, tp) and not (tp is float and isinstance(data, int)):
            raise TypeError(f"expected {tp.__name__}, got {type(data).__name__}")
        return data
    raise TypeError(f"the project facts cannot decode {tp}")


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
