"""The CLI in real workflows: config files, exit codes, stdin, CI formats, --add-noqa, pre-commit."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from gpulint.cli import main

ROOT = Path(__file__).resolve().parent.parent.parent
# a torchvision dataset yields CPU tensors, so GPU101's fix is the safe one (see docs/fix-safety.md)
IMPORTS = "import torch\nfrom torch.utils.data import DataLoader; from torchvision.datasets import MNIST as ds\n"
MOVES = "for x, y in loader:\n    x = x.to('cuda')\n"  # the batches reach the GPU
FLAGGED = IMPORTS + "loader = DataLoader(ds(), num_workers=2)\n" + MOVES
FIXED = (IMPORTS + "loader = DataLoader(ds(), num_workers=2, pin_memory=True)\n"
         + MOVES.replace("to('cuda')", "to('cuda', non_blocking=True)"))  # the copies become asynchronous
UNSAFE_ONLY = ("import torch\nfrom torch.utils.data import DataLoader\nfrom torchvision.datasets import MNIST\n"
               "device = 'cuda'\nloader = DataLoader(MNIST(), pin_memory=True)\n")
CLEAN = "import torch\nx = torch.zeros(3)\n"
UNSAFE_AND_NONE = (UNSAFE_ONLY + "a = torch.optim.Adam(model.parameters())\n"
                   "b = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n")


def gpulint(*args: str, input: bytes | str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


# exit codes ------------------------------------------------------------------------------------

def test_exit_0_when_clean(project: Path) -> None:
    (project / "a.py").write_text(CLEAN)
    result = gpulint("check", "a.py")
    assert result.exit_code == 0 and "All checks passed!" in result.stdout


def test_exit_1_when_findings_remain(project: Path) -> None:
    (project / "a.py").write_text(FLAGGED)
    assert gpulint("check", "a.py").exit_code == 1
    assert gpulint("check", "--exit-zero", "a.py").exit_code == 0


def test_fix_exit_codes(project: Path) -> None:
    (project / "a.py").write_text(FLAGGED)
    result = gpulint("fix", "--exit-non-zero-on-fix", "a.py")
    assert result.exit_code == 1 and (project / "a.py").read_text() == FIXED
    (project / "a.py").write_text(FLAGGED)
    result = gpulint("fix", "a.py")  # everything fixed, nothing remains
    assert result.exit_code == 0 and (project / "a.py").read_text() == FIXED
    (project / "a.py").write_text(UNSAFE_ONLY)
    assert gpulint("fix", "a.py").exit_code == 1  # GPU102's fix is unsafe: the finding remains
    assert gpulint("fix", "--unsafe-fixes", "a.py").exit_code == 0


def test_exit_2_for_usage_and_config_errors(project: Path) -> None:
    (project / "a.py").write_text(CLEAN)
    assert gpulint("check", "missing.py").exit_code == 2
    assert gpulint("check", "--output-format", "xml", "a.py").exit_code == 2
    assert gpulint("check", "--config", "nope.toml", "a.py").exit_code == 2
    assert gpulint("check", "--config", "nope.toml", "--isolated", "a.py").exit_code == 2
    (project / "pyproject.toml").write_text("[tool.gpulint]\nnum-workers = 'many'\n")
    result = gpulint("check", "a.py")
    assert result.exit_code == 2
    assert "pyproject.toml: [tool.gpulint] num-workers: expected an integer >= 1" in result.stderr
    assert "Traceback" not in result.stderr
    assert gpulint("check", "--isolated", "a.py").exit_code == 0


def test_syntax_error_is_a_finding_and_other_files_are_linted(project: Path) -> None:
    (project / "bad.py").write_text("def broken(:\n    torch.manual_seed(0)\n")
    (project / "good.py").write_text(FLAGGED)
    result = gpulint("check", "--output-format", "json", ".")
    assert result.exit_code == 1
    codes = sorted((Path(f["filename"]).name, f["code"]) for f in json.loads(result.stdout))
    assert codes == [("bad.py", "GPU000"), ("good.py", "GPU101")]


def test_internal_error_exits_2(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpulint.rules.gpu101_dataloader_without_pin_memory import DataLoaderPinMemory

    def boom(self, ctx):  # noqa: ANN001, ANN202
        raise RuntimeError("rule bug")

    monkeypatch.setattr(DataLoaderPinMemory, "detect", boom)  # the rule detects on `ast` (issue 25)
    (project / "a.py").write_text(FLAGGED)
    result = gpulint("check", "a.py")
    assert result.exit_code == 2 and "internal error" in result.stderr


# configuration through the CLI ----------------------------------------------------------------

def test_config_discovery_per_file_ignores_and_exclude(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.gpulint]\nextend-exclude = ["legacy"]\n[tool.gpulint.per-file-ignores]\n"scripts/*" = ["GPU101"]\n')
    for name in ("src/a.py", "scripts/b.py", "legacy/c.py"):
        (project / name).parent.mkdir(exist_ok=True)
        (project / name).write_text(FLAGGED)
    result = gpulint("check", "--output-format", "json", ".")
    assert [Path(f["filename"]).relative_to(project).as_posix() for f in json.loads(result.stdout)] == ["src/a.py"]
    # a file named on the command line is linted anyway, unless --force-exclude (pre-commit)
    assert gpulint("check", "legacy/c.py").exit_code == 1
    result = gpulint("check", "--force-exclude", "legacy/c.py")
    assert result.exit_code == 0 and "GPU101" not in result.stdout
    # so is an excluded directory named on the command line
    assert gpulint("check", "legacy").exit_code == 1
    # ... but a directory whose every file is excluded is nothing to check: a mistyped CI path fails
    result = gpulint("check", "--force-exclude", "legacy")
    assert result.exit_code == 2 and "every Python file there is excluded" in result.stderr


def test_show_config(project: Path) -> None:
    (project / "gpulint.toml").write_text('ignore = ["GPU102"]\ntorch-version = "2.4"\n')
    (project / "train.py").write_text(FLAGGED)
    result = gpulint("show-config", "train.py")
    assert result.exit_code == 0
    assert f"# configuration: {project / 'gpulint.toml'}" in result.stdout
    assert 'torch-version = "2.4"' in result.stdout and 'ignore = ["GPU102"]' in result.stdout
    result = gpulint("show-config", "--isolated", "train.py")
    assert "none (defaults)" in result.stdout and 'torch-version = "any"' in result.stdout


# output options --------------------------------------------------------------------------------

def test_statistics(project: Path) -> None:
    (project / "a.py").write_text(FLAGGED)
    (project / "b.py").write_text(FLAGGED)
    result = gpulint("check", "--statistics", ".")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0].split("\t") == ["2", "GPU101", "[*] dataloader-without-pin-memory"]
    result = gpulint("check", "--statistics", "--output-format", "json", ".")
    assert json.loads(result.stdout) == [
        {"code": "GPU101", "name": "dataloader-without-pin-memory", "count": 2, "fixable": True, "fixable_count": 2}]


def test_statistics_fixable_column_follows_unsafe_fixes(project: Path) -> None:
    """ruff's fixable column: `[*]` every finding of the code fixable, `[-]` some, `[ ]` none; unsafe
    fixes count with --unsafe-fixes."""
    (project / "a.py").write_text(UNSAFE_AND_NONE)
    rows = [line.split("\t") for line in gpulint("check", "--statistics", "a.py").stdout.splitlines()]
    assert ["1", "GPU102", "[ ] dataloader-without-workers"] in rows
    assert ["2", "GPU201", "[-] non-fused-optimizer"] in rows
    rows = [line.split("\t") for line in gpulint("check", "--statistics", "--unsafe-fixes", "a.py").stdout.splitlines()]
    assert ["1", "GPU102", "[*] dataloader-without-workers"] in rows
    assert ["2", "GPU201", "[*] non-fused-optimizer"] in rows


def test_diff_ends_with_a_blank_line_before_the_summary(project: Path) -> None:
    (project / "a.py").write_text(FLAGGED)
    result = gpulint("check", "--diff", "a.py")
    assert result.stdout.endswith("\n\n") and result.stdout.startswith("--- a/a.py")
    assert result.stderr == "Would fix 1 finding.\n"


def test_rule_suggests_the_nearest_code(project: Path) -> None:
    result = gpulint("rule", "GPU999")
    assert result.exit_code == 2
    assert "unknown rule 'GPU999'; did you mean GPU900?" in result.stderr
    assert "did you mean GPU101?" in gpulint("rule", "GPU11").stderr
    assert "did you mean missing-autocast?" in gpulint("rule", "missing-autocst").stderr


def test_show_fixes(project: Path) -> None:
    (project / "a.py").write_text(FLAGGED)
    result = gpulint("check", "--show-fixes", "a.py")
    assert "    fix (safe): Add `pin_memory=True`" in result.stdout
    result = gpulint("fix", "--show-fixes", "a.py")
    assert "Fixed 1 finding:\n- a.py:\n    1 × GPU101 (dataloader-without-pin-memory)" in result.stderr


@pytest.mark.parametrize("fmt", ["github", "sarif", "junit", "full", "json-lines"])
def test_ci_formats_exit_like_concise(project: Path, fmt: str) -> None:
    (project / "a.py").write_text(FLAGGED)
    result = gpulint("check", "--output-format", fmt, "a.py")
    assert result.exit_code == 1 and "GPU101" in result.stdout
    if fmt == "github":
        assert result.stdout.startswith("::error title=gpulint (GPU101),file=a.py,line=3,col=10,")


# stdin -----------------------------------------------------------------------------------------

def test_check_stdin_uses_filename_for_config_and_output(project: Path) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "gpulint.toml").write_text('ignore = ["GPU101"]\n')
    result = gpulint("check", "-", "--stdin-filename", "train.py", input=FLAGGED)
    assert result.exit_code == 1 and result.stdout.startswith("train.py:3:10: GPU101")
    result = gpulint("check", "-", "--stdin-filename", "sub/train.py", input=FLAGGED)
    assert result.exit_code == 0
    result = gpulint("check", "-", input=FLAGGED)
    assert result.stdout.startswith("-:3:10: GPU101")


def test_fix_stdin_prints_fixed_code(project: Path) -> None:
    result = gpulint("fix", "-", "--stdin-filename", "train.py", input=FLAGGED)
    assert result.exit_code == 0
    assert result.stdout == FIXED
    assert "Fixed 1 finding." in result.stderr
    result = gpulint("fix", "-", input=UNSAFE_ONLY)
    assert result.exit_code == 1 and result.stdout == UNSAFE_ONLY and "GPU102" in result.stderr
    result = gpulint("check", "--fix", "-", input=FLAGGED.replace("\n", "\r\n").encode())
    assert result.stdout_bytes == FIXED.replace("\n", "\r\n").encode()  # newline style kept


def test_stdin_syntax_error_and_force_exclude(project: Path) -> None:
    result = gpulint("check", "-", "--stdin-filename", "x.py", input="def f(:\n    torch.manual_seed(0)\n")
    assert result.exit_code == 1 and "GPU000" in result.stdout
    (project / "gpulint.toml").write_text('exclude = ["gen"]\n')
    result = gpulint("fix", "-", "--stdin-filename", "gen/x.py", "--force-exclude", input=FLAGGED)
    assert result.exit_code == 0 and result.stdout == FLAGGED
    assert gpulint("check", "-", "x.py", input=FLAGGED).exit_code == 2


def test_stdin_through_the_console_script(project: Path) -> None:
    script = Path(sys.executable).with_name("gpulint")
    proc = subprocess.run([str(script), "fix", "-", "--stdin-filename", "t.py"], input=FLAGGED.encode(),
                          capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.decode() == FIXED


# --add-noqa ------------------------------------------------------------------------------------

def test_add_noqa_then_gate_only_new_code(project: Path) -> None:
    (project / "old.py").write_text(FLAGGED + "opt = torch.optim.Adam(p)\n")
    result = gpulint("check", "--add-noqa", ".")
    assert result.exit_code == 0 and "Added 2 noqa directives." in result.stdout
    assert (project / "old.py").read_text().splitlines()[2:] == [
        "loader = DataLoader(ds(), num_workers=2)  # noqa: GPU101",
        "for x, y in loader:",
        "    x = x.to('cuda')",
        "opt = torch.optim.Adam(p)  # noqa: GPU201",
    ]
    assert gpulint("check", ".").exit_code == 0
    (project / "new.py").write_text(FLAGGED)
    assert gpulint("check", ".").exit_code == 1
    # once the old code is fixed by hand, the stale comment is reported and removable
    (project / "old.py").write_text(FIXED + "opt = torch.optim.Adam(p)  # noqa: GPU201\n"
                                    .replace("Adam(p)", "Adam(p, fused=True)"))
    result = gpulint("check", "--select", "GPU201,GPU900", "old.py")
    assert result.exit_code == 1 and "GPU900" in result.stdout
    assert gpulint("fix", "--select", "GPU201,GPU900", "old.py").exit_code == 0
    assert "noqa" not in (project / "old.py").read_text()


# pre-commit ------------------------------------------------------------------------------------

def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "PRE_COMMIT_HOME": str(repo.parent / "pre-commit-home")}
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=check,
                          timeout=180)


def _local_hooks_config() -> str:
    """Our .pre-commit-hooks.yaml as a `repo: local` config running this venv's gpulint.

    `language: python` would make pre-commit pip-install gpulint and its dependencies into a
    fresh environment (network, minutes); the hook definitions are otherwise used verbatim.
    """
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    script = Path(sys.executable).with_name("gpulint")
    for hook in hooks:
        assert hook["entry"].startswith("gpulint ")
        hook["entry"] = str(script) + hook["entry"][len("gpulint"):]
        hook["language"] = "system"
        hook.pop("minimum_pre_commit_version", None)
    return yaml.safe_dump({"repos": [{"repo": "local", "hooks": hooks}]})


def test_hook_manifest_is_valid_for_pre_commit() -> None:
    from pre_commit.clientlib import load_manifest

    hooks = {h["id"]: h for h in load_manifest(ROOT / ".pre-commit-hooks.yaml")}
    assert set(hooks) == {"gpulint", "gpulint-fix"}
    for hook in hooks.values():
        assert hook["types_or"] == ["python", "pyi", "jupyter"] and hook["require_serial"] is True
        assert "--force-exclude" in hook["entry"] and hook["language"] == "python"
    assert hooks["gpulint"]["entry"].startswith("gpulint check")
    assert hooks["gpulint-fix"]["entry"].startswith("gpulint fix")


def test_pre_commit_blocks_findings_passes_clean_and_fix_hook_rewrites(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / ".pre-commit-config.yaml").write_text(_local_hooks_config())
    (repo / "gpulint.toml").write_text('exclude = ["vendored"]\n')
    pre_commit = [sys.executable, "-m", "pre_commit"]
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    subprocess.run([*pre_commit, "install"], cwd=repo, env=env, check=True, capture_output=True, timeout=120)

    # no Python file staged: both hooks are skipped, the commit goes through
    (repo / "README.md").write_text("hello\n")
    _git(repo, "add", "README.md", ".pre-commit-config.yaml", "gpulint.toml")
    assert _git(repo, "commit", "-q", "-m", "docs").returncode == 0

    # a finding blocks the commit; the fix hook rewrites the file
    (repo / "train.py").write_text(FLAGGED)
    _git(repo, "add", "train.py")
    blocked = _git(repo, "commit", "-q", "-m", "train", check=False)
    assert blocked.returncode != 0
    assert "train.py:3:10: GPU101" in blocked.stdout + blocked.stderr
    assert (repo / "train.py").read_text() == FIXED
    assert _git(repo, "log", "--oneline").stdout.count("\n") == 1

    # the fixed file passes both hooks
    _git(repo, "add", "train.py")
    assert _git(repo, "commit", "-q", "-m", "train").returncode == 0

    # an excluded file is skipped even though pre-commit names it (--force-exclude)
    (repo / "vendored").mkdir()
    (repo / "vendored" / "lib.py").write_text(FLAGGED)
    _git(repo, "add", "vendored/lib.py")
    assert _git(repo, "commit", "-q", "-m", "vendored").returncode == 0
    assert (repo / "vendored" / "lib.py").read_text() == FLAGGED


# the README's workflow snippets (configuration, suppressions, pre-commit, CI) work when copied --

README = ROOT / "README.md"


def _blocks(language: str) -> list[str]:
    import re

    text = README.read_text(encoding="utf-8")
    section = text[text.index("<!-- WORKFLOWS:BEGIN -->"):text.index("<!-- WORKFLOWS:END -->")]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)


def _commands(text: str) -> list[list[str]]:
    import shlex

    out = []
    for line in text.splitlines():
        line = line.strip().removeprefix("- ").removeprefix("run: ")
        if not line.startswith("gpulint "):
            continue
        words = shlex.split(line, comments=True)
        if ">" in words:
            words = words[: words.index(">")]
        out.append(words[1:])
    return out


def test_docs_toml_snippets_are_valid_configuration(tmp_path: Path) -> None:
    from gpulint.config import SettingsResolver

    blocks = _blocks("toml")
    assert len(blocks) >= 3
    for i, block in enumerate(blocks):
        project = tmp_path / f"p{i}"
        (project / "sub").mkdir(parents=True)
        name = "pyproject.toml" if "[tool.gpulint" in block else "gpulint.toml"
        (project / "sub" / name).write_text(block)
        (project / "gpulint-base.toml").write_text("num-workers = 2\n")
        SettingsResolver().for_path(project / "sub" / "train.py")  # raises ConfigError when invalid


def test_docs_commands_exist(project: Path) -> None:
    (project / "src").mkdir()
    (project / "src" / "train.py").write_text(FLAGGED)
    (project / "ci").mkdir()
    (project / "ci" / "gpulint.toml").write_text("num-workers = 2\n")
    # a repository with a branch to compare with, for --diff-base and the CI variables that name it
    _git(project, "init", "-q", "-b", "main")
    _git(project, "add", ".")
    _git(project, "commit", "-qm", "base")
    _git(project, "update-ref", "refs/remotes/origin/main", "HEAD")
    ci_values = {"${{ github.base_ref }}": "main", "$CI_MERGE_REQUEST_DIFF_BASE_SHA": "main"}
    commands = [c for block in _blocks("bash") + _blocks("yaml") for c in _commands(block)]
    assert len(commands) >= 8
    for args in commands:
        for key, value in ci_values.items():
            args = [a.replace(key, value) for a in args]
        result = gpulint(*args)
        assert result.exit_code in (0, 1), (args, result.stderr)


def test_docs_yaml_snippets(tmp_path: Path) -> None:
    from pre_commit.clientlib import load_config

    blocks = [yaml.safe_load(b) for b in _blocks("yaml")]
    pre_commit_configs = [b for b in blocks if "repos" in b]
    assert len(pre_commit_configs) == 2
    for i, config in enumerate(pre_commit_configs):
        path = tmp_path / f"c{i}.yaml"
        path.write_text(yaml.safe_dump(config))
        load_config(path)  # pre-commit's own schema
    local, remote = (c["repos"][0] for c in pre_commit_configs)
    # the recommended form comes first: the installed gpulint, the manifest's hook otherwise
    manifest = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert local["repo"] == "local" and "rev" not in local
    hook = local["hooks"][0]
    assert hook["language"] == "system"
    for key in ("id", "entry", "types_or", "require_serial"):
        assert hook[key] == manifest["gpulint"][key], key
    # the remote form is for when a tag exists: it pins one (a branch makes pre-commit warn on every
    # run), points at no repository that is not there, and says it cannot be used yet
    assert {h["id"] for h in remote["hooks"]} <= set(manifest)
    assert not re.match(r"[a-z]+://", remote["repo"]), remote["repo"]
    assert re.fullmatch(r"v\d+(\.\d+)*", str(remote["rev"])), remote["rev"]
    tags = subprocess.run(["git", "tag"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    prose = " ".join(README.read_text(encoding="utf-8").split())
    assert remote["rev"] in tags or "there is no tag yet, so use the local form above" in prose
    actions = next(b for b in blocks if "jobs" in b)
    steps = actions["jobs"]["gpulint"]["steps"]
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif"))
    assert upload["with"]["sarif_file"] == "gpulint.sarif"
    assert any("--output-format github" in s.get("run", "") for s in steps)
    gitlab = next(b for b in blocks if "gpulint" in b and "script" in b["gpulint"])
    report = gitlab["gpulint"]["artifacts"]["reports"]["codequality"]
    assert any(f"--output-format gitlab -o {report}" in line for line in gitlab["gpulint"]["script"])


def test_docs_local_pre_commit_snippet_blocks_a_finding(tmp_path: Path) -> None:
    """The README's recommended hook, run by real pre-commit with this environment's gpulint on the
    PATH: it blocks a finding, passes the fixed file, and pre-commit says nothing else (no warning)."""
    local = next(b for b in _blocks("yaml") if "repo: local" in b)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}

    def run(repo: Path) -> subprocess.CompletedProcess:
        subprocess.run(["git", "add", "."], cwd=repo, check=True)
        return subprocess.run([sys.executable, "-m", "pre_commit", "run"], cwd=repo, env=env, capture_output=True,
                              text=True, timeout=180)

    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / ".pre-commit-config.yaml").write_text(local)
    (repo / "train.py").write_text(FLAGGED)
    result = run(repo)
    assert result.returncode == 1 and "train.py:3:10: GPU101" in result.stdout
    assert "warning" not in (result.stdout + result.stderr).lower(), result.stdout + result.stderr
    (repo / "train.py").write_text(FIXED)
    result = run(repo)
    assert result.returncode == 0 and "gpulint....." in result.stdout, result.stdout
    assert "warning" not in (result.stdout + result.stderr).lower(), result.stdout + result.stderr

    # the fixing variant the README describes: the entry changed to `gpulint fix --force-exclude`
    fixing = tmp_path / "fixing"
    fixing.mkdir()
    _git(fixing, "init", "-q")
    assert "entry: gpulint check --force-exclude" in local
    (fixing / ".pre-commit-config.yaml").write_text(local.replace("gpulint check", "gpulint fix"))
    (fixing / "train.py").write_text(FLAGGED)
    result = run(fixing)
    assert result.returncode == 1 and "files were modified by this hook" in result.stdout, result.stdout
    assert (fixing / "train.py").read_text() == FIXED
    assert run(fixing).returncode == 0
