"""`--statistics`: how many findings per code, most frequent first."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Sequence

from gpulint.core.findings import Finding


def statistics(findings: Sequence[Finding], unsafe: bool = False) -> list[dict[str, Any]]:
    """Per code, most frequent first: how many findings, and how many `gpulint fix` would fix (with
    --unsafe-fixes, when `unsafe`). `fixable` is set when it would fix every one, as ruff's is."""
    counts = Counter(f.code for f in findings)
    names = {f.code: f.name for f in findings}
    fixable = Counter(f.code for f in findings if f.fix is not None and f.fix.is_applicable(unsafe))
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [{"code": code, "name": names[code], "count": count, "fixable": fixable[code] == count and count > 0,
             "fixable_count": fixable[code]} for code, count in rows]


def render_statistics(findings: Sequence[Finding], as_json: bool = False, unsafe: bool = False) -> str:
    """ruff's table: count, code, a fixable column (`[*]` all fixable, `[-]` some, `[ ]` none), name."""
    rows = statistics(findings, unsafe)
    if as_json:
        return json.dumps(rows, indent=2) + "\n"
    width = max((len(str(r["count"])) for r in rows), default=1)

    def marker(row: dict[str, Any]) -> str:
        return "[*]" if row["fixable"] else ("[-]" if row["fixable_count"] else "[ ]")

    return "".join(f"{r['count']:>{width}}\t{r['code']}\t{marker(r)} {r['name']}\n" for r in rows)
