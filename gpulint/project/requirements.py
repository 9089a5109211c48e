"""The oldest torch a project declares it supports, read from every place a project pins it; and, by the same
reader, the range of versions it declares for another distribution (`transformers`: a fix that writes
`gradient_checkpointing_kwargs=` needs 4.35, and `transformers==4.27.1` admits none that has it).

A fix or a piece of advice that needs a newer torch than the project supports breaks it for some
of its users (`torch.amp.GradScaler` exists from 2.3 on; `fused=True` raises a TypeError on torch
1.7). The `torch-version` setting says so explicitly; without it, the floor comes from the files
next to the code, as ruff takes its target version from `requires-python`:

- `pyproject.toml`: `[project] dependencies` (its optional dependencies when those name torch and
  the required ones do not), or Poetry's `[tool.poetry.dependencies]` (`torch = "^1.13"`);
- `setup.cfg`: `[options] install_requires`;
- `setup.py`: `install_requires=` of the `setup(...)` call, a list of string literals (or a
  module-level name bound to one), or the `*.txt` files the script reads at run time (named as one
  relative path, or as the parts of an `os.path.join`);
- `requirements*.txt`, also with a prefix (`vim_requirements.txt`, `det-requirements.txt`: Vim keeps one per
  sub-project), and `requirements/*.txt`, following `-r other.txt`; a file of conda pins written by
  `conda env export` or `conda list --export` under such a name (`- pytorch=1.4.0=py3.7_cuda10.0_0`:
  Unsupervised-Classification's requirements.txt) is read as conda pins when pip's reading finds no bound;
- conda environment files (`environment*.yml`, `conda_env.yml`, `env.yaml`, `conda.yml`, with
  either suffix): conda pins (`pytorch=1.7.1`, `pytorch>=1.8`) and the pip section's requirements;
- the requirements files, conda environment files and Dockerfiles (by the names above and below) of a subfolder
  whose name says it holds the environment (`env/`, `envs/`, `environment/`, `environments/`, `conda/`, `docker/`:
  equiformer's `env/env_equiformer.yml`, a `conda env export` pinning `pytorch=1.10.2`; SegFormer's
  `docker/Dockerfile`, built from `pytorch/pytorch:1.6.0`), asked after the folder's own, and not in a Python
  package (a folder with an `__init__.py`: yolov5's `utils/docker/` builds the repository's image, and the root's
  `torch>=1.8` is the project's floor);
  a subfolder that is an installed environment (a virtualenv's `pyvenv.cfg` or a conda prefix's
  `conda-meta/` at its top) declares nothing and is never read;
- install commands in shell scripts (`*.sh`) and Dockerfiles: `pip install torch==1.7.1`,
  `conda install pytorch=1.8 -c pytorch`, and a Dockerfile's `FROM pytorch/pytorch:1.7.1-...` image (an `ARG`'s
  default written where it is used: `ARG PYTORCH="1.6.0"` ... `FROM pytorch/pytorch:${PYTORCH}-cuda10.1-...`),
  or NVIDIA's NGC image `FROM nvcr.io/nvidia/pytorch:20.12-py3`, whose release ships one torch (`NGC_PYTORCH`:
  20.12 ships 1.8.0a0, read as `torch==1.8.0a0`; flowtron) unless an install command in the file names torch
  or a companion (radtts' `pip install torchaudio` pulls the torch that torchaudio requires);
- Cog's `cog.yaml` (the container a model is served and often trained in): `build.python_packages`
  (`"torch==1.10.0"`), the requirements file `build.python_requirements` names, and install commands in
  `build.run`.

A pin of torchvision, torchaudio or torchtext pins torch too (`COMPANIONS`): each release requires one torch
exactly, so hyena-dna's `torchtext==0.14.0 # this needs to align with the pytorch version` admits torch 1.13 alone.
A file's torch range is the intersection of what its torch lines and its companions' lines admit (an unpinned one
admits any).

Prose is never a pin: a README that says "requires PyTorch 1.4" is not read (it is often stale, and
a sentence is not a constraint pip or conda enforces).

Requirements are parsed with `packaging` (PEP 508 and PEP 440: `torch>=2`, `torch==2.*`,
`torch~=1.13.0`, markers, extras); conda's `name=version` means that version's prefix. The first
directory at or above the file that holds any of these files is the project's; in it, the first
file with a bounded torch requirement gives the floor, the lowest version each of its torch lines
admits. A folder whose files do not name torch at all (an example's `requirements.txt` listing
`transformers`, a C extension's `setup.py`) leaves the question to the folders above it, up to the
repository's root (a `.git`, `.hg` or `.svn`): the code there runs on the torch the repository pins.
Metadata that cannot be read or parsed gives no floor: it never stops a run.

A pin the project's own code contradicts is stale and gives no floor (`_stale`): SimCLR's `env.yml` pins
`pytorch=1.4.0`, and its `simclr.py` imports `torch.cuda.amp` (1.6) at module level, outside any `try` or
`if`; the APIs and their versions are core/floors.py's `NEEDED_BY_IMPORT`, which the caller passes.

Every function takes the distribution it asks about as a `Package` (torch unless told): its names on PyPI and
conda, the Docker image that ships it (torch's `pytorch/pytorch`), and whether a requirement with no lower bound
bounds it at all. For torch it does not (`torch<3` gives no floor, and the floor is what is asked); for another
distribution an upper bound alone still ends its range (`transformers<4.30` admits nothing from 4.30 on), which
`declared_range` gives with the file it comes from, folder by folder as the torch floor is found. For torch,
`declared_torch_range` gives the end of the pin the floor comes from too (`pytorch=2.0.1`: nothing from 2.1 on),
which settings carry as `torch_above` (GPU302: no torch older than 2.1 warns about a missing `use_reentrant`).
"""

from __future__ import annotations

import ast
import os
import re
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Optional, TypeVar

from gpulint.project.ast_nodes import walk
from gpulint.records import dataclass

if TYPE_CHECKING:
    from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

METADATA_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
# conda environment files by the names projects give them: environment.yml, environment-cuda.yaml,
# conda_env.yml, env.yaml, conda.yml (a file that lists no dependencies names no torch: nothing is read)
_ENVIRONMENT = re.compile(r"(?:[\w.-]*[_.-])?(?:environment|env|conda)(?:[_.-][\w.-]*)?\.ya?ml$", re.IGNORECASE)
_REPOSITORY_ROOT = (".git", ".hg", ".svn")
_DOCKERFILE_NAME = r"Dockerfile(?:\.[\w.-]+)?|[\w.-]+\.Dockerfile"  # `Dockerfile`, `Dockerfile.gpu`, `gpu.Dockerfile`
_SCRIPT = re.compile(rf"(?:[\w.-]+\.sh|{_DOCKERFILE_NAME})$")
_DOCKERFILE = re.compile(rf"(?:{_DOCKERFILE_NAME})$")
# a Dockerfile's `ARG PYTORCH="1.6.0"` and its uses (`FROM pytorch/pytorch:${PYTORCH}-cuda10.1-cudnn7-devel`)
_ARG = re.compile(r"^[ \t]*ARG[ \t]+(?P<name>[A-Za-z_]\w*)=(?P<value>\"[^\"\n]*\"|'[^'\n]*'|\S+)", re.MULTILINE)
_ARG_USE = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_]\w*)\}|(?P<bare>[A-Za-z_]\w*))")
_COG = "cog.yaml"
_KEY = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z_][\w-]*)\s*:\s*(?P<value>[^#]*?)\s*(?:#.*)?$")
# `pip install ...`, `python -m pip install ...`, `conda install ...` up to the end of the command
_INSTALL = re.compile(r"\b(?P<tool>pip3?|conda|mamba|micromamba)\s+install\s+(?P<args>[^;&|#\n]*)")
_IMAGE = re.compile(r"^\s*FROM\s+(?:--\S+\s+)?(?:docker\.io/)?pytorch/pytorch:(?P<version>\d+\.\d+)", re.MULTILINE)
# NVIDIA's NGC PyTorch container (`FROM nvcr.io/nvidia/pytorch:20.12-py3`, `-py2`, `-igpu`): its tag names a
# monthly release, which ships one torch (`NGC_PYTORCH`)
_NGC_IMAGE = re.compile(r"^\s*FROM\s+(?:--\S+\s+)?nvcr\.io/nvidia/pytorch:(?P<release>\d{2}\.\d{2})-(?:py[23]|igpu)\b",
                        re.MULTILINE)
# options of pip and conda that take a value: the value is no package
_VALUED = frozenset({"-f", "--find-links", "-i", "--index-url", "--extra-index-url", "-c", "--channel",
                     "-r", "--requirement", "-e", "--editable", "-t", "--target", "-n", "--name", "-p", "--prefix"})
_MAX_BYTES = 1024 * 1024
# folders of a project that hold no code of its own (environments, caches), and how many Python files and
# folders the stale-pin check reads at most (a monorepo's root, a dataset of many folders: the rest is not
# read, and a pin nothing read contradicts stands)
_NOT_CODE = frozenset({"venv", "env", "site-packages", "node_modules", "__pycache__", "build", "dist"})
_MAX_CODE_FILES = 5000
_MAX_CODE_FOLDERS = 5000
_REQUIREMENTS = re.compile(r"(?:[\w.-]*[_.-])?requirements[\w.-]*\.txt$", re.IGNORECASE)
# subfolders whose name says they hold the environment (equiformer's `env/env_equiformer.yml`, SegFormer's
# `docker/Dockerfile`): their requirements files, conda environment files and Dockerfiles pin the folder they lie
# in; and what an installed environment holds at its top (a virtualenv's `pyvenv.cfg`, a conda prefix's
# `conda-meta/`): such a folder declares nothing, and is not read
_ENVIRONMENT_FOLDERS = frozenset({"env", "envs", "environment", "environments", "conda", "docker"})
_INSTALLED_ENVIRONMENT = ("pyvenv.cfg", "conda-meta")
_CONDA_HISTORY = "conda-meta/history"  # a conda prefix's record: copied so that `conda-meta/` is seen
_CONDA_VERSION = re.compile(r"^(?P<op>==|>=|<=|!=|~=|>|<|=)?\s*(?P<version>\d+(?:\.\d+)*)(?:\.\*)?")
_INCLUDE = re.compile(r"^\s*(?:-r|--requirement)", re.MULTILINE)  # a requirements file's `-r other.txt`
_LIST_ITEM = re.compile(r"^(?P<indent>\s*)-\s+(?P<item>.+?)\s*$")
_TOP_KEY = re.compile(r"^(?P<key>[A-Za-z_][\w-]*)\s*:")

Version = tuple[int, int]
Declared = tuple[Optional[Version], Optional[str]]
# (the lowest version admitted, the first MAJOR.MINOR no longer admitted: 1.5 for `pytorch=1.4.0`, None for
# `torch>=1.8`); (None, None) when nothing bounds it
Range = tuple[Optional[Version], Optional[Version]]
# a project's range of a distribution and the file that declares it (`declared_range`)
DeclaredRange = tuple[Optional[Version], Optional[Version], Optional[str]]
# what one file says about a distribution: (whether it names it at all, the floor it gives, the first MAJOR.MINOR
# it no longer admits)
Reading = tuple[bool, Optional[Version], Optional[Version]]
T = TypeVar("T")


@dataclass(frozen=True)
class Package:
    """A distribution whose declared versions are read (`package` builds one from its names)."""

    names: frozenset[str]  # lower case, as pip (and conda) name it
    # conda: `pytorch=1.7.1=py3.8_cuda11.0_cudnn8.0.5_0`, `pytorch==1.9`, `pytorch >=1.8,<2`, `pytorch 1.7.*`
    conda: re.Pattern[str]
    mentions: re.Pattern[str]  # a requirement about it, even one packaging cannot parse (`torch @ file.whl#...`)
    # a requirement with no lower bound bounds nothing: torch, whose floor is the question (`torch<3` says
    # nothing of it); another distribution's range still ends at an upper bound alone
    needs_floor: bool = False
    image: Optional[re.Pattern[str]] = None  # a Dockerfile's base image that ships it
    # distributions released in lockstep with it, whose pin pins it too (torch's: `COMPANIONS`)
    companions: tuple[Companion, ...] = ()
    # the range a Dockerfile's base image named by release, not by version, ships (torch's: `_ngc_range`, NVIDIA's
    # NGC container); an install command in the Dockerfile that names the distribution or a companion replaces it
    release_image: Optional[Callable[[str], Range]] = None


@dataclass(frozen=True)
class Companion:
    """A distribution each release of which requires one release of another exactly (torchvision 0.14 requires
    torch 1.13): a pin of it pins that one."""

    package: Package
    # the MAJOR.MINOR of the other distribution that the first release at or after a MAJOR.MINOR requires (so a
    # floor maps to the floor, the first release not admitted to the first not admitted); None where no such
    # release is known (torchvision 0.2, torchtext 0.19)
    requires: Callable[[Version], Optional[Version]]


@lru_cache(maxsize=None)
def package(*names: str, needs_floor: bool = False, image: Optional[re.Pattern[str]] = None,
            companions: tuple[Companion, ...] = (), release_image: Optional[Callable[[str], Range]] = None) -> Package:
    """The `Package` of a distribution spelled `names` (`package("torch", "pytorch")`); built once per run."""
    spelled = "|".join(re.escape(n.lower()) for n in sorted(names, key=len, reverse=True))
    return Package(frozenset(n.lower() for n in names),
                   re.compile(rf"^\s*(?:[\w.-]+::)?(?P<name>{spelled})(?![\w.-])\s*(?P<spec>[^#]*)", re.IGNORECASE),
                   re.compile(rf"^\s*(?:{spelled})(?![\w.-])", re.IGNORECASE), needs_floor, image, companions,
                   release_image)


# torchvision, torchaudio and torchtext are released in lockstep with torch, and each release requires its torch
# exactly (`torch==1.13.0` for torchvision 0.14.0), so pinning one pins torch (PyTorch's previous-versions page,
# pytorch.org/get-started/previous-versions, and the compatibility tables of the three repositories' READMEs):
# - torchvision 0.N -> torch 1.(N-1) for 5 <= N <= 14 (0.5 -> 1.4 ... 0.14 -> 1.13); 0.(15+k) -> torch 2.k;
# - torchtext: the same (0.5 -> 1.4 ... 0.14 -> 1.13, 0.15 -> 2.0 ... 0.18 -> 2.3, its last release);
# - torchaudio 0.N -> torch 1.N for 4 <= N <= 13 (no 0.14 or 1.x: 2.0 followed 0.13); X.Y -> X.Y from 2.0 on.
# Older releases (torchvision 0.2, which required no torch exactly) map to none: they bound nothing.
def _torchvision_requires(release: Version) -> Optional[Version]:
    major, minor = release
    if major != 0 or minor < 5:
        return None
    return (1, minor - 1) if minor <= 14 else (2, minor - 15)


def _torchtext_requires(release: Version) -> Optional[Version]:
    # 0.19, never released, stands for the end of `torchtext==0.18.0` (no torch from 2.4 on); beyond it, none
    return _torchvision_requires(release) if release[0] == 0 and release[1] <= 19 else None


def _torchaudio_requires(release: Version) -> Optional[Version]:
    major, minor = release
    if major == 0 and 4 <= minor <= 13:
        return 1, minor
    if (major == 0 and minor >= 14) or major == 1:
        return 2, 0  # the first release after 0.13 is 2.0
    return release if major >= 2 else None


# The torch each release of NVIDIA's NGC PyTorch container ships, as NVIDIA states it ("PyTorch container image
# version 20.12 is based on 1.8.0a0+1606899"; the commit left off): read as an exact pin of that version, so
# `1.8.0a0` is torch 1.8, as `torch==1.8.0a0` would be. Sources: NVIDIA's PyTorch release notes
# (docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes: rel_20-12's "NVIDIA PyTorch Container Versions"
# table for 19.08-20.12, rel_20-02, rel_21-09, rel-25-12), the framework-container column of NVIDIA's "PyTorch for
# Jetson Platform" compatibility table (docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform-
# release-notes: 22.01-25.09), and the banner the container prints ("NVIDIA Release 21.04 ... PyTorch Version
# 1.9.0a0+2ecb2c7"). A release none of them states (19.01-19.07, 20.04, 20.05, 21.01, 21.02, 21.05, 21.06, 21.08,
# 21.11, 22.08, 23.08, 25.07, 25.10, 25.11, later ones) pins nothing, nor does a tag that names none (`latest`).
# Where two sources disagree the older torch is kept (the quieter reading): 20.02 (its notes: 1.4.0a0; the 20.12
# table: 1.5.0a0) and 23.04 (the Jetson table: 2.0.0a0+fe05266f).
NGC_PYTORCH: Mapping[str, str] = {
    "19.08": "1.2.0a0", "19.09": "1.2.0", "19.10": "1.3.0a0", "19.11": "1.4.0a0", "19.12": "1.4.0a0",
    "20.01": "1.4.0a0", "20.02": "1.4.0a0", "20.03": "1.5.0a0", "20.06": "1.6.0a0", "20.07": "1.6.0a0",
    "20.08": "1.7.0a0", "20.09": "1.7.0a0", "20.10": "1.7.0a0", "20.11": "1.8.0a0", "20.12": "1.8.0a0",
    "21.03": "1.9.0a0", "21.04": "1.9.0a0", "21.07": "1.10.0a0", "21.09": "1.10.0a0", "21.10": "1.10.0a0",
    "21.12": "1.11.0a0", "22.01": "1.11.0a0", "22.02": "1.11.0a0", "22.03": "1.12.0a0", "22.04": "1.12.0a0",
    "22.05": "1.12.0a0", "22.06": "1.13.0a0", "22.07": "1.13.0a0", "22.09": "1.13.0a0", "22.10": "1.13.0a0",
    "22.11": "1.13.0a0", "22.12": "1.14.0a0", "23.01": "1.14.0a0", "23.02": "1.14.0a0", "23.03": "2.0.0a0",
    "23.04": "2.0.0a0", "23.05": "2.0.0", "23.06": "2.1.0a0", "23.07": "2.1.0a0", "23.09": "2.1.0a0",
    "23.10": "2.1.0a0", "23.11": "2.2.0a0", "23.12": "2.2.0a0", "24.01": "2.2.0a0", "24.02": "2.3.0a0",
    "24.03": "2.3.0a0", "24.04": "2.3.0a0", "24.05": "2.4.0a0", "24.06": "2.4.0a0", "24.07": "2.4.0a0",
    "24.08": "2.5.0a0", "24.09": "2.5.0a0", "24.10": "2.5.0a0", "24.11": "2.6.0a0", "24.12": "2.6.0a0",
    "25.01": "2.6.0a0", "25.02": "2.7.0a0", "25.03": "2.7.0a0", "25.04": "2.7.0a0", "25.05": "2.8.0a0",
    "25.06": "2.8.0a0", "25.08": "2.8.0a0", "25.09": "2.9.0a0", "25.12": "2.10.0a0",
}


def _ngc_range(text: str) -> Range:
    """The torch range of a Dockerfile's NGC PyTorch base image (the first whose release `NGC_PYTORCH` knows), as
    an exact pin of the torch that release ships; (None, None) where there is none."""
    for image in _NGC_IMAGE.finditer(text):
        shipped = NGC_PYTORCH.get(image["release"])
        if shipped is not None:
            pin = [("==", shipped)]
            return _lowest(pin), _above(pin)
    return None, None


COMPANIONS = (Companion(package("torchvision"), _torchvision_requires),
              Companion(package("torchaudio"), _torchaudio_requires),
              Companion(package("torchtext"), _torchtext_requires))
TORCH = package("torch", "pytorch", needs_floor=True, image=_IMAGE, companions=COMPANIONS, release_image=_ngc_range)


def _release(text: str) -> Optional[Version]:
    """MAJOR.MINOR of a version string (`2`, `2.*`, `1.13.1+cu117`); None when it is not a version."""
    from packaging.version import InvalidVersion
    from packaging.version import Version as Parsed

    try:
        release = Parsed(text.replace(".*", "") or "0").release
    except InvalidVersion:
        return None
    return release[0], release[1] if len(release) > 1 else 0


def _lowest(specifiers: Iterable[tuple[str, str]]) -> Optional[Version]:
    """The lowest version a set of (operator, version) clauses admits: the highest lower bound; None
    when no clause bounds it from below (`torch`, `torch<3`, `torch!=2.0`)."""
    bounds = []
    for operator, version in specifiers:
        if operator in (">=", "~=", "==", "===", ">", "="):
            found = _release(version)
            if found is not None:
                bounds.append(found)
    return max(bounds) if bounds else None


def _above(specifiers: Iterable[tuple[str, str]]) -> Optional[Version]:
    """The first MAJOR.MINOR a set of (operator, version) clauses no longer admits: `==1.4.0` and conda's
    `=1.4` admit 1.4.x only (1.5), `<1.6` stops at 1.6, `<=1.6.2` and `<1.6.1` admit some 1.6 (1.7), `~=1.13`
    stops at 2.0, `==2.*` at 3.0; None when no clause bounds it from above (`>=1.8`, `!=2.0`)."""
    bounds = []
    for operator, version in specifiers:
        found = _release(version)
        if found is None:
            continue
        parts = len(version.replace(".*", "").split("+", 1)[0].split("."))
        whole_major = parts == 1  # `==2`, `==2.*`: any 2.x
        if operator in ("==", "===", "="):
            bounds.append((found[0] + 1, 0) if whole_major else (found[0], found[1] + 1))
        elif operator == "~=":
            bounds.append((found[0] + 1, 0) if parts <= 2 else (found[0], found[1] + 1))
        elif operator == "<=":
            bounds.append((found[0] + 1, 0) if whole_major else (found[0], found[1] + 1))
        elif operator == "<":
            exact_minor = all(p == "0" for p in version.split("+", 1)[0].split(".")[2:])
            bounds.append(found if exact_minor else (found[0], found[1] + 1))
    return min(bounds) if bounds else None


def torch_floor(requirements: Iterable[str]) -> Optional[Version]:
    """The lowest torch version these PEP 508 requirement strings admit, when each torch line has a bound."""
    return torch_range(requirements)[0]


def torch_range(requirements: Iterable[str]) -> Range:
    """(the lowest torch these PEP 508 requirement strings admit, the first MAJOR.MINOR none of their torch
    lines admits): each torch line is an alternative (markers), so the range spans them all."""
    return pip_range(requirements, TORCH)


def pip_range(requirements: Iterable[str], package: Package = TORCH) -> Range:
    """The range of `package` these PEP 508 requirement strings declare, as `torch_range` gives torch's."""
    floors: list[Optional[Version]] = []
    aboves: list[Optional[Version]] = []
    for line in requirements:
        if not package.mentions.match(line):
            continue  # another package (`_requirement` is not asked: see `names_package`)
        requirement = _requirement(line)
        if requirement is None:
            continue
        if requirement.name.lower() not in package.names:
            continue  # another package (torchvision, torch-geometric)
        clauses = requirement.clauses
        floor, above = _lowest(clauses), _above(clauses)
        if floor is None and (package.needs_floor or above is None):
            return None, None  # an unbounded line: any version may be installed
        floors.append(floor)
        aboves.append(above)
    return _span(floors, aboves)


def _span(floors: list[Optional[Version]], aboves: list[Optional[Version]]) -> Range:
    """The range alternatives span (lines with markers, a conda pin and a pip line): from the lowest floor to
    the highest end; one open at a side (None) opens the range there. (None, None) when there are none."""
    if not floors:
        return None, None
    return (None if None in floors else min(f for f in floors if f is not None),
            None if None in aboves else max(a for a in aboves if a is not None))


def names_torch(requirements: Iterable[str]) -> bool:
    """Whether any of these PEP 508 requirement strings is about torch itself."""
    return names_package(requirements, TORCH)


def names_package(requirements: Iterable[str], package: Package = TORCH) -> bool:
    """Whether any of these PEP 508 requirement strings is about `package` itself."""
    for line in requirements:
        if not package.mentions.match(line):
            # a requirement named so starts with the name (packaging's names are ASCII, followed by none of
            # `[\w.-]`): a line that does not is another package's, and need not be parsed (most are)
            continue
        requirement = _requirement(line)
        if requirement is None or requirement.name.lower() in package.names:
            return True  # (None: `torch @ file.whl#...` spelled in a way packaging refuses: torch, unbounded)
    return False


# a local version label after a release (`2.0.1+cu118`): PEP 440 allows it only with `==`/`!=`, but pip
# installs `torch>=2.0.1+cu118` and projects write it (SRGAN-PyTorch's requirements.txt)
_LOCAL_LABEL = re.compile(r"(\d)\+[A-Za-z0-9.]+")


@dataclass(frozen=True)
class _Pin:
    """What the readers take from a requirement: its name and its (operator, version) clauses."""

    name: str
    clauses: tuple[tuple[str, str], ...]


# The shapes nearly every pin takes (`torch`, `torch>=2.0,<3`, `torch[extra] == 2.*`, `torch>=2.7.1; sys_platform ==
# "linux"`), read without packaging: importing packaging.requirements (its tokenizer, markers, specifiers and tags)
# costs more than reading every pin of a project. A marker is never evaluated (each torch line is an alternative), so
# its shape only has to be one packaging accepts. Anything else (URLs, `===`, local labels, pre-releases,
# parentheses, a `v` prefix) goes to packaging, which decides; tests/config/test_pin_shapes.py checks both read
# alike.
_PIN_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_PIN_CLAUSE = r"(?:~=|==|!=|<=|>=|<|>)\s*\d+(?:\.\d+)*(?:\.\*)?"
_MARKER_CLAUSE = (r"(?:python_version|python_full_version|sys_platform|platform_system|platform_machine|os_name|"
                  r"platform_python_implementation|implementation_name)\s*(?:==|!=|<=|>=|<|>|~=|not\s+in|in)\s*"
                  r"(?:\"[^\"]*\"|'[^']*')")
_SIMPLE_PIN = re.compile(
    rf"(?P<name>{_PIN_NAME})\s*(?:\[\s*(?:{_PIN_NAME}(?:\s*,\s*{_PIN_NAME})*)?\s*\]\s*)?"
    rf"(?P<spec>{_PIN_CLAUSE}(?:\s*,\s*{_PIN_CLAUSE})*)?\s*"
    rf"(?:;\s*{_MARKER_CLAUSE}(?:\s+(?:and|or)\s+{_MARKER_CLAUSE})*\s*)?")
_CLAUSE = re.compile(r"(~=|==|!=|<=|>=|<|>)\s*([^,\s]+)")


def _requirement(line: str) -> Optional[_Pin]:
    """A PEP 508 requirement, read as pip reads it: a local label on a bound (`>=2.0.1+cu118`) is dropped,
    since it says which build, not which release; None when it is not a requirement."""
    text = line.strip()
    simple = _SIMPLE_PIN.fullmatch(text)
    if simple is not None:
        spec = simple["spec"]
        clauses = tuple((op, version) for op, version in _CLAUSE.findall(spec)) if spec else ()
        # `.*` belongs to `==`/`!=` alone and `~=` wants two parts: packaging refuses the rest, and decides
        if not any((version.endswith(".*") and op != "==" and op != "!=") or (op == "~=" and "." not in version)
                   for op, version in clauses):
            return _Pin(simple["name"], clauses)
    requirement = _parsed(text)
    if requirement is None:
        return None
    return _Pin(requirement.name, tuple((s.operator, s.version) for s in requirement.specifier))


def _parsed(text: str) -> Optional[Requirement]:
    """packaging's reading of a requirement `_requirement` cannot read by its shape."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(text)
    except InvalidRequirement:
        pass
    stripped = _LOCAL_LABEL.sub(r"\1", text)
    if stripped == text:
        return None
    try:
        return Requirement(stripped)
    except InvalidRequirement:
        return None


def conda_floor(lines: Iterable[str], package: Package = TORCH) -> Optional[Version]:
    """The same for conda pins (`pytorch=1.7`, `pytorch=1.7.1=py3.8_cuda...`, `pytorch>=1.8,<2`, `pytorch 1.9.*`)."""
    return conda_range(lines, package)[0]


def conda_range(lines: Iterable[str], package: Package = TORCH) -> Range:
    """(floor, the first MAJOR.MINOR not admitted) of conda pins, as `torch_range` gives them for pip's."""
    floors: list[Optional[Version]] = []
    aboves: list[Optional[Version]] = []
    for line in lines:
        match = package.conda.match(line)
        if match is None:
            continue
        spec = match["spec"].strip()
        if spec.startswith("=") and not spec.startswith("=="):
            spec = "=" + spec[1:].split("=", 1)[0]  # `=1.7.1=build`: the version, not the build string
        clauses = []
        for part in re.split(r"[,|]", spec):
            found = _CONDA_VERSION.match(part.strip())
            if found is not None:
                clauses.append((found["op"] or "=", found["version"]))  # `pytorch 1.9.*`: that prefix
        floor, above = _lowest(clauses), _above(clauses)
        if floor is None and (package.needs_floor or above is None):
            return None, None
        floors.append(floor)
        aboves.append(above)
    return _span(floors, aboves)


def declared_torch_floor(directory: str, memo: Optional[dict[str, DeclaredRange]] = None,
                         needs: Optional[Mapping[str, Version]] = None,
                         stale: Optional[dict[str, Stale]] = None) -> Declared:
    """(floor, the file it comes from) for the project `directory` belongs to: `declared_torch_range`'s
    floor and file."""
    floor, _, source = declared_torch_range(directory, memo, needs, stale)
    return floor, source


def declared_torch_range(directory: str, memo: Optional[dict[str, DeclaredRange]] = None,
                         needs: Optional[Mapping[str, Version]] = None,
                         stale: Optional[dict[str, Stale]] = None) -> DeclaredRange:
    """(floor, the first MAJOR.MINOR the deciding file no longer admits, the file) for the project `directory`
    belongs to: `environment.yml`'s `pytorch=2.0.1` gives ((2, 0), (2, 1), its path); `torch>=1.13`,
    ((1, 13), None, its path). `memo` keeps every folder's answer for a run: the files of one tree cost one look
    per folder.

    With `needs` (core/floors.py `NEEDED_BY_IMPORT`: torch APIs and the release that added each), a pin
    with an upper bound (`pytorch=1.4.0`, `torch==1.8.1`, `torch<1.6`) is checked against the code it covers:
    when that code cannot run on any torch the pin admits, the pin is stale and gives neither floor nor end,
    `(None, None, file)`, and `stale` gets the evidence by the pinning file's path. See `_stale` for why none
    rather than the version the code needs."""
    def settle(folder: str, found: Declared, above: Optional[Version]) -> DeclaredRange:
        if needs and found[1] is not None and above is not None:
            evidence = _stale(folder, found[1], found[0], above, needs)
            if evidence is not None:
                if stale is not None:
                    stale[found[1]] = evidence
                return None, None, found[1]
        return found[0], above, found[1]

    return _walk(directory, TORCH, {} if memo is None else memo, settle, (None, None, None))


def declared_range(directory: str, package: Package, memo: Optional[dict[str, DeclaredRange]] = None) -> DeclaredRange:
    """(the lowest version of `package` the project `directory` belongs to admits, the first MAJOR.MINOR it no
    longer admits, the file that says so), found as the torch floor is (`memo` as there; no stale check: no
    table dates the APIs of other distributions a module imports). `transformers==4.27.1` in requirements.txt
    gives ((4, 27), (4, 28), its path); `transformers<4.30`, (None, (4, 30), its path); an unpinned or
    unnamed one, (None, None, None)."""
    return _walk(directory, package, {} if memo is None else memo,
                 lambda folder, found, above: (found[0], above, found[1]), (None, None, None))


def _walk(directory: str, package: Package, memo: dict[str, T],
          settle: Callable[[str, Declared, Optional[Version]], T], nothing: T) -> T:
    """The answer of the first folder at or above `directory` whose files decide about `package`, up to the
    repository's root: `settle` makes it of (that folder, (floor, file), the first MAJOR.MINOR not admitted);
    `nothing` where no folder decides. Every folder passed is remembered in `memo`."""
    current = os.path.abspath(directory)
    passed: list[str] = []
    answer = nothing
    while current not in memo:
        passed.append(current)
        decided, found, above = _folder_floor(current, package)
        if decided:
            answer = settle(current, found, above)
            break
        parent = os.path.dirname(current)
        if parent == current or _is_repository_root(current):
            break
        current = parent
    else:
        answer = memo[current]
    for folder in passed:
        memo[folder] = answer
    return answer


@dataclass(frozen=True)
class Stale:
    """A torch pin the project's own code contradicts: a module imports, unconditionally, an API newer than
    any torch the pin admits (SimCLR's env.yml pins `pytorch=1.4.0`; simclr.py imports `torch.cuda.amp`, 1.6)."""

    source: str  # the file that pins
    floor: Optional[Version]  # None: an end alone (`torchvision<0.16`)
    above: Version  # the first MAJOR.MINOR the pin does not admit
    needs: Version  # the torch the import needs
    api: str  # what is imported (`torch.cuda.amp`)
    user: str  # the file that imports it

    def reason(self) -> str:
        """`env.yml pins torch 1.4, but simclr.py imports torch.cuda.amp (torch 1.6)`."""
        pinned = f"pins torch {_text(self.floor)}" if self.floor is not None \
            and self.above == (self.floor[0], self.floor[1] + 1) \
            else f"admits no torch from {_text(self.above)} on"
        return f"{self.source} {pinned}, but {self.user} imports {self.api} (torch {_text(self.needs)})"


def _text(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


def _stale(root: str, source: str, floor: Optional[Version], above: Version,
           needs: Mapping[str, Version]) -> Optional[Stale]:
    """The evidence that a pin admitting only torch below `above` is stale: a Python file under `root` (not
    under a folder that pins torch itself) whose module-level imports, outside any `try` or `if`, take an API
    `needs` dates at `above` or later. Such a module cannot even be imported on the pinned torch, so whoever
    wrote it ran a newer one: the pin no longer says which torch the project runs on.

    The pin then gives no floor at all, the same as a project that pins none, rather than the version the
    code needs. A floor is a premise for withholding advice: "some user runs a torch without X". The pin was
    the only evidence for it; the code proves only that its users run that version *or newer*, which is no
    evidence that anyone runs exactly it (issue 21: evidence for every premise). SimCLR's 1.6 from
    `torch.cuda.amp` would keep silent all three findings the fourth blind reading judged true, fused Adam
    (1.13), `torch.autocast` (1.10) and `torch.amp`'s GradScaler (2.3), on the strength of a number nobody
    declared. A `>=` pin is never stale (the code runs on some torch it admits) and is not
    raised either: one module that needs a newer torch says nothing about the files that never import it.

    Only module-level imports count: a call inside a function or a branch (`if args.compile:
    torch.compile(model)`) may never run on the pinned torch. Notebooks are not read."""
    found: Optional[Stale] = None
    seen = folders = 0
    needles = sorted({name.rsplit(".", 1)[-1] for name in needs})  # a cheap text test before parsing
    for folder, subfolders, files in os.walk(root):
        folders += 1
        if folders > _MAX_CODE_FOLDERS:
            return found  # what was read is a lower bound of what the code needs: a pin it leaves standing stays
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and d not in _NOT_CODE
                               and not _folder_floor(os.path.join(folder, d))[0])
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            seen += 1
            if seen > _MAX_CODE_FILES:
                return found
            path = os.path.join(folder, name)
            text = _read(path)
            if text is None or not any(n in text for n in needles):
                continue
            need = _import_need(text, needs)
            if need is not None and need[0] >= above and (found is None or need[0] > found.needs):
                found = Stale(os.path.relpath(source, root), floor, above, need[0], need[1],
                              os.path.relpath(path, root))
    return found


def _import_need(text: str, needs: Mapping[str, Version]) -> Optional[tuple[Version, str]]:
    """The newest torch a module's module-level imports need (outside `try` and `if`), and the import."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    best: Optional[tuple[Version, str]] = None
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and not statement.level and statement.module:
            targets = [statement.module] + [f"{statement.module}.{a.name}" for a in statement.names]
        elif isinstance(statement, ast.Import):
            targets = [a.name for a in statement.names]
        else:
            continue
        for target in targets:
            for api, version in needs.items():
                if (target == api or target.startswith(api + ".")) and (best is None or version > best[0]):
                    best = (version, api)
    return best


def _folder_floor(directory: str, package: Package = TORCH) -> tuple[bool, Declared, Optional[Version]]:
    """(whether this folder's files decide, their answer, the first MAJOR.MINOR the deciding file no longer
    admits): the first bounded torch requirement gives the floor; a torch named without a bound gives none;
    files that never name torch do not decide. (So for `package`: bounded at either side, unless it
    `needs_floor`.)"""
    named = False
    for path in _declaring_files(directory):
        mentioned, floor, above = _floor_of(path, package)
        if floor is not None or above is not None:
            return True, (floor, path), above
        named = named or mentioned
    return named, (None, None), None


def ships_distribution(directory: str) -> bool:
    """Whether `directory` holds packaging metadata that builds a distribution others install: a `setup.py` or
    `setup.cfg`, or a `pyproject.toml` with a `[project]`, `[build-system]` or `[tool.poetry]` table (one that
    cannot be read counts; one of tool settings alone, `[tool.ruff]`, does not)."""
    if any(os.path.isfile(os.path.join(directory, name)) for name in ("setup.py", "setup.cfg")):
        return True
    path = os.path.join(directory, "pyproject.toml")
    if not os.path.isfile(path):
        return False
    text = _read(path)
    try:
        table = tomllib.loads(text) if text is not None else None
    except (tomllib.TOMLDecodeError, ValueError):
        table = None
    if table is None:
        return True
    tool = table.get("tool")
    return "project" in table or "build-system" in table or (isinstance(tool, dict) and "poetry" in tool)


def _is_repository_root(directory: str) -> bool:
    return any(os.path.exists(os.path.join(directory, marker)) for marker in _REPOSITORY_ROOT)


def _declaring_files(directory: str) -> list[str]:
    """The files of `directory` that may pin torch, in the order they are asked."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    present = [os.path.join(directory, n) for n in METADATA_FILES if n in names]
    # `requirements*.txt` before a prefixed one (`dev-requirements.txt`): the first to bound torch gives the floor
    wanted = sorted((n for n in names if _REQUIREMENTS.match(n)),
                    key=lambda n: not n.lower().startswith("requirements"))
    present += [os.path.join(directory, n) for n in wanted]
    if "requirements" in names and os.path.isdir(os.path.join(directory, "requirements")):
        try:
            present += [os.path.join(directory, "requirements", n)
                        for n in sorted(os.listdir(os.path.join(directory, "requirements"))) if n.endswith(".txt")]
        except OSError:
            pass
    present += [os.path.join(directory, n) for n in names if _ENVIRONMENT.match(n)]
    # a Python package's subfolders are its code's: an environment kept inside one (yolov5's `utils/docker/`, the
    # repository's container) is not the package's to declare; the folders above it are asked
    environments = () if "__init__.py" in names else (n for n in names if n.lower() in _ENVIRONMENT_FOLDERS)
    for folder in environments:
        present += _environment_folder(os.path.join(directory, folder))
    present += [os.path.join(directory, n) for n in names if _SCRIPT.match(n)]
    present += [os.path.join(directory, _COG)] if _COG in names else []
    return [p for p in present if os.path.isfile(p)]


def _environment_folder(folder: str) -> list[str]:
    """The files of an environment-named subfolder (`env/`, `docker/`) that may pin torch: requirements files
    (`requirements*.txt` first), conda environment files and Dockerfiles, by the names a folder's own are read by
    (not its shell scripts: a `docker/` folder's run the container); none where
    the folder is an installed environment (a virtualenv or a conda prefix: its files are an install's, not a
    declaration)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    if any(marker in names for marker in _INSTALLED_ENVIRONMENT):
        return []
    wanted = sorted((n for n in names if _REQUIREMENTS.match(n)),
                    key=lambda n: not n.lower().startswith("requirements"))
    wanted += [n for n in names if _ENVIRONMENT.match(n)] + [n for n in names if _DOCKERFILE.match(n)]
    return [os.path.join(folder, n) for n in wanted]


def read_for_floor(path: str) -> bool:
    """Whether the floor reader may read a file with this relative posix path (for tools that copy a
    project's files, such as bench/precision/prepare.py: one list of the names, here), the markers of an
    installed environment in an environment-named folder included (`env/pyvenv.cfg`: that folder is not read)."""
    name = path.rsplit("/", 1)[-1]
    parent = path.rsplit("/", 2)[-2] if path.count("/") else ""
    if name in METADATA_FILES or name == _COG or (parent == "requirements" and name.endswith(".txt")):
        return True
    folders = path.split("/")
    if name == _INSTALLED_ENVIRONMENT[0] and parent.lower() in _ENVIRONMENT_FOLDERS:
        return True
    if len(folders) >= 3 and "/".join(folders[-2:]) == _CONDA_HISTORY and folders[-3].lower() in _ENVIRONMENT_FOLDERS:
        return True
    return bool(_REQUIREMENTS.match(name) or _ENVIRONMENT.match(name) or _SCRIPT.match(name))


def _floor_of(path: str, package: Package = TORCH) -> Reading:
    """What the file at `path` says about `package`: its own lines, narrowed by its companions' (a file that pins
    `torchtext==0.14.0` admits only torch 1.13, whatever it says of torch itself: pip must satisfy both)."""
    reading = _own_floor_of(path, package)
    return _with_companions(path, reading, package.companions) if package.companions else reading


def _with_companions(path: str, reading: Reading, companions: tuple[Companion, ...]) -> Reading:
    """`reading` narrowed to the range the companions the same file bounds require: the intersection (floors:
    the highest; ends: the lowest). A companion is read with its own reader (an upper bound alone ends its range:
    `torchvision<0.16` admits no torch from 2.1 on) only where the file names it, or may pull in a file that does
    (`-r`, a setup.py, a cog.yaml). Where the file contradicts itself (`torch==2.0` beside `torchvision==0.14`),
    its torch lines stand: pip refuses it, and they are the direct statement."""
    text = _read(path)
    if text is None:
        return reading
    lowered = text.lower()
    includes = os.path.basename(path) in ("setup.py", _COG) or _INCLUDE.search(text) is not None
    named, floor, above = reading
    for companion in companions:
        if not includes and not any(n in lowered for n in companion.package.names):
            continue
        _, low, end = _own_floor_of(path, companion.package)
        required = (companion.requires(low) if low is not None else None,
                    companion.requires(end) if end is not None else None)
        floor = max(floor, required[0]) if floor is not None and required[0] is not None else floor or required[0]
        above = min(above, required[1]) if above is not None and required[1] is not None else above or required[1]
    if floor is not None and above is not None and floor >= above:
        return reading
    return named, floor, above


def _own_floor_of(path: str, package: Package) -> Reading:
    """What the file at `path` says about `package` in the lines that name it."""
    name = os.path.basename(path)
    if _SCRIPT.match(name):
        text = _read(path)
        return _script_floor(text, package) if text is not None else (False, None, None)
    if _ENVIRONMENT.match(name):
        text = _read(path)
        return _environment_floor(text, package) if text is not None else (False, None, None)
    if name == _COG:
        text = _read(path)
        return _cog_floor(text, os.path.dirname(path), package) if text is not None else (False, None, None)
    requirements = _requirements(path, package)
    if requirements is None:
        return False, None, None
    reading = (names_package(requirements, package), *pip_range(requirements, package))
    if reading[1:] == (None, None) and name not in METADATA_FILES:
        exported = _conda_export(path, package)  # `- pytorch=1.4.0=py3.7_cuda10.0...`: a conda export named .txt
        if exported is not None:
            return exported
    return reading


def _conda_export(path: str, package: Package) -> Optional[Reading]:
    """The range a requirements file written by `conda env export` / `conda list --export` gives `package`
    (`- pytorch=1.4.0=py3.7_cuda10.0.130_cudnn7.6.3_0`, `pytorch=1.4.0=...`): conda's one `=` is no pip operator,
    so pip's reading finds nothing there. None when no such line names the package."""
    text = _read(path)
    if text is None:
        return None
    items = [line.strip().lstrip("-").strip() for line in text.splitlines()]
    pins = [item for item in items if package.conda.match(item) and re.match(r"[\w.-]+=[^=]", item)]
    if not pins:
        return None
    found = conda_range(pins, package)
    return (True, *found) if found != (None, None) else None


def _read(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(_MAX_BYTES + 1)
        if len(raw) > _MAX_BYTES:
            return None
        return raw.decode("utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None


def _requirements(path: str, package: Package = TORCH, depth: int = 0) -> Optional[list[str]]:
    """The requirement lines of a metadata or requirements file (pyproject.toml's extras and Poetry table: those
    that name `package`)."""
    text = _read(path)
    if text is None:
        return None
    name = os.path.basename(path)
    try:
        if name == "pyproject.toml":
            return _from_pyproject(text, package)
        if name == "setup.cfg":
            return _from_setup_cfg(text)
        if name == "setup.py":
            return _from_setup_py(text, os.path.dirname(path), package, depth)
        return _from_requirements_txt(text, os.path.dirname(path), package, depth)
    except (ValueError, SyntaxError, RecursionError, MemoryError, tomllib.TOMLDecodeError):
        return None


def _from_pyproject(text: str, package: Package) -> Optional[list[str]]:
    document = tomllib.loads(text)
    project = document.get("project")
    project = project if isinstance(project, dict) else {}
    dependencies = _strings(project.get("dependencies"))
    if not names_package(dependencies, package):  # only in an extra (`pip install pkg[train]`): that extra's pin
        extras = project.get("optional-dependencies")
        for group in extras.values() if isinstance(extras, dict) else ():
            dependencies += [d for d in _strings(group) if names_package([d], package)]
    tool = document.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    if not names_package(dependencies, package) and isinstance(poetry, dict):
        dependencies += _from_poetry(poetry.get("dependencies"), package)
    return dependencies or None


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _from_poetry(table: object, package: Package) -> list[str]:
    """Poetry's torch constraint as a PEP 508 string: `^1.13` and `~1.13` admit 1.13 and later of that
    line (the floor is all that is read), `*` admits any; a table carries it in `version`."""
    if not isinstance(table, dict):
        return []
    out: list[str] = []
    for name, value in table.items():
        if not isinstance(name, str) or name.lower() not in package.names:
            continue
        if isinstance(value, dict):
            value = value.get("version", "*")
        if not isinstance(value, str):
            continue
        clauses = []
        for part in value.split(","):
            part = part.strip()
            if part.startswith("^") or (part.startswith("~") and not part.startswith("~=")):
                part = ">=" + part.lstrip("^~").strip()
            elif part and part[0].isdigit():
                part = "==" + part
            if part and part != "*":
                clauses.append(part)
        out.append(f"{name}{','.join(clauses)}")
    return out


def _from_setup_cfg(text: str) -> Optional[list[str]]:
    import configparser  # only for projects that keep their metadata in setup.cfg

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    if not parser.has_option("options", "install_requires"):
        return None
    lines = parser.get("options", "install_requires").replace(";", "\n;").splitlines()
    out: list[str] = []
    for line in lines:  # one requirement per line; a `;` line continues the one before (a marker)
        if line.startswith(";") and out:
            out[-1] += line
        elif line.strip():
            out.append(line.strip())
    return out


def _from_requirements_txt(text: str, directory: str, package: Package, depth: int) -> list[str]:
    """Requirement lines, without comments, options and URLs; `-r other.txt` is followed (twice at most)."""
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ", "-r")) and depth < 2:
            included = line.split(None, 1)[1] if " " in line else line[2:]
            found = _requirements(os.path.join(directory, included.strip()), package, depth + 1)
            out.extend(found or [])
            continue
        if line.startswith("-") or "://" in line:
            continue  # -e ., --extra-index-url, -f <url>: not a requirement on a version
        out.append(line)
    return out


def _from_setup_py(text: str, directory: str, package: Package, depth: int) -> Optional[list[str]]:
    tree = ast.parse(text)
    lists: dict[str, ast.expr] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name):
            lists[statement.targets[0].id] = statement.value
    for node in walk(tree):
        if not (isinstance(node, ast.Call) and _is_setup(node.func)):
            continue
        for keyword in node.keywords:
            if keyword.arg != "install_requires":
                continue
            value: ast.expr = keyword.value
            if isinstance(value, ast.Name):
                value = lists.get(value.id, value)
            if isinstance(value, (ast.List, ast.Tuple)) and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts):
                return [e.value for e in value.elts]  # type: ignore[attr-defined]
            return _read_at_run_time(tree, directory, package, depth)  # built at run time: from the file it reads
    return None


def _read_at_run_time(tree: ast.Module, directory: str, package: Package, depth: int) -> Optional[list[str]]:
    """`install_requires=read("requirements.txt")`: the `*.txt` files the script names, read here. A
    name is one relative path (`"requirements/base.txt"`) or the string parts of a path join
    (`os.path.join(here, "requirements", "base.txt")`); nothing outside the script's folder is read."""
    named: set[str] = set()
    for node in walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".txt"):
            named.add(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)) \
                and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "join":
            parts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if parts and parts[-1].endswith(".txt"):
                named.add("/".join(parts))
    out: list[str] = []
    for name in sorted(named):
        relative = os.path.normpath(name.strip())
        if os.path.isabs(relative) or relative.startswith(".."):
            continue
        found = _requirements(os.path.join(directory, relative), package, depth + 1) if depth < 2 else None
        out.extend(found or [])
    return out or None


def _environment_floor(text: str, package: Package = TORCH) -> Reading:
    """Conda dependencies of an environment file, and the requirements of its `pip:` section."""
    conda: list[str] = []
    pip: list[str] = []
    pip_indent: Optional[int] = None
    section = ""
    for line in text.splitlines():
        key = _TOP_KEY.match(line)
        if key is not None:
            section = key["key"]  # `channels:` lists channels (one may be named pytorch), not packages
            continue
        match = _LIST_ITEM.match(line)
        if match is None or section != "dependencies":
            continue
        indent, item = len(match["indent"]), match["item"].strip().strip("'\"")
        if pip_indent is not None and indent > pip_indent:
            pip.append(item)
            continue
        pip_indent = indent if item.rstrip(":") == "pip" and item.endswith(":") else None
        conda.append(item)
    named = any(package.conda.match(c) for c in conda) or any(package.mentions.match(p) for p in pip)
    ranges = [r for r in (conda_range(conda, package), pip_range(pip, package)) if r != (None, None)]
    unbounded = any(package.conda.match(c) and conda_range([c], package) == (None, None) for c in conda) or (
        any(package.mentions.match(p) for p in pip) and pip_range(pip, package) == (None, None))
    return (named, *_union(ranges)) if not unbounded else (named, None, None)


def _script_floor(text: str, package: Package = TORCH) -> Reading:
    """Install commands of a shell script or Dockerfile, and a Dockerfile's pytorch/pytorch base image (or, where
    no install command names the distribution, its NGC base image: `Package.release_image`)."""
    if "$" in text and _ARG.search(text) is not None:
        text = _with_arguments(text)
    image = package.image.search(text) if package.image is not None else None
    if image is not None:
        version = _release(image["version"])
        return True, version, (version[0], version[1] + 1) if version is not None else None
    pip: list[str] = []
    conda: list[str] = []
    for command in _INSTALL.finditer(text.replace("\\\n", " ")):
        words = command["args"].split()
        kept: list[str] = []
        skip = False
        for word in words:
            if skip:
                skip = False
            elif word.startswith("-"):
                skip = word in _VALUED
            else:
                kept.append(word.strip("'\""))
        (pip if command["tool"].startswith("pip") else conda).extend(kept)
    named = names_package(pip, package) or any(package.conda.match(c) for c in conda)
    # an install of torch, or of a companion (radtts: `pip install torchaudio`, whose release requires a torch of
    # its own), replaces the torch an NGC image ships: only where none is installed does the image decide
    replaced = named or any(names_package(pip, c.package) or any(c.package.conda.match(x) for x in conda)
                            for c in package.companions)
    if not replaced and package.release_image is not None:
        shipped = package.release_image(text)  # `FROM nvcr.io/nvidia/pytorch:20.12-py3`: torch 1.8
        if shipped != (None, None):
            return True, *shipped
    ranges = [r for r in (pip_range(pip, package), conda_range(conda, package)) if r != (None, None)]
    unbounded = (names_package(pip, package) and pip_range(pip, package) == (None, None)) or (
        any(package.conda.match(c) for c in conda) and conda_range(conda, package) == (None, None))
    return (named, *_union(ranges)) if not unbounded else (named, None, None)


def _with_arguments(text: str) -> str:
    """A Dockerfile with the defaults of its `ARG`s written where they are used (`ARG PYTORCH="1.6.0"` ...
    `FROM pytorch/pytorch:${PYTORCH}-cuda...`: a build without `--build-arg` gets that image). An argument with
    no default stays as written, and reads as no version."""
    defaults = {m["name"]: m["value"].strip("'\"") for m in _ARG.finditer(text)}
    return _ARG_USE.sub(lambda m: defaults.get(m["braced"] or m["bare"], m[0]), text)


def _cog_floor(text: str, directory: str, package: Package = TORCH) -> Reading:
    """`build.python_packages`, the file `build.python_requirements` names, and `build.run`'s install commands."""
    packages: list[str] = []
    commands: list[str] = []
    requirements_file = ""
    section = ""  # the key under `build:` whose list is being read
    in_build = False
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key = _KEY.match(line)
        if key is not None and not line.lstrip().startswith("-"):
            if not key["indent"]:
                in_build, section = key["key"] == "build", ""
            elif in_build:
                section = key["key"]
                if section == "python_requirements":
                    requirements_file = key["value"].strip("'\"")
            continue
        item = _LIST_ITEM.match(line)
        if item is None or not in_build:
            continue
        value = item["item"].strip().strip("'\"")
        if section == "python_packages":
            packages.append(value)
        elif section == "run":
            commands.append(value)
    if requirements_file:
        packages += _requirements(os.path.join(directory, requirements_file), package) or []
    named, low, above = _script_floor("\n".join(commands), package)
    ranges = [r for r in (pip_range(packages, package), (low, above)) if r != (None, None)]
    unbounded = names_package(packages, package) and pip_range(packages, package) == (None, None)
    named = named or names_package(packages, package)
    return (named, *_union(ranges)) if not unbounded and not (named and not ranges) else (named, None, None)


def _union(ranges: list[Range]) -> Range:
    """The range that spans several (floor, above) ranges of one file (a conda pin and a pip line)."""
    return _span([r[0] for r in ranges], [r[1] for r in ranges])


def _is_setup(func: ast.AST) -> bool:
    return (isinstance(func, ast.Name) and func.id == "setup") or \
        (isinstance(func, ast.Attribute) and func.attr == "setup")
