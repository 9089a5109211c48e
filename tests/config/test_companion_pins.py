"""Two more places a project declares its torch (project/requirements.py):

- a pin of torchvision, torchaudio or torchtext, each release of which requires one torch exactly (blind23:
  hyena-dna's requirements.txt pins `torchtext==0.14.0 # this needs to align with the pytorch version` and no
  torch: torch 1.13, where AdamW has no `fused=`);
- a Dockerfile in a `docker/` folder, its base image's tag written with an `ARG` (blind23: SegFormer's
  `ARG PYTORCH="1.6.0"` ... `FROM pytorch/pytorch:${PYTORCH}-cuda${CUDA}-cudnn${CUDNN}-devel`: torch 1.6, which
  has no `use_reentrant=`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from gpulint.core.floors import NEEDED_BY_IMPORT
from gpulint.project.requirements import Stale, declared_torch_range, read_for_floor
from tests.analysis.test_project import findings
from tests.analysis.test_project import write as write_project
from tests.config.test_torch_floor import ADAM, write

Version = Optional[tuple[int, int]]
ADAMW = ADAM.replace("optim.Adam(", "optim.AdamW(")


@pytest.mark.parametrize(("requirements", "floor", "above"), [
    ("torchtext==0.14.0  # align with the pytorch version\ntorchvision\n", (1, 13), (2, 0)),  # hyena-dna
    ("torchvision>=0.15\n", (2, 0), None),
    ("torchvision<0.16\n", None, (2, 1)),  # an end alone ends torch's range
    ("torchvision==0.14.1+cu117\n", (1, 13), (2, 0)),  # the first torch no torchvision before 0.15 requires
    ("torchvision==0.5.0\n", (1, 4), (1, 5)),
    ("torchvision~=0.17.0\n", (2, 2), (2, 3)),
    ("torchaudio==0.13.1\n", (1, 13), (2, 0)),  # 2.0 followed 0.13
    ("torchaudio==0.4.0\n", (1, 4), (1, 5)),
    ("torchaudio>=2.1,<2.3\n", (2, 1), (2, 3)),
    ("torchtext==0.18.0\n", (2, 3), (2, 4)),  # its last release
    ("torchtext==0.5.0\n", (1, 4), (1, 5)),
    ("torch==1.13.1\ntorchvision>=0.14\n", (1, 13), (1, 14)),  # the torch pin is tighter
    ("torch>=1.10\ntorchvision==0.15.2\n", (2, 0), (2, 1)),  # the companion is tighter
    ("torch\ntorchaudio==2.2.0\n", (2, 2), (2, 3)),  # an unbounded torch line bounds nothing
    ("torch>=1.12\ntorchvision>=0.15\ntorchaudio<2.2\n", (2, 0), (2, 2)),  # every line holds
    ("torch>=1.8\ntorchvision\ntorchaudio\n", (1, 8), None),  # unpinned companions bound nothing
    ("torch==2.0.1\ntorchvision==0.14.0\n", (2, 0), (2, 1)),  # a contradiction: the torch line stands
])
def test_a_companion_pin_bounds_torch(tmp_path: Path, requirements: str, floor: Version, above: Version) -> None:
    write(tmp_path, {"requirements.txt": requirements})
    assert declared_torch_range(str(tmp_path)) == (floor, above, str(tmp_path / "requirements.txt"))


@pytest.mark.parametrize("requirements", [
    "torchvision\ntorchtext\n",  # unpinned
    "torchvision==0.2.2\n",  # before the lockstep releases: no torch it requires
    "torchvision>=0.2\n",
    "torchtext>=0.20\n",  # no such release
    "torchvision-extra==0.14.0\ntorchaudio-utils>=2.1\n",  # other distributions
    "torchvision!=0.14.0\n",
])
def test_what_bounds_no_companion_bounds_no_torch(tmp_path: Path, requirements: str) -> None:
    write(tmp_path, {"requirements.txt": requirements})
    assert declared_torch_range(str(tmp_path)) == (None, None, None)


def test_every_kind_of_pin_file_reads_its_companions(tmp_path: Path) -> None:
    """Conda pins and a pip section of an environment file, install commands, setup.py (its own list, or a file
    it reads at run time), pyproject.toml and `-r` includes: each is read for the companions as for torch."""
    write(tmp_path, {
        "conda/environment.yml": "dependencies:\n  - pytorch\n  - torchvision=0.14\n",
        "condapip/environment.yml": "dependencies:\n  - python=3.9\n  - pip:\n    - torchaudio==0.12.1\n",
        "script/install.sh": "pip install torch torchvision==0.16.0\n",
        "setup/setup.py": "from setuptools import setup\nsetup(install_requires=['torch', 'torchtext==0.15.2'])\n",
        "runtime/setup.py": "from setuptools import setup\n\n"
                            "setup(install_requires=open('requirements/runtime.txt').read().split())\n",
        "runtime/requirements/runtime.txt": "torch\ntorchvision>=0.13.0\n",
        "pyproject/pyproject.toml": '[project]\nname = "p"\ndependencies = ["torchvision==0.19.1"]\n',
        "included/requirements.txt": "-r requirements/base.txt\n",
        "included/requirements/base.txt": "torchvision==0.11.3\n",
    })
    assert declared_torch_range(str(tmp_path / "conda"))[:2] == ((1, 13), (2, 0))
    assert declared_torch_range(str(tmp_path / "condapip"))[:2] == ((1, 12), (1, 13))
    assert declared_torch_range(str(tmp_path / "script"))[:2] == ((2, 1), (2, 2))
    assert declared_torch_range(str(tmp_path / "setup"))[:2] == ((2, 0), (2, 1))
    assert declared_torch_range(str(tmp_path / "runtime"))[:2] == ((1, 12), None)
    assert declared_torch_range(str(tmp_path / "pyproject"))[:2] == ((2, 4), (2, 5))
    assert declared_torch_range(str(tmp_path / "included"))[:2] == ((1, 10), (1, 11))


def test_a_companion_pin_the_code_contradicts_is_stale(tmp_path: Path) -> None:
    """A companion's pin is checked against the code as a torch pin is, an end alone too (`torchvision<0.15`
    admits no torch from 2.0 on, and the module imports torch.compile, 2.0)."""
    write(tmp_path, {".git/HEAD": "", "requirements.txt": "torchvision<0.15\n",
                     "train.py": "from torch import compile\n"})
    stale: dict[str, Stale] = {}
    source = str(tmp_path / "requirements.txt")
    assert declared_torch_range(str(tmp_path), None, NEEDED_BY_IMPORT, stale) == (None, None, source)
    assert stale[source].reason() == "requirements.txt admits no torch from 2.0 on, but train.py imports " \
                                     "torch.compile (torch 2.0)"


SEGFORMER_DOCKERFILE = """\
ARG PYTORCH="1.6.0"
ARG CUDA="10.1"
ARG CUDNN="7"

FROM pytorch/pytorch:${PYTORCH}-cuda${CUDA}-cudnn${CUDNN}-devel
RUN pip install mmcv-full==1.2.7
"""


def test_a_dockerfile_in_a_docker_folder_pins_the_project(tmp_path: Path) -> None:
    """SegFormer: its requirements name torch without a bound, its docker/Dockerfile builds from the image of the
    ARG's default. Without a default (`--build-arg` decides) the tag reads as no version; a folder's own pin
    comes first; a Dockerfile in a folder of another name, or in a Python package's docker/ folder, is not the
    project's."""
    write(tmp_path, {
        "segformer/requirements.txt": "torch\ntorchvision\n",
        "segformer/docker/Dockerfile": SEGFORMER_DOCKERFILE,
        "bare/docker/Dockerfile": "ARG PYTORCH=1.8.1\nFROM pytorch/pytorch:$PYTORCH-cuda11.1-cudnn8-runtime\n",
        "plain/docker/Dockerfile.gpu": "FROM pytorch/pytorch:1.9.0-cuda11.1-cudnn8-devel\n",
        "nodefault/docker/Dockerfile": "ARG PYTORCH\nFROM pytorch/pytorch:${PYTORCH}-cuda10.1-cudnn7-devel\n",
        "own/requirements.txt": "torch>=1.13\n",
        "own/docker/Dockerfile": SEGFORMER_DOCKERFILE,
        "other/containers/Dockerfile": SEGFORMER_DOCKERFILE,
        "root/Dockerfile": SEGFORMER_DOCKERFILE,
        "yolo/requirements.txt": "torch>=1.8.0\ntorchvision>=0.9.0\n",
        "yolo/utils/__init__.py": "",
        "yolo/utils/docker/Dockerfile": "FROM pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime\n",
    })
    assert declared_torch_range(str(tmp_path / "segformer" / "mmseg")) == (
        (1, 6), (1, 7), str(tmp_path / "segformer" / "docker" / "Dockerfile"))
    assert declared_torch_range(str(tmp_path / "bare"))[:2] == ((1, 8), (1, 9))
    assert declared_torch_range(str(tmp_path / "plain"))[:2] == ((1, 9), (1, 10))
    assert declared_torch_range(str(tmp_path / "nodefault")) == (None, None, None)
    assert declared_torch_range(str(tmp_path / "own")) == ((1, 13), None, str(tmp_path / "own" / "requirements.txt"))
    assert declared_torch_range(str(tmp_path / "other")) == (None, None, None)
    assert declared_torch_range(str(tmp_path / "root"))[:2] == ((1, 6), (1, 7))  # a folder's own Dockerfile
    # a package's docker/ folder is not the package's pin: the root's decides (yolov5's utils/docker/)
    assert declared_torch_range(str(tmp_path / "yolo" / "utils")) == (
        (1, 8), None, str(tmp_path / "yolo" / "requirements.txt"))
    assert read_for_floor("docker/Dockerfile") and read_for_floor("docker/Dockerfile.gpu")


CHECKPOINTED = """\
import torch.nn as nn
import torch.utils.checkpoint as cp


class Block(nn.Module):
    def __init__(self, width, with_cp=False):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.with_cp = with_cp

    def forward(self, x):
        def inner(h):
            return h + self.proj(h).relu()

        if self.with_cp and x.requires_grad:
            return cp.checkpoint(inner, x)
        return inner(x)
"""


def test_gpu302_is_not_reported_on_the_torch_a_docker_folder_pins(tmp_path: Path) -> None:
    """SegFormer (blind23, 10 FP): on torch 1.6 `use_reentrant=` does not exist, so the fix raises a TypeError
    (CURRENT_TORCH refuted). Without the Dockerfile's version nothing bounds torch, and the finding stays."""
    write_project(tmp_path / "pinned", {"requirements.txt": "torch\ntorchvision\n",
                                        "docker/Dockerfile": SEGFORMER_DOCKERFILE, "mmseg/block.py": CHECKPOINTED})
    assert findings(tmp_path / "pinned", "--select", "GPU302") == []
    write_project(tmp_path / "open", {"requirements.txt": "torch\ntorchvision\n",
                                      "docker/Dockerfile": SEGFORMER_DOCKERFILE.replace('="1.6.0"', ""),
                                      "mmseg/block.py": CHECKPOINTED})
    assert findings(tmp_path / "open", "--select", "GPU302") == [("mmseg/block.py", 16, "GPU302")]


def test_gpu201_gives_no_fused_advice_on_the_torch_a_companion_pins(tmp_path: Path) -> None:
    """hyena-dna (blind23, 2 FP): `torchtext==0.14.0` admits torch 1.13 alone, whose AdamW has no `fused=` (2.0);
    an unpinned torchtext leaves the finding."""
    write_project(tmp_path / "pinned", {"requirements.txt": "torchtext==0.14.0\ntorchvision\n", "train.py": ADAMW})
    assert findings(tmp_path / "pinned", "--select", "GPU201") == []
    write_project(tmp_path / "open", {"requirements.txt": "torchtext\ntorchvision\n", "train.py": ADAMW})
    assert findings(tmp_path / "open", "--select", "GPU201") == [("train.py", 4, "GPU201")]
