"""Run `gpulint verify` on every fixture at --size gpu on CUDA; write a JSON and a markdown report.

    bash scripts/gpu_verify.sh                       # on a CUDA machine: docs/verification.{json,md}
    python scripts/gpu_verify.py --size tiny --device cpu --out-dir /tmp/dry   # dry run on a CPU

Each check isolates one family of rewrites with --select, so its number answers one question,
and compares it with the target from the verify issue (H200). Every loss verdict must pass.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "fixtures" / "scripts"


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


def run_check(check: Check, size: str, device: str, work: Path, timeout: int) -> dict[str, Any]:
    report = work / f"{check.script.removesuffix('.py')}-{check.select.replace(',', '_')}.json"
    command = [
        sys.executable, "-m", "gpulint", "verify", str(SCRIPTS / check.script), "--select", check.select,
        "--steps", str(check.steps), "--warmup", str(check.warmup), "--device", device, "--no-diff",
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
    speedup = comparison.get("speedup")
    if check.min_speedup is not None and (speedup is None or speedup < check.min_speedup):
        problems.append("speed below target")
    ratio = (comparison.get("memory") or {}).get("ratio")
    if check.max_memory_ratio is not None and (ratio is None or ratio > check.max_memory_ratio):
        problems.append("memory above target")
    return not problems, "; ".join(problems) or "met"


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
    lines = [
        "# gpulint verify on a GPU",
        "",
        f"- date: {today}",
        f"- device: {env.get('device_name', '?')} ({env.get('device', device)}), CUDA {env.get('cuda') or '-'}, "
        f"torch {env.get('torch', '?')}, Python {env.get('python', '?')}",
        f"- command: `bash scripts/gpu_verify.sh` (fixtures at `--size {size}`; each check applies only the rules "
        "it names; timing excludes the warm-up steps; deterministic algorithms on in both runs)",
        "",
        "| check | script | rules applied | steps | median step original | rewritten | speedup | memory metric "
        "| original | rewritten | ratio | loss (max step deviation, limit) | target | met |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for outcome in outcomes:
        check: Check = outcome["_check"]
        script = (outcome["report"] or {}).get("scripts", [{}])[0] if outcome["report"] else {}
        c = script.get("comparison") or {}
        memory = c.get("memory") or {}
        loss = c.get("loss") or {}
        times = c.get("median_step_time_s") or {}
        speedup = c.get("speedup")
        loss_text = "-" if not loss else (f"{'PASS' if loss.get('passed') else 'FAIL'} "
                                          f"({loss.get('max_step_deviation') or 0:.1e}, "
                                          f"{loss['tolerance']['per_step']:g})")
        ratio = memory.get("ratio")
        met, why = outcome["met"], outcome["why"]
        lines.append(
            f"| {check.name} | {check.script} {' '.join(check.args)} | {', '.join(script.get('rules_applied', [])) or '-'} "
            f"| {check.steps} ({check.warmup} warm-up) | {_ms(times.get('original'))} | {_ms(times.get('rewritten'))} "
            f"| {'-' if speedup is None else f'{speedup:.2f}x'} | {memory.get('metric') or '-'} "
            f"| {_gib(memory.get('original_bytes'))} | {_gib(memory.get('rewritten_bytes'))} "
            f"| {'-' if ratio is None else f'{ratio:.2f}'} | {loss_text} | {check.target()} "
            f"| {'yes' if met else 'no: ' + why} |"
        )
    failures = [o for o in outcomes if o["report"] and o["report"]["scripts"] and o["report"]["scripts"][0]["reasons"]]
    if failures:
        lines += ["", "## Reasons reported by gpulint verify", ""]
        for outcome in failures:
            for reason in outcome["report"]["scripts"][0]["reasons"]:
                lines.append(f"- {outcome['check']}: {reason}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("gpu", "tiny"), default="gpu")
    parser.add_argument("--device", choices=("cuda", "cpu", "auto"), default="cuda")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "docs")
    parser.add_argument("--timeout", type=int, default=240, help="seconds per training run")
    parser.add_argument("--only", default=None, help="run only checks whose name contains this text")
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    work = args.out_dir / "verification-runs"
    work.mkdir(exist_ok=True)
    outcomes = []
    for check in CHECKS:
        if args.only and args.only.lower() not in check.name.lower():
            continue
        outcome = run_check(check, args.size, args.device, work, args.timeout)
        outcome["met"], outcome["why"] = judge(check, outcome)
        outcome["_check"] = check
        outcomes.append(outcome)
    (args.out_dir / "verification.md").write_text(markdown(outcomes, args.size, args.device), encoding="utf-8")
    combined = {"size": args.size, "device": args.device,
                "checks": [{k: v for k, v in o.items() if k != "_check"} for o in outcomes]}
    (args.out_dir / "verification.json").write_text(json.dumps(combined, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out_dir / 'verification.md'} and {args.out_dir / 'verification.json'}", file=sys.stderr)
    print((args.out_dir / "verification.md").read_text())
    return 0 if all(o["met"] for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
