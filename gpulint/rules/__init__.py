"""The rule registry: every `Rule` subclass in this package, found by discovery.

A rule is one module, `gpuNNN_<name>.py` (`scripts/new_rule.py GPU4xx some-name` writes one),
holding one `Rule` subclass whose code and name are the ones its file name spells. Nothing
else lists the rules: the README table, `gpulint rule --all`, configuration validation,
`show-config` and verify all read them from here.

Importing this package is cheap: the rule modules (and LibCST with them) are imported on
the first call that needs the classes. The codes and names come from the module names, so
validating `--select GPU110` never parses anything; the options (for validating a
configuration) come from a run's results cache when it has them (engine/cache.py).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, Sequence

from gpulint.core.options import GENERAL_OPTIONS, Option

if TYPE_CHECKING:
    from gpulint.rules.base import Rule

RULE_MODULE = re.compile(r"gpu(\d{3})_([a-z0-9_]+)")


class RuleModule(NamedTuple):
    module: str  # gpulint.rules.gpu101_dataloader_without_pin_memory
    code: str  # GPU101
    name: str  # dataloader-without-pin-memory


@lru_cache(maxsize=1)
def rule_modules() -> tuple[RuleModule, ...]:
    """The rule modules of this package, by code, read from their file names (nothing is imported)."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        match = RULE_MODULE.fullmatch(info.name)
        if match is not None:
            code, name = f"GPU{match.group(1)}", match.group(2).replace("_", "-")
            found.append(RuleModule(f"{__name__}.{info.name}", code, name))
    return tuple(sorted(found, key=lambda m: m.code))


def rule_codes() -> tuple[str, ...]:
    """Every rule code, GPU000 included, sorted."""
    return tuple(m.code for m in rule_modules())


class RegistryError(Exception):
    """A rule module that breaks the convention (one Rule subclass, code and name as its file says)."""


@lru_cache(maxsize=1)
def all_rules() -> tuple[type["Rule"], ...]:
    """Every rule class, sorted by code (imports the rule modules, and LibCST with them)."""
    from gpulint.rules.base import Rule

    rules = []
    for entry in rule_modules():
        module = importlib.import_module(entry.module)
        found = [value for value in vars(module).values()
                 if isinstance(value, type) and issubclass(value, Rule) and value.__module__ == module.__name__
                 and "code" in vars(value)]
        if len(found) != 1:
            raise RegistryError(f"{entry.module}: expected one Rule subclass with a code, found {len(found)}")
        rule = found[0]
        if (rule.code, rule.name) != (entry.code, entry.name):
            raise RegistryError(f"{entry.module}: {rule.__name__} is {rule.code} {rule.name}, but its file name "
                                f"says {entry.code} {entry.name}")
        rules.append(rule)
    return tuple(rules)


def rule_by_code(code: str) -> Optional[type["Rule"]]:
    """The rule with this code (any case) or name."""
    for rule in all_rules():
        if rule.code == code.upper() or rule.name == code:
            return rule
    return None


def nearest_rule(text: str) -> Optional[str]:
    """The rule code (or name) closest to a mistyped one: `GPU999` -> GPU900, `GPU11` -> GPU101."""
    import difflib

    wanted = text.strip()
    modules = rule_modules()
    if wanted.upper().startswith("GPU"):
        codes = [m.code for m in modules]
        if not any(ch.isdigit() for ch in wanted):
            return None
        close = difflib.get_close_matches(wanted.upper(), codes, n=1, cutoff=0.5)
        if close:
            return close[0]
        digits = "".join(ch for ch in wanted if ch.isdigit())
        if digits:
            return min(codes, key=lambda code: (abs(int(code[3:]) - int(digits)), code))
        return None
    names = difflib.get_close_matches(wanted.lower(), [m.name for m in modules], n=1, cutoff=0.5)
    return names[0] if names else None


# ---------------------------------------------------------------------------------------------
# options: the general ones and every rule's, by key

_known_options: Optional[tuple[Option[Any], ...]] = None


def options_of(rules: Sequence[type["Rule"]]) -> tuple[Option[Any], ...]:
    """The general options, then each rule's own, once each; two options may not share a key."""
    out: dict[str, Option[Any]] = {option.key: option for option in GENERAL_OPTIONS}
    for rule in rules:
        for option in rule.options:
            if out.setdefault(option.key, option) != option:
                raise RegistryError(f"{rule.code} declares option {option.key!r}, which is declared differently "
                                    "elsewhere")
    return tuple(out.values())


def all_options() -> tuple[Option[Any], ...]:
    """Every configuration option with a value (the results cache may provide them without the rules)."""
    global _known_options
    if _known_options is None:
        _known_options = options_of(all_rules())
    return _known_options


def use_options(options: Sequence[Option[Any]]) -> None:
    """Take the options from a cached copy of `all_options()` made by this very build of gpulint."""
    global _known_options
    _known_options = tuple(options)
