"""The README stays honest: its rule table is what the rules say, its commands exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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
    assert commands[0] == "pip install -e . && gpulint check examples/"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci.splitlines(), ".ci/run must run the README's test command verbatim"


def test_quickstart_claims_are_what_gpulint_prints_on_the_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first command's promised output (README and examples/README.md) is the real one."""
    from click.testing import CliRunner

    from gpulint.cli import main

    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["check", "--no-cache", "examples/"])
    assert result.exit_code == 1
    lines = [line for line in result.stdout.splitlines() if line.startswith("examples/")]
    files = {line.split(":")[0] for line in lines}
    # findings, and none of the fixture suite's noise (cases meant to stay silent, expected fixes)
    assert lines and result.stdout.count(": GPU") == len(lines)
    assert not re.search(r"fixtures/|_not_flagged|\.fixed\.py|tests/", result.stdout), result.stdout
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    claim = re.search(r"it prints (\d+) findings in (\d+) files", readme)
    assert claim is not None and (int(claim.group(1)), int(claim.group(2))) == (len(lines), len(files))
    assert f"Found {len(lines)} findings." in result.stdout
    examples = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
    assert f"gpulint check examples/                              # {len(lines)} findings" in examples
    listed = set(re.findall(r"\[`([\w.]+)`\]\(", examples))
    assert listed == {Path(f).name for f in files}, "examples/README.md lists every example"
    shown = re.search(r"\$ gpulint check examples/churn.ipynb\n(.*?)```", readme, re.S)
    assert shown is not None
    for line in shown.group(1).splitlines():
        prefix = line.split("...")[0]
        assert any(real.startswith(prefix) for real in lines), line
