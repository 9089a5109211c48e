"""The settings one file is linted with: which rules run, and the values of the options.

Configuration files and the command line produce a `Settings` (gpulint/config.py); rules
read it through their context (`ctx.settings.value(NUM_WORKERS)`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace
from typing import Any, Mapping, Optional, TypeVar

from gpulint.core.options import (
    LINE_LENGTH,
    LINT_TESTS,
    MAX_FILE_SIZE,
    MAX_FIX_SIZE,
    TORCH_VERSION,
    Option,
)
from gpulint.records import dataclass

T = TypeVar("T")
SELECT_ALL = "ALL"


class ConfigError(Exception):
    """A bad setting; the message names the key and where it came from."""


def _specificity(selector: str) -> int:
    return -1 if selector == SELECT_ALL else len(selector)


def selector_matches(selector: str, code: str) -> bool:
    """`ALL`, the code itself or a prefix of it (`GPU1` matches GPU101)."""
    return selector == SELECT_ALL or code.startswith(selector)


def _decide(code: str, select: tuple[str, ...], extend_select: tuple[str, ...],
            ignore: tuple[str, ...]) -> Optional[bool]:
    """One layer's verdict on `code`: the most specific matching selector wins, ignore wins a
    tie; None when no selector of the layer matches."""
    best: Optional[tuple[int, bool]] = None
    for selector in select + extend_select:
        if selector_matches(selector, code) and (best is None or _specificity(selector) > best[0]):
            best = (_specificity(selector), True)
    for selector in ignore:
        if selector_matches(selector, code) and (best is None or _specificity(selector) >= best[0]):
            best = (_specificity(selector), False)
    return None if best is None else best[1]


@dataclass(frozen=True)
class Selection:
    """A layer of rule selection on top of the configuration's: the command line's."""

    select: Optional[tuple[str, ...]] = None  # given: the selection starts over
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] = ()  # empty: every stable rule
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    preview: bool = False
    # option values set by configuration, as (key, value) sorted by key; the others are defaults
    values: tuple[tuple[str, Any], ...] = ()
    test_file: bool = False  # this file matches test-patterns (set per file)
    # codes or prefixes off for this one file (per-file-ignores); they beat any selection
    per_file_ignores: tuple[str, ...] = ()
    # the command line's selection, applied after the configuration's (it wins)
    overrides: tuple[Selection, ...] = ()
    # the versions the project's pins admit of the libraries other than torch a fix writes into (core/floors.py
    # LIBRARIES), as (name, the lowest admitted, the first MAJOR.MINOR not admitted); only those it bounds
    libraries: tuple[tuple[str, Optional[tuple[int, int]], Optional[tuple[int, int]]], ...] = ()
    # the first MAJOR.MINOR of torch the pin the torch floor comes from no longer admits (`pytorch=2.0.1`: 2.1);
    # None when that pin admits every later torch, or the floor is configured (`torch-version`) or unknown
    torch_above: Optional[tuple[int, int]] = None

    def value(self, option: Option[T]) -> T:
        """The option's value for this file: the configured one, else its default."""
        for key, value in self.values:
            if key == option.key:
                return value
        return option.default

    def with_values(self, values: Mapping[str, Any]) -> "Settings":
        """These option values (by configuration key) on top of the current ones."""
        merged = dict(self.values)
        merged.update(values)
        return replace(self, values=tuple(sorted(merged.items())))

    @property
    def torch_version(self) -> Optional[tuple[int, int]]:
        return self.value(TORCH_VERSION)

    def library_range(self, name: str) -> tuple[Optional[tuple[int, int]], Optional[tuple[int, int]]]:
        """(the lowest version of library `name` the project admits, the first MAJOR.MINOR it no longer
        admits); (None, None) when its pins do not bound it."""
        for library, floor, above in self.libraries:
            if library == name:
                return floor, above
        return None, None

    @property
    def lint_tests(self) -> bool:
        return self.value(LINT_TESTS)

    @property
    def max_file_size(self) -> int:
        return self.value(MAX_FILE_SIZE)

    @property
    def max_fix_size(self) -> int:
        return self.value(MAX_FIX_SIZE)

    @property
    def line_length(self) -> int:
        """The line length fixes keep to; 88 (ruff's and black's default) when nothing sets one."""
        return self.value(LINE_LENGTH) or 88

    def is_enabled(self, code: str, preview_rule: bool = False, opt_in: bool = False) -> bool:
        """Ruff's semantics: the most specific selector wins; ignore wins a tie. The command
        line's selection (`overrides`) is a layer on top of the configuration's. An `opt_in` rule
        (advice most projects would not take unasked) runs only when selected by its exact code."""
        if any(selector_matches(selector, code) for selector in self.per_file_ignores):
            return False
        enabled = _decide(code, self.select or (SELECT_ALL,), self.extend_select, self.ignore)
        exact = code in self.select or code in self.extend_select
        for layer in self.overrides:
            if layer.select is not None:  # starts the selection over
                enabled = _decide(code, layer.select, layer.extend_select, layer.ignore)
                exact = code in layer.select or code in layer.extend_select
            else:  # changes only the rules it names
                decided = _decide(code, (), layer.extend_select, layer.ignore)
                if decided is not None:
                    enabled = decided
                exact = exact or code in layer.extend_select
        # preview rules run only when opted in, or when selected by their exact code
        if preview_rule and not self.preview and not exact:
            return False
        if opt_in and not exact:
            return False
        return bool(enabled)

    def fingerprint(self) -> str:
        data = asdict(self)
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]
