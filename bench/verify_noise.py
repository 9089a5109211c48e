"""Benchmark, not a test: the noise floor of `gpulint verify` on the shipped examples, and the verdicts it changes.

    .venv/bin/python bench/verify_noise.py [--steps 60] [--threads N] [--noise-runs 1] [--example NAME ...]
    .venv/bin/python bench/verify_noise.py --damage [--steps 60] [--threads N]

For each example (examples/*.py and the notebook) it runs `gpulint verify --noise-floor always
--repeats 0` (a checked run of the original and of the rewrite, and --noise-runs runs of the
original with its initial weights nudged by one ulp), then prints:

- the envelope (how far the nudged original drifts from the original) at steps 10, 20, ... beside
  the rewrite's own deviation (a running maximum, like the envelope);
- side by side, the verdict of 02ed7e3's loss check (a fixed per-step tolerance, relative to the
  step's own loss, no noise floor) recomputed from the same runs, and the verdict of this
  version, with its reason.

The old column is 02ed7e3's loss check only: the checks it did not have (exceptions counted,
float16 range, coverage per edit) would not have changed an old PASS into anything else.

`--damage` asks how much the noise floor lets through: on the small ResNet (chaotic: per-batch
losses, 60 steps) and the residual regression MLP (smooth), it runs the original, three noise-floor
runs (the session's one, and the two it adds before a FAIL within 3x of its allowance), the
rewrite as gpulint writes it, and the rewrite with its learning rate damaged by 5 % and 10 %,
through the harness directly, and applies this version's loss check to each as the session does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {
    "shapes_classifier": ["examples/shapes_classifier.py", "--", "--epochs", "1"],
    "char_transformer": ["examples/char_transformer.py"],
    "deep_residual_mlp": ["examples/deep_residual_mlp.py"],
    "churn": ["examples/churn.ipynb"],
}


def old_loss_check(original: list[float], rewritten: list[float], tolerance: dict[str, Any]) -> tuple[bool, str]:
    """02ed7e3's check (gpulint/verify/compare.py there): relative to the step's own loss, fixed limits."""
    steps = min(len(original), len(rewritten))

    def relative(a: float, b: float) -> float:
        if a == b:
            return 0.0
        if not (math.isfinite(a) and math.isfinite(b)):
            return math.inf
        return abs(a - b) / max(abs(a), abs(b), 1e-12)

    if steps == 0:
        return False, "no steps to compare"
    deviations = [relative(original[i], rewritten[i]) for i in range(steps)]
    worst = max(range(steps), key=lambda i: deviations[i])
    if any(not math.isfinite(v) for v in original[:steps] + rewritten[:steps]):
        return False, "a loss is NaN"
    if deviations[worst] > tolerance["per_step"]:
        return False, f"{deviations[worst]:.2e} at step {worst + 1} > {tolerance['per_step']:g}"
    if tolerance.get("mean_last") is not None:
        n = min(tolerance["last_n"], steps)
        mean = relative(statistics.fmean(original[steps - n:steps]), statistics.fmean(rewritten[steps - n:steps]))
        if mean > tolerance["mean_last"]:
            return False, f"last-{n} mean {mean:.2%} > {tolerance['mean_last']:.0%}"
    return True, f"max {deviations[worst]:.2e} <= {tolerance['per_step']:g}"


def running_max(values: list[Optional[float]]) -> list[float]:
    out, worst = [], 0.0
    for value in values:
        if value is not None and math.isfinite(value):
            worst = max(worst, value)
        out.append(worst)
    return out


def verify(name: str, args: list[str], steps: int, threads: Optional[int], noise_runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="verify-noise-") as folder:
        report = Path(folder) / "report.json"
        target, script_args = args[0], args[1:]
        command = [sys.executable, "-m", "gpulint", "verify", target, "--steps", str(steps), "--repeats", "0",
                   "--noise-floor", "always", "--noise-runs", str(noise_runs), "--no-diff", "--json", str(report)]
        if threads:
            command += ["--threads", str(threads)]
        started = time.monotonic()
        completed = subprocess.run(command + script_args, cwd=ROOT, capture_output=True, text=True)
        if not report.exists():
            raise SystemExit(f"{name}: verify wrote no report (exit {completed.returncode}):\n"
                             f"{completed.stderr[-2000:]}")
        data = json.loads(report.read_text())
        data["wall_s"] = time.monotonic() - started
        data["exit"] = completed.returncode
        return data


def show(name: str, data: dict[str, Any]) -> dict[str, Any]:
    script = data["scripts"][0]
    original = script["runs"]["original"]["losses"]
    rewritten = script["runs"]["rewritten"]["losses"]
    loss = (script["comparison"] or {}).get("loss") or {}
    floor = loss.get("noise_floor") or {}
    envelope = floor.get("envelope") or []
    tolerance = script["tolerance"]
    scale = max((abs(v) for v in original[:10] if math.isfinite(v)), default=0.0)
    deviation = running_max([abs(a - b) / max(abs(a), abs(b), 0.1 * scale, 1e-12) if a != b else 0.0
                             for a, b in zip(original, rewritten)])
    old_ok, old_why = old_loss_check(original, rewritten, tolerance)
    print(f"\n== {name}: {', '.join(script['rules_applied'])} ({tolerance['name']}; {len(original)} steps; "
          f"{floor.get('nudge', 'no noise floor')}; {data['wall_s']:.0f} s)")
    print("   step   rewrite's deviation (running max)   noise envelope   allowed (tolerance + 3 x envelope)")
    for step in list(range(10, len(original) + 1, 10)) or [len(original)]:
        if step > len(deviation):
            break
        env = envelope[min(step, len(envelope)) - 1] if envelope else None
        allowed = ("-" if env is None or tolerance.get("bit_exact") else
                   f"{tolerance['per_step'] + (floor.get('multiple') or 3) * env:.2e}")
        print(f"   {step:4d}   {deviation[step - 1]:33.2e}   {env if env is not None else float('nan'):14.2e}   "
              f"{allowed}")
    new = script["verdict"]
    print(f"   02ed7e3's loss check: {'PASS' if old_ok else 'FAIL'} ({old_why})")
    print(f"   this version: {new}" + (f": {script['verdict_reason']}" if script["verdict_reason"] else ""))
    return {"example": name, "rules": ",".join(script["rules_applied"]), "steps": len(original),
            "envelope": envelope[-1] if envelope else None, "deviation": deviation[-1] if deviation else None,
            "old": "PASS" if old_ok else "FAIL", "new": new}


DAMAGE = {  # example -> (script arguments, the learning rate's default as written, noise bits of what runs)
    "shapes_classifier": (("--epochs", "1"), "default=3e-3", 7),
    "deep_residual_mlp": ((), "default=0.005", 7),
}


def damage(steps: int, threads: Optional[int]) -> None:
    from gpulint.config import CliOverrides, SettingsResolver
    from gpulint.core.verification import MIXED_PRECISION
    from gpulint.verify.compare import NOISE_RECHECK_RUNS, check_losses, noise_floor, wants_more_noise
    from gpulint.verify.process import RunSpec, run_harness
    from gpulint.verify.project import rewrite_file

    print("\n| example | rewrite | largest deviation | closest to (or first beyond) its allowance | loss check |")
    print("|---|---|---:|---:|---|")
    for name, (args, default, bits) in DAMAGE.items():
        script = ROOT / "examples" / f"{name}.py"
        rewritten = rewrite_file(script, SettingsResolver(CliOverrides(lint_tests=True)).for_path(script))
        value = float(default.split("=")[1])
        variants: dict[str, tuple[str, tuple[str, ...]]] = {"original": (rewritten.source.text, ())}
        for k in range(1, NOISE_RECHECK_RUNS + 1):  # the session's 1 run, and the runs it adds near a FAIL
            variants[f"noise {k}"] = (rewritten.source.text, ("--perturb", str(k), "--perturb-bits", str(bits)))
        variants["as written"] = (rewritten.new_text, ())
        for factor in (0.95, 0.9):
            variants[f"lr x {factor}"] = (rewritten.new_text.replace(default, f"default={value * factor!r}"), ())
        losses = {}
        with tempfile.TemporaryDirectory(prefix="verify-damage-") as folder:
            for label, (text, extra) in variants.items():
                spec = RunSpec(script=script, folder=Path(folder) / label.replace(" ", "_"), steps=steps,
                               device="cpu", warmup=2, threads=threads, script_args=args, roots=(ROOT,),
                               overrides={script: text.encode()}, harness_args=("--float16", "bfloat16", *extra))
                losses[label] = run_harness(spec).losses
        tolerance = dataclasses.replace(MIXED_PRECISION, noise_bits=bits)
        noise = [losses[f"noise {k}"] for k in range(1, NOISE_RECHECK_RUNS + 1)]
        for label in ("as written", "lr x 0.95", "lr x 0.9"):
            floor = noise_floor(losses["original"], noise[:1], tolerance.noise_precision, tolerance.last_n)
            check = check_losses(losses["original"], losses[label], tolerance, noise=floor)
            runs = "1 run"
            if wants_more_noise(check):  # as the session does: 3 runs before a FAIL within 3x of its allowance
                floor = noise_floor(losses["original"], noise, tolerance.noise_precision, tolerance.last_n)
                check = check_losses(losses["original"], losses[label], tolerance, noise=floor)
                runs = f"{NOISE_RECHECK_RUNS} runs"
            print(f"| {name} | {label} | {check.max_step_deviation:.2e} (step {check.largest_step}) | "
                  f"{check.deviation_at_worst:.2e} of {check.bound_at_worst:.2e} (step {check.worst_step}) | "
                  f"{'matches' if check.passed else 'DIFFERS'} (noise floor of {runs}) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--noise-runs", type=int, default=1)
    parser.add_argument("--example", action="append", choices=sorted(EXAMPLES), help="default: all")
    parser.add_argument("--damage", action="store_true", help="how much damage the noise floor lets through")
    options = parser.parse_args()
    if options.damage:
        damage(options.steps, options.threads)
        return
    names = options.example or list(EXAMPLES)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"verify noise floor on {len(names)} examples: {options.steps} steps, threads "
          f"{options.threads or 'default'}, {options.noise_runs} perturbed run(s); load average {load:.1f} on "
          f"{os.cpu_count()} CPUs")
    rows = [show(name, verify(name, EXAMPLES[name], options.steps, options.threads, options.noise_runs))
            for name in names]
    print("\n| example | rules | steps | rewrite's max deviation | final envelope | 02ed7e3 | now |")
    print("|---|---|---:|---:|---:|---|---|")
    for row in rows:
        envelope = f"{row['envelope']:.2e}" if row["envelope"] is not None else "-"
        deviation = f"{row['deviation']:.2e}" if row["deviation"] is not None else "-"
        print(f"| {row['example']} | {row['rules']} | {row['steps']} | {deviation} | {envelope} | {row['old']} | "
              f"{row['new']} |")


if __name__ == "__main__":
    main()
