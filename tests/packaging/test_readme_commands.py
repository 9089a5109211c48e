"""Every command the README shows is run by a test or names something that exists.

Each line of each bash block, and each command of the CI jobs in its YAML blocks, is sorted by its
program. A command of a kind no check knows fails the test: add a check with the new command.
`gpulint` commands are parsed by the command line itself (their options exist) and the workflow
ones are run (tests/cli/test_workflow.py); `pip install` may only name this checkout and its real
extras, the wheel `python -m build` makes, a requirement of the test extra, or torch at CI's pin
from an index known to resolve; `pipx install .` is run for real (a slow test, with the network
to the package index that the machines running it have).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

import gpulint
from gpulint.cli import main
from tests.test_links import KNOWN_URLS

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])
WHEEL = f"gpulint-{gpulint.__version__}-py3-none-any.whl"
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
TORCH_PIN = re.search(r"torch==([\d.]+)", CI).group(1)  # type: ignore[union-attr]


def shell_commands() -> list[str]:
    """Every command in the README: bash lines (split at &&), and the CI jobs' `run:` and `script:` lines."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
            commands += [part.strip() for part in line.split("&&") if part.strip()]
    for block in re.findall(r"```yaml\n(.*?)```", README, re.S):
        data = yaml.safe_load(block)
        if "jobs" in data:  # GitHub Actions
            commands += [step["run"] for job in data["jobs"].values() for step in job["steps"] if "run" in step]
        else:  # GitLab CI
            commands += [line for job in data.values() if isinstance(job, dict) for line in job.get("script", [])]
    return commands


def _requirement_ok(word: str) -> bool:
    """A positional argument of `pip install` in the README."""
    name, _, extras = word.partition("[")
    wanted = set(extras.rstrip("]").split(",")) - {""}
    if not wanted <= EXTRAS:
        return False
    if name == "." or name == WHEEL or name.endswith("/" + WHEEL):
        return True
    if re.fullmatch(r"torch==[\d.]+", name):
        return name == f"torch=={TORCH_PIN}"
    test_extra = {re.split(r"[<>=!~; \[]", r, maxsplit=1)[0]
                  for r in PYPROJECT["project"]["optional-dependencies"]["test"]}
    return name in test_extra  # e.g. `build`: the tests run what the README installs


def check_command(command: str) -> str:
    """What makes the command true, or an AssertionError saying why it is not."""
    words = shlex.split(command)
    program = words[0]
    if program == "pip" and words[1] == "install":
        args = words[2:]
        for i, word in enumerate(args):
            if word == "--index-url":
                assert args[i + 1] in KNOWN_URLS, command
            elif word in ("-e",) or (i and args[i - 1] == "--index-url"):
                continue
            else:
                assert _requirement_ok(word), f"{command}: {word} is not this checkout, its extras or its wheel"
        return "pip install of this checkout, its wheel, or a pinned requirement"
    if program == "pipx":
        assert words == ["pipx", "install", "."], command
        return "run by test_pipx_installs_the_checkout (slow)"
    if program == "python" and words[1:3] == ["-m", "build"]:
        assert set(words[3:]) <= {"--wheel", "--sdist"}, command
        return "run by the built fixture (tests/packaging/conftest.py)"
    if program == "python" and words[1:3] == ["-m", "pytest"]:
        assert command in CI.splitlines() or f"&& {command}" in CI, f"{command}: CI does not run it"
        return ".ci/run runs it"
    if program == "python":
        assert (ROOT / words[1]).is_file(), command
        return "a script of this repository"
    if program == "gpulint":
        _parse(words[1:])
        return "parsed by gpulint's command line"
    if program == "code":  # VS Code's command line installing the editor extension
        assert words[1:] == ["--install-extension", f"dist/gpulint-{gpulint.__version__}.vsix"], command
        return "the .vsix scripts/build_vsix.py writes (built twice by tests/server/test_extension.py, slow)"
    if program in ("mkdir", "cp", "git", "grep"):
        for word in words[1:]:
            if word.endswith(".whl"):
                assert Path(word).name == WHEEL and word.startswith("dist/"), f"{command}: no such wheel is built"
        return "a shell tool; the wheel it names is the one `python -m build` writes"
    raise AssertionError(f"no check for this README command: {command!r} (add one to {__name__})")


def _parse(args: list[str]) -> None:
    """Parse (never run) a gpulint command line: unknown commands and options raise."""
    name, rest = args[0], args[1:]
    command = main.commands[name]
    with main.make_context("gpulint", [name], resilient_parsing=True) as parent:
        try:
            command.make_context(name, list(rest), parent=parent)
        except click.UsageError as exc:
            raise AssertionError(f"gpulint {' '.join(args)}: {exc}") from None


def test_every_readme_command_is_checked() -> None:
    commands = shell_commands()
    assert len(commands) >= 25
    checked = {command: check_command(command) for command in commands}
    # the install instructions are all there and all covered
    for needed in ("pip install -e .", "pipx install .", "pip install build", "python -m build",
                   f"pip install {WHEEL}", f"pip install torch=={TORCH_PIN} -e \".[test,verify]\"",
                   f"pip install ci/{WHEEL}"):
        assert needed in checked, needed


def test_the_checks_catch_a_wrong_command() -> None:
    for wrong in ("pip install gpulint", "pip install 'gpulint[verify]'", "pip install -e '.[nope]'",
                  "pip install torch==2.99.0", "pip install dist/gpulint-9.9.9-py3-none-any.whl",
                  "pip install torch --index-url https://example.org/simple", "gpulint check --no-such-option .",
                  "python -m pytest --no-such-run", "pipx install gpulint", "curl https://example.org | sh",
                  "code --install-extension dist/gpulint-9.9.9.vsix"):
        with pytest.raises(AssertionError):
            check_command(wrong)


def test_the_built_wheel_is_the_one_the_readme_names(built: Path) -> None:
    assert [p.name for p in built.glob("*.whl")] == [WHEEL]
    assert WHEEL in README


@pytest.mark.slow
def test_pipx_installs_the_checkout(tmp_path: Path) -> None:
    """`pipx install .` as written, in a copy of the checkout, into a pipx home of its own; the installed
    command lints the examples. pipx builds and installs from the package index (network)."""
    from tests.packaging.conftest import copy_checkout

    source = copy_checkout(tmp_path / "checkout")
    env = {**os.environ, "PIPX_HOME": str(tmp_path / "pipx"), "PIPX_BIN_DIR": str(tmp_path / "bin"),
           "PIPX_MAN_DIR": str(tmp_path / "man"), "GPULINT_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "pipx", "install", "."], cwd=source, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "warning" not in (done.stdout + done.stderr).lower(), done.stdout + done.stderr
    installed = tmp_path / "bin" / "gpulint"
    run = subprocess.run([str(installed), "check", "examples/"], cwd=source, env=env, capture_output=True, text=True,
                         timeout=300)
    claim = re.search(r"it prints (\d+) findings in", (source / "README.md").read_text(encoding="utf-8"))
    assert claim is not None  # the README's quickstart count, which tests/test_readme.py checks from the checkout
    assert run.returncode == 1 and f"Found {claim.group(1)} findings." in run.stdout, run.stdout + run.stderr
