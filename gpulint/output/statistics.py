"""`--statistics`: how many findings per code, most frequent first."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Sequence

from gpulint.core.edits import Applicability
from gpulint.core.findings import Finding


def statistics(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    counts = Counter(f.code for f in findings)
    names = {f.code: f.name for f in findings}
    fixable = Counter(f.code for f in findings if f.fix is not None and f.fix.applicability is Applicability.SAFE)
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [{"code": code, "name": names[code], "count": count, "fixable": fixable[code] == count and count > 0}
            for code, count in rows]


def render_statistics(findings: Sequence[Finding], as_json: bool = False) -> str:
    rows = statistics(findings)
    if as_json:
        return json.dumps(rows, indent=2) + "\n"
    width = max((len(str(r["count"])) for r in rows), default=1)
    return "".join(f"{r['count']:>{width}}\t{r['code']}\t{'[*] ' if r['fixable'] else '    '}{r['name']}\n"
                   for r in rows)
