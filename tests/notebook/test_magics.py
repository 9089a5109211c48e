"""IPython syntax in cells: which lines are magics, and positions that survive them."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Optional

import pytest

from gpulint.config import Settings
from gpulint.notebook.lint import lint_notebook
from gpulint.notebook.magics import not_python, transform
from gpulint.notebook.model import load_notebook
from tests.notebook.nbfiles import notebook


@pytest.mark.parametrize("source, code", [
    ("%matplotlib inline\nx = 1", "\nx = 1"),
    ("!pip install torch \\\n    torchvision\nx = 1", "\n\nx = 1"),
    ("files = !ls\nx, y = %who_ls\nx = 1", "\n\nx = 1"),
    ("model?\n??torch.nn\nx = 1", "\n\nx = 1"),
    ("for i in range(3):\n    !echo $i\n", "for i in range(3):\n    pass\n"),
    ("%time y = f(x)\n", "y = f(x)\n"),
    ("if a:\n    %timeit -n 3 f()\n", "if a:\n    pass\n"),
    ("%%time\nfor x in y:\n    f(x)", "\nfor x in y:\n    f(x)"),
    ("%%capture out\nf()", "\nf()"),
    # IPython automagics and shell aliases without `%` or `!` (valid in Jupyter, not Python)
    ("pip install -q transformers accelerate\nx = 1", "\nx = 1"),
    ("cd data/cifar\nls -la\nx = 1", "\nls -la\nx = 1"),  # `ls -la` is Python (a subtraction): kept
    ("for i in range(3):\n    pip install pkg$i\n", "for i in range(3):\n    pass\n"),
    ("run train.py --epochs 1\nx = 1", "\nx = 1"),
])
def test_magic_lines_become_placeholders_on_their_rows(source: str, code: str) -> None:
    out = transform(source)
    assert out.text == code and out.skipped is None
    ast.parse(out.text)
    assert out.text.count("\n") == source.count("\n")  # every row stays where it was


@pytest.mark.parametrize("source", [
    'msg = """Is this a question?\n%not a magic\n!nor this\n"""\n%matplotlib inline',
    "x = [\n    1,\n    2 %\n    3,\n]\n%env A=1",
    "s = 'why?'  # a comment?\n%load_ext x",
    "y = f(a,\n      b)?\n",
])
def test_lines_inside_strings_and_brackets_are_not_magics(source: str) -> None:
    out = transform(source)
    kept = [line for _, line in out.magics]
    assert all(line.lstrip().startswith(("%matplotlib", "%env", "%load_ext")) for line in kept), kept
    assert "Is this a question?" in out.text or "2 %" in out.text or "why?" in out.text or "b)?" in out.text


@pytest.mark.parametrize("source", [
    "pip = 3\ncd(x)\nls.append(1)\nx = f(\n",  # names that are Python here (the last line breaks the cell)
    "time += 1\nenv = {\n}\nhistory[0]\n",
])
def test_automagic_names_used_as_python_stay_python(source: str) -> None:
    out = transform(source)
    assert [row for row, _ in out.magics] == []


def test_a_notebook_with_automagics_is_linted_not_a_syntax_error() -> None:
    """`pip install x` / `cd dir` in a cell run in Jupyter: GPU000 must not call the notebook invalid."""
    raw = notebook([
        "pip install torch torchvision",
        "cd /content/data",
        "import torch\nopt = torch.optim.Adam(torch.nn.Linear(8, 8).cuda().parameters())",
    ]).encode()
    found = lint_notebook(Path("nb.ipynb"), load_notebook(raw), Settings(select=("ALL",)))
    assert "GPU000" not in {f.code for f in found}
    assert "GPU201" in {f.code for f in found}


YAML_CELL = """# model_config.yaml
Base:
    model_root: '../checkpoints/'
    workers: 3
    feature_cols:
        - {name: ["userid", "adgroup_id",
                  "pid"], active: True, dtype: str}
    metrics: ['logloss', 'AUC']
"""


@pytest.mark.parametrize("source, holds", [
    (YAML_CELL, "YAML"),
    ("taobao_tiny:\n    data_root: ../data/\n    - item\n", "YAML"),
    ("!cd demo\npython DeepFM_with_h5.py", "shell"),
    ("!cd benchmarks\n# run the demo\n!nohup python run.py --gpu 0 > run.log &", "shell"),
    ("import torch\nmodel = torch.nn.Linear(8, 8\n", None),  # Python with a mistake
    ("Base:\n    x = torch.zeros(3)\n", None),  # a key, then Python
    ("python = 3\nprint python\n", None),
])
def test_cells_of_yaml_or_shell_commands_are_told_apart_from_python(source: str, holds: Optional[str]) -> None:
    assert not_python(source) == holds


def test_a_yaml_or_shell_cell_is_no_gpu000_but_a_python_cell_with_a_mistake_is() -> None:
    """blind17 (xue-pai/FuxiCTR): tutorials show their YAML configs in code cells, and run scripts in cells whose
    lines lost their `!`; 33 GPU000 findings, none of which held Python to lint. Pedantic still reports them."""
    raw = notebook([
        "import torch\nopt = torch.optim.Adam(torch.nn.Linear(8, 8).cuda().parameters())",
        YAML_CELL,
        "!cd demo\npython DeepFM_with_h5.py",
        "def broken(:\n    pass",
    ]).encode()
    found = lint_notebook(Path("nb.ipynb"), load_notebook(raw), Settings(select=("ALL",)))
    assert [f.cell.number for f in found if f.code == "GPU000"] == [4]
    assert "GPU201" in {f.code for f in found}
    pedantic = lint_notebook(Path("nb.ipynb"), load_notebook(raw),
                             Settings(select=("ALL",)).with_values({"strictness": "pedantic"}))
    assert [f.cell.number for f in pedantic if f.code == "GPU000"] == [2, 3, 4]


def test_a_notebook_naming_no_torch_gets_no_gpu000() -> None:
    raw = notebook(["print 'python 2'", "x = 1"]).encode()
    assert lint_notebook(Path("nb.ipynb"), load_notebook(raw), Settings(select=("ALL",))) == []


def test_cell_magics_that_are_not_python_skip_the_cell() -> None:
    assert transform("%%bash\nls -la").skipped == "cell magic %%bash"
    assert transform("%%writefile train.py\nimport torch").skipped == "cell magic %%writefile"


def test_a_statement_after_time_keeps_its_columns() -> None:
    raw = notebook([
        "import torch\nfrom torch.utils.data import DataLoader\ndevice = torch.device('cuda')",
        "%time loader = DataLoader(ds, num_workers=2)",
        "for i in range(2):\n    %time  other = DataLoader(ds, num_workers=2)",
    ]).encode()
    findings = lint_notebook(Path("nb.ipynb"), load_notebook(raw),
                             Settings(select=("GPU101",)).with_values({"strictness": "pedantic"}))
    assert [(f.cell.number, f.location.row, f.location.column) for f in findings] == [(2, 1, 16), (3, 2, 20)]
    fixes = [f.fix.edits[0] for f in findings]
    assert [(e.location.row, e.location.column) for e in fixes] == [(1, 44), (2, 48)]
