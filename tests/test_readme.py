"""The README stays honest: its rule table is what the rules say, its commands exist."""

from __future__ import annotations

import re
from pathlib import Path

from scripts.update_readme import render

ROOT = Path(__file__).resolve().parent.parent


def test_rule_table_is_current() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert render(readme) == readme, "run: python scripts/update_readme.py"


def test_quickstart_has_the_two_setup_commands_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Quickstart.*?```bash\n(.*?)```", readme, re.S)
    assert block is not None
    commands = [line for line in block.group(1).splitlines() if line.strip()]
    assert commands[0] == "pip install -e . && gpulint check fixtures/"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci.splitlines(), ".ci/run must run the README's test command verbatim"
