"""Packaging a user can trust: what the built wheel says about itself is true, and it installs and runs."""

from __future__ import annotations

import email.parser
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import gpulint
from gpulint.core import extras

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def wheel_of(dist: Path) -> Path:
    wheels = sorted(dist.glob("*.whl"))
    assert [w.name for w in wheels] == [f"gpulint-{gpulint.__version__}-py3-none-any.whl"]
    return wheels[0]


def metadata(dist: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel_of(dist)) as wheel:
        text = wheel.read(f"gpulint-{gpulint.__version__}.dist-info/METADATA").decode("utf-8")
    return email.parser.Parser().parsestr(text)


def requirements(meta: email.message.Message, extra: str | None = None) -> dict[str, Requirement]:
    found = {}
    for line in meta.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        in_extra = requirement.marker is not None and f'extra == "{extra}"' in str(requirement.marker)
        if (extra is None and (requirement.marker is None or "extra" not in str(requirement.marker))) or in_extra:
            found[requirement.name] = requirement
    return found


def test_the_version_is_written_in_one_place(built: Path) -> None:
    assert "version" not in PYPROJECT["project"] and PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "gpulint.__version__"}
    assert metadata(built)["Version"] == gpulint.__version__
    # the VS Code extension's manifest must hold a literal version (vsce reads it): it is kept equal
    manifest = json.loads((ROOT / "editors" / "vscode" / "package.json").read_text(encoding="utf-8"))
    assert manifest["version"] == gpulint.__version__


def test_the_license_is_mit_and_ships_in_the_wheel_and_the_sdist(built: Path) -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n\nCopyright (c) 2026 the gpulint authors\n")
    assert "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND" in text
    meta = metadata(built)
    assert meta["License-Expression"] == "MIT" and meta.get_all("License-File") == ["LICENSE"]
    with zipfile.ZipFile(wheel_of(built)) as wheel:
        assert wheel.read(f"gpulint-{gpulint.__version__}.dist-info/licenses/LICENSE").decode() == text
        names = wheel.namelist()
    assert "gpulint/py.typed" in names and not any(n.startswith(("tests/", "fixtures/", "scripts/")) for n in names)
    with tarfile.open(built / f"gpulint-{gpulint.__version__}.tar.gz") as sdist:
        assert f"gpulint-{gpulint.__version__}/LICENSE" in sdist.getnames()


def test_classifiers_exist_and_agree_with_the_metadata(built: Path) -> None:
    from trove_classifiers import classifiers as known

    listed = metadata(built).get_all("Classifier") or []
    assert listed and set(listed) <= known, set(listed) - known
    assert not any(c.startswith("License ::") for c in listed)  # the SPDX expression says it (PEP 639)
    versions = sorted(tuple(map(int, c.rsplit(" ", 1)[1].split("."))) for c in listed
                      if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    floor = tuple(map(int, PYPROJECT["project"]["requires-python"].removeprefix(">=").split(".")))
    assert versions[0] == floor and versions == [(3, minor) for minor in range(floor[1], versions[-1][1] + 1)]
    assert sys.version_info[:2] in versions  # the Python running this test is one the package claims


def test_no_url_is_published_while_nothing_public_exists(built: Path) -> None:
    """decisions.md: no public site, repository or package yet; a Documentation URL would become every
    rule's docs link (core/docs_url.py), so the metadata names none."""
    assert "urls" not in PYPROJECT["project"] and metadata(built).get_all("Project-URL") is None


def test_dependency_bounds(built: Path) -> None:
    core = requirements(metadata(built))
    assert set(core) == {"libcst", "click", "packaging", "tomli"}  # packaging: torch pins (project/requirements.py)
    assert "2" not in core["libcst"].specifier and "1.9.0" in core["libcst"].specifier  # below the next major
    import importlib.metadata

    assert importlib.metadata.version("libcst") in core["libcst"].specifier  # what the tests run with
    assert importlib.metadata.version("packaging") in core["packaging"].specifier
    verify = requirements(metadata(built), "verify")
    assert set(verify) == {"torch", "matplotlib"}


def test_the_verify_extra_never_upgrades_an_installed_torch(built: Path) -> None:
    """Any torch a training environment has satisfies the extra; the floor is checked at run time."""
    torch = requirements(metadata(built), "verify")["torch"]
    for installed in ("1.13.1", "2.2.0", "2.4.0", "2.13.0+cpu", "2.13.0"):
        assert torch.specifier.contains(installed, prereleases=True), installed
    assert extras.problem_with_torch("2.2.0") is not None and "torch 2.4 or newer" in extras.problem_with_torch("2.2.0")
    assert extras.problem_with_torch("2.4.0") is None and extras.problem_with_torch("2.13.0+cpu") is None
    assert extras.problem_with_torch(None) is not None and extras.problem_with_torch("") is None
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    pinned = re.search(r"torch==([\d.]+)", ci)
    assert pinned is not None and extras.problem_with_torch(pinned.group(1)) is None


def test_pip_keeps_an_older_torch_when_the_verify_extra_is_installed(tmp_path: Path) -> None:
    """pip's own resolver, offline, in an environment that appears to have torch 2.2.0: installing
    `-e .[verify]` needs nothing new, so torch stays (with `torch>=2.4` in the extra it would not)."""
    fake = tmp_path / "site"
    info = fake / "torch-2.2.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.2.0\n")
    (info / "RECORD").write_text("")
    (info / "INSTALLER").write_text("pip\n")
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": str(fake), "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"}
    env.pop("PIP_FIND_LINKS", None)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-build-isolation",
                           "--no-index", "--report", str(report), "-e", f"{ROOT}[verify]"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    installs = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    assert installs == ["gpulint"]


def test_the_wheel_installs_and_lints_without_the_checkout(built: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target),
                           str(wheel_of(built))], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    examples = tmp_path / "examples"
    examples.mkdir()
    for name in ("shapes_classifier.py", "churn.ipynb"):
        (examples / name).write_bytes((ROOT / "examples" / name).read_bytes())
    env = {**os.environ, "PYTHONPATH": str(target), "GPULINT_CACHE_DIR": str(tmp_path / "cache")}
    where = subprocess.run([sys.executable, "-c", "import gpulint; print(gpulint.__file__)"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=60)
    assert where.stdout.startswith(str(target))  # the wheel's copy, not the checkout's
    run = subprocess.run([sys.executable, "-m", "gpulint", "check", "examples"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and "examples/shapes_classifier.py:" in run.stdout and "churn.ipynb:cell" in run.stdout
    rule = subprocess.run([sys.executable, "-m", "gpulint", "rule", "GPU101"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert rule.returncode == 0 and "Docs:" not in rule.stdout and "http" not in rule.stdout.split("## Fix safety")[1]
    hint = subprocess.run([sys.executable, "-c", "from gpulint.core.extras import install_hint;"
                           "print(install_hint('verify', 'matplotlib'))"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert hint.stdout.strip() == "pip install 'matplotlib>=3.5'"  # no checkout to point at from a wheel


def test_an_editable_install_prints_no_warning(tmp_path: Path) -> None:
    """`pip install -e .` shows every warning the build backend emits; setuptools' editable finder
    emits one ("Editable installation ...") that a .pth install does not."""
    from tests.packaging.conftest import copy_checkout

    source = copy_checkout(tmp_path / "checkout")
    script = ("import warnings, sys\nfrom setuptools import build_meta\n"
              "with warnings.catch_warnings(record=True) as caught:\n"
              "    warnings.simplefilter('always')\n"
              "    name = build_meta.build_editable(sys.argv[1])\n"
              "print('BUILT', name)\nfor w in caught:\n    print('WARNING', w.category.__name__, w.message)\n")
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run([sys.executable, "-c", script, str(out)], cwd=source, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "WARNING" not in done.stdout, done.stdout
    built_name = re.search(r"^BUILT (\S+)$", done.stdout, re.M)
    assert built_name is not None, done.stdout
    with zipfile.ZipFile(out / built_name.group(1)) as wheel:
        pth = [n for n in wheel.namelist() if n.endswith(".pth")]
        assert len(pth) == 1 and wheel.read(pth[0]).decode().strip() == str(source)


@pytest.mark.parametrize("extra,name", [("verify", "matplotlib")])
def test_install_hints_name_installs_that_work(extra: str, name: str) -> None:
    """A hint names the requirement as pyproject.toml states it, and the checkout's real extra."""
    declared = [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"][extra]]
    wanted = next(r for r in declared if r.name == name)
    hint = extras.install_hint(extra, name)
    quoted = re.match(r"pip install '([^']+)'", hint)
    assert quoted is not None and Requirement(quoted.group(1)) == Requirement(str(wanted).replace(" ", ""))
    assert f"pip install -e '{ROOT}[{extra}]'" in hint


def test_no_message_suggests_an_extra_of_a_package_nobody_can_install() -> None:
    sources = [p for p in (ROOT / "gpulint").rglob("*.py")]
    offenders = [str(p.relative_to(ROOT)) for p in sources if re.search(r"gpulint\[\w+\]", p.read_text("utf-8"))]
    assert not offenders, offenders


def test_changelog_and_security_policy() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## {re.escape(gpulint.__version__)}\b", changelog, re.M)
    assert changelog.index("## Unreleased") < changelog.index(f"## {gpulint.__version__}")
    security = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
    assert "runs the training scripts it is given" in security and "not a security boundary" in security
