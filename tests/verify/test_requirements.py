"""What verify needs to start: torch new enough (checked at run time, not by the extra), and a word
about the notebooks a folder holds that it does not run."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulint.core import extras
from gpulint.verify import session
from gpulint.verify.results import VerifyOptions
from tests.notebook.nbfiles import notebook


@pytest.mark.parametrize("version,problem", [
    ("2.2.0", "needs torch 2.4 or newer; this environment has torch 2.2.0"),
    (None, "needs torch 2.4 or newer, which this Python"),
])
def test_verify_refuses_a_torch_it_cannot_work_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   version: str | None, problem: str) -> None:
    script = tmp_path / "train.py"
    script.write_text("x = 1\n")
    monkeypatch.setattr(extras, "installed_torch", lambda: version)
    with pytest.raises(session.UsageError, match=problem.replace("(", r"\(")) as raised:
        session.check_options(VerifyOptions(paths=(script,)))
    assert "gpulint[" not in str(raised.value) and "pip install" in str(raised.value)


@pytest.mark.torch
def test_the_installed_torch_is_read_without_importing_it() -> None:
    import subprocess
    import sys

    code = ("import sys; from gpulint.core.extras import installed_torch, problem_with_torch; "
            "v = installed_torch(); print(v, problem_with_torch(v) is None, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout.split()
    assert out[-1] == "False"  # gpulint verify reads the version from the metadata: importing torch takes seconds
    assert out[0].startswith("2.") and out[1] == "True"  # CI's torch (2.13.0) is new enough


def test_a_folder_says_which_notebooks_it_does_not_run(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("x = 1\n")
    (tmp_path / "nbs").mkdir()
    (tmp_path / "nbs" / "explore.ipynb").write_text(notebook(["x = 1\n"]))
    said: list[str] = []
    verifier = session.Verifier(VerifyOptions(paths=(tmp_path,)), echo=lambda text, err=False: said.append(text))
    files, folder = verifier.candidates()
    assert folder and [p.name for p in files] == ["train.py"]
    notebook_path = tmp_path / "nbs" / "explore.ipynb"
    assert said == [f"gpulint verify: {notebook_path}: not run (a folder's notebooks run only when named, since a "
                    f"notebook is often not a training run): gpulint verify {notebook_path}"]
