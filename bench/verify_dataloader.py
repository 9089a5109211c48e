"""Benchmark, not a test: does the DataLoader rewrite (GPU101 + GPU102) speed up the image fixture on CPU?

    .venv/bin/python bench/verify_dataloader.py [--steps 60] [--warmup 10] [--repeats 3] [--num-workers N] [--min 1.2]

Runs `gpulint verify --select GPU101,GPU102` on fixtures/scripts/image_classifier.py (--size tiny)
in a scratch project, so the rewrite is exactly what GPU102 writes (num_workers=4, or
--num-workers N through the project's `num-workers` setting). Worker processes overlap the
per-item augmentation with the training step, so the step gets faster only when a core is
free: on a machine whose cores are busy with other work the number drops. Prints the verify
report and exits 1 when the lower bound of the speedup's 95% interval is below --min or the
loss check fails.
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
    parser.add_argument("--num-workers", type=int, default=None, help="default: GPU102's own (4)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads in the training process")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved timed runs of each version")
    parser.add_argument("--min", type=float, default=1.2, dest="minimum")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="gpulint-bench-") as scratch:
        project = Path(scratch)
        settings = "" if args.num_workers is None else f"num-workers = {args.num_workers}\n"
        (project / "pyproject.toml").write_text("[tool.gpulint]\n" + settings)
        script = project / FIXTURE.name
        shutil.copy(FIXTURE, script)
        report = project / "report.json"
        command = [
            sys.executable, "-m", "gpulint", "verify", str(script), "--select", "GPU101,GPU102",
            "--steps", str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads),
            "--repeats", str(args.repeats),
            "--no-diff", "--json", str(report), "--", "--size", "tiny",
        ]
        completed = subprocess.run(command, cwd=project)
        if not report.exists():
            print(f"bench: gpulint verify wrote no report (exit {completed.returncode})", file=sys.stderr)
            return 1
        result = json.loads(report.read_text())["scripts"][0]
    comparison = result["comparison"] or {}
    speed = comparison.get("speedup") or {}
    loss_ok = bool(comparison.get("loss", {}) and comparison["loss"]["passed"])
    workers = 4 if args.num_workers is None else args.num_workers
    shown = (f"{speed['estimate']:.2f}x (95% CI {speed['ci_low']:.2f}-{speed['ci_high']:.2f}x, "
             f"{speed['run_pairs']} run pairs)" if speed else "not measured")
    print(f"bench: DataLoader rewrite with {workers} workers on {os.cpu_count()} CPUs: speedup {shown} "
          f"(lower bound required > {args.minimum}), loss check {'PASS' if loss_ok else 'FAIL'}")
    if not speed or speed["ci_low"] <= args.minimum or not loss_ok:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
