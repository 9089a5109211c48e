"""Regenerate the README's rule table from the rules themselves (tests/test_readme.py checks it)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpulint.output.docs import rules_table  # noqa: E402
from gpulint.rules import all_rules  # noqa: E402

BEGIN, END = "<!-- RULES:BEGIN -->", "<!-- RULES:END -->"


def rules_section() -> str:
    return (
        "## Rules\n\n"
        "`safe` fixes keep behaviour and are applied by `gpulint fix`; `unsafe` fixes may change numerics or\n"
        "semantics and are applied only with `--unsafe-fixes`. `preview` rules run only with `--preview` or when\n"
        "selected by their code. `gpulint rule CODE` prints a rule's full documentation, with the measured figure\n"
        "behind it and its source.\n\n" + rules_table(all_rules()) + "\n"
    )


def render(readme: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    return pattern.sub(lambda _: f"{BEGIN}\n{rules_section()}{END}", readme)


if __name__ == "__main__":
    path = ROOT / "README.md"
    path.write_text(render(path.read_text(encoding="utf-8")), encoding="utf-8")
