"""Regenerate the README's rule table from the rules themselves and the measured precision on real code
(bench/precision/RESULTS.md); tests/test_readme.py checks it is current."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpulint.output.docs import rules_table  # noqa: E402
from gpulint.rules import all_rules  # noqa: E402

BEGIN, END = "<!-- RULES:BEGIN -->", "<!-- RULES:END -->"
# The one place that says which torch the rule docs' own figures come from ("measured on CPU").
MEASURED_WITH = (
    "The figures the rule docs give as *measured on CPU* were measured by this project with torch 2.14.1 on\n"
    "a CPU; which torch version has which API was read from torch's own sources, 1.13.1 through 2.14.1. The\n"
    "tests pin torch 2.13.0 only because CI checks with that build; gpulint reads code written for any torch.\n"
    "Figures quoted from elsewhere name their source.")
PRECISION = ROOT / "bench" / "precision" / "RESULTS.md"


def measured_precision() -> dict[str, str]:
    """code -> "100.0 % of 29" from the generated summary of bench/precision/RESULTS.md."""
    text = PRECISION.read_text(encoding="utf-8")
    block = text.split("<!-- SUMMARY:BEGIN -->", 1)[1].split("<!-- SUMMARY:END -->", 1)[0]
    found = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 6 and cells[0].startswith("GPU"):
            found[cells[0]] = f"{cells[5]} of {cells[2]}"
    return found


def with_precision(table: str) -> str:
    """The rule table with a column for the precision measured on real repositories."""
    precision = measured_precision()
    lines = table.splitlines()
    out = [lines[0] + " precision on real code |", lines[1] + "---|"]
    for line in lines[2:]:
        code = line.strip("|").split("|")[0].strip()
        out.append(line + f" {precision.get(code, '-')} |")
    return "\n".join(out)


def rules_section() -> str:
    return (
        "## Rules\n\n"
        "`safe` fixes keep behaviour and are applied by `gpulint fix`; `unsafe` fixes may change numerics or\n"
        "semantics and are applied only with `--unsafe-fixes`. `preview` rules run only with `--preview` or when\n"
        "selected by their code. `gpulint rule CODE` prints a rule's full documentation, with the measured figure\n"
        "behind it and its source. Precision is the share of findings that are right, read one by one on\n"
        "20 public repositories ([bench/precision/RESULTS.md](bench/precision/RESULTS.md), with recall; a second\n"
        "reading of 30 of them, drawn at random, agreed on every verdict and found one fix that had to become\n"
        "unsafe); on 7 hold-out repositories read after the rules were final, the first reading was 258 right\n"
        "of 262, and the 85 findings in their notebooks, read later, were all right.\n\n"
        + MEASURED_WITH + "\n\n"
        + with_precision(rules_table(all_rules())) + "\n"
    )


def render(readme: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    return pattern.sub(lambda _: f"{BEGIN}\n{rules_section()}{END}", readme)


if __name__ == "__main__":
    path = ROOT / "README.md"
    path.write_text(render(path.read_text(encoding="utf-8")), encoding="utf-8")
