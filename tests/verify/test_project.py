"""Issue 13 item 9: fixes in the project's own modules are verified through the entry script that imports them.

The layout is minGPT's: `projects/chargpt/chargpt.py` imports `mingpt.model`, whose optimizer
gpulint rewrites; the entry script itself has nothing to fix. The rewritten model.py is what
the rewritten run imports (from the sandbox copy of the project), never the user's file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpulint.cli import main
from gpulint.verify.project import imported_project_files, is_entry_script, project_root

pytest.importorskip("torch")

MODEL = '''"""A model library: definitions only."""

import torch
from torch import nn

from .utils import width

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, width()), nn.Tanh(), nn.Linear(width(), 8), nn.Linear(8, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def configure_optimizer(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=1e-2)
'''

TRAIN = '''"""The entry script: no fix of its own."""

import torch

from mylib.model import DEVICE, Net

model = Net().to(DEVICE)
optimizer = model.configure_optimizer()
x = torch.randn(128, 8, device=DEVICE)
y = x.sum(dim=1, keepdim=True)
for step in range(1000):
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "mylib").mkdir(parents=True)
    (root / "projects" / "demo").mkdir(parents=True)
    (root / "setup.py").write_text("from setuptools import setup\nsetup(name='mylib')\n")
    (root / "mylib" / "__init__.py").write_text("")
    (root / "mylib" / "utils.py").write_text("def width() -> int:\n    return 16\n")
    (root / "mylib" / "model.py").write_text(MODEL)
    (root / "projects" / "demo" / "train.py").write_text(TRAIN)
    return root


def test_the_project_and_the_modules_a_script_imports_are_found(project: Path) -> None:
    script = project / "projects" / "demo" / "train.py"
    assert project_root(script) == project.resolve()
    found = imported_project_files(script, project.resolve())
    assert {p.relative_to(project.resolve()).as_posix() for p in found} == {
        "mylib/__init__.py", "mylib/model.py", "mylib/utils.py"}  # utils through a relative import
    import ast

    assert is_entry_script(ast.parse(TRAIN)) and not is_entry_script(ast.parse(MODEL))


@pytest.mark.torch
@pytest.mark.slow
def test_fixes_in_an_imported_module_are_verified_through_the_entry_script(project: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    before = (project / "mylib" / "model.py").read_bytes()
    report = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["verify", "projects/demo/train.py", "--steps", "8", "--warmup", "2",
                                       "--repeats", "1", "--threads", "1", "--select", "GPU201",
                                       "--json", str(report)])
    assert result.exit_code == 0, result.output
    script = json.loads(report.read_text())["scripts"][0]
    assert script["verdict"] == "PASS"
    assert [Path(f["path"]).name for f in script["rewritten_files"]] == ["model.py"]
    assert script["rules_applied"] == ["GPU201"]
    (rule,) = script["rules"]
    assert rule["status"] == "exercised" and "AdamW (fused) at model.py:20" in rule["detail"]
    imported = {Path(i["path"]).name: i["from"] for i in script["runs"]["rewritten"]["imported"]}
    assert imported["model.py"] == "sandbox"  # the rewritten copy, not the user's file
    assert "fused=True" in script["diff"] and "mylib/model.py" in script["diff"]
    assert "rewritten files: mylib/model.py" in result.output
    # speed: timed runs with the script's own settings, interleaved (one pair with --repeats 1)
    comparison = script["comparison"]
    timing = comparison["timing"]
    assert timing["order"] == ["original", "rewritten"]
    assert [len(run) for run in timing["original_step_times_s"]] == [6]  # 8 steps, 2 of them warm-up
    speed = comparison["speedup"]
    assert speed["ci_low"] <= speed["estimate"] <= speed["ci_high"] and speed["run_pairs"] == 1
    assert timing["cpu_count"] and len(timing["load_average_before_run"]) == 2
    assert "one pair: the interval covers step-to-step jitter only" in result.output
    assert (project / "mylib" / "model.py").read_bytes() == before
    assert sorted(os.listdir(project)) == ["mylib", "projects", "setup.py"]


@pytest.mark.parametrize("source, expected", [
    ("import torch.distributed as dist\ndist.init_process_group('nccl')\n", True),
    ("from torch.distributed import init_process_group\ninit_process_group(backend='nccl')\n", True),
    ("import os, torch.multiprocessing as mp\nfrom torch.distributed import init_process_group\n"
     "def setup(rank, world):\n    os.environ['MASTER_ADDR'] = 'localhost'\n"
     "    init_process_group('nccl', rank=rank, world_size=world)\n"
     "mp.spawn(setup, args=(2,), nprocs=2)\n", False),  # starts its own processes
    ("import torch\nprint(torch.zeros(1))\n", False),
])
def test_scripts_that_need_torchrun_are_recognised(source: str, expected: bool) -> None:
    """A DDP script written for torchrun fails as `python train.py`: verify launches it through torchrun."""
    import ast

    from gpulint.verify.project import needs_torchrun

    assert needs_torchrun(ast.parse(source)) is expected
