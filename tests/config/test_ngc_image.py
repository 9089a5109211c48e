"""A Dockerfile built from NVIDIA's NGC PyTorch container pins the torch that release ships
(project/requirements.py `NGC_PYTORCH`). blind25: flowtron's only pin is its root Dockerfile's
`FROM nvcr.io/nvidia/pytorch:20.12-py3` (PyTorch 1.8.0a0), where `torch.amp.GradScaler`/`torch.amp.autocast` do not
exist and Adam takes no `fused=`: two GPU003 and one GPU201 fix that break the project (3 FP)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from gpulint.project.requirements import NGC_PYTORCH, declared_torch_range
from tests.analysis.test_project import findings
from tests.analysis.test_project import write as write_project
from tests.config.test_torch_floor import ADAM, write

Version = Optional[tuple[int, int]]


@pytest.mark.parametrize(("dockerfile", "floor", "above"), [
    ("FROM nvcr.io/nvidia/pytorch:20.12-py3\nRUN pip install librosa==0.8.0\n", (1, 8), (1, 9)),  # flowtron
    ("FROM nvcr.io/nvidia/pytorch:19.09-py2\n", (1, 2), (1, 3)),
    ("FROM nvcr.io/nvidia/pytorch:24.01-py3-igpu\n", (2, 2), (2, 3)),
    ("FROM --platform=linux/amd64 nvcr.io/nvidia/pytorch:23.05-py3 AS build\n", (2, 0), (2, 1)),
    ("FROM nvcr.io/nvidia/pytorch:22.12-py3\n", (1, 14), (1, 15)),  # 1.14.0a0: before 2.0, after 1.13
    ("ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:22.07-py3\nFROM ${BASE_IMAGE}\n", (1, 13), (1, 14)),  # an ARG's default
    # an install command that names torch, or a companion, replaces the image's torch: it decides
    ("FROM nvcr.io/nvidia/pytorch:21.10-py3\nRUN pip install torch==2.1.0\n", (2, 1), (2, 2)),
    ("FROM nvcr.io/nvidia/pytorch:21.10-py3\nRUN pip install torchvision==0.15.2\n", (2, 0), (2, 1)),
])
def test_an_ngc_pytorch_image_pins_the_torch_its_release_ships(tmp_path: Path, dockerfile: str, floor: Version,
                                                                 above: Version) -> None:
    write(tmp_path, {"Dockerfile": dockerfile})
    assert declared_torch_range(str(tmp_path)) == (floor, above, str(tmp_path / "Dockerfile"))


@pytest.mark.parametrize("dockerfile", [
    "FROM nvcr.io/nvidia/pytorch:21.08-py3\n",  # a release the table leaves out (not verified)
    "FROM nvcr.io/nvidia/pytorch:18.13-py3\n",  # no such release
    "FROM nvcr.io/nvidia/pytorch:latest\n",
    "FROM nvcr.io/nvidia/pytorch:20.12\n",  # not a tag NVIDIA publishes
    "FROM nvcr.io/nvidia/tensorflow:20.12-tf2-py3\n",  # another framework's container
    "FROM nvcr.io/nvidia/tritonserver:24.12-py3\n",
    "FROM nvcr.io/nvidia/cuda:11.1.1-cudnn8-devel-ubuntu18.04\n",
    "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n",  # `--build-arg` decides
    "# FROM nvcr.io/nvidia/pytorch:20.12-py3\nFROM ubuntu:20.04\n",  # a comment
])
def test_what_names_no_known_ngc_pytorch_release_pins_nothing(tmp_path: Path, dockerfile: str) -> None:
    write(tmp_path, {"Dockerfile": dockerfile})
    assert declared_torch_range(str(tmp_path)) == (None, None, None)


@pytest.mark.parametrize("install", [
    "pip install -U torch torchvision",  # yolov5: the image's torch upgraded to whatever pip finds, not 1.10
    "pip install librosa==0.8.0 soundfile webrtcvad torchaudio lmdb",  # radtts: torchaudio pulls its own torch
    "conda install -y pytorch -c pytorch",
])
def test_an_install_that_replaces_the_images_torch_unbounded_pins_nothing(tmp_path: Path, install: str) -> None:
    write(tmp_path, {"Dockerfile": f"FROM nvcr.io/nvidia/pytorch:21.03-py3\nRUN {install}\n"})
    assert declared_torch_range(str(tmp_path))[:2] == (None, None)


def test_the_table_reads_every_release_as_an_exact_pin() -> None:
    """Each entry is YY.MM -> a torch version; a release later than another never ships an older minor, except
    23.05 (2.0.0, the release) after 23.04 (2.0.0a0): the same minor."""
    from packaging.version import Version as Parsed

    releases = sorted(NGC_PYTORCH)
    assert releases[0] == "19.08" and "20.12" in releases and "21.08" not in releases
    minors = [Parsed(NGC_PYTORCH[r]).release[:2] for r in releases]
    assert minors == sorted(minors)


def test_flowtron_gets_no_fix_its_ngc_torch_lacks(tmp_path: Path) -> None:
    """flowtron (blind25): requirements.txt names no torch, the root Dockerfile builds from NGC 20.12 (torch 1.8):
    no GPU003 (`torch.amp.*` needs 2.3/1.10 and nothing is deprecated on 1.8), no GPU201 (`fused=` needs 1.13).
    From an unknown release the findings stay, as before."""
    train = ADAM + (
        "scaler = torch.cuda.amp.GradScaler()\n"
        "with torch.cuda.amp.autocast():\n"
        "    loss = model(torch.ones(4, 4).cuda()).sum()\n")
    files = {"requirements.txt": "numpy==1.19.2\nscipy==1.5.2\n", "train.py": train}
    write_project(tmp_path / "pinned", {**files, "Dockerfile": "FROM nvcr.io/nvidia/pytorch:20.12-py3\n"})
    assert findings(tmp_path / "pinned", "--select", "GPU003,GPU201") == []
    write_project(tmp_path / "open", {**files, "Dockerfile": "FROM nvcr.io/nvidia/pytorch:latest\n"})
    assert findings(tmp_path / "open", "--select", "GPU003,GPU201") == [
        ("train.py", 4, "GPU201"), ("train.py", 5, "GPU003"), ("train.py", 6, "GPU003")]
