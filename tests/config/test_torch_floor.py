"""Without `torch-version`, the floor comes from the project's packaging metadata, so no fix needs a
torch newer than the project supports (fairseq declares torch>=1.13 in setup.py: rewriting its
`torch.cuda.amp.GradScaler` to `torch.amp.GradScaler`, which exists from 2.3 on, would break it)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Optional

import pytest

from gpulint.config import SettingsResolver
from gpulint.project.requirements import Declared, declared_torch_floor, torch_floor
from tests.conftest import Gpulint

AMP = "import torch\n\nscaler = torch.cuda.amp.GradScaler()\n"
ADAM = "import torch\n\nmodel = torch.nn.Linear(4, 4).cuda()\nopt = torch.optim.Adam(model.parameters())\n"


@pytest.mark.parametrize(("requirements", "floor"), [
    (["torch>=1.13"], (1, 13)),
    (["numpy", "torch >= 1.10.0"], (1, 10)),
    (["torch>=2.1,<3"], (2, 1)),
    (["torch[opt]~=2.2.0"], (2, 2)),
    (['torch==2.0.1; sys_platform == "linux"'], (2, 0)),
    (["Torch>1.13"], (1, 13)),
    (["torch>=1.13,>=2.0"], (2, 0)),  # both bounds hold
    (['torch>=2.4; sys_platform == "darwin"', 'torch>=2.1; sys_platform == "linux"'], (2, 1)),  # the lowest
    (["torch"], None),  # unbounded: any torch may be installed
    (["torch>=2.1", "torch; python_version < '3.9'"], None),
    (["torchvision>=0.15", "torch-geometric>=2.0", "pytorch-lightning>=2.0"], None),  # other packages
    (["torch<3"], None),
])
def test_the_floor_of_torch_requirements(requirements: list[str], floor: Optional[tuple[int, int]]) -> None:
    assert torch_floor(requirements) == floor


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def test_each_kind_of_metadata_is_read(tmp_path: Path) -> None:
    write(tmp_path, {
        "a/pyproject.toml": '[project]\nname = "a"\ndependencies = ["numpy", "torch>=2.2"]\n',
        "b/setup.cfg": "[metadata]\nname = b\n\n[options]\ninstall_requires =\n    numpy\n    torch>=1.12\n",
        "c/setup.py": "from setuptools import setup\n\nsetup(name='c', install_requires=['torch>=1.13'])\n",
        "d/setup.py": "import setuptools\n\nREQS = ['torch>=2.0']\nsetuptools.setup(install_requires=REQS)\n",
        "e/setup.py": "from setuptools import setup\n\nsetup(install_requires=open('r.txt').read().split())\n",
        "f/pyproject.toml": '[project]\nname = "f"\ndependencies = ["numpy"]\n',  # no torch here:
        "f/setup.py": "from setuptools import setup\nsetup(install_requires=['torch>=1.11'])\n",  # the next file
        "g/pyproject.toml": "[project\n",  # broken: no floor, no error
    })
    assert declared_torch_floor(str(tmp_path / "a")) == ((2, 2), str(tmp_path / "a" / "pyproject.toml"))
    assert declared_torch_floor(str(tmp_path / "b"))[0] == (1, 12)
    assert declared_torch_floor(str(tmp_path / "c"))[0] == (1, 13)
    assert declared_torch_floor(str(tmp_path / "d"))[0] == (2, 0)
    assert declared_torch_floor(str(tmp_path / "e")) == (None, None)  # computed at run time
    assert declared_torch_floor(str(tmp_path / "f")) == ((1, 11), str(tmp_path / "f" / "setup.py"))
    assert declared_torch_floor(str(tmp_path / "g")) == (None, None)


def test_the_nearest_project_decides(tmp_path: Path) -> None:
    """A sub-package with metadata of its own is its own project; folders without any look upwards."""
    write(tmp_path, {
        "pyproject.toml": '[project]\nname = "outer"\ndependencies = ["torch>=1.13"]\n',
        "src/pkg/train.py": AMP,
        "plugins/inner/pyproject.toml": '[project]\nname = "inner"\ndependencies = ["numpy"]\n',
        "plugins/inner/train.py": AMP,
    })
    resolver = SettingsResolver()
    assert resolver.for_path(tmp_path / "src" / "pkg" / "train.py").torch_version == (1, 13)
    assert resolver.for_path(tmp_path / "plugins" / "inner" / "train.py").torch_version is None


def test_a_configured_torch_version_wins_and_isolated_reads_nothing(tmp_path: Path) -> None:
    write(tmp_path, {
        "configured/pyproject.toml": '[project]\nname = "p"\ndependencies = ["torch>=1.13"]\n\n'
                                     '[tool.gpulint]\ntorch-version = "2.4"\n',
        "configured/train.py": AMP,
        "configured/sub/setup.py": "from setuptools import setup\nsetup(install_requires=['torch>=1.13'])\n",
        "configured/sub/train.py": AMP,  # the configuration covers its folders: it still decides
        "plain/setup.py": "from setuptools import setup\nsetup(install_requires=['torch>=1.13'])\n",
        "plain/train.py": AMP,
    })
    resolver = SettingsResolver()
    assert resolver.for_path(tmp_path / "configured" / "train.py").torch_version == (2, 4)
    assert resolver.for_path(tmp_path / "configured" / "sub" / "train.py").torch_version == (2, 4)
    assert resolver.for_path(tmp_path / "plain" / "train.py").torch_version == (1, 13)
    assert SettingsResolver(isolated=True).for_path(tmp_path / "plain" / "train.py").torch_version is None


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_no_fix_needs_a_torch_newer_than_the_project_declares(tmp_path: Path, cache: bool) -> None:
    gpulint = Gpulint(cache, tmp_path / "cache")
    write(tmp_path, {"proj/setup.py": "from setuptools import setup\nsetup(install_requires=['torch>=1.13'])\n",
                     "proj/train.py": AMP})
    target = tmp_path / "proj" / "train.py"
    result = gpulint.check("--output-format", "concise", "--show-fixes", target)
    assert "GPU003" in result.output and "fixable" not in result.output  # reported, not rewritten, and why:
    assert "note: no fix: torch.amp.GradScaler needs torch 2.3 (torch-version is 1.13)" in result.output
    shown = gpulint("show-config", target).output
    assert 'torch-version = "1.13"' in shown and "the torch floor" in shown and "setup.py declares" in shown
    (tmp_path / "proj" / "setup.py").write_text(
        "from setuptools import setup\nsetup(install_requires=['torch>=2.3'])\n", encoding="utf-8")
    result = gpulint.check("--output-format", "concise", target)
    assert "1 fixable" in result.output  # the same file, now fixable: the floor is part of the cache key


def test_an_optimizer_fix_says_which_torch_it_needs(tmp_path: Path) -> None:
    write(tmp_path, {"pyproject.toml": '[project]\nname = "p"\ndependencies = ["torch>=2.0"]\n', "train.py": ADAM})
    result = Gpulint(False, tmp_path / "cache").check("--output-format", "concise", "--show-fixes",
                                                      tmp_path / "train.py")
    assert "GPU201" in result.output and "fixable" not in result.output
    assert "note: no fix: fused=True on CPU parameters needs torch 2.4 (torch-version is 2.0)" in result.output


def test_one_look_per_folder(tmp_path: Path) -> None:
    """The answer is remembered for every folder passed on the way up, so a tree costs one look per folder."""
    write(tmp_path, {"pyproject.toml": '[project]\nname = "p"\ndependencies = ["torch>=2.1"]\n',
                     "a/b/c/train.py": AMP, "a/d/train.py": AMP})
    memo: dict[str, Declared] = {}
    expected = ((2, 1), str(tmp_path / "pyproject.toml"))
    assert declared_torch_floor(str(tmp_path / "a" / "b" / "c"), memo) == expected
    passed = [tmp_path / "a" / "b" / "c", tmp_path / "a" / "b", tmp_path / "a", tmp_path]
    assert all(memo[str(folder)] == expected for folder in passed)
    (tmp_path / "pyproject.toml").unlink()  # the memo answers without looking again
    assert declared_torch_floor(str(tmp_path / "a" / "d"), memo) == expected
