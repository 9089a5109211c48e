"""Hostile tests, false greens: a CI gate never passes by mistake.

Issue 10, items 11 (a notebook or JSON named explicitly was parsed as Python and passed; notebooks
are now read as notebooks, tests/notebook/),
12 (unknown codes in --select/--ignore/--extend-select and configuration), 13 (nothing to
check is exit 2), 15 (no "All checks passed!" after an internal error), 17 (show-config on a
missing path). Every test runs with the results cache on and off.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpulint.core.settings import ConfigError
from gpulint.rules import rule_codes
from gpulint.selectors import parse_codes, suggest
from tests.conftest import Gpulint

TRAIN = """\
import torch
from torch.utils.data import DataLoader
from torchvision.datasets import MNIST

device = torch.device("cuda")
loader = DataLoader(MNIST(), batch_size=32)
for batch in loader:
    batch = batch.to(device, non_blocking=True)
"""
CLEAN = "import torch\nx = torch.zeros(3)\n"
MOVES = "for x in loader:\n    x = x.to(device, non_blocking=True)\n"  # the batches reach the GPU
NOTEBOOK = json.dumps({"cells": [{"cell_type": "code", "source": ["import torch\n", "from torch.utils.data import "
                                                                  "DataLoader\n", "torch.device('cuda')\n",
                                                                  "loader = DataLoader([torch.zeros(2)] * 4)\n",
                                                                  "for b in loader:\n",
                                                                  "    b.to('cuda', non_blocking=True)"]}],
                       "nbformat": 4})


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- item 11: files gpulint cannot lint are findings, never a pass -----------------------------

@pytest.mark.parametrize("name, content, reason", [
    ("nb.ipynb", '{"cells": [], "nbformat": 3}', "nbformat 3 notebook"),
    ("data.json", '{"a": [1, 2]}', "not Python source (a .json file)"),
    ("config.yaml", "[1, 2, 3]\n", "not Python source (a .yaml file)"),
    ("notes.txt", "x = 1\n", "not Python source (a .txt file)"),
    ("run", "#!/bin/sh\necho hi\n", "no .py suffix and no python shebang"),
])
@pytest.mark.parametrize("command", ["check", "fix"])
def test_a_file_that_is_not_python_is_a_finding(gl: Gpulint, project: Path, name: str, content: str,
                                               reason: str, command: str) -> None:
    path = project / name
    path.write_text(content)
    result = gl(command, name)
    assert result.exit_code == 1, result.output
    assert "All checks passed!" not in result.stdout
    [line] = [line for line in result.stdout.splitlines() if line.startswith(f"{name}:")]
    assert "GPU000 cannot lint " in line and reason in line
    assert path.read_text() == content


def test_a_notebook_on_stdin_is_read_as_a_notebook(gl: Gpulint, project: Path) -> None:
    """A notebook's JSON is a valid Python expression: read as Python, it passed."""
    result = gl("check", "-", "--stdin-filename", "nb.ipynb", input=NOTEBOOK)
    assert result.exit_code == 1 and "nb.ipynb:cell 1:4:10: GPU101" in result.stdout, result.output
    broken = NOTEBOOK[:-1]
    checked = gl("check", "-", "--stdin-filename", "nb.ipynb", input=broken)
    assert checked.exit_code == 1 and "GPU000 cannot lint notebook: not a notebook: invalid JSON" in checked.stdout
    fixed = gl("fix", "-", "--stdin-filename", "nb.ipynb", input=broken)
    assert fixed.stdout == broken and fixed.exit_code == 1


@pytest.mark.parametrize("name, content", [
    ("train", "#!/usr/bin/env python3\n" + TRAIN),
    ("TRAIN.PY", TRAIN),
    ("gui.pyw", TRAIN),
    ("stubs.pyi", "import torch\nopt = torch.optim.Adam(model.cuda().parameters())\n"),
])
def test_python_files_without_the_usual_name_are_linted(gl: Gpulint, project: Path, name: str, content: str) -> None:
    (project / name).write_text(content)
    result = gl.check(name)
    assert result.exit_code == 1 and f"{name}:" in result.stdout and "GPU000" not in result.stdout, result.output


def test_directories_are_searched_for_python_files_and_notebooks_only(gl: Gpulint, project: Path) -> None:
    (project / "data.json").write_text('{"a": 1}')
    (project / "notes.txt").write_text(TRAIN)
    (project / "train.py").write_text(CLEAN)
    assert gl.check(".").exit_code == 0
    (project / "nb.ipynb").write_text(NOTEBOOK)
    result = gl.check(".")
    assert result.exit_code == 1 and "nb.ipynb:cell 1:4:10: GPU101" in result.stdout, result.output


# -- item 12: unknown codes are usage errors ---------------------------------------------------

@pytest.mark.parametrize("option", ["--select", "--ignore", "--extend-select"])
@pytest.mark.parametrize("command", ["check", "fix"])
def test_an_unknown_code_on_the_command_line_is_exit_2_with_a_suggestion(
        gl: Gpulint, project: Path, option: str, command: str) -> None:
    (project / "train.py").write_text(TRAIN)
    result = gl(command, option, "GPU110", "train.py")
    assert result.exit_code == 2
    assert "unknown rule code 'GPU110'" in result.output and "did you mean GPU101?" in result.output
    assert (project / "train.py").read_text() == TRAIN


@pytest.mark.parametrize("value, message", [
    ("GPU11", "unknown rule prefix 'GPU11': it selects no rule; did you mean GPU10?"),
    ("GPU1010", "unknown rule code 'GPU1010'; did you mean GPU101?"),
    ("GPU999", "unknown rule code 'GPU999'"),
    ("GPU7", "unknown rule prefix 'GPU7': it selects no rule"),  # GPU4 exists since issue 27
    ("E501", "invalid rule selector 'E501'"),
])
def test_unknown_codes_and_prefixes_are_named(value: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_codes(f"GPU101, {value}")
    assert message in str(error.value)


@pytest.mark.parametrize("value", ["ALL", "GPU", "GPU1", "GPU10", "GPU101", "gpu101", " GPU3 ", "GPU000", "GPU9"])
def test_known_codes_and_prefixes_are_accepted(value: str) -> None:
    assert parse_codes(value) == (value.strip().upper(),)


@pytest.mark.parametrize("config", [
    'select = ["GPU110"]',
    'ignore = ["GPU110"]',
    'extend-select = ["GPU110"]',
    '[tool.gpulint.per-file-ignores]\n"tests/**" = ["GPU110"]',
])
def test_an_unknown_code_in_configuration_is_exit_2_naming_file_key_and_code(
        gl: Gpulint, project: Path, config: str) -> None:
    header = "" if config.startswith("[") else "[tool.gpulint]\n"
    (project / "pyproject.toml").write_text(header + config + "\n")
    (project / "train.py").write_text(TRAIN)
    result = gl.check("train.py")
    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    assert str(project / "pyproject.toml") in line and "'GPU110'" in line and "did you mean GPU101?" in line
    key = config.split("=")[0].strip().split("\n")[-1].strip('"')
    assert (key if not config.startswith("[") else "per-file-ignores") in line


def test_verify_validates_its_codes_too(project: Path) -> None:
    (project / "train.py").write_text(TRAIN)
    result = Gpulint(True, project)("verify", "--select", "GPU110", "train.py")
    assert result.exit_code == 2 and "did you mean GPU101?" in result.output


def test_every_known_code_is_a_rule_and_every_rule_is_known() -> None:
    from gpulint.rules import all_rules

    assert sorted(rule_codes()) == sorted(rule.code for rule in all_rules())


def test_suggestions_prefer_a_transposition() -> None:
    assert suggest("GPU110") == ["GPU101"]
    assert suggest("GPU210") == ["GPU201"]
    assert "GPU302" in suggest("GPU3002") and len(suggest("GPU3002")) <= 3


def test_validating_codes_does_not_import_libcst() -> None:
    probe = ("import sys\nfrom gpulint.selectors import parse_codes\n"
             "parse_codes('GPU101,GPU1')\n"
             "try:\n    parse_codes('GPU110')\nexcept Exception as exc:\n    print(exc)\n"
             "print('libcst' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.stdout.splitlines()[-1] == "False", proc.stdout + proc.stderr
    assert "did you mean GPU101?" in proc.stdout


# -- item 13: nothing to check is not a pass ---------------------------------------------------

@pytest.mark.parametrize("command", ["check", "fix"])
def test_an_empty_directory_is_exit_2(gl: Gpulint, project: Path, command: str) -> None:
    (project / "src").mkdir()
    (project / "src" / "README.md").write_text("no code here\n")
    result = gl(command, "src")
    assert result.exit_code == 2
    assert "no Python files found in src" in result.stderr and "All checks passed!" not in result.output


def test_a_mistyped_path_in_the_current_directory_is_exit_2(gl: Gpulint, project: Path) -> None:
    result = gl.check()
    assert result.exit_code == 2 and "no Python files found in ." in result.stderr


def test_everything_excluded_is_exit_2(gl: Gpulint, project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.gpulint]\nextend-exclude = ["generated"]\n')
    (project / "generated").mkdir()
    (project / "generated" / "a.py").write_text(TRAIN)
    result = gl.check(".")
    assert result.exit_code == 2 and "every Python file there is excluded" in result.stderr


def test_pre_commit_naming_only_excluded_files_is_a_deliberate_skip(gl: Gpulint, project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.gpulint]\nextend-exclude = ["generated"]\n')
    (project / "generated").mkdir()
    (project / "generated" / "a.py").write_text(TRAIN)
    result = gl.check("--force-exclude", "generated/a.py")
    assert result.exit_code == 0 and "excluded by configuration" in result.stderr
    assert "All checks passed!" not in result.stdout


# -- item 15: an internal error is never a pass -----------------------------------------------

@pytest.fixture
def broken_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpulint.rules.gpu101_dataloader_without_pin_memory import DataLoaderPinMemory

    def broken(self, ctx) -> None:  # noqa: ANN001
        raise KeyError("simulated bug")

    monkeypatch.setattr(DataLoaderPinMemory, "detect", broken)  # the rule detects on `ast` (issue 25)


@pytest.mark.parametrize("args", [("check",), ("fix",), ("fix", "--diff"), ("check", "--exit-zero"),
                                  ("fix", "--unsafe-fixes", "--exit-zero")])
def test_an_internal_error_never_says_all_checks_passed(gl: Gpulint, project: Path, broken_rule: None,
                                                        args: tuple[str, ...]) -> None:
    (project / "train.py").write_text(TRAIN)
    (project / "clean.py").write_text(CLEAN)
    result = gl(*args, ".")
    assert result.exit_code == 2
    assert "All checks passed!" not in result.output
    assert "could not check 1 file" in result.output
    assert (project / "train.py").read_text() == TRAIN


# -- item 17: show-config ----------------------------------------------------------------------

def test_show_config_on_a_missing_path_is_exit_2(gl: Gpulint, project: Path) -> None:
    result = gl("show-config", "missing.py")
    assert result.exit_code == 2 and "missing.py: no such file or directory" in result.output
    assert "select" not in result.stdout


def test_show_config_says_the_default_selection_the_readme_documents(gl: Gpulint, project: Path) -> None:
    (project / "train.py").write_text(TRAIN)
    result = gl("show-config", "train.py")
    assert result.exit_code == 0
    assert 'select = ["GPU"]' in result.stdout.splitlines()
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert 'select = ["GPU"]                 # default: every stable rule' in readme


# -- issue 22, item 12: --add-noqa names what it could not cover -------------------------------------

def _notebook(*sources: str) -> str:
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": source}
             for source in sources]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)


def test_add_noqa_covers_what_it_can_and_names_the_files_with_gpu000(gl: Gpulint, project: Path) -> None:
    """It said "Added 0 noqa directives." with exit 0 and skipped a notebook whose one cell did not parse."""
    (project / "ok.py").write_text(TRAIN)
    (project / "bad.py").write_text("def f(:\n    torch.manual_seed(0)\n")
    (project / "nb.ipynb").write_text(_notebook("import torch\nfrom torch.utils.data import DataLoader\n"
                                                "from torchvision.datasets import MNIST\n"
                                                "device = torch.device('cuda')\n", "def broken(:\n",
                                                "loader = DataLoader(MNIST())\n" + MOVES))
    result = gl("check", "--add-noqa", ".")
    assert result.exit_code == 1, result.output
    assert result.stdout == "Added 4 noqa directives; 2 files with GPU000 findings no directive can cover.\n"
    assert result.stderr.splitlines() == [
        "gpulint: warning: bad.py: GPU000 SyntaxError: invalid syntax; skipped, no noqa directive added",
        "gpulint: warning: nb.ipynb:cell 2: GPU000 SyntaxError: invalid syntax (the cell was not linted; the other "
        "cells were); the notebook's other cells got theirs"]
    assert (project / "ok.py").read_text().splitlines()[5] == \
        "loader = DataLoader(MNIST(), batch_size=32)  # noqa: GPU101, GPU102"
    assert json.loads((project / "nb.ipynb").read_text())["cells"][2]["source"] == \
        "loader = DataLoader(MNIST())  # noqa: GPU101, GPU102\n" + MOVES
    after = gl("check", ".")  # what is left is what no comment can silence
    assert after.exit_code == 1
    assert sorted(line.split(":")[0] for line in after.stdout.splitlines() if " GPU" in line) == ["bad.py", "nb.ipynb"]
    assert "All checks passed!" not in after.stdout


def test_add_noqa_without_gpu000_still_exits_0(gl: Gpulint, project: Path) -> None:
    (project / "ok.py").write_text(TRAIN)
    result = gl("check", "--add-noqa", ".")
    assert result.exit_code == 0 and result.stdout == "Added 2 noqa directives.\n" and result.stderr == ""
