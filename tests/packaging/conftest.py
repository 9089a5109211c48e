"""A wheel and an sdist built from a copy of this checkout, the way the README says (`python -m build`),
once per test session. The build runs without network (`--no-isolation`: the test extra installs
setuptools and build), in a copy, so the checkout gets no build/ or egg-info from the tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def checkout_files() -> list[str]:
    """The files a fresh clone would have, plus new files not committed yet (not the ignored ones)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode()
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def copy_checkout(target: Path) -> Path:
    for name in checkout_files():
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target / name)
    return target


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dist/ of `python -m build` run in a copy of the checkout: the sdist and the wheel."""
    source = copy_checkout(tmp_path_factory.mktemp("checkout"))
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(source / "dist"),
                           str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return source / "dist"
