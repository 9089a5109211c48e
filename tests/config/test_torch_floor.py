"""Without `torch-version`, the floor comes from the project's packaging metadata, so no fix needs a
torch newer than the project supports (fairseq declares torch>=1.13 in setup.py: rewriting its
`torch.cuda.amp.GradScaler` to `torch.amp.GradScaler`, which exists from 2.3 on, would break it)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Optional

import pytest

from gpulint.config import SettingsResolver
from gpulint.core.floors import NEEDED_BY_IMPORT
from gpulint.project.requirements import (
    DeclaredRange,
    Stale,
    conda_floor,
    conda_range,
    declared_torch_floor,
    declared_torch_range,
    read_for_floor,
    torch_floor,
    torch_range,
)
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
    (["torch>=2"], (2, 0)),  # a major version alone
    (["torch==2.*"], (2, 0)),  # a wildcard
    (["torch~=1.13.0"], (1, 13)),
    (["torch==1.7.1+cu110"], (1, 7)),  # a local version
    (["torch>=2.0.1+cu118"], (2, 0)),  # a local label on a lower bound: pip reads it, packaging refuses it
    (["torch >= 1.12.0+cu113, < 2"], (1, 12)),
    (["torchvision>=0.15.2+cu118"], None),  # still another package
    (["torch>=1.8,!=1.12.0"], (1, 8)),
    (["pytorch>=1.9"], (1, 9)),  # the conda package's name, in a pip section
    (["not a requirement ((", "torch>=2.2"], (2, 2)),
])

def test_the_floor_of_torch_requirements(requirements: list[str], floor: Optional[tuple[int, int]]) -> None:
    assert torch_floor(requirements) == floor


@pytest.mark.parametrize(("pins", "floor"), [
    (["pytorch=1.7.1=py3.8_cuda11.0_cudnn8.0.5_0"], (1, 7)),
    (["pytorch>=1.8,<2"], (1, 8)),
    (["pytorch 1.9.*"], (1, 9)),
    (["conda-forge::pytorch==2.1"], (2, 1)),
    (["pytorch"], None),
    (["pytorch-lightning=1.0", "torchvision=0.8"], None),
])
def test_the_floor_of_conda_pins(pins: list[str], floor: Optional[tuple[int, int]]) -> None:
    assert conda_floor(pins) == floor


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
        "h/setup.py": "from setuptools import setup\n\nsetup(install_requires=open('reqs.txt').read().split())\n",
        "h/reqs.txt": "numpy\n-r more.txt\n",  # read at run time, and what it includes
        "h/more.txt": "torch>=1.9  # the floor\n",
        "i/requirements.txt": "-f https://download.pytorch.org/whl/torch_stable.html\ntorch==1.7.1+cu110\n",
        "j/environment.yaml": "channels:\n  - pytorch\n  - nvidia\ndependencies:\n  - python=3.8\n"
                              "  - pytorch=1.10.2=py3.8_cuda11.3_0\n  - pip:\n    - torch-geometric\n",
        "k/requirements/base.txt": "torch>=2.1\n",
        "k/setup.py": "from setuptools import setup\nsetup(name='k')\n",
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
    assert declared_torch_floor(str(tmp_path / "h"))[0] == (1, 9)
    assert declared_torch_floor(str(tmp_path / "i"))[0] == (1, 7)
    assert declared_torch_floor(str(tmp_path / "j")) == ((1, 10), str(tmp_path / "j" / "environment.yaml"))
    assert declared_torch_floor(str(tmp_path / "k")) == ((2, 1), str(tmp_path / "k" / "requirements" / "base.txt"))


def test_the_nearest_project_that_names_torch_decides(tmp_path: Path) -> None:
    """The nearest folder whose files name torch decides; a sub-package or an example whose metadata never
    names torch runs on the torch the repository pins, so the question goes on upwards (to the repository's
    root at most); one that names torch without a bound says any torch may be installed."""
    write(tmp_path, {
        "pyproject.toml": '[project]\nname = "outer"\ndependencies = ["torch>=1.13"]\n',
        "src/pkg/train.py": AMP,
        "plugins/inner/pyproject.toml": '[project]\nname = "inner"\ndependencies = ["numpy"]\n',
        "plugins/inner/train.py": AMP,
        "examples/llm/requirements.txt": "transformers>=4.30\n",
        "examples/llm/train.py": AMP,
        "ops/setup.py": "from setuptools import setup\nsetup(name='ops', ext_modules=[])\n",
        "ops/train.py": AMP,
        "latest/requirements.txt": "torch\n",
        "latest/train.py": AMP,
    })
    resolver = SettingsResolver()
    assert resolver.for_path(tmp_path / "src" / "pkg" / "train.py").torch_version == (1, 13)
    for folder in ("plugins/inner", "examples/llm", "ops"):
        assert resolver.for_path(tmp_path / folder / "train.py").torch_version == (1, 13), folder
    assert resolver.for_path(tmp_path / "latest" / "train.py").torch_version is None


def test_the_repository_root_ends_the_search(tmp_path: Path) -> None:
    """A checkout inside a folder that pins torch for something else is its own project."""
    write(tmp_path, {"requirements.txt": "torch==1.4.0\n", "clone/.git/HEAD": "ref: refs/heads/main\n",
                     "clone/requirements.txt": "numpy\n", "clone/train.py": AMP})
    assert declared_torch_floor(str(tmp_path / "clone")) == (None, None)


def test_prose_is_never_a_pin(tmp_path: Path) -> None:
    """A README's "requires PyTorch 1.4" is not a constraint pip or conda enforces, and often stale."""
    write(tmp_path, {".git/HEAD": "ref: refs/heads/main\n",
                     "README.md": "## Requirements\n\nThis code requires PyTorch 1.4 (torch>=1.4.0).\n",
                     "INSTALL.txt": "pip install torch==1.4.0\n", "train.py": AMP})
    assert declared_torch_floor(str(tmp_path)) == (None, None)


def test_more_places_that_pin_torch(tmp_path: Path) -> None:
    write(tmp_path, {
        "poetry/pyproject.toml": '[tool.poetry.dependencies]\npython = "^3.9"\ntorch = "^1.13"\n',
        "poetry-table/pyproject.toml": '[tool.poetry.dependencies]\ntorch = {version = ">=2.1,<3", source = "pt"}\n',
        "poetry-any/pyproject.toml": '[tool.poetry.dependencies]\ntorch = "*"\n',
        "extra/pyproject.toml": '[project]\nname = "x"\ndependencies = ["numpy"]\n\n'
                                '[project.optional-dependencies]\ntrain = ["torch>=2.0", "wandb"]\n',
        "joined/setup.py": "import os\nfrom setuptools import setup\nhere = os.path.dirname(__file__)\n"
                           "setup(install_requires=open(os.path.join(here, 'requirements', 'base.txt'))\n"
                           "      .read().split())\n",
        "joined/requirements/base.txt": "torch>=1.10\n",
        "subpath/setup.py": "from setuptools import setup\n"
                            "setup(install_requires=open('deps/train.txt').readlines())\n",
        "subpath/deps/train.txt": "torch==1.8.1\n",
        "outside/setup.py": "from setuptools import setup\nsetup(install_requires=open('/etc/reqs.txt').readlines())\n",
        "env-named/environment-cuda.yml": "dependencies:\n  - pytorch==1.9.0\n",
        # decision-transformer's name for it (the fourth blind reading: a fused-AdamW fix for torch 1.2)
        "conda-named/conda_env.yml": "name: dt\ndependencies:\n  - python=3.8\n  - pip:\n    - torch==1.8.1\n",
        "yaml-config/config.yaml": "dependencies:\n  - pytorch==1.9.0\n",  # not an environment's name
    })
    assert declared_torch_floor(str(tmp_path / "poetry"))[0] == (1, 13)
    assert declared_torch_floor(str(tmp_path / "poetry-table"))[0] == (2, 1)
    assert declared_torch_floor(str(tmp_path / "poetry-any")) == (None, None)
    assert declared_torch_floor(str(tmp_path / "extra"))[0] == (2, 0)
    assert declared_torch_floor(str(tmp_path / "joined"))[0] == (1, 10)
    assert declared_torch_floor(str(tmp_path / "subpath"))[0] == (1, 8)
    assert declared_torch_floor(str(tmp_path / "outside")) == (None, None)
    assert declared_torch_floor(str(tmp_path / "env-named"))[0] == (1, 9)
    assert declared_torch_floor(str(tmp_path / "conda-named"))[0] == (1, 8)
    assert declared_torch_floor(str(tmp_path / "yaml-config")) == (None, None)


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
    result = gpulint.check("--output-format", "concise", target)
    # the replacement does not exist on every torch the project supports: the advice cannot pay off there
    assert "GPU003" not in result.output
    shown = gpulint("show-config", target).output
    assert 'torch-version = "1.13"' in shown and "the torch floor" in shown and "setup.py declares" in shown
    (tmp_path / "proj" / "setup.py").write_text(
        "from setuptools import setup\nsetup(install_requires=['torch>=2.3'])\n", encoding="utf-8")
    result = gpulint.check("--output-format", "concise", target)
    assert "GPU003" in result.output and "1 fixable" in result.output  # the floor is part of the cache key


def test_a_local_label_on_the_bound_still_declares_the_floor(tmp_path: Path) -> None:
    """blind8: SRGAN-PyTorch pins `torch>=2.0.1+cu118`, which packaging refuses as a specifier; read as pip
    reads it, its floor 2.0 lacks torch.amp.GradScaler (2.3), so GPU003 has nothing to offer there."""
    gpulint = Gpulint(False, tmp_path / "cache")
    write(tmp_path, {"proj/requirements.txt": "numpy\ntorch>=2.0.1+cu118\ntorchvision>=0.15.2+cu118\n",
                     "proj/train.py": AMP})
    target = tmp_path / "proj" / "train.py"
    assert "GPU003" not in gpulint.check("--output-format", "concise", target).output
    assert 'torch-version = "2.0"' in gpulint("show-config", target).output


AUTOCAST_STEP = """import torch
from torch.cuda.amp import GradScaler

scaler = GradScaler()


def step(model, x, opt):
    with torch.cuda.amp.autocast(True):
        loss = model(x).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
"""


@pytest.mark.parametrize(("pin", "spelling"), [
    ("torch==1.9.0", None),  # neither torch.autocast (1.10) nor torch.amp (1.12): the old spelling stays
    ("torch==1.10.2", 'torch.autocast("cuda", enabled=True)'),
    ("torch==1.11.0", 'torch.autocast("cuda", enabled=True)'),  # blind19: DDPM-Pytorch pins torch==1.11.0
    ("torch==1.12.1", 'torch.amp.autocast("cuda", enabled=True)'),
    ("numpy", 'torch.amp.autocast("cuda", enabled=True)'),  # no floor declared: torch.amp, as ever
])
def test_the_autocast_rename_follows_the_pinned_torch(tmp_path: Path, pin: str, spelling: Optional[str]) -> None:
    """torch 1.10 and 1.11 have torch.autocast but no torch.amp package: a project pinned to one is told to use
    torch.autocast; from 1.12 the rename is torch.amp.autocast. The GradScaler is kept below 2.3 either way."""
    write(tmp_path, {"proj/requirements.txt": f"{pin}\n", "proj/train.py": AUTOCAST_STEP})
    gpulint = Gpulint(False, tmp_path / "cache")
    target = tmp_path / "proj" / "train.py"
    found = [line for line in gpulint.check("--output-format", "concise", target).output.splitlines()
             if "GPU003" in line]
    if spelling is None:
        assert found == []
        return
    expected = spelling.split("(")[0]
    assert [line.split(": ", 1)[1] for line in found if "GradScaler" not in line] == [
        f'GPU003 [*] torch.cuda.amp.autocast is deprecated since torch 2.4: use {expected}("cuda", ...)']
    assert any("GradScaler" in line for line in found) == (pin == "numpy")  # torch.amp.GradScaler needs 2.3
    gpulint.fix("--select", "GPU003", target)
    fixed = target.read_text(encoding="utf-8")
    assert f"with {spelling}:" in fixed and "torch.cuda.amp.autocast" not in fixed


def test_no_optimizer_advice_needs_a_torch_the_project_does_not_declare(tmp_path: Path) -> None:
    """`fused=True` raises a TypeError on a torch without the kernel: a project that declares one is not told
    to pass it, also when it pins torch in requirements.txt or environment.yml."""
    maybe_cpu = ADAM.replace(".cuda()", '.to(args.device)')  # "cpu" or "cuda", as the command line says
    torch_2 = '[project]\nname = "p"\ndependencies = ["torch>=2.0"]\n'
    write(tmp_path, {"a/pyproject.toml": torch_2, "a/train.py": maybe_cpu,
                     "b/requirements.txt": "numpy\ntorch==1.7.1\n", "b/train.py": ADAM,
                     "c/environment.yml": "dependencies:\n  - pytorch=1.8\n", "c/train.py": ADAM,
                     "d/requirements.txt": "torch>=2.4\n", "d/train.py": ADAM,
                     "e/pyproject.toml": torch_2, "e/train.py": ADAM,
                     "f/pyproject.toml": torch_2,
                     "f/train.py": ADAM.replace(".cuda()", '.to("cuda" if torch.cuda.is_available() else "cpu")'),
                     "g/pyproject.toml": torch_2,
                     "g/train.py": ADAM.replace(".cuda()", '.to("cuda" if args.gpu else "cpu")')})
    gpulint = Gpulint(False, tmp_path / "cache")
    for folder in "abc":
        assert "GPU201" not in gpulint.check("--output-format", "concise", tmp_path / folder / "train.py").output
    # the CPU only where CUDA is not available: fused exactly when it is (torch 2.0 has the CUDA kernel)
    shown = gpulint.check("--show-fixes", "--output-format", "concise", tmp_path / "f" / "train.py").output
    assert "GPU201" in shown and "fused=torch.cuda.is_available()" in shown
    # the CPU only where a flag read beside the optimizer is off: fused exactly when it is on (a bool of it, as
    # what `args.gpu` holds is not known here)
    shown = gpulint.check("--show-fixes", "--output-format", "concise", tmp_path / "g" / "train.py").output
    assert "GPU201" in shown and "fused=bool(args.gpu)" in shown
    assert "GPU201" in gpulint.check("--output-format", "concise", tmp_path / "d" / "train.py").output
    # a CUDA-only script needs only the CUDA kernel (Adam: 1.13), not the CPU one (2.4): mar's case, blind3
    assert "GPU201" in gpulint.check("--output-format", "concise", tmp_path / "e" / "train.py").output


def test_one_look_per_folder(tmp_path: Path) -> None:
    """The answer is remembered for every folder passed on the way up, so a tree costs one look per folder."""
    write(tmp_path, {"pyproject.toml": '[project]\nname = "p"\ndependencies = ["torch>=2.1"]\n',
                     "a/b/c/train.py": AMP, "a/d/train.py": AMP})
    memo: dict[str, DeclaredRange] = {}
    expected = ((2, 1), str(tmp_path / "pyproject.toml"))
    assert declared_torch_floor(str(tmp_path / "a" / "b" / "c"), memo) == expected
    passed = [tmp_path / "a" / "b" / "c", tmp_path / "a" / "b", tmp_path / "a", tmp_path]
    assert all(memo[str(folder)] == ((2, 1), None, expected[1]) for folder in passed)
    (tmp_path / "pyproject.toml").unlink()  # the memo answers without looking again
    assert declared_torch_floor(str(tmp_path / "a" / "d"), memo) == expected


def test_install_commands_of_scripts_and_dockerfiles(tmp_path: Path) -> None:
    """`pip install torch==1.7.1` in install.sh is a pin the project runs (a README sentence is not)."""
    write(tmp_path, {
        "pip/install.sh": "set -e\npip install torch==1.7.1+cu110 torchvision==0.8.2 \\\n"
                          "    -f https://download.pytorch.org/whl/torch_stable.html\n",
        "conda/setup_env.sh": "conda create -n x python=3.8\n"
                              "conda install -y pytorch=1.8 cudatoolkit=11.1 -c pytorch\n",
        "docker/Dockerfile": "FROM pytorch/pytorch:1.9.0-cuda11.1-cudnn8-runtime\n"
                             "RUN pip install -r requirements.txt\n",
        "latest/install.sh": "pip install torch torchvision\n",
        "runs/.git/HEAD": "", "runs/train.sh": "python train.py --lr 0.1\n",  # names no torch: no floor
        "order/requirements.txt": "torch>=2.0\n", "order/install.sh": "pip install torch==1.4\n",
    })
    assert declared_torch_floor(str(tmp_path / "pip")) == ((1, 7), str(tmp_path / "pip" / "install.sh"))
    assert declared_torch_floor(str(tmp_path / "conda"))[0] == (1, 8)
    assert declared_torch_floor(str(tmp_path / "docker"))[0] == (1, 9)
    assert declared_torch_floor(str(tmp_path / "latest")) == (None, None)
    assert declared_torch_floor(str(tmp_path / "runs")) == (None, None)
    assert declared_torch_floor(str(tmp_path / "order"))[0] == (2, 0)  # the packaging metadata is asked first


@pytest.mark.parametrize(("requirements", "above"), [
    (["torch==1.4.0"], (1, 5)),
    (["torch==1.7.1+cu110"], (1, 8)),
    (["torch==2.*"], (3, 0)),
    (["torch~=1.13.0"], (1, 14)),
    (["torch~=1.13"], (2, 0)),
    (["torch>=1.4,<1.6"], (1, 6)),
    (["torch>=1.4,<1.6.1"], (1, 7)),
    (["torch>=1.4,<=1.6"], (1, 7)),
    (["torch>=1.4"], None),  # no upper bound
    (["torch>=1.8,!=2.0"], None),
    (['torch==1.4; sys_platform == "darwin"', 'torch>=2.1; sys_platform == "linux"'], None),  # either line
])
def test_the_first_torch_a_requirement_no_longer_admits(requirements: list[str],
                                                        above: Optional[tuple[int, int]]) -> None:
    assert torch_range(requirements)[1] == above


@pytest.mark.parametrize(("pins", "above"), [
    (["pytorch=1.4.0"], (1, 5)),
    (["pytorch=1.7.1=py3.8_cuda11.0_cudnn8.0.5_0"], (1, 8)),
    (["pytorch 1.9.*"], (1, 10)),
    (["pytorch>=1.8,<2"], (2, 0)),
    (["pytorch>=1.8"], None),
])
def test_the_first_torch_a_conda_pin_no_longer_admits(pins: list[str], above: Optional[tuple[int, int]]) -> None:
    assert conda_range(pins)[1] == above


# SimCLR (the fourth blind reading): env.yml pins pytorch=1.4.0, simclr.py imports torch.cuda.amp (torch 1.6)
SIMCLR_ENV = "name: simclr\nchannels:\n  - pytorch\ndependencies:\n  - python=3.7.6\n  - pytorch=1.4.0\n" \
             "  - torchvision=0.5\n"
CUDA_AMP = "import torch\nfrom torch.cuda.amp import GradScaler, autocast\n\nscaler = GradScaler()\n"


def test_a_pin_the_code_contradicts_is_stale(tmp_path: Path) -> None:
    """A module that imports, unconditionally, an API no torch the pin admits has: whoever wrote it ran a newer
    torch, so the pin says nothing about the torch the project runs on and gives no floor (as if none were
    declared), with the evidence kept for `show-config`. Not the version the code needs either: that proves
    only that users run it or newer, no evidence that anyone runs exactly it."""
    write(tmp_path, {
        "simclr/.git/HEAD": "", "simclr/env.yml": SIMCLR_ENV, "simclr/simclr.py": CUDA_AMP, "simclr/run.py": ADAM,
        # a pinned range the code needs more than: torch<1.10 and torch.func (2.0), imported beside others
        "capped/requirements.txt": "torch>=1.8,<1.10\n", "capped/pkg/ops.py": "import os, torch.func\n",
        "exact-pip/requirements.txt": "torch==1.9.0\n", "exact-pip/train.py": "from torch.amp import GradScaler\n",
    })
    stale: dict[str, Stale] = {}
    assert declared_torch_floor(str(tmp_path / "simclr"), None, NEEDED_BY_IMPORT, stale) == \
        (None, str(tmp_path / "simclr" / "env.yml"))
    assert stale[str(tmp_path / "simclr" / "env.yml")].reason() == \
        "env.yml pins torch 1.4, but simclr.py imports torch.cuda.amp (torch 1.6)"
    assert declared_torch_floor(str(tmp_path / "simclr")) == ((1, 4), str(tmp_path / "simclr" / "env.yml"))  # unasked
    assert declared_torch_floor(str(tmp_path / "capped"), None, NEEDED_BY_IMPORT, stale)[0] is None
    assert stale[str(tmp_path / "capped" / "requirements.txt")].reason() == \
        "requirements.txt admits no torch from 1.10 on, but pkg/ops.py imports torch.func (torch 2.0)"
    assert declared_torch_floor(str(tmp_path / "exact-pip"), None, NEEDED_BY_IMPORT, stale)[0] is None
    resolver = SettingsResolver()
    assert resolver.for_path(tmp_path / "simclr" / "run.py").torch_version is None
    gpulint = Gpulint(False, tmp_path / "cache")
    # the fused Adam the stale pin withheld (run.py:77 in SimCLR, read as TP), and GPU003's torch.amp rename
    output = gpulint.check("--output-format", "concise", tmp_path / "simclr").output
    assert "run.py:4:7: GPU201" in output and "simclr.py:2:28: GPU003" in output
    shown = gpulint("show-config", tmp_path / "simclr" / "run.py").output
    assert "# torch-version: none: env.yml pins torch 1.4, but simclr.py imports torch.cuda.amp (torch 1.6): " \
           "a stale pin, not a floor" in shown


def test_a_pin_the_code_respects_still_rules(tmp_path: Path) -> None:
    """No stale pin where the code runs on a torch the pin admits, where the newer API is imported only as a
    fallback, a version branch or inside a function (it may never run on the pinned torch), in a folder that
    pins torch itself, or where the pin has no upper bound (`>=1.4`: the code runs on some torch it admits;
    the floor is not raised either, one module's need says nothing about files that never import it)."""
    guarded = "try:\n    from torch.cuda.amp import autocast\nexcept ImportError:\n    autocast = None\n"
    branch = "import torch\nif torch.__version__ >= '1.6':\n    from torch.cuda.amp import autocast\n"
    late = "def train():\n    from torch.cuda.amp import autocast\n    return autocast\n"
    write(tmp_path, {
        "respected/environment.yml": "dependencies:\n  - pytorch=1.7.1\n", "respected/amp.py": CUDA_AMP,
        "respected/train.py": ADAM,
        "guarded/env.yml": SIMCLR_ENV, "guarded/a.py": guarded, "guarded/b.py": branch, "guarded/c.py": late,
        "guarded/train.py": ADAM,
        "nested/env.yml": SIMCLR_ENV, "nested/train.py": ADAM,
        "nested/tools/requirements.txt": "torch>=2.0\n", "nested/tools/compiled.py": "from torch.func import vmap\n",
        "floor-only/requirements.txt": "torch>=1.4\n", "floor-only/train.py": ADAM,
        "floor-only/amp.py": "from torch.func import vmap\n",
    })
    stale: dict[str, Stale] = {}
    assert declared_torch_floor(str(tmp_path / "respected"), None, NEEDED_BY_IMPORT, stale)[0] == (1, 7)
    assert declared_torch_floor(str(tmp_path / "guarded"), None, NEEDED_BY_IMPORT, stale)[0] == (1, 4)
    assert declared_torch_floor(str(tmp_path / "nested"), None, NEEDED_BY_IMPORT, stale)[0] == (1, 4)
    assert declared_torch_floor(str(tmp_path / "nested" / "tools"), None, NEEDED_BY_IMPORT, stale)[0] == (2, 0)
    assert declared_torch_floor(str(tmp_path / "floor-only"), None, NEEDED_BY_IMPORT, stale)[0] == (1, 4)
    assert stale == {}
    gpulint = Gpulint(False, tmp_path / "cache")
    for folder in ("respected", "guarded", "floor-only"):
        output = gpulint.check("--output-format", "concise", tmp_path / folder / "train.py").output
        assert "GPU201" not in output, folder  # fused Adam needs 1.13: the pin withholds it
    assert "stale" not in gpulint("show-config", tmp_path / "guarded" / "train.py").output


def test_cog_yaml_pins(tmp_path: Path) -> None:
    """Cog's build file pins the torch its container runs (salesforce/BLIP: torch==1.10.0 in python_packages,
    a requirements.txt without torch); a README sentence beside it is still not read."""
    write(tmp_path, {
        "blip/cog.yaml": 'build:\n  gpu: true\n  python_version: "3.8"\n  system_packages:\n    - "libgl1"\n'
                         '  python_packages:\n    - "torchvision==0.11.1"\n    - "torch==1.10.0"\n'
                         'predict: "predict.py:Predictor"\n',
        "blip/requirements.txt": "timm==0.4.12\ntransformers==4.15.0\n",
        "blip/README.md": "Tested on PyTorch 2.1.\n",
        "reqs/cog.yaml": "build:\n  python_requirements: requirements-cog.txt\n",
        "reqs/requirements-cog.txt": "torch>=1.13\n",
        "run/cog.yaml": "build:\n  run:\n    - pip install torch==2.0.1 --index-url https://x\n",
        "loose/cog.yaml": 'build:\n  python_packages:\n    - "torch"\n',
        "other/cog.yaml": 'build:\n  python_packages:\n    - "numpy==1.26"\nimage: "r8.im/x/torch==1.4"\n',
    })
    assert declared_torch_floor(str(tmp_path / "blip")) == ((1, 10), str(tmp_path / "blip" / "cog.yaml"))
    assert declared_torch_floor(str(tmp_path / "reqs"))[0] == (1, 13)
    assert declared_torch_floor(str(tmp_path / "run"))[0] == (2, 0)
    assert declared_torch_floor(str(tmp_path / "loose"))[0] is None  # names torch, no bound: no floor
    assert declared_torch_floor(str(tmp_path / "other"))[0] is None  # lists no torch
    assert read_for_floor("cog.yaml") and read_for_floor("deploy/cog.yaml")


def test_requirements_files_with_a_prefix_pin_torch(tmp_path: Path) -> None:
    """Vim keeps one pin file per sub-project (`vim/vim_requirements.txt`, `det/det-requirements.txt`: the fifteenth
    blind reading); `requirements.txt` is still asked before a prefixed file in the same folder."""
    write(tmp_path, {
        "vim/vim_requirements.txt": "torch==2.1.1\ntimm==0.4.12\n",
        "det/det-requirements.txt": "torch==2.1.2\n",
        "both/dev-requirements.txt": "torch>=2.4\n",
        "both/requirements.txt": "torch>=1.13\n",
        "word/myrequirements.txt": "torch==1.8\n",  # no separator: not a requirements file's name
    })
    assert declared_torch_floor(str(tmp_path / "vim")) == ((2, 1), str(tmp_path / "vim" / "vim_requirements.txt"))
    assert declared_torch_floor(str(tmp_path / "det"))[0] == (2, 1)
    assert declared_torch_floor(str(tmp_path / "both")) == ((1, 13), str(tmp_path / "both" / "requirements.txt"))
    assert declared_torch_floor(str(tmp_path / "word"))[0] is None
    assert read_for_floor("det/det-requirements.txt") and read_for_floor("vim_requirements.txt")
    assert not read_for_floor("myrequirements.txt")


def test_a_conda_export_saved_as_requirements_txt_pins_torch(tmp_path: Path) -> None:
    """wvangansbeke/Unsupervised-Classification (sixteenth blind reading, 2 NP and 1 FP of GPU001): its
    requirements.txt is `conda env export` output (`- pytorch=1.4.0=py3.7_cuda10.0.130_cudnn7.6.3_0`), torch 1.4,
    which has no mixed precision; pip's reading finds no bound in it. `conda list --export` lines count too; a pip
    requirement in the same file still comes first, and a conda line naming another package is no pin."""
    write(tmp_path, {
        "export/requirements.txt": '""" Packages used. """\n  - blas=1.0=mkl\n  - pytorch=1.4.0=py3.7_cuda10.0_0\n',
        "listed/requirements.txt": "# platform: linux-64\npytorch=1.8.1=py3.8_cuda11.1_cudnn8.0.5_0\n",
        "pip/requirements.txt": "torch>=2.1\n  - pytorch=1.4.0=py3.7_0\n",
        "other/requirements.txt": "  - pillow=7.0.0=py37_0\n  - numpy=1.18.1=py37\n",
        "companion/requirements.txt": "  - torchvision=0.5.0=py37_cu100\n  - numpy=1.18.1=py37\n",
    })
    assert declared_torch_floor(str(tmp_path / "export"))[0] == (1, 4)
    assert declared_torch_floor(str(tmp_path / "listed"))[0] == (1, 8)
    assert declared_torch_floor(str(tmp_path / "pip"))[0] == (2, 1)
    assert declared_torch_floor(str(tmp_path / "other"))[0] is None
    assert declared_torch_range(str(tmp_path / "companion"))[:2] == ((1, 4), (1, 5))  # torchvision 0.5: torch 1.4


CONDA_EXPORT = ("name: proj\nchannels:\n  - pytorch\n  - conda-forge\ndependencies:\n  - python=3.8.13=h12debd9_0\n"
                "  - pytorch=1.10.2=py3.8_cuda11.3_cudnn8.2.0_0\n  - pytorch-scatter=2.0.9=py38_torch_1.10.0_cu113\n"
                "  - pip:\n    - ase==3.22.1\n")


def test_an_environment_folder_pins_the_folder_it_lies_in(tmp_path: Path) -> None:
    """equiformer (the twenty-second blind reading: 8 GPU003 and 2 GPU001 NP) keeps its `conda env export` in
    `env/env_equiformer.yml` (`pytorch=1.10.2`): no torch.amp package there. A subfolder whose name says it holds
    the environment (`env`, `envs`, `environment`, `environments`, `conda`) pins the folder it lies in with its
    requirements and conda environment files, after the folder's own files; the folders below take it too."""
    write(tmp_path, {
        ".git/HEAD": "ref: refs/heads/main\n",
        "env/env_proj.yml": CONDA_EXPORT, "nets/deep/model.py": "import torch\n",
        "envs/a/envs/requirements.txt": "torch==1.8.1\n",
        "environment/b/environment/cuda-environment.yaml": "dependencies:\n  - pytorch>=1.12\n",
        "environments/c/Environments/dev-requirements.txt": "torch>=2.2\n",
        "environments/c/Environments/requirements.txt": "torch>=2.1\n",  # `requirements*.txt` first, as beside
        "conda/d/conda/conda.yml": "dependencies:\n  - pip:\n    - torch==1.9.0\n",
        "own/e/requirements.txt": "torch>=2.0\n",  # the folder's own file before its env folder's
        "own/e/env/environment.yml": "dependencies:\n  - pytorch=1.6\n",
        "names/f/env/proj.yml": "dependencies:\n  - pytorch=1.6\n",  # not an environment file's name
        "names/f/env/notes.txt": "torch==1.6\n",  # not a requirements file's name
        "names/f/setup/requirements.txt": "torch==1.6\n",  # not an environment folder's name
        "deeper/g/sub/env/environment.yml": "dependencies:\n  - pytorch=1.6\n",  # pins sub/, not g/
    })
    yml = str(tmp_path / "env" / "env_proj.yml")
    assert declared_torch_floor(str(tmp_path)) == ((1, 10), yml)
    assert declared_torch_floor(str(tmp_path / "nets" / "deep")) == ((1, 10), yml)
    assert declared_torch_floor(str(tmp_path / "envs" / "a"))[0] == (1, 8)
    assert declared_torch_floor(str(tmp_path / "environment" / "b"))[0] == (1, 12)
    assert declared_torch_floor(str(tmp_path / "environments" / "c")) == (
        (2, 1), str(tmp_path / "environments" / "c" / "Environments" / "requirements.txt"))
    assert declared_torch_floor(str(tmp_path / "conda" / "d"))[0] == (1, 9)
    own = tmp_path / "own" / "e"
    assert declared_torch_floor(str(own)) == ((2, 0), str(own / "requirements.txt"))
    assert declared_torch_floor(str(tmp_path / "names" / "f")) == ((1, 10), yml)  # nothing there: the root's pin
    assert declared_torch_floor(str(tmp_path / "deeper" / "g")) == ((1, 10), yml)
    assert declared_torch_floor(str(tmp_path / "deeper" / "g" / "sub"))[0] == (1, 6)
    for path in ("env/env_equiformer.yml", "envs/requirements.txt", "conda/environment.yaml"):
        assert read_for_floor(path), path


def test_an_installed_environment_is_never_a_pin(tmp_path: Path) -> None:
    """A virtualenv made in `env/` (`python -m venv env`: `pyvenv.cfg`, `bin/`, `lib/` at its top) or a conda
    prefix (`conda create -p ./env`: `conda-meta/`) is an install, not a declaration: nothing in it is read,
    not even a requirements or environment file at its top, and the pin above it still decides."""
    site = "env/lib/python3.10/site-packages"
    write(tmp_path, {
        ".git/HEAD": "ref: refs/heads/main\n",
        "venv-made/env/pyvenv.cfg": "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.10.12\n",
        "venv-made/env/bin/activate": "VIRTUAL_ENV=/proj/env\n",
        "venv-made/env/requirements.txt": "torch==1.8.1\n",
        f"venv-made/{site}/torch-2.1.0.dist-info/METADATA": "Name: torch\nVersion: 2.1.0\n",
        f"venv-made/{site}/pkg/requirements.txt": "torch==1.4.0\n",
        f"venv-made/{site}/pkg/environment.yml": "dependencies:\n  - pytorch=1.4\n",
        "conda-made/env/conda-meta/history": "==> 2023-01-01 00:00:00 <==\n# cmd: conda create -p ./env\n",
        "conda-made/env/environment.yml": "dependencies:\n  - pytorch=1.4\n",
        "conda-made/env/conda-meta/pytorch-1.4.0-py3.7_0.json": '{"name": "pytorch", "version": "1.4.0"}\n',
        "pinned/requirements.txt": "torch>=2.0\n",
        "pinned/env/pyvenv.cfg": "home = /usr/bin\n", "pinned/env/requirements.txt": "torch==1.8.1\n",
    })
    assert declared_torch_floor(str(tmp_path / "venv-made")) == (None, None)
    assert declared_torch_floor(str(tmp_path / "conda-made")) == (None, None)
    assert declared_torch_floor(str(tmp_path / "pinned"))[0] == (2, 0)
    # the markers are copied with the files they keep from being read (bench/precision/prepare.py)
    assert read_for_floor("env/pyvenv.cfg") and read_for_floor("sub/envs/conda-meta/history")
    assert not read_for_floor("conda-meta/history") and not read_for_floor("tools/conda-meta/history")


def test_a_conda_export_in_an_env_folder_keeps_torch_amp_out_of_the_fix(tmp_path: Path) -> None:
    """The rename the project's torch has: torch 1.10 (equiformer's export) has torch.autocast, no torch.amp, and
    no torch.amp.GradScaler (2.3); a virtualenv in `env/` beside the code says nothing, and torch.amp stays."""
    write(tmp_path, {"proj/.git/HEAD": "ref: refs/heads/main\n", "proj/env/env_proj.yml": CONDA_EXPORT,
                     "proj/train.py": AUTOCAST_STEP,
                     "venv/.git/HEAD": "ref: refs/heads/main\n", "venv/env/pyvenv.cfg": "home = /usr/bin\n",
                     "venv/env/environment.yml": CONDA_EXPORT, "venv/train.py": AUTOCAST_STEP})
    gpulint = Gpulint(False, tmp_path / "cache")
    for folder, spelling in (("proj", "torch.autocast"), ("venv", "torch.amp.autocast")):
        found = [line.split(": ", 1)[1] for line in gpulint.check(
            "--output-format", "concise", tmp_path / folder / "train.py").output.splitlines() if "GPU003" in line]
        assert [line for line in found if "GradScaler" not in line] == [
            f'GPU003 [*] torch.cuda.amp.autocast is deprecated since torch 2.4: use {spelling}("cuda", ...)'], folder
        assert any("GradScaler" in line for line in found) == (folder == "venv"), folder
