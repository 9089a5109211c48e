"""Run `gpulint verify` on every fixture at --size gpu on CUDA; write a JSON and a markdown report.

    bash scripts/gpu_verify.sh                       # on a CUDA machine: docs/verification.{json,md}
    python scripts/gpu_verify.py --size tiny --device cpu --out-dir /tmp/dry   # dry run on a CPU

Each check isolates one family of rewrites with --select, so its number answers one question,
and compares it with the target from the verify issue (H200). Every verdict must be PASS, and a
speed target is met only when the lower bound of the speedup's 95% interval reaches it. The
DDP fixture runs through torchrun with 2 processes when the machine has 2 GPUs, else 1 (on the
CPU dry run: 2 processes with gloo).

Then every script in fixtures/runtime is fixed with `gpulint fix --unsafe-fixes` in a scratch
copy and run on the device: it must exit 0 and its loss must go down. On the CPU the test suite
does this (tests/rules/test_rewrites_train.py); here it is the same rewrites on CUDA, where
autocast refuses binary_cross_entropy and pinning CUDA tensors raises.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "fixtures" / "scripts"
RUNTIME = ROOT / "fixtures" / "runtime"
# scripts that take arguments: one tuple per run ({dir}: the scratch copy)
RUNTIME_RUNS = {"epochs_with_checkpoint.py": (("{dir}/checkpoint.pt", "2"), ("{dir}/checkpoint.pt", "4"))}


@dataclass(frozen=True)
class Check:
    name: str
    script: str
    select: str
    args: tuple[str, ...]
    steps: int
    warmup: int
    min_speedup: Optional[float] = None
    max_memory_ratio: Optional[float] = None
    nproc: int = 1

    def target(self) -> str:
        parts = []
        if self.min_speedup is not None:
            parts.append(f"speedup >= {self.min_speedup:g}x" if self.min_speedup >= 1
                         else f"step time <= {1 / self.min_speedup - 1:.0%} more")
        if self.max_memory_ratio is not None:
            parts.append(f">= {1 - self.max_memory_ratio:.0%} less peak memory")
        return ", ".join(parts + ["loss verdict PASS"])


CHECKS = (
    Check("mixed precision", "transformer_lm.py", "GPU001,GPU002,GPU003", (), 40, 10, min_speedup=2.0),
    Check("DataLoader workers + pinned memory", "image_classifier.py", "GPU101,GPU102", (), 30, 5, min_speedup=3.0),
    Check("fused AdamW (optimizer-heavy)", "transformer_lm.py", "GPU201", ("--config", "optimizer-heavy"), 40, 10,
          min_speedup=1.1),
    Check("activation checkpointing", "deep_mlp.py", "GPU301,GPU302", (), 25, 5, min_speedup=1 / 1.35,
          max_memory_ratio=0.60),
)


def ddp_check(device: str) -> Check:
    """2 processes when the machine has 2 GPUs (or on the CPU, with gloo), else 1."""
    gpus = 0
    if device != "cpu":
        probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.device_count())"],
                               capture_output=True, text=True)
        gpus = int(probe.stdout.strip() or 0) if probe.returncode == 0 else 0
    nproc = 2 if device == "cpu" or gpus >= 2 else 1
    return Check(f"DDP through torchrun, {nproc} process{'es' if nproc > 1 else ''}: mixed precision + fused AdamW",
                 "ddp_lm.py", "GPU001,GPU201", (), 40, 10, nproc=nproc)


def run_check(check: Check, size: str, device: str, work: Path, timeout: int, repeats: int) -> dict[str, Any]:
    report = work / f"{check.script.removesuffix('.py')}-{check.select.replace(',', '_')}-{check.nproc}.json"
    command = [
        sys.executable, "-m", "gpulint", "verify", str(SCRIPTS / check.script), "--select", check.select,
        "--steps", str(check.steps), "--warmup", str(check.warmup), "--device", device, "--no-diff",
        "--repeats", str(repeats), "--nproc-per-node", str(check.nproc),
        "--timeout", str(timeout), "--json", str(report), "--", "--size", size, *check.args,
    ]
    print(f"== {check.name}: {' '.join(command[2:])}", file=sys.stderr, flush=True)
    started = time.monotonic()
    completed = subprocess.run(command, cwd=ROOT)
    data = json.loads(report.read_text()) if report.exists() else None
    return {"check": check.name, "target": check.target(), "exit_code": completed.returncode,
            "wall_s": round(time.monotonic() - started, 1), "report": data}


def judge(check: Check, outcome: dict[str, Any]) -> tuple[bool, str]:
    data = outcome["report"]
    if not data or not data["scripts"]:
        return False, f"no report (exit {outcome['exit_code']})"
    script = data["scripts"][0]
    comparison = script.get("comparison")
    if not comparison:
        return False, "; ".join(script.get("reasons") or ["no comparison"])
    problems = []
    if not (comparison.get("loss") or {}).get("passed"):
        problems.append("loss check failed")
    if script.get("verdict") != "PASS":
        problems.append(f"verdict {script.get('verdict')}: " + "; ".join(script.get("reasons", []) +
                                                                       script.get("inconclusive", [])))
    speedup = comparison.get("speedup") or {}
    low = speedup.get("ci_low")
    if check.min_speedup is not None and (low is None or low < check.min_speedup):
        problems.append("speed below target (95% interval's lower bound)")
    ratio = (comparison.get("memory") or {}).get("ratio")
    if check.max_memory_ratio is not None and (ratio is None or ratio > check.max_memory_ratio):
        problems.append("memory above target")
    return not problems, "; ".join(problems) or "met"


def _speed(speed: dict[str, Any]) -> str:
    if not speed:
        return "-"
    return f"{speed['estimate']:.2f}x ({speed['ci_low']:.2f}-{speed['ci_high']:.2f})"


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value * 1000:.1f} ms"


def _gib(value: Optional[int]) -> str:
    if value is None:
        return "-"
    return f"{value / (1 << 30):.2f} GiB" if value >= 1 << 30 else f"{value / (1 << 20):.1f} MiB"


def markdown(outcomes: list[dict[str, Any]], size: str, device: str) -> str:
    env: dict[str, Any] = {}
    for outcome in outcomes:
        if outcome["report"] and outcome["report"].get("environment"):
            env = outcome["report"]["environment"]
            break
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    gpus: list[str] = []
    for outcome in outcomes:
        machine = (outcome["report"] or {}).get("machine") or {}
        if machine.get("cuda_devices"):
            gpus = machine["cuda_devices"]
            break
    lines = [
        "# gpulint verify on a GPU",
        "",
        f"- date: {today}",
        f"- device: {env.get('device_name', '?')} ({env.get('device', device)}), CUDA {env.get('cuda') or '-'}, "
        f"torch {env.get('torch', '?')}, Python {env.get('python', '?')}",
        f"- GPUs: {', '.join(gpus) or '-'}",
        f"- command: `bash scripts/gpu_verify.sh` (fixtures at `--size {size}`; each check applies only the rules "
        "it names; loss, memory and rules exercised from a checked run of each version with deterministic "
        "algorithms; speed from interleaved timed runs with the scripts' own settings, median and 95% interval)",
        "",
        "| check | script | rules applied | steps | median step original | rewritten | speedup (95% CI) "
        "| memory metric | original | rewritten | ratio | loss (max step deviation, limit) | verdict | target | met |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for outcome in outcomes:
        check: Check = outcome["_check"]
        script = (outcome["report"] or {}).get("scripts", [{}])[0] if outcome["report"] else {}
        c = script.get("comparison") or {}
        memory = c.get("memory") or {}
        loss = c.get("loss") or {}
        times = (c.get("timing") or {}).get("median_step_time_s") or {}
        speed = c.get("speedup") or {}
        loss_text = "-" if not loss else (f"{'PASS' if loss.get('passed') else 'FAIL'} "
                                          f"({loss.get('max_step_deviation') or 0:.1e}, "
                                          f"{loss['tolerance']['per_step']:g})")
        ratio = memory.get("ratio")
        met, why = outcome["met"], outcome["why"]
        lines.append(
            f"| {check.name} | {check.script} {' '.join(check.args)} "
            f"| {', '.join(script.get('rules_applied', [])) or '-'} "
            f"| {check.steps} ({check.warmup} warm-up) | {_ms(times.get('original'))} | {_ms(times.get('rewritten'))} "
            f"| {_speed(speed)} | {memory.get('metric') or '-'} "
            f"| {_gib(memory.get('original_bytes'))} | {_gib(memory.get('rewritten_bytes'))} "
            f"| {'-' if ratio is None else f'{ratio:.2f}'} | {loss_text} | {script.get('verdict', '-')} "
            f"| {check.target()} | {'yes' if met else 'no: ' + why} |"
        )
    failures = [o for o in outcomes if o["report"] and o["report"]["scripts"]
                and (o["report"]["scripts"][0]["reasons"] or o["report"]["scripts"][0].get("inconclusive"))]
    if failures:
        lines += ["", "## Reasons reported by gpulint verify", ""]
        for outcome in failures:
            script = outcome["report"]["scripts"][0]
            for reason in script["reasons"] + script.get("inconclusive", []):
                lines.append(f"- {outcome['check']}: {reason}")
    return "\n".join(lines) + "\n"


def runtime_checks(device: str, work: Path, timeout: int) -> list[dict[str, Any]]:
    """Fix each fixtures/runtime script (all rules, unsafe fixes too) and run it: it must train."""
    results = []
    scratch = work / "runtime"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(RUNTIME, scratch)
    env = dict(os.environ, PYTHONHASHSEED="0")
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    for entry in sorted(scratch.iterdir()):
        script = entry / "train.py" if entry.is_dir() else entry
        if entry.suffix != ".py" and not entry.is_dir():
            continue
        fixed = subprocess.run([sys.executable, "-m", "gpulint", "fix", "--unsafe-fixes", "--isolated", "--no-cache",
                                str(entry)], cwd=ROOT, capture_output=True, text=True)
        outcome: dict[str, Any] = {"script": entry.name, "fix_exit_code": fixed.returncode}
        print(f"== runtime: {entry.name} (fix exit {fixed.returncode})", file=sys.stderr, flush=True)
        losses: list[float] = []
        try:
            for args in RUNTIME_RUNS.get(entry.name, ((),)):  # a resumed script runs twice on one checkpoint
                ran = subprocess.run([sys.executable, str(script), *(a.format(dir=scratch) for a in args)],
                                     cwd=script.parent, capture_output=True, text=True, env=env, timeout=timeout)
                outcome["exit_code"], outcome["stderr_tail"] = ran.returncode, ran.stderr[-2000:]
                if ran.returncode != 0:
                    losses = []
                    break
                losses += json.loads(ran.stdout.strip().splitlines()[-1])
        except (subprocess.TimeoutExpired, ValueError, IndexError) as exc:
            losses, outcome["exit_code"], outcome["stderr_tail"] = [], None, f"{type(exc).__name__}: {exc}"
        first = sum(losses[:5]) / 5 if len(losses) >= 10 else None
        last = sum(losses[-5:]) / 5 if len(losses) >= 10 else None
        outcome["first_loss"], outcome["last_loss"] = first, last
        outcome["trained"] = (fixed.returncode in (0, 1) and outcome["exit_code"] == 0 and first is not None
                              and last is not None and last < 0.8 * first)
        results.append(outcome)
    return results


def runtime_markdown(results: list[dict[str, Any]]) -> str:
    lines = ["", "## The rewrites train (fixtures/runtime, `gpulint fix --unsafe-fixes`, then run)", "",
             "| script | fix exit | run exit | mean loss, first 5 steps | last 5 steps | trained |",
             "|---|---|---|---|---|---|"]
    for r in results:
        first = "-" if r["first_loss"] is None else f"{r['first_loss']:.3f}"
        last = "-" if r["last_loss"] is None else f"{r['last_loss']:.3f}"
        lines.append(f"| {r['script']} | {r['fix_exit_code']} | {r['exit_code']} | {first} | {last} "
                     f"| {'yes' if r['trained'] else 'NO'} |")
    failed = [r for r in results if not r["trained"]]
    for r in failed:
        lines += ["", f"{r['script']} stderr (tail):", "```", r["stderr_tail"].strip(), "```"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("gpu", "tiny"), default="gpu")
    parser.add_argument("--device", choices=("cuda", "cpu", "auto"), default="cuda")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "docs")
    parser.add_argument("--timeout", type=int, default=240, help="seconds per training run")
    parser.add_argument("--only", default=None, help="run only checks whose name contains this text")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each version per check")
    parser.add_argument("--no-runtime", action="store_true", help="skip the fixtures/runtime training runs")
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    work = args.out_dir / "verification-runs"
    work.mkdir(exist_ok=True)
    outcomes = []
    for check in (*CHECKS, ddp_check(args.device)):
        if args.only and args.only.lower() not in check.name.lower():
            continue
        outcome = run_check(check, args.size, args.device, work, args.timeout, args.repeats)
        outcome["met"], outcome["why"] = judge(check, outcome)
        outcome["_check"] = check
        outcomes.append(outcome)
    runtime = [] if args.no_runtime else runtime_checks(args.device, work, args.timeout)
    text = markdown(outcomes, args.size, args.device) + (runtime_markdown(runtime) if runtime else "")
    (args.out_dir / "verification.md").write_text(text, encoding="utf-8")
    combined = {"size": args.size, "device": args.device,
                "checks": [{k: v for k, v in o.items() if k != "_check"} for o in outcomes], "runtime": runtime}
    (args.out_dir / "verification.json").write_text(json.dumps(combined, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out_dir / 'verification.md'} and {args.out_dir / 'verification.json'}", file=sys.stderr)
    print((args.out_dir / "verification.md").read_text())
    for outcome in outcomes:
        print(f"{outcome['check']}: {'met' if outcome['met'] else 'NOT met: ' + outcome['why']} "
              f"({outcome['wall_s']} s)", file=sys.stderr)
    for result in runtime:
        print(f"runtime {result['script']}: {'trained' if result['trained'] else 'DID NOT TRAIN'}", file=sys.stderr)
    return 0 if all(o["met"] for o in outcomes) and all(r["trained"] for r in runtime) else 1


if __name__ == "__main__":
    sys.exit(main())
