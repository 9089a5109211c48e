"""Benchmark: `gpulint check one_file.py` inside a big project, cold (issue 25: one file costs one file).

A script, not a test. From the repository root, with the project's venv:

    python bench/one_file.py --files 8000 --runs 3

It writes a project of `--files` modules into a temporary folder: packages of ten modules, each
package's training script importing the package's dataset and model modules (the shipped fixture
scripts as content, so every file parses to real facts), then times, in one process run and
alternating within each round so machine load hits both alike:

- `partial`: this checkout as it is: the project pass reads the linted file's imports, its
  importers (found with a text test, then confirmed) and what they import;
- `whole`: the same code with the partial path switched off (`PART_OF_PROJECT = 0`): every file
  of the project is parsed for its facts, as before issue 25.

Both run `check --no-cache --isolated --exit-zero` (no results cache, no project-facts cache) on
one model module in the middle of the tree, and must print the same findings. For each: median wall
and CPU seconds (user + system of the process and its children, from `wait4`) and the ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "fixtures" / "scripts"

RUN = ("import sys; import gpulint.dispatch.project_scan as scan; scan.PART_OF_PROJECT = float(sys.argv[1]); "
       "from gpulint.cli import main; main(sys.argv[2:])")

MODEL = '''import torch.nn as nn


class Net{n}(nn.Module):
    def __init__(self, width=512):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(width, width) for _ in range(12)])

    def forward(self, x):
        return self.layers(x)
'''
DATA = '''import torch
from PIL import Image
from torch.utils.data import Dataset


class Images{n}(Dataset):
    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return torch.tensor(list(Image.open(self.files[i]).getdata()))
'''
TRAIN = '''import torch
from torch.utils.data import DataLoader

from .data import Images{n}
from .model import Net{n}

model = Net{n}().cuda()
optimizer = torch.optim.Adam(model.parameters())
loader = DataLoader(Images{n}(["a.png"]), batch_size=32)
for x in loader:
    loss = model(x.cuda()).sum()
    loss.backward()
    optimizer.step()
'''


def build(root: Path, files: int) -> Path:
    """A project of `files` modules; returns the model module of the middle package."""
    (root / "pyproject.toml").write_text("[project]\nname = 'big'\n")
    extra = sorted(SCRIPTS.glob("*.py"))
    packages = max(1, files // 10)
    for n in range(packages):
        package = root / "big" / f"p{n:05d}"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "model.py").write_text(MODEL.format(n=n))
        (package / "data.py").write_text(DATA.format(n=n))
        (package / "train.py").write_text(TRAIN.format(n=n))
        for k in range(6):  # the rest of a package: realistic training code that imports nothing here
            shutil.copyfile(extra[(n + k) % len(extra)], package / f"extra{k}.py")
    (root / "big" / "__init__.py").write_text("")
    return root / "big" / f"p{packages // 2:05d}" / "model.py"


def timed(part: str, target: Path) -> tuple[float, float, str]:
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", RUN, part, "check", "--no-cache", "--isolated",
                                "--exit-zero", "--output-format", "concise", str(target)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=target.parent)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    out = process.stdout.read().decode() if process.stdout else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"gpulint failed: {process.stderr.read().decode() if process.stderr else ''}")
    return wall, usage.ru_utime + usage.ru_stime, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=8000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        target = build(Path(folder), args.files)
        count = sum(1 for _ in Path(folder).rglob("*.py"))
        print(f"project: {count} Python files; linting {target.relative_to(folder)}; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        results: dict[str, list[tuple[float, float]]] = {"partial": [], "whole": []}
        outputs = set()
        for _ in range(args.runs):
            for name, part in (("partial", "0.5"), ("whole", "0")):
                wall, cpu, out = timed(part, target)
                results[name].append((wall, cpu))
                outputs.add(out)
        if len(outputs) != 1:
            raise SystemExit(f"the two paths printed different findings: {outputs}")
        base = statistics.median(c for _, c in results["whole"])
        for name, runs in results.items():
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"{name:8} wall {wall:6.2f} s  cpu {cpu:6.2f} s  cpu ratio {cpu / base:.3f}")


if __name__ == "__main__":
    main()
