"""Effective settings for a file: which rules run and the typed rule options."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Iterable, Optional


class ConfigError(Exception):
    """A bad setting; the message names the key and where it came from."""


AMP_DTYPES = ("float16", "bfloat16")


def parse_codes(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """`"GPU1, GPU201"` or a list -> ("GPU1", "GPU201"), validated as codes or prefixes."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for item in items:
        code = str(item).strip().upper()
        if not code:
            continue
        if code != "ALL" and not (code.startswith("GPU") and code[3:].isdigit() or code == "GPU"):
            raise ConfigError(f"invalid rule selector {item!r}: expected a code such as GPU101, a prefix such as GPU1, or ALL")
        out.append(code)
    return tuple(out)


def parse_version(value: str) -> tuple[int, int]:
    parts = str(value).strip().split(".")
    try:
        major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise ConfigError(f"invalid torch-version {value!r}: expected MAJOR.MINOR such as 2.4") from None
    return major, minor


def _specificity(selector: str) -> int:
    return -1 if selector == "ALL" else len(selector)


def _matches(selector: str, code: str) -> bool:
    return selector == "ALL" or code.startswith(selector)


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] = ()  # empty: every stable rule
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    preview: bool = False
    # rule options
    amp_dtype: str = "float16"
    num_workers: int = 4
    checkpoint_min_depth: int = 8
    checkpoint_unknown_depth: bool = False
    torch_version: Optional[tuple[int, int]] = None  # oldest torch the project supports
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def is_enabled(self, code: str, preview_rule: bool = False) -> bool:
        """Ruff's semantics: the most specific selector wins; ignore wins a tie."""
        if preview_rule and not self.preview:
            # preview rules run only when opted in, or when selected by their exact code
            if code not in self.select and code not in self.extend_select:
                return False
        best: tuple[int, bool] = (-2, False)
        selected = self.select or ("ALL",)
        for selector in selected + self.extend_select:
            if _matches(selector, code) and _specificity(selector) > best[0]:
                best = (_specificity(selector), True)
        for selector in self.ignore:
            if _matches(selector, code) and _specificity(selector) >= best[0]:
                best = (_specificity(selector), False)
        return best[1]

    def with_overrides(self, **changes: object) -> "Settings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def fingerprint(self) -> str:
        data = asdict(self)
        data.pop("extra", None)
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class CliOverrides:
    """Settings given on the command line; they win over every configuration file."""

    select: Optional[tuple[str, ...]] = None
    extend_select: Optional[tuple[str, ...]] = None
    ignore: Optional[tuple[str, ...]] = None
    preview: Optional[bool] = None

    def apply(self, settings: Settings) -> Settings:
        changes: dict[str, object] = {}
        if self.select is not None:
            changes["select"] = self.select
            changes["extend_select"] = ()
        if self.extend_select:
            changes["extend_select"] = tuple(changes.get("extend_select", settings.extend_select)) + self.extend_select  # type: ignore[arg-type]
        if self.ignore:
            changes["ignore"] = settings.ignore + self.ignore
        if self.preview is not None:
            changes["preview"] = self.preview
        return replace(settings, **changes)  # type: ignore[arg-type]


class SettingsResolver:
    """Effective settings per file: defaults, then configuration, then the command line."""

    def __init__(self, overrides: Optional[CliOverrides] = None, base: Optional[Settings] = None) -> None:
        self.overrides = overrides or CliOverrides()
        self.base = base or Settings()
        self._cache: dict[str, Settings] = {}

    def for_path(self, path) -> Settings:  # noqa: ANN001 - str or Path
        key = str(path)
        if key not in self._cache:
            self._cache[key] = self.overrides.apply(self.base)
        return self._cache[key]
