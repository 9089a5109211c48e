"""`gpulint verify nb.ipynb`: the code cells run as a script, or a clear reason why they cannot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpulint.cli import main
from gpulint.notebook.model import load_notebook
from gpulint.notebook.script import notebook_script
from tests.notebook.nbfiles import notebook

SETUP = "%matplotlib inline\n%load_ext autoreload\n%autoreload 2\n!pip install -q \\\n    tqdm\nimport torch"
TRAIN_CELLS = [
    "%matplotlib inline\nimport torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader, TensorDataset\n"
    "torch.manual_seed(0)",
    'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\nx = torch.randn(256, 16)\n'
    "y = (x.sum(1, keepdim=True) > 0).float()\nloader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)",
    "model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)\n"
    "opt = torch.optim.Adam(model.parameters(), lr=1e-2)",
    "%%time\nfor epoch in range(3):\n    for xb, yb in loader:\n        xb, yb = xb.to(device), yb.to(device)\n"
    "        loss = nn.functional.binary_cross_entropy_with_logits(model(xb), yb)\n        opt.zero_grad()\n"
    "        loss.backward()\n        opt.step()\n    model?",
]


def _script(sources: list[str]):  # noqa: ANN202 - NotebookScript
    return notebook_script(load_notebook(notebook(sources).encode()), "nb.ipynb")


def test_session_magics_are_left_out_with_a_note() -> None:
    script = _script([SETUP, "x = torch.zeros(2)\n%time y = x + 1\nprint(y)"])
    assert script.refusal is None
    compile(script.text, "nb.ipynb.py", "exec")
    assert "\ny = x + 1\n" in script.text and "# cell 2\n" in script.text
    assert [n.split(": `")[0] for n in script.notes] == ["cell 1, line 1", "cell 1, line 2", "cell 1, line 3",
                                                         "cell 1, line 4", "cell 1, line 5", "cell 2, line 2"]
    assert "left out: installs packages" in script.notes[3] and "left out: installs packages" in script.notes[4]


@pytest.mark.parametrize("sources, reason", [
    (["import torch", "!wget -q data.zip\nx = 1"], "cell 2, line 1: `!wget -q data.zip` needs IPython"),
    (["files = !ls"], "cell 1, line 1: `files = !ls` needs IPython"),
    (["%cd data\nimport torch"], "cell 1, line 1: `%cd data` needs IPython"),
    (["import torch", "%%writefile train.py\nimport torch"], "cell 2 is a cell magic %%writefile cell"),
    (["def f(:\n    pass"], "cell 1 does not parse (SyntaxError"),
])
def test_what_a_script_cannot_run_is_named(sources: list[str], reason: str) -> None:
    script = _script(sources)
    assert script.refusal is not None and reason in script.refusal, script.refusal


def test_verify_refuses_a_notebook_with_a_shell_command_clearly(tmp_path: Path) -> None:
    pytest.importorskip("torch")  # verify refuses to start without torch; CI installs it
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(["import torch", "!nvidia-smi"]))
    result = CliRunner().invoke(main, ["verify", str(path), "--repeats", "0"])
    assert result.exit_code == 1
    assert "cannot run the notebook as a script: cell 2, line 1: `!nvidia-smi` needs IPython" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nb.ipynb"]


@pytest.mark.slow
@pytest.mark.torch
def test_verify_runs_the_cells_as_a_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    folder = tmp_path / "notebooks"
    folder.mkdir()
    # a toy model on small batches: the premises that keep gpulint silent on such code are lifted
    (folder / "gpulint.toml").write_text('strictness = "pedantic"\nmin-width = 1\n')
    path = folder / "train.ipynb"
    path.write_text(notebook(TRAIN_CELLS))
    before = path.read_bytes()
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["verify", "notebooks/train.ipynb", "--steps", "12", "--warmup", "2",
                                       "--repeats", "0", "--no-diff", "--threads", "1", "--json", str(report)])
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    [script] = data["scripts"]
    assert script["verdict"] == "PASS" and script["rules_applied"] == ["GPU001", "GPU101", "GPU201"]
    assert [r["status"] for r in script["rules"]] == ["exercised"] * 3
    assert "note: train.ipynb runs as train.ipynb.py: its code cells in order, in its folder" in result.output
    assert "`%%time` left out" in result.output and "`model?` left out: asks for help" in result.output
    assert path.read_bytes() == before and sorted(p.name for p in folder.iterdir()) == ["gpulint.toml", "train.ipynb"]
