"""`dataclass`, with the class made a dataclass when it is first used rather than when it is defined.

Making a class a dataclass compiles each method it generates (`__init__`, `__repr__`, `__eq__`, and for a frozen
class `__hash__`, `__setattr__` and `__delattr__`) with an `exec` of its own: about 0.4 ms a class in Python
3.11, and gpulint defines some 170, most of them on the way to linting a file. A run uses about half of them
(a warm `check` two in three, the rest are other commands', other rules' or other formats'), so each class
here is handed to `dataclasses.dataclass`, with the same arguments, only when it is first needed:

- an instance is made, compared, hashed, shown or changed: the class's own `__init__`, `__eq__`, `__hash__`,
  `__repr__`, `__setattr__` or `__delattr__` stands in until then (only those `dataclasses.dataclass` would
  add, never one the class body defines), makes the class a dataclass and calls the method it added;
- its fields are asked for (`dataclasses.fields`, `replace`, `asdict`, `is_dataclass`, a subclass made a
  dataclass): `__dataclass_fields__` stands in the same way.

The class is the same object, made a dataclass by the same function with the same arguments and the same
body, so it behaves as one made at once; only a class attribute holding a `field(...)` default reads as that
`Field` until then (no code reads one). Classes with other arguments (`order=True`) are made at once.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional

# the arguments a deferred class may take (others: made at once)
_DEFERRED_ARGUMENTS = frozenset({"frozen", "eq"})
_FIELDS = "__dataclass_fields__"
_lock = threading.RLock()  # a class is made a dataclass once, whichever thread first uses it


def _realize(cls: type, stand_ins: tuple[str, ...], arguments: dict[str, Any]) -> None:
    with _lock:
        if _PENDING.pop(cls, None) is None:
            return  # made already
        for name in (*stand_ins, _FIELDS):
            delattr(cls, name)  # the class body as written, for `dataclasses.dataclass` to read
        dataclasses.dataclass(cls, **arguments)


class _Fields:
    """`__dataclass_fields__` of a class not yet made a dataclass: reading it makes the class one."""

    def __init__(self, owner: type, stand_ins: tuple[str, ...], arguments: dict[str, Any]) -> None:
        self.owner, self.stand_ins, self.arguments = owner, stand_ins, arguments

    def __get__(self, instance: object, kind: Optional[type] = None) -> Any:
        _realize(self.owner, self.stand_ins, self.arguments)
        return self.owner.__dict__[_FIELDS]


_PENDING: dict[type, _Fields] = {}


def _stand_in(cls: type, name: str, stand_ins: tuple[str, ...], arguments: dict[str, Any]) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        _realize(cls, stand_ins, arguments)
        real = cls.__dict__[name]
        if real is None:  # `__hash__ = None`: an unhashable dataclass
            raise TypeError(f"unhashable type: {type(self).__name__!r}")
        return real(self, *args, **kwargs)

    method.__name__ = name
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    return method


def _added_methods(cls: type, arguments: dict[str, Any]) -> tuple[str, ...]:
    """The methods `dataclasses.dataclass(cls, **arguments)` may set that the class body does not define."""
    names = ["__init__", "__repr__"]
    if arguments.get("eq", True):
        names += ["__eq__", "__hash__"]
    if arguments.get("frozen", False):
        names += ["__setattr__", "__delattr__"]
    return tuple(name for name in names if name not in cls.__dict__)


def _deferred(cls: type, arguments: dict[str, Any]) -> type:
    if _FIELDS in cls.__dict__ or "__slots__" in cls.__dict__:
        return dataclasses.dataclass(cls, **arguments)
    stand_ins = _added_methods(cls, arguments)
    with _lock:
        for name in stand_ins:
            setattr(cls, name, _stand_in(cls, name, stand_ins, arguments))
        fields = _PENDING[cls] = _Fields(cls, stand_ins, arguments)
        setattr(cls, _FIELDS, fields)
    return cls


def _dataclass(cls: Optional[type] = None, /, **arguments: Any) -> Any:
    if not set(arguments) <= _DEFERRED_ARGUMENTS:
        return dataclasses.dataclass(cls, **arguments) if cls is not None else dataclasses.dataclass(**arguments)
    if cls is None:
        return lambda kind: _deferred(kind, arguments)
    return _deferred(cls, arguments)


if TYPE_CHECKING:
    from dataclasses import dataclass as dataclass
else:
    dataclass = _dataclass
