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
from typing import Any, Callable, Union

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
    return cls(**{name: read(data[name]) for name, read in _field_decoders(cls) if name in data})


def decode(tp: Any, data: Any) -> Any:
    """`data` (from `encode`) as a value of the annotated type `tp`."""
    return _decoder(tp)(data)


Decoder = Callable[[Any], Any]


@lru_cache(maxsize=None)
def _field_decoders(cls: type) -> tuple[tuple[str, Decoder], ...]:
    hints = _hints(cls)
    return tuple((f.name, _decoder(hints[f.name])) for f in dataclasses.fields(cls))


@lru_cache(maxsize=None)
def _decoder(tp: Any) -> Decoder:
    """One function per annotated type, built once: a warm run decodes every file's facts from the cache, and
    working out the annotation again for each of their tens of thousands of values was most of that cost."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return _same
    if origin is Union:
        options = [a for a in args if a is not type(None)]
        if len(options) != 1:
            raise TypeError(f"the project facts cannot decode the union {tp}")
        inner = _decoder(options[0])
        if type(None) not in args:
            return inner
        return lambda data: None if data is None else inner(data)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        cls: Any = tp
        fields = _field_decoders(cls)
        return lambda data: cls(*(read(item) for (_, read), item in zip(fields, data)))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item_decoder = _decoder(args[0])
            return lambda data: tuple(map(item_decoder, data))
        decoders = [_decoder(a) for a in args]
        return lambda data: tuple(read(item) for read, item in zip(decoders, data))
    if origin is frozenset:
        item_decoder = _decoder(args[0])
        return lambda data: frozenset(map(item_decoder, data))
    if origin is list:
        item_decoder = _decoder(args[0])
        return lambda data: list(map(item_decoder, data))
    if origin is dict:
        keys, values = _decoder(args[0]), _decoder(args[1])
        return lambda data: {keys(key): values(item) for key, item in data.items()}
    if tp in _PRIMITIVES:
        return _primitive(tp)
    raise TypeError(f"the project facts cannot decode {tp}")


def _same(data: Any) -> Any:
    return data


def _primitive(tp: type) -> Decoder:
    """The value itself, once it is checked to be of the type (a float field also takes an int)."""
    accepted: tuple[type, ...] = (float, int) if tp is float else (tp,)

    def check(data: Any) -> Any:
        if not isinstance(data, accepted):
            raise TypeError(f"expected {tp.__name__}, got {type(data).__name__}")
        return data

    return check


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
