"""Notebooks through the command line: real-shaped files from JupyterLab, Colab, Kaggle and Windows.

The four notebooks in notebooks/ are written as those tools write them: JupyterLab's indent-1
sorted JSON with cell ids, outputs (streams, an image, an execute result), magics, `model?`
and a `%%time` cell; Colab's indent-2 JSON in insertion order with `metadata.id`, shell
assignments, `%time stmt`, a `%%bash` cell and suppressions; Kaggle's compact JSON whose
sources are single strings with CRLF inside; a Windows-saved notebook with a BOM, CRLF between
the JSON lines and CRLF inside the source lines.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any, Union

import nbformat
import pytest

from tests.conftest import Gpulint
from tests.notebook.nbfiles import NOTEBOOKS, assert_only_sources_changed, notebook, sources_of

NAMES = ("jupyterlab", "colab", "kaggle", "windows")
FINDINGS = {
    "jupyterlab": [
        "jupyterlab.ipynb:cell 4:4:16: GPU101",
        "jupyterlab.ipynb:cell 5:4:13: GPU201",
        "jupyterlab.ipynb:cell 6:7:9: GPU001",
    ],
    "colab": ["colab.ipynb:cell 5:6:9: GPU001"],
    "kaggle": [
        "kaggle.ipynb:cell 2:3:7: GPU201",
        "kaggle.ipynb:cell 2:4:10: GPU101",
        "kaggle.ipynb:cell 3:5:5: GPU001",
    ],
    "windows": ["windows.ipynb:cell 1:5:10: GPU101", "windows.ipynb:cell 2:2:7: GPU201"],
}
# the JSON lines of the file that `fix --unsafe-fixes` changes: only lines of edited sources
CHANGED_LINES = {"jupyterlab": 20, "colab": 16, "kaggle": 2, "windows": 4}


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the notebooks outside tests/ (where test-file rules would stay silent)."""
    for name in NAMES:
        shutil.copy(NOTEBOOKS / f"{name}.ipynb", tmp_path / f"{name}.ipynb")
    # the notebooks train toy models on a few KB of batches, as notebooks do: their findings are the
    # undecided (pedantic) ones, and the toy widths are let through
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\nstrictness = "pedantic"\nmin-width = 1\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _codes(output: str) -> list[str]:
    return [line.split(" [*]")[0].split(": GPU")[0] + ": GPU" + line.split(": GPU")[1][:3]
            for line in output.splitlines() if ": GPU" in line]


@pytest.mark.parametrize("name", NAMES)
def test_check_reports_cell_positions(gl: Gpulint, here: Path, name: str) -> None:
    result = gl.check(f"{name}.ipynb")
    assert result.exit_code == 1, result.output
    assert _codes(result.stdout) == FINDINGS[name]


def test_a_directory_lints_its_notebooks(gl: Gpulint, here: Path) -> None:
    result = gl.check(".")
    assert sorted(_codes(result.stdout)) == sorted(f for name in NAMES for f in FINDINGS[name])
    assert "Found 9 findings." in result.stdout


@pytest.mark.parametrize("name", NAMES)
def test_fix_changes_only_the_edited_sources(gl: Gpulint, here: Path, name: str) -> None:
    path = here / f"{name}.ipynb"
    before = path.read_bytes()
    result = gl.fix("--unsafe-fixes", path.name)
    after = path.read_bytes()
    assert result.exit_code == 0, result.output
    assert assert_only_sources_changed(before, after) == CHANGED_LINES[name]
    nbformat.validate(nbformat.reads(after.decode("utf-8-sig"), as_version=4))
    assert gl.check("--unsafe-fixes", path.name).exit_code == 0
    again = gl.fix("--unsafe-fixes", path.name)
    assert again.exit_code == 0 and path.read_bytes() == after


def test_fixed_sources_keep_their_layout(gl: Gpulint, here: Path) -> None:
    gl.fix("--unsafe-fixes", "kaggle.ipynb", "windows.ipynb", "colab.ipynb")
    kaggle = json.loads((here / "kaggle.ipynb").read_text())
    assert isinstance(kaggle["cells"][2]["source"], str)  # one string stays one string
    assert "\r\n    scaler.update()" in kaggle["cells"][2]["source"]  # CRLF cell, CRLF new lines
    assert not kaggle["cells"][2]["source"].endswith("\n")
    assert "\n" not in (here / "kaggle.ipynb").read_text()  # compact JSON stays on one line
    windows = (here / "windows.ipynb").read_bytes()
    assert windows.startswith(b"\xef\xbb\xbf") and b"\n" not in windows.replace(b"\r\n", b"")
    assert '"sgd = torch.optim.Adam(net.parameters(), fused=True)"' in windows.decode("utf-8-sig")
    colab = (here / "colab.ipynb").read_text()
    # indent 2 kept
    assert '\n        "scaler = torch.amp.GradScaler(device.type, enabled=(amp_dtype == torch.float16))"\n' in colab
    assert '"opt = optim.Adam(net.parameters())\\n",' in colab  # a newline added to the old last line


def test_outputs_metadata_and_ids_survive_byte_for_byte(gl: Gpulint, here: Path) -> None:
    path = here / "jupyterlab.ipynb"
    before = json.loads(path.read_text())
    gl.fix("--unsafe-fixes", path.name)
    after = json.loads(path.read_text())
    assert [c.get("id") for c in after["cells"]] == [c.get("id") for c in before["cells"]]
    assert [c.get("outputs") for c in after["cells"]] == [c.get("outputs") for c in before["cells"]]
    assert after["metadata"] == before["metadata"] and after["cells"][6]["outputs"][0]["data"]["image/png"]
    assert "perte d'entraînement" in path.read_text(encoding="utf-8")  # non-ASCII stays raw


def test_magics_are_kept_and_skipped(gl: Gpulint, here: Path) -> None:
    gl.fix("--unsafe-fixes", "jupyterlab.ipynb", "colab.ipynb")
    lab = sources_of((here / "jupyterlab.ipynb").read_text())
    assert lab[1].startswith("%matplotlib inline\n%load_ext autoreload\n%autoreload 2\n!pip install -q tqdm\n")
    assert lab[4].endswith("\nmodel?") and lab[5].startswith("%%time\namp_dtype = (\n")
    colab = sources_of((here / "colab.ipynb").read_text())
    assert colab[1].startswith("!nvidia-smi\nfiles = !ls /content\n")
    assert colab[4].endswith("\n%time train_epoch()")
    assert "DataLoader(None)" in colab[5]  # the %%bash cell: not Python, not linted, not touched


def test_diff_shows_cells_and_writes_nothing(gl: Gpulint, here: Path) -> None:
    before = (here / "jupyterlab.ipynb").read_bytes()
    result = gl.check("--diff", "jupyterlab.ipynb")
    assert "--- a/jupyterlab.ipynb:cell 4\n+++ b/jupyterlab.ipynb:cell 4\n" in result.stdout
    assert "+train_loader = DataLoader(train_set, batch_size=64, shuffle=True, pin_memory=True)" in result.stdout
    assert (here / "jupyterlab.ipynb").read_bytes() == before


def test_noqa_works_in_cells_and_never_across_cells(gl: Gpulint, tmp_path: Path, cwd: Path) -> None:
    (tmp_path / "gpulint.toml").write_text('strictness = "pedantic"\n')  # where `ds` goes is not shown
    head = "import torch\nfrom torch.utils.data import DataLoader\ndevice = torch.device('cuda')\n"
    nb = tmp_path / "nb.ipynb"
    nb.write_text(notebook([
        head,
        "a = DataLoader(ds, num_workers=2)  # noqa: GPU101\n# gpulint: ignore[GPU101]\n"
        "b = DataLoader(ds, num_workers=2)\n# gpulint: ignore[GPU101]",  # the last line of a cell: not the next
        "c = DataLoader(ds, num_workers=2)",
    ]))
    result = gl.check("nb.ipynb")
    assert _codes(result.stdout) == ["nb.ipynb:cell 2:4:1: GPU900", "nb.ipynb:cell 3:1:5: GPU101"]
    added = gl.check("--add-noqa", "nb.ipynb")
    assert added.exit_code == 0 and "Added 1 noqa directive." in added.stdout
    assert sources_of(nb.read_text())[2] == "c = DataLoader(ds, num_workers=2)  # noqa: GPU101"
    fixed = gl.fix("nb.ipynb")  # GPU900: the unused comment goes, with the line break before it
    assert fixed.exit_code == 0 and sources_of(nb.read_text())[1].endswith("\nb = DataLoader(ds, num_workers=2)")


def test_a_file_wide_suppression_in_the_first_cell(gl: Gpulint, tmp_path: Path, cwd: Path) -> None:
    (tmp_path / "gpulint.toml").write_text('strictness = "pedantic"\n')  # where `ds` goes is not shown
    (tmp_path / "nb.ipynb").write_text(notebook([
        "%pip install torch\n# gpulint: noqa: GPU101\nimport torch\nfrom torch.utils.data import DataLoader",
        "device = torch.device('cuda')\nloader = DataLoader(ds, num_workers=2)",
    ]))
    assert gl.check("nb.ipynb").exit_code == 0


def test_a_cell_that_does_not_parse_is_reported_and_the_others_linted(gl: Gpulint, tmp_path: Path, cwd: Path) -> None:
    (tmp_path / "gpulint.toml").write_text('strictness = "pedantic"\n')  # where `ds` goes is not shown
    (tmp_path / "nb.ipynb").write_text(notebook([
        "import torch\nfrom torch.utils.data import DataLoader\ndevice = torch.device('cuda')",
        "def broken(:\n    pass",
        "loader = DataLoader(ds, num_workers=2)",
    ]))
    result = gl.check("nb.ipynb")
    assert _codes(result.stdout) == ["nb.ipynb:cell 2:1:12: GPU000", "nb.ipynb:cell 3:1:10: GPU101"]
    assert "the cell was not linted; the other cells were" in result.stdout


def test_a_cell_magic_that_is_not_python_is_not_linted(gl: Gpulint, tmp_path: Path, cwd: Path) -> None:
    (tmp_path / "nb.ipynb").write_text(notebook([
        "%%writefile train.py\nimport torch\ntorch.device('cuda')\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds)",
        "%%bash\nif [ -d x ]; then echo (; fi",
    ]))
    assert gl.check("nb.ipynb").exit_code == 0


@pytest.mark.parametrize("content, message", [
    ('{"cells": [', "notebook: not a notebook: invalid JSON at line 1, column 12: Expecting value"),
    (b'\xff\xfe{"cells": []}', "file: cannot decode as utf-8 at byte 0"),
    ('{"worksheets": [], "nbformat": 3, "nbformat_minor": 0}', "nbformat 3 notebook: gpulint reads nbformat 4; "
                                                              "convert it with `jupyter nbconvert"),
    ('[1, 2]', "not a notebook: the JSON is not an object"),
    ('{"cells": {}, "nbformat": 4}', "malformed notebook: no list of cells"),
    ('{"cells": [{"cell_type": "code", "source": 3}], "nbformat": 4}', "malformed notebook: cell 1's source"),
    ('{"cells": [{"cell_type": "code", "source": "x", "source": "y"}], "nbformat": 4}',
     "the key 'source' appears twice"),
    ('{"cells": [], "nbformat": 4, "metadata": {"kernelspec": {"language": "R"}}}', "its kernel runs r, not Python"),
])
@pytest.mark.parametrize("command", ["check", "fix"])
def test_a_notebook_gpulint_cannot_read_is_a_finding(gl: Gpulint, tmp_path: Path, cwd: Path, command: str,
                                                     content: Union[str, bytes], message: str) -> None:
    path = tmp_path / "nb.ipynb"
    data = content if isinstance(content, bytes) else content.encode()
    path.write_bytes(data)
    result = gl(command, "nb.ipynb")
    assert result.exit_code == 1, result.output
    [line] = result.stdout.splitlines()[:1]
    assert line.startswith("nb.ipynb:1:1: GPU000 cannot lint ") and message in line, line
    assert path.read_bytes() == data


def test_include_and_extend_exclude_choose_notebooks(gl: Gpulint, here: Path) -> None:
    (here / "train.py").write_text("import torch\n")
    (here / "pyproject.toml").write_text('[tool.gpulint]\ninclude = ["*.py"]\n')
    assert gl.check(".").exit_code == 0  # notebooks left out
    assert gl.check("colab.ipynb").exit_code == 1  # named explicitly: linted, as excluded files are
    assert gl.check("--force-exclude", "colab.ipynb").exit_code == 0
    (here / "pyproject.toml").write_text('[tool.gpulint]\nextend-exclude = ["k*.ipynb", "windows.ipynb"]\n')
    linted = {line.split(":")[0] for line in gl.check(".").stdout.splitlines() if ": GPU" in line}
    assert linted == {"colab.ipynb", "jupyterlab.ipynb"}
    shown = gl("show-config", "colab.ipynb").stdout
    assert 'include = ["*.py", "*.pyi", "*.ipynb"]' in shown


def test_fix_keeps_the_mode_and_refuses_a_notebook_changed_meanwhile(gl: Gpulint, here: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = here / "windows.ipynb"
    os.chmod(path, 0o640)
    gl.fix("windows.ipynb")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    path = here / "jupyterlab.ipynb"
    from gpulint.notebook import job

    real = job.run_notebook

    def save_meanwhile(*args: Any, **kwargs: Any) -> Any:  # an editor saves the notebook while gpulint fixes it
        result = real(*args, **kwargs)
        path.write_bytes(path.read_bytes().replace(b"Fine-tuning", b"Fine tuning"))
        return result

    monkeypatch.setattr(job, "run_notebook", save_meanwhile)
    saved = path.read_bytes().replace(b"Fine-tuning", b"Fine tuning")
    result = gl.fix("jupyterlab.ipynb")
    assert "changed during fix, skipped" in result.output
    assert path.read_bytes() == saved


def test_the_cache_is_keyed_by_the_notebooks_bytes(here: Path, _private_cache_dir: Path) -> None:
    cached = Gpulint(True, _private_cache_dir)
    first = cached.check("kaggle.ipynb")
    assert cached.check("kaggle.ipynb").stdout == first.stdout
    path = here / "kaggle.ipynb"
    path.write_text(path.read_text().replace("lr=3e-4)", "lr=3e-4, fused=True)"))
    assert "GPU201" not in cached.check("kaggle.ipynb").stdout


def test_notebook_findings_in_every_format(gl: Gpulint, here: Path) -> None:
    data = json.loads(gl.check("--output-format", "json", "colab.ipynb").stdout)
    assert [(f["cell"], f["cell_id"], f["location"]["row"]) for f in data] == [(5, "trainLoop04", 6)]
    assert {e["cell"] for e in data[0]["fix"]["edits"]} == {4, 5}  # the scaler goes next to the optimizer
    github = gl.check("--output-format", "github", "windows.ipynb").stdout.splitlines()[0]
    raw_lines = (here / "windows.ipynb").read_bytes().decode("utf-8-sig").split("\r\n")
    line = int(github.split("line=")[1].split(",")[0])
    assert "loader = DataLoader(TensorDataset" in raw_lines[line - 1] and "cell 1:5:10" in github
    sarif = json.loads(gl.check("--output-format", "sarif", "windows.ipynb").stdout)
    location = sarif["runs"][0]["results"][0]["locations"][0]
    assert location["properties"]["cell"] == 1 and location["properties"]["cellRegion"]["startLine"] == 5
    assert location["physicalLocation"]["region"] == {"startLine": line, "endLine": line}
    full = gl.check("--output-format", "full", "windows.ipynb").stdout
    assert "5 | loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8)" in full
    junit = gl.check("--output-format", "junit", "windows.ipynb").stdout
    assert 'name="GPU101 cell 1:5:10"' in junit


def test_a_notebook_on_stdin(gl: Gpulint, here: Path) -> None:
    raw = (here / "kaggle.ipynb").read_bytes()
    fixed = gl("fix", "-", "--stdin-filename", "kaggle.ipynb", input=raw)
    assert fixed.exit_code == 1  # GPU001 needs --unsafe-fixes
    out = fixed.stdout_bytes
    assert json.loads(out) and b"fused=True" in out and (here / "kaggle.ipynb").read_bytes() == raw
    assert assert_only_sources_changed(raw, out) == 2  # the one line of compact JSON, out and in
