"""Benchmark, not a test: is `gpulint verify`'s speed verdict stable from one invocation to the next?

    .venv/bin/python bench/verify_speed.py [--invocations 3] [--repeats 3] [--steps 40] [--warmup 8]

Two rewrites, each verified --invocations times in a row (every invocation: a checked run of
each version, then --repeats timed runs of each, interleaved ABBA):

- rename only (GPU003 renames torch.cuda.amp.GradScaler(enabled=False) to torch.amp.GradScaler):
  nothing runs differently, so an honest verdict is "no measurable difference" every time, and
  each interval contains 1.0;
- the DataLoader rewrite (GPU101 + GPU102) of the image-classifier fixture: workers overlap
  the per-item augmentation with the step; faster when a core is free.

For each invocation it prints the median speedup with its 95% interval and the single-pair
ratios a one-run comparison would have reported (what issue 13 saw swing 0.74x/1.88x/0.74x).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RENAME_ONLY = '''import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scaler = torch.cuda.amp.GradScaler(enabled=False)
x = torch.randn(512, 256, device=device)
y = torch.randint(0, 10, (512,), device=device)
for step in range(100000):
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
'''


def verify(script: Path, select: str, args: argparse.Namespace, extra: list[str], cwd: Path) -> dict:
    report = cwd / "report.json"
    command = [sys.executable, "-m", "gpulint", "verify", str(script), "--select", select, "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--repeats", str(args.repeats), "--threads", "1", "--no-diff",
               "--json", str(report), "--", *extra]
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(report.read_text())["scripts"][0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--invocations", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=8)
    args = parser.parse_args()
    print(f"bench: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start")
    with tempfile.TemporaryDirectory(prefix="gpulint-bench-") as scratch:
        folder = Path(scratch)
        (folder / "pyproject.toml").write_text("[tool.gpulint]\n")
        rename = folder / "rename_only.py"
        rename.write_text(RENAME_ONLY)
        classifier = folder / "image_classifier.py"
        classifier.write_text((ROOT / "fixtures" / "scripts" / "image_classifier.py").read_text())
        cases = [("rename only (GPU003)", rename, "GPU003", []),
                 ("DataLoader (GPU101, GPU102)", classifier, "GPU101,GPU102", ["--size", "tiny"])]
        for name, script, select, extra in cases:
            for n in range(args.invocations):
                result = verify(script, select, args, extra, folder)
                comparison = result.get("comparison") or {}
                speed, timing = comparison.get("speedup") or {}, comparison.get("timing") or {}
                pairs = []
                for a, b in zip(timing.get("original_step_times_s", []), timing.get("rewritten_step_times_s", [])):
                    a, b = sorted(a), sorted(b)
                    pairs.append(a[len(a) // 2] / b[len(b) // 2])
                loads = [x for x in timing.get("load_average_before_run", []) if x is not None]
                shown = (f"{speed['estimate']:.2f}x (95% CI {speed['ci_low']:.2f}-{speed['ci_high']:.2f}x) "
                         f"{speed['verdict']}" if speed else "not measured")
                print(f"{name}, invocation {n + 1}: {shown}; single pairs "
                      f"{', '.join(f'{p:.2f}x' for p in pairs)}; verdict {result['verdict']}; "
                      f"load {min(loads, default=0):.1f}-{max(loads, default=0):.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
