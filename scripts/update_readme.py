"""Regenerate the README's rule table from the rules themselves and the measured precision on real code
(bench/precision/RESULTS.md); tests/test_readme.py checks it is current."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpulint.output.docs import habits_table, rules_table  # noqa: E402
from gpulint.rules import all_rules  # noqa: E402

BEGIN, END = "<!-- RULES:BEGIN -->", "<!-- RULES:END -->"
# The one place that says which torch the rule docs' own figures come from ("measured on CPU").
MEASURED_WITH = (
    "The figures the rule docs give as *measured on CPU* were measured by this project with torch 2.14.1 on\n"
    "a CPU; which torch version has which API was read from torch's own sources, 1.13.1 through 2.14.1. The\n"
    "tests pin torch 2.13.0 only because CI checks with that build; gpulint reads code written for any torch.\n"
    "Figures quoted from elsewhere name their source.")
PRECISION = ROOT / "bench" / "precision" / "RESULTS.md"


def measured_precision(block_name: str) -> dict[str, str]:
    """code -> "100.0 % of 29" from a generated summary block of bench/precision/RESULTS.md: the strict
    precision (its `strict` column, or `precision` in older tables) over the findings read."""
    text = PRECISION.read_text(encoding="utf-8")
    begin, end = f"<!-- {block_name}:BEGIN -->", f"<!-- {block_name}:END -->"
    if begin not in text:
        return {}
    block = text.split(begin, 1)[1].split(end, 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in block.splitlines()
            if line.strip().startswith("|")]
    if not rows:
        return {}
    header = rows[0]
    column = header.index("strict") if "strict" in header else header.index("precision")
    read = [header.index(v) for v in ("TP", "NP", "FP") if v in header]
    found = {}
    for cells in rows[1:]:
        if cells[0].startswith("GPU") and len(cells) > column:
            total = sum(int(cells[i]) for i in read if cells[i].isdigit())
            cell = cells[column]
            # a small count is already written as "2 of 8"; a percentage gets its denominator
            found[cells[0]] = ("no finding" if not total else cell if " of " in cell else f"{cell} of {total}")
    return found


def with_precision(table: str) -> str:
    """The rule table with the precision measured on real repositories: the first reading of the blind
    hold-out (strict), then the development corpus the rules were tuned on."""
    blind = measured_precision("BLIND25-FIRST-SUMMARY")
    # a preview rule may also sit in the stable block with no finding read there (GPU301)
    for code, cell in measured_precision("BLIND25-PREVIEW-FIRST-SUMMARY").items():
        if blind.get(code, "no finding") == "no finding":
            blind[code] = cell
    dev = measured_precision("SUMMARY")
    lines = table.splitlines()
    out = [lines[0] + " first reading, latest blind hold-out | tuned-on corpus |", lines[1] + "---|---|"]
    for line in lines[2:]:
        code = line.strip("|").split("|")[0].strip()
        out.append(line + f" {blind.get(code, '-')} | {dev.get(code, '-')} |")
    return "\n".join(out)


def rules_section() -> str:
    return (
        "## Rules\n\n"
        "`safe` fixes keep behaviour and are applied by `gpulint fix`; `unsafe` fixes may change numerics or\n"
        "semantics and are applied only with `--unsafe-fixes`. `preview` rules run only with `--preview` or when\n"
        "selected by their code. `gpulint rule CODE` prints a rule's full documentation, with the measured figure\n"
        "behind it and its source. Precision is the share of findings that are right and whose advice pays off\n"
        "for that code, read one by one ([bench/precision/RESULTS.md](bench/precision/RESULTS.md)). The figure\n"
        "that counts is the first reading of the latest blind hold-out, 16 public repositories nobody here had\n"
        "opened, at the commit the rules were frozen at (2026-12-08; the twenty-fifth such reading, blind in\n"
        "both its recall and its precision halves): 24 of the 42 findings of the stable rules paid off (57.1 %;\n"
        "the twenty-fourth reading had 21.3 % of 89, the twenty-third 57.5 % of 113). 12 were true but could\n"
        "not pay off there (8 on one folder of toy 2-D experiments, an optimizer whose state a checkpoint\n"
        "restores, a CPU-only project) and 6 wrong (a torch pin stated by an NVIDIA container image, loaders of\n"
        "inference, a GPU001 fix that named a dict's device); 21 of the 36 instances the recall readers listed\n"
        "were found. GPU003 had 15 of 17, GPU201 4 of 7, GPU001 3 of 12; no rule kept the 95 % the issue asks.\n"
        "The preview rules had their first reading on the same repositories: 12 of 25 findings paid off, which\n"
        "is why they stay in preview. RESULTS.md lists the families and what its fixes changed (an NGC\n"
        "container's torch, loaders that feed no training, projects that never leave the CPU): the next\n"
        "hold-out gives the next figure. The last column is the 20\n"
        "repositories the rules were developed on: a regression suite, not "
        "a measurement.\n\n"
        + MEASURED_WITH + "\n\n"
        + with_precision(rules_table(all_rules())) + "\n\n"
        "### The guide's habits\n\n"
        "The habits of the GPU-optimisation guide gpulint was built from, and the rules that check each one\n"
        "(each rule's documentation names its habit):\n\n"
        + habits_table(all_rules()) + "\n"
    )


def render(readme: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    return pattern.sub(lambda _: f"{BEGIN}\n{rules_section()}{END}", readme)


def main() -> None:
    path = ROOT / "README.md"
    text = path.read_text(encoding="utf-8")
    new = render(text)
    if new != text:
        path.write_text(new, encoding="utf-8")
        print("wrote README.md")


if __name__ == "__main__":
    main()
