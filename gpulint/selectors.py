"""Rule selectors (`GPU101`, `GPU1`, `ALL`): parsing them, and a did-you-mean for unknown ones.

The known codes come from the registry's module names (`gpulint.rules.rule_codes`), so
validating `--select GPU110` imports no rule and no LibCST.
"""

from __future__ import annotations

from typing import Iterable, Union

from gpulint.core.settings import SELECT_ALL, ConfigError
from gpulint.rules import rule_codes

FAMILY = "GPU"


def parse_codes(value: Union[str, Iterable[str], None]) -> tuple[str, ...]:
    """`"GPU1, GPU201"` or a list -> ("GPU1", "GPU201"), validated as codes or prefixes."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for item in items:
        code = str(item).strip().upper()
        if not code:
            continue
        if code != SELECT_ALL and not (code.startswith(FAMILY) and code[len(FAMILY):].isdigit() or code == FAMILY):
            raise ConfigError(f"invalid rule selector {str(item).strip()!r}: expected a code such as GPU101, a prefix "
                              "such as GPU1, or ALL")
        if not selects_something(code):  # a typo must not silently select (or ignore) nothing
            raise ConfigError(unknown_selector_message(code))
        out.append(code)
    return tuple(out)


def selects_something(selector: str) -> bool:
    """`ALL`, a known code, or a prefix of one (`GPU`, `GPU1`, `GPU10`)."""
    return selector == SELECT_ALL or any(code.startswith(selector) for code in rule_codes())


def _selectors() -> set[str]:
    return {code[:n] for code in rule_codes() for n in range(len(FAMILY), len(code) + 1)}


def _distance(a: str, b: str) -> int:
    """Edit distance counting a swap of neighbours as one edit (GPU110 -> GPU101)."""
    rows = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        rows[i][0] = i
    for j in range(len(b) + 1):
        rows[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            rows[i][j] = min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                rows[i][j] = min(rows[i][j], rows[i - 2][j - 2] + 1)
    return rows[len(a)][len(b)]


def suggest(selector: str) -> list[str]:
    """The known codes or prefixes closest to an unknown one (at most three, at most two edits)."""
    candidates = [s for s in _selectors() if abs(len(s) - len(selector)) <= 1]
    scored = sorted((_distance(selector, s), len(s) != len(selector), s) for s in candidates)
    if not scored or scored[0][0] > 2:
        return []
    best = scored[0][:2]
    return [s for d, longer, s in scored if (d, longer) == best][:3]


def unknown_selector_message(selector: str) -> str:
    """Why `selector` (upper case, GPU followed by digits) is refused, with a did-you-mean."""
    kind = "code" if len(selector) >= len(rule_codes()[0]) else "prefix"
    message = f"unknown rule {kind} {selector!r}" + (": it selects no rule" if kind == "prefix" else "")
    close = suggest(selector)
    if close:
        message += f"; did you mean {' or '.join(close)}?"
    return message + " (all codes: `gpulint rule --all`)"
