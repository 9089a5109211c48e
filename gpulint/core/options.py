"""Typed settings: what a configuration key accepts, its default, and how `show-config` shows it.

An `Option` is declared once, where it is used: the general ones below, a rule's own on its
rule class (`Rule.options`). Configuration validation, `show-config`, the rule docs and the
fixture headers all read these declarations, so a new option touches no other file.
Options travel as plain data (`to_json`) so a run answered from the cache can validate a
configuration without importing the rules.
"""

from __future__ import annotations

import re
from typing import Any, Generic, Optional, TypeVar, Union

from gpulint.records import dataclass

T = TypeVar("T")

_SIZE_UNITS = {"": 1, "b": 1, "kb": 1024, "kib": 1024, "k": 1024, "mb": 1024 ** 2, "mib": 1024 ** 2, "m": 1024 ** 2,
               "gb": 1024 ** 3, "gib": 1024 ** 3, "g": 1024 ** 3}


class OptionError(ValueError):
    """A value an option does not accept; the message says what it expects."""


def describe_value(value: object) -> str:
    """`int 8`, `str '8'`: the type and the value, as error messages show them."""
    return f"{type(value).__name__} {value!r}"


def parse_size(value: object) -> int:
    """`2097152`, `"2 MB"`, `"512KB"` -> bytes (1 KB = 1024 bytes); ValueError when not a size."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        number = value
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(value))
        if match is None or match.group(2).lower() not in _SIZE_UNITS:
            raise ValueError(value)
        number = int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()])
    if number < 1:
        raise ValueError(value)
    return number


def format_size(size: int) -> str:
    """Bytes as the settings write them: "2 MB", "256 KB", "1000 B"."""
    for unit, factor in (("GB", 1024 ** 3), ("MB", 1024 ** 2), ("KB", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KB"


def version_text(version: tuple[int, int]) -> str:
    """A torch version as messages and `show-config` write it: "2.4"."""
    return f"{version[0]}.{version[1]}"


def parse_version(value: str) -> tuple[int, int]:
    """`"2.4"` -> (2, 4); OptionError when not MAJOR.MINOR."""
    parts = str(value).strip().split(".")
    try:
        major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise OptionError(f"invalid torch-version {value!r}: expected MAJOR.MINOR such as 2.4") from None
    return major, minor


# ---------------------------------------------------------------------------------------------
# kinds: how a TOML value is checked, how a fixture header spells it, how show-config prints it

@dataclass(frozen=True)
class Choice:
    values: tuple[str, ...]

    def read(self, value: object) -> str:
        if value not in self.values:
            raise OptionError(f"expected one of {', '.join(map(repr, self.values))}, got {describe_value(value)}")
        return str(value)

    def from_text(self, text: str) -> str:
        return self.read(text)

    def show(self, value: Any) -> object:
        return value



@dataclass(frozen=True)
class Integer:
    minimum: int = 1

    def read(self, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < self.minimum:
            raise OptionError(f"expected an integer >= {self.minimum}, got {describe_value(value)}")
        return value

    def from_text(self, text: str) -> int:
        try:
            return self.read(int(text))
        except ValueError:
            raise OptionError(f"expected an integer >= {self.minimum}, got {describe_value(text)}") from None

    def show(self, value: Any) -> object:
        return value



@dataclass(frozen=True)
class Flag:
    def read(self, value: object) -> bool:
        if not isinstance(value, bool):
            raise OptionError(f"expected true or false, got {describe_value(value)}")
        return value

    def from_text(self, text: str) -> bool:
        if text.lower() not in ("true", "false"):
            raise OptionError(f"expected true or false, got {describe_value(text)}")
        return text.lower() == "true"

    def show(self, value: Any) -> object:
        return value



@dataclass(frozen=True)
class Size:
    def read(self, value: object) -> int:
        try:
            return parse_size(value)
        except ValueError:
            raise OptionError('expected a size in bytes or with a unit, such as 2097152 or "2 MB", '
                              f"got {describe_value(value)}") from None

    def from_text(self, text: str) -> int:
        return self.read(text)

    def show(self, value: Any) -> object:
        return format_size(value)



@dataclass(frozen=True)
class Version:
    """A torch version floor, MAJOR.MINOR; None (the default) means any version."""

    def read(self, value: object) -> tuple[int, int]:
        if not isinstance(value, str):
            hint = ' (write it as a string, such as "2.4": as a number 2.10 would read as 2.1)'
            raise OptionError(f"expected a version string such as \"2.4\", got {describe_value(value)}{hint}")
        if not re.fullmatch(r"\s*\d+\.\d+(\.\d+)?\s*", value):
            raise OptionError(f"expected MAJOR.MINOR such as \"2.4\", got {value!r}")
        return parse_version(value)

    def from_text(self, text: str) -> tuple[int, int]:
        return self.read(text)

    def show(self, value: Any) -> object:
        return version_text(value) if value else "any"



Kind = Union[Choice, Integer, Flag, Size, Version]
_KINDS: dict[str, type] = {"choice": Choice, "integer": Integer, "flag": Flag, "size": Size, "version": Version}


@dataclass(frozen=True)
class Option(Generic[T]):
    """One configuration key with a typed value. Read it with `Settings.value(option)`."""

    key: str  # as written in configuration files: "num-workers"
    kind: Kind
    default: T
    help: str  # one line, for show-config and the docs

    def read(self, value: object) -> T:
        """The typed value of a TOML value; OptionError says what was expected."""
        return self.kind.read(value)  # type: ignore[return-value]

    def show(self, value: Optional[T] = None) -> object:
        """The value as show-config prints it (the default when none is given)."""
        return self.kind.show(self.default if value is None else value)

    def to_json(self) -> dict[str, Any]:
        kind: dict[str, Any] = {"kind": next(name for name, cls in _KINDS.items() if isinstance(self.kind, cls))}
        if isinstance(self.kind, Choice):
            kind["values"] = list(self.kind.values)
        elif isinstance(self.kind, Integer):
            kind["minimum"] = self.kind.minimum
        default = list(self.default) if isinstance(self.default, tuple) else self.default
        return {"key": self.key, "help": self.help, "default": default, **kind}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Option[Any]":
        """The inverse of `to_json`; KeyError, TypeError or ValueError on data of another shape."""
        name = data["kind"]
        if name == "choice":
            kind: Kind = Choice(tuple(str(v) for v in data["values"]))
        elif name == "integer":
            kind = Integer(int(data["minimum"]))
        else:
            kind = _KINDS[name]()
        default = data["default"]
        if isinstance(default, list):
            default = tuple(default)
        return cls(str(data["key"]), kind, default, str(data["help"]))


# ---------------------------------------------------------------------------------------------
# the options that are not any one rule's

DEFAULT_MAX_FILE_SIZE = 2 * 1024 * 1024
DEFAULT_MAX_FIX_SIZE = 256 * 1024

TORCH_VERSION: Option[Optional[tuple[int, int]]] = Option(
    "torch-version", Version(), None,
    "the oldest torch the project supports: fixes that need a newer torch are not offered "
    "(unset: the torch floor the project's pyproject.toml, setup.cfg or setup.py declares)")
LINT_TESTS: Option[bool] = Option(
    "lint-tests", Flag(), False,
    "run the training-step, loader and optimizer rules on test files too")
MAX_FILE_SIZE: Option[int] = Option(
    "max-file-size", Size(), DEFAULT_MAX_FILE_SIZE,
    "bigger files are a GPU000 finding instead of being parsed")
MAX_FIX_SIZE: Option[int] = Option(
    "max-fix-size", Size(), DEFAULT_MAX_FIX_SIZE,
    "`fix` leaves bigger files unfixed, with a GPU000 finding (each fix round parses the file again)")

STRICTNESS: Option[str] = Option(
    "strictness", Choice(("default", "pedantic")), "default",
    "default: report only what the project shows evidence for, premise by premise; pedantic: also findings "
    "whose premises gpulint cannot decide (each says which)")

LINE_LENGTH: Option[Optional[int]] = Option(
    "line-length", Integer(1), None,
    "the line length code written by fixes keeps to (unset: the project's ruff, black or flake8 line length, "
    "else 88)")

GENERAL_OPTIONS: tuple[Option[Any], ...] = (
    TORCH_VERSION, LINT_TESTS, MAX_FILE_SIZE, MAX_FIX_SIZE, STRICTNESS, LINE_LENGTH)
