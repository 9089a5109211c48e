"""Benchmark, not a test: does the DataLoader rewrite (GPU101 + GPU102) speed up the image fixture on CPU?

    .venv/bin/python bench/verify_dataloader.py [--steps 60] [--warmup 10] [--num-workers N] [--min 1.2]

Runs `gpulint verify --select GPU101,GPU102` on fixtures/scripts/image_classifier.py (--size tiny)
in a scratch project whose configuration sets `num-workers` (default: the CPU count, at most 4;
GPU102's own default of 4 oversubscribes a 2-core machine). Worker processes overlap the
per-item augmentation with the training step, so the step gets faster when a core is free;
on a machine whose cores are busy with other work the number drops. Prints the verify report
and exits 1 when the speedup is below --min or the loss check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "scripts" / "image_classifier.py"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--num-workers", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument("--threads", type=int, default=1, help="torch threads in the training process")
    parser.add_argument("--min", type=float, default=1.2, dest="minimum")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="gpulint-bench-") as scratch:
        project = Path(scratch)
        (project / "pyproject.toml").write_text(f"[tool.gpulint]\nnum-workers = {args.num_workers}\n")
        script = project / FIXTURE.name
        shutil.copy(FIXTURE, script)
        report = project / "report.json"
        command = [
            sys.executable, "-m", "gpulint", "verify", str(script), "--select", "GPU101,GPU102",
            "--steps", str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads),
            "--no-diff", "--json", str(report), "--", "--size", "tiny",
        ]
        completed = subprocess.run(command, cwd=project)
        if not report.exists():
            print(f"bench: gpulint verify wrote no report (exit {completed.returncode})", file=sys.stderr)
            return 1
        result = json.loads(report.read_text())["scripts"][0]
    comparison = result["comparison"] or {}
    speedup = comparison.get("speedup")
    loss_ok = bool(comparison.get("loss", {}) and comparison["loss"]["passed"])
    print(f"bench: DataLoader rewrite with {args.num_workers} workers on {os.cpu_count()} CPUs: "
          f"speedup {speedup if speedup is None else f'{speedup:.2f}x'} (required > {args.minimum}), "
          f"loss check {'PASS' if loss_ok else 'FAIL'}")
    if speedup is None or speedup <= args.minimum or not loss_ok:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
