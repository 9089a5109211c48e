"""`gpulint check --diff-base REV`: findings on the lines changed since REV, in real git repositories."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gpulint.cli import main
from gpulint.engine.changes import parse_diff
from tests.notebook.nbfiles import notebook

GPU = 'import torch\ntorch.device("cuda")\n'
LOADER = "from torch.utils.data import DataLoader\n"
TRAIN = GPU + LOADER + "loader = DataLoader(ds, pin_memory=True, num_workers=2)\nopt = torch.optim.Adam(params)\n"
ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, env={**os.environ, **ENV}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def check(repo: Path, *args: str) -> Result:
    cwd = os.getcwd()
    os.chdir(repo)
    try:
        return CliRunner().invoke(main, ["check", "--no-cache", *args], catch_exceptions=False)
    finally:
        os.chdir(cwd)


def codes_at(result: Result) -> list[str]:
    """`file:row CODE` of each finding in a concise report."""
    out = []
    for line in result.stdout.splitlines():
        if ": GPU" in line:
            where, rest = line.split(": ", 1)
            out.append(f"{where.rsplit(':', 1)[0]} {rest.split()[0]}")
    return out


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """main: train.py with a GPU201 finding on line 5; the branch `work` is checked out."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "train.py").write_text(TRAIN)
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    git(root, "checkout", "-qb", "work")
    return root


def test_only_findings_on_changed_lines_count(repo: Path) -> None:
    assert codes_at(check(repo, "--diff-base", "main", ".")) == []
    text = TRAIN.replace("pin_memory=True, num_workers=2", "num_workers=2")  # line 4 loses pin_memory
    (repo / "train.py").write_text(text)
    whole = check(repo, ".")
    assert codes_at(whole) == ["train.py:4 GPU101", "train.py:5 GPU201"] and whole.exit_code == 1
    gated = check(repo, "--diff-base", "main", ".")
    assert codes_at(gated) == ["train.py:4 GPU101"] and gated.exit_code == 1
    assert "1 changed file; 1 finding on their unchanged lines not shown" in gated.stderr


def test_committed_staged_unstaged_and_untracked_changes_all_count(repo: Path) -> None:
    (repo / "committed.py").write_text(GPU + "a = torch.optim.Adam(p)\n")
    git(repo, "add", "committed.py")
    git(repo, "commit", "-qm", "committed")
    (repo / "staged.py").write_text(GPU + "b = torch.optim.Adam(p)\n")
    git(repo, "add", "staged.py")
    (repo / "untracked.py").write_text(GPU + "c = torch.optim.Adam(p)\n")
    (repo / "ignored.py").write_text(GPU + "d = torch.optim.Adam(p)\n")
    (repo / ".gitignore").write_text("ignored.py\n")
    (repo / "train.py").write_text(TRAIN + "e = torch.optim.SGD(p, lr=0.1)\n")  # unstaged
    result = check(repo, "--diff-base", "main", ".")
    assert codes_at(result) == ["committed.py:3 GPU201", "staged.py:3 GPU201", "train.py:6 GPU201",
                                "untracked.py:3 GPU201"]


def test_the_branch_is_compared_with_where_it_left_the_revision(repo: Path) -> None:
    """Commits that main gained after the branch left it are not the branch's changes."""
    git(repo, "checkout", "-q", "main")
    (repo / "train.py").write_text(TRAIN.replace("Adam(params)", "Adam(params, lr=1e-3)"))
    git(repo, "commit", "-qam", "main moves on")
    git(repo, "checkout", "-q", "work")
    assert codes_at(check(repo, "--diff-base", "main", ".")) == []  # `git diff main` would show line 5
    (repo / "train.py").write_text(TRAIN + "x = 1\n")
    assert codes_at(check(repo, "--diff-base", "main", ".")) == []
    assert codes_at(check(repo, "--diff-base", "HEAD", ".")) == []


def test_a_renamed_file_reports_only_its_edited_lines(repo: Path) -> None:
    git(repo, "mv", "train.py", "renamed.py")
    (repo / "renamed.py").write_text(TRAIN.replace("num_workers=2)", "num_workers=2)  # tuned"))
    assert codes_at(check(repo, "--diff-base", "main", ".")) == []  # line 4 changed; its loader is fine
    (repo / "renamed.py").write_text(TRAIN.replace("pin_memory=True, ", ""))
    assert codes_at(check(repo, "--diff-base", "main", ".")) == ["renamed.py:4 GPU101"]


def test_a_line_deleted_inside_a_statement_changes_the_statement(repo: Path) -> None:
    spread = GPU + LOADER + "loader = DataLoader(\n    ds,\n    pin_memory=True,\n    num_workers=2,\n)\n"
    (repo / "train.py").write_text(spread)
    git(repo, "commit", "-qam", "spread")
    (repo / "train.py").write_text(spread.replace("    pin_memory=True,\n", ""))
    assert codes_at(check(repo, "--diff-base", "HEAD", ".")) == ["train.py:4 GPU101"]


def test_a_notebook_counts_the_cells_that_changed(repo: Path) -> None:
    cells = [GPU + LOADER, "loader = DataLoader(ds, pin_memory=True, num_workers=2)\n",
             "opt = torch.optim.Adam(params)\n"]
    (repo / "nb.ipynb").write_text(notebook(cells))
    git(repo, "add", "nb.ipynb")
    git(repo, "commit", "-qm", "notebook")
    (repo / "nb.ipynb").write_text(notebook(cells + ["opt2 = torch.optim.AdamW(params)\n"]))
    result = check(repo, "--diff-base", "HEAD", "--output-format", "json", ".")
    assert [(f["code"], f["cell"]) for f in json.loads(result.stdout)] == [("GPU201", 4)]


def test_a_changed_file_that_cannot_be_checked_fails_the_gate(repo: Path) -> None:
    (repo / "broken.py").write_text("x = 1\n")
    git(repo, "add", "broken.py")
    git(repo, "commit", "-qm", "broken")
    (repo / "broken.py").write_text("x = 1\n\n\n\n\ndef f(:\n")
    (repo / "old_broken.py").write_text("def g(:\n")  # untracked: new, so it counts too
    result = check(repo, "--diff-base", "HEAD", ".")
    assert codes_at(result) == ["broken.py:6 GPU000", "old_broken.py:1 GPU000"] and result.exit_code == 1


def test_nothing_changed_is_a_pass_with_a_valid_report(repo: Path) -> None:
    (repo / "README.md").write_text("docs only\n")
    result = check(repo, "--diff-base", "main", ".")
    assert result.exit_code == 0 and "All checks passed!" in result.stdout and "no file changed" in result.stderr
    for fmt in ("json", "gitlab"):
        result = check(repo, "--diff-base", "main", "--output-format", fmt, ".")
        assert result.exit_code == 0 and json.loads(result.stdout) == []


def test_names_with_spaces_quotes_and_accents(repo: Path) -> None:
    folder = repo / "my dir"
    folder.mkdir()
    (folder / 'café "v2".py').write_text(GPU + "a = torch.optim.Adam(p)\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "names")
    (folder / 'café "v2".py').write_text(GPU + "a = torch.optim.Adam(p)\nb = torch.optim.Adam(q)\n")
    result = check(repo, "--diff-base", "HEAD", "--output-format", "json", ".")
    assert [(Path(f["filename"]).name, f["location"]["row"]) for f in json.loads(result.stdout)] == [
        ('café "v2".py', 4)]


def test_the_users_git_configuration_does_not_change_the_diff(repo: Path) -> None:
    for key, value in (("diff.noprefix", "true"), ("color.ui", "always"), ("diff.mnemonicPrefix", "true"),
                       ("diff.external", "false"), ("diff.relative", "true"), ("core.quotePath", "true")):
        git(repo, "config", key, value)
    (repo / "train.py").write_text(TRAIN + "e = torch.optim.SGD(p, lr=0.1)\n")
    assert codes_at(check(repo, "--diff-base", "main", ".")) == ["train.py:6 GPU201"]


def test_errors_are_exit_2_with_a_message(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    (outside / "a.py").write_text(TRAIN)
    cases = [
        (check(outside, "--diff-base", "main", "."), "a.py is not in a git repository"),
        (check(repo, "--diff-base", "nope", "."), "--diff-base nope: no such revision"),
        (check(repo, "--diff-base", "", "."), "empty revision"),
        (check(repo, "--diff-base", "main", "--fix", "."), "cannot be combined with --fix"),
        (check(repo, "--diff-base", "main", "--diff", "."), "cannot be combined"),
        (check(repo, "--diff-base", "main", "--add-noqa", "."), "cannot be combined"),
        (check(repo, "--diff-base", "main", "-", "--stdin-filename", "train.py"), "cannot read from stdin"),
    ]
    for result, message in cases:
        assert result.exit_code == 2 and message in result.stderr, (message, result.stderr)
    assert CliRunner().invoke(main, ["fix", "--diff-base", "main", "."]).exit_code == 2  # check's option only


def test_a_shallow_clone_says_so(repo: Path, tmp_path: Path) -> None:
    (repo / "train.py").write_text(TRAIN + "x = 1\n")
    git(repo, "commit", "-qam", "work 1")
    git(repo, "checkout", "-q", "main")
    (repo / "other.py").write_text("y = 2\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "main 1")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", "--branch", "work", f"file://{repo}", str(clone))
    git(clone, "fetch", "-q", "--depth", "1", "origin", "main:refs/remotes/origin/main")
    result = check(clone, "--diff-base", "origin/main", ".")
    assert result.exit_code == 2 and "this clone is shallow" in result.stderr, result.stderr


def test_hunk_lines_are_never_read_as_headers() -> None:
    diff = ("diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,0 +2,2 @@\n+++ not a header\n+--- neither\n"
            "@@ -5 +7,0 @@\n-gone\n@@ -9 +9 @@\n-old\n+new\n"
            'diff --git "a/t\\303\\251\\tb.py" "b/t\\303\\251\\tb.py"\n--- "a/t\\303\\251\\tb.py"\n'
            '+++ "b/t\\303\\251\\tb.py"\n@@ -1 +1 @@\n-a\n+b\n'
            "diff --git a/img.py b/img.py\nBinary files a/img.py and b/img.py differ\n"
            "diff --git a/gone.py b/gone.py\ndeleted file mode 100644\n--- a/gone.py\n+++ /dev/null\n"
            "@@ -1 +0,0 @@\n-x\n")
    found = parse_diff(diff)
    assert set(found) == {"x.py", "té\tb.py", "img.py"}
    assert found["x.py"].lines == {2, 3, 9} and found["x.py"].deleted_after == {7}
    assert found["té\tb.py"].lines == {1} and found["img.py"].whole


def test_a_folder_that_could_not_be_read_still_fails_the_gate(tmp_path: Path) -> None:
    from gpulint.core.findings import Finding, Location
    from gpulint.engine.changes import Changes

    folder = tmp_path / "locked"
    folder.mkdir()
    unreadable = Finding(str(folder), "GPU000", "invalid-file", "cannot lint directory", Location(1, 1),
                         Location(1, 1))
    unchanged = Finding(str(tmp_path / "old.py"), "GPU000", "invalid-file", "syntax error", Location(1, 1),
                        Location(1, 1))
    changes = Changes("main", {}, {})
    assert changes.keeps(unreadable) and not changes.keeps(unchanged)
