"""`scripts/new_rule.py` writes a rule that everything picks up with no other file touched: the rule
table of `gpulint rule --all`, the README table, the configuration schema and `show-config`.

Runs on a copy of the checkout (git-tracked, so "no other file touched" is git's verdict).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE, NAME = "GPU499", "scaffold-probe"
MODULE = "gpulint/rules/gpu499_scaffold_probe.py"


def _git(copy: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", *args], cwd=copy, env=env, check=True, capture_output=True, text=True).stdout


def _gpulint(copy: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(copy))
    return subprocess.run([sys.executable, "-m", "gpulint", *args], cwd=cwd or copy, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed copy of the package, the scripts, the fixtures and the README, then the scaffold run in it."""
    target = tmp_path_factory.mktemp("checkout")
    for name in ("gpulint", "scripts", "fixtures", "tests"):
        shutil.copytree(ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "README.md", target / "README.md")
    shutil.copy(ROOT / "mkdocs.yml", target / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", target / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    (target / "bench" / "precision").mkdir(parents=True)  # the README table's precision column comes from here
    shutil.copy(ROOT / "bench" / "precision" / "RESULTS.md", target / "bench" / "precision" / "RESULTS.md")
    _git(target, "init", "-q")
    _git(target, "add", "-A")
    _git(target, "commit", "-q", "-m", "before")
    proc = subprocess.run([sys.executable, str(target / "scripts" / "new_rule.py"), CODE, NAME],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return target


def test_the_scaffold_writes_the_module_and_the_fixture_folder_only(copy: Path) -> None:
    status = sorted(_git(copy, "status", "--porcelain", "--untracked-files=all").splitlines())
    assert status == [f"?? fixtures/rules/{CODE}/basic.fixed.py", f"?? fixtures/rules/{CODE}/basic.py",
                      f"?? fixtures/rules/{CODE}/with_fast_not_flagged.py", f"?? {MODULE}"]


def test_the_scaffold_writes_an_ast_detector_with_a_libcst_fix(copy: Path) -> None:
    """Issue 25: new rules read CPython's `ast` and import LibCST only to build the fix."""
    source = (copy / MODULE).read_text(encoding="utf-8")
    assert "def detect(self, ctx: AstContext)" in source and "def build_fix(" in source
    assert "def visit_" not in source
    top_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert not any("libcst" in line for line in top_level)
    fixed = _gpulint(copy, "fix", "--isolated", "--no-cache", "--select", CODE, "--diff",
                     str(copy / "fixtures" / "rules" / CODE / "basic.py"))
    assert "(fast=True)" in fixed.stdout, fixed.stdout + fixed.stderr


def test_the_new_rule_is_in_the_rule_table_and_documented(copy: Path) -> None:
    table = _gpulint(copy, "rule", "--all")
    assert table.returncode == 0, table.stderr
    assert f"| {CODE} | {NAME} |" in table.stdout
    docs = _gpulint(copy, "rule", CODE)
    assert docs.returncode == 0 and f"# {NAME} ({CODE})" in docs.stdout


def test_one_command_puts_the_new_rule_in_the_readme_the_docs_and_the_site_nav(copy: Path) -> None:
    proc = subprocess.run([sys.executable, str(copy / "scripts" / "update_docs.py")], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(copy)))
    assert proc.returncode == 0, proc.stderr
    assert f"| {CODE} | {NAME} |" in (copy / "README.md").read_text(encoding="utf-8")
    assert f"# {NAME} ({CODE})" in (copy / "docs" / "rules" / f"{CODE}.md").read_text(encoding="utf-8")
    assert f"- {CODE}: rules/{CODE}.md" in (copy / "mkdocs.yml").read_text(encoding="utf-8")
    assert f"| {CODE} |" not in (ROOT / "README.md").read_text(encoding="utf-8")  # the real checkout is untouched
    again = subprocess.run([sys.executable, str(copy / "scripts" / "update_docs.py")], capture_output=True,
                           text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(copy)))
    assert again.returncode == 0 and again.stdout == "", again.stdout  # a second run has nothing to write


def test_the_new_rule_runs_on_its_own_cases(copy: Path) -> None:
    cases = copy / "fixtures" / "rules" / CODE
    flagged = _gpulint(copy, "check", "--isolated", "--no-cache", "--select", CODE, str(cases / "basic.py"))
    assert flagged.returncode == 1 and f"{CODE} " in flagged.stdout
    clean = _gpulint(copy, "check", "--isolated", "--no-cache", "--select", CODE,
                     str(cases / "with_fast_not_flagged.py"))
    assert clean.returncode == 0, clean.stdout + clean.stderr


def test_the_new_rule_passes_the_generic_rule_tests(copy: Path) -> None:
    """Registry, docs, documented examples, fixture cases and fix cases: what every rule must pass, the new one
    included."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", CODE,
                           "tests/rules/test_registry.py", "tests/rules/test_fixtures.py",
                           "tests/rules/test_fix_safety.py"],
                          cwd=copy, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=str(copy)))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout


def test_an_option_declared_in_the_rule_module_is_in_the_configuration_schema(copy: Path, tmp_path: Path) -> None:
    """The author adds an option to the new module, and nowhere else: configuration validates it,
    show-config shows it, and the rule's docs list it."""
    module = copy / MODULE
    text = module.read_text(encoding="utf-8")
    text = text.replace("from gpulint.rules.base import FixCase, Rule, RuleDocs, Target\n",
                        "from gpulint.core.options import Integer, Option\n"
                        "from gpulint.rules.base import FixCase, Rule, RuleDocs, Target\n\n"
                        'PROBE_LIMIT: Option[int] = Option("probe-limit", Integer(1), 3, "how many probes to allow")\n')
    text = text.replace("    target = Target.ANY\n", "    target = Target.ANY\n    options = (PROBE_LIMIT,)\n")
    module.write_text(text, encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("x = 1\n")
    (project / "pyproject.toml").write_text("[tool.gpulint]\nprobe-limit = 7\n")
    shown = _gpulint(copy, "show-config", "train.py", cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert "probe-limit = 7" in shown.stdout.splitlines()
    (project / "pyproject.toml").write_text('[tool.gpulint]\nprobe-limit = "many"\n')
    refused = _gpulint(copy, "check", "--no-cache", "train.py", cwd=project)
    assert refused.returncode == 2 and "probe-limit: expected an integer >= 1" in refused.stderr
    docs = _gpulint(copy, "rule", CODE)
    assert "`probe-limit` (default `3`): how many probes to allow" in docs.stdout
