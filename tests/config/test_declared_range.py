"""The range of another distribution than torch a project declares (transformers: GPU302's fix passes
`gradient_checkpointing_kwargs`, which transformers has from 4.35 on), read by the torch floor's reader with
the distribution as its parameter (project/requirements.py `declared_range`). Blind10: ChatGLM-Tuning pins
`transformers==4.27.1` in its requirements.txt."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from gpulint.config import SettingsResolver
from gpulint.core import floors
from gpulint.project.requirements import (
    TORCH,
    DeclaredRange,
    conda_range,
    declared_range,
    declared_torch_floor,
    declared_torch_range,
    package,
    pip_range,
)
from tests.config.test_torch_floor import write

TRANSFORMERS = package("transformers")
Version = Optional[tuple[int, int]]


@pytest.mark.parametrize(("requirements", "floor", "above"), [
    (["transformers==4.27.1"], (4, 27), (4, 28)),
    (["transformers<4.30"], None, (4, 30)),  # an upper bound alone still ends the range
    (["transformers~=4.28.0"], (4, 28), (4, 29)),
    (["transformers<4.35"], None, (4, 35)),
    (["transformers<4.35.1"], None, (4, 36)),  # admits 4.35.0
    (["transformers>=4.35"], (4, 35), None),
    (["transformers>=4.20,<5"], (4, 20), (5, 0)),
    (["transformers"], None, None),  # unpinned
    (["transformers!=4.30.0"], None, None),
    (["transformers==4.27.1; python_version < '3.8'", "transformers>=4.40; python_version >= '3.8'"],
     (4, 27), None),  # alternatives: the range spans them
    (["transformers<4.30", "transformers"], None, None),
    (["torch==1.13.1", "sentence-transformers==2.2.2", "transformers-stream-generator==0.0.4"], None, None),
])
def test_the_range_of_transformers_requirements(requirements: list[str], floor: Version, above: Version) -> None:
    assert pip_range(requirements, TRANSFORMERS) == (floor, above)


def test_torch_still_needs_a_floor() -> None:
    """The same reader, asked about torch, keeps its answers: an upper bound alone gives no range."""
    assert pip_range(["torch<2"], TORCH) == (None, None)
    assert pip_range(["torch<2", "transformers==4.27.1"], TORCH) == (None, None)
    assert pip_range(["torch==1.13.1", "transformers==4.27.1"], TORCH) == ((1, 13), (1, 14))
    assert conda_range(["pytorch<2"]) == (None, None)
    assert conda_range(["transformers=4.27.1", "pytorch=1.13"], TRANSFORMERS) == ((4, 27), (4, 28))
    assert conda_range(["conda-forge::transformers <4.30"], TRANSFORMERS) == (None, (4, 30))


def test_every_kind_of_pin_file_gives_the_range(tmp_path: Path) -> None:
    write(tmp_path, {
        "req/requirements.txt": "torch>=1.13.1\ntransformers==4.27.1\n",
        "included/requirements.txt": "-r requirements/base.txt\n",
        "included/requirements/base.txt": "transformers<4.30\n",
        "setuppy/setup.py": "from setuptools import setup\nsetup(install_requires=['transformers~=4.28.0'])\n",
        "cfg/setup.cfg": "[options]\ninstall_requires =\n    transformers==4.26.0\n",
        "pyproject/pyproject.toml": '[project]\nname = "p"\ndependencies = ["torch"]\n'
                                    '[project.optional-dependencies]\nhf = ["transformers>=4.36"]\n',
        "poetry/pyproject.toml": '[tool.poetry.dependencies]\ntransformers = "4.27.1"\n',
        "yml/environment.yml": "dependencies:\n  - python=3.10\n  - pip:\n    - transformers==4.29.2\n",
        "image/Dockerfile": "FROM pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime\n"
                             "RUN pip install transformers==4.30.2 peft\n",
        "unpinned/requirements.txt": "transformers\ntorch==2.1\n",
        "absent/requirements.txt": "torch==2.1\n",
    })
    assert declared_range(str(tmp_path / "req"), TRANSFORMERS) == (
        (4, 27), (4, 28), str(tmp_path / "req" / "requirements.txt"))
    assert declared_range(str(tmp_path / "included"), TRANSFORMERS)[:2] == (None, (4, 30))
    assert declared_range(str(tmp_path / "setuppy"), TRANSFORMERS)[:2] == ((4, 28), (4, 29))
    assert declared_range(str(tmp_path / "cfg"), TRANSFORMERS)[:2] == ((4, 26), (4, 27))
    assert declared_range(str(tmp_path / "pyproject"), TRANSFORMERS)[:2] == ((4, 36), None)
    assert declared_range(str(tmp_path / "poetry"), TRANSFORMERS)[:2] == ((4, 27), (4, 28))
    assert declared_range(str(tmp_path / "yml"), TRANSFORMERS)[:2] == ((4, 29), (4, 30))
    assert declared_range(str(tmp_path / "image"), TRANSFORMERS)[:2] == ((4, 30), (4, 31))
    assert declared_torch_floor(str(tmp_path / "image"))[0] == (1, 13)  # the base image is torch's alone
    assert declared_range(str(tmp_path / "unpinned"), TRANSFORMERS) == (None, None, None)
    assert declared_range(str(tmp_path / "absent"), TRANSFORMERS) == (None, None, None)


def test_the_nearest_folder_that_bounds_it_decides_and_each_folder_is_read_once(tmp_path: Path) -> None:
    write(tmp_path, {".git/HEAD": "ref: refs/heads/main\n", "requirements.txt": "transformers==4.27.1\n",
                     "examples/requirements.txt": "datasets\n",  # names no transformers: the root decides
                     "tools/requirements.txt": "transformers>=4.36\n"})
    memo: dict[str, DeclaredRange] = {}
    root = str(tmp_path / "requirements.txt")
    assert declared_range(str(tmp_path / "examples"), TRANSFORMERS, memo) == ((4, 27), (4, 28), root)
    assert memo[str(tmp_path / "examples")] == memo[str(tmp_path)] == ((4, 27), (4, 28), root)
    (tmp_path / "requirements.txt").unlink()  # the memo answers without reading again
    assert declared_range(str(tmp_path), TRANSFORMERS, memo)[2] == root
    assert declared_range(str(tmp_path / "tools"), TRANSFORMERS, memo)[:2] == ((4, 36), None)


def test_settings_carry_the_range_and_show_config_says_where_it_comes_from(tmp_path: Path) -> None:
    write(tmp_path, {"old/requirements.txt": "torch>=1.13.1\ntransformers==4.27.1\n", "old/train.py": "x = 1\n",
                     "new/requirements.txt": "transformers>=4.35\n", "new/train.py": "x = 1\n",
                     "none/requirements.txt": "transformers\n", "none/train.py": "x = 1\n"})
    resolver = SettingsResolver()
    old = resolver.for_path(tmp_path / "old" / "train.py")
    assert old.library_range("transformers") == ((4, 27), (4, 28)) and old.torch_version == (1, 13)
    assert floors.library_lacks(old.library_range("transformers")[1], floors.HF_CHECKPOINTING_KWARGS)
    new = resolver.for_path(tmp_path / "new" / "train.py")
    assert not floors.library_lacks(new.library_range("transformers")[1], floors.HF_CHECKPOINTING_KWARGS)
    unpinned = resolver.for_path(tmp_path / "none" / "train.py")
    assert unpinned.libraries == () and unpinned.library_range("transformers") == (None, None)
    assert f"# transformers: >=4.27,<4.28, the range {tmp_path / 'old' / 'requirements.txt'} declares" \
        in resolver.describe(tmp_path / "old" / "train.py")
    assert SettingsResolver(isolated=True).for_path(tmp_path / "old" / "train.py").libraries == ()


@pytest.mark.parametrize(("above", "lacks"), [
    ((4, 28), True), ((4, 30), True), ((4, 35), True),  # `<4.35`: no 4.35 admitted
    ((4, 36), False), ((5, 0), False), (None, False),
])
def test_a_range_lacks_the_symbol_when_it_ends_at_or_before_its_release(above: Version, lacks: bool) -> None:
    assert floors.library_lacks(above, floors.HF_CHECKPOINTING_KWARGS) is lacks


def test_the_torch_range_gives_the_end_of_the_pin_the_floor_comes_from(tmp_path: Path) -> None:
    """`pytorch=2.0.1` admits no torch from 2.1 on (GPU302 reads whether the torch the project runs on warns
    about a missing use_reentrant); `torch>=1.13` has no end; a configured torch-version reads no pin."""
    write(tmp_path, {"conda/environment.yml": "dependencies:\n  - pytorch=2.0.1\n", "conda/train.py": "x = 1\n",
                     "open/requirements.txt": "torch>=1.13\n", "open/train.py": "x = 1\n"})
    root = str(tmp_path / "conda" / "environment.yml")
    assert declared_torch_range(str(tmp_path / "conda")) == ((2, 0), (2, 1), root)
    assert declared_torch_range(str(tmp_path / "open"))[:2] == ((1, 13), None)
    resolver = SettingsResolver()
    assert resolver.for_path(tmp_path / "conda" / "train.py").torch_above == (2, 1)
    assert resolver.for_path(tmp_path / "open" / "train.py").torch_above is None
    assert SettingsResolver(isolated=True).for_path(tmp_path / "conda" / "train.py").torch_above is None
