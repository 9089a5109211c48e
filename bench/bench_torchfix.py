"""Benchmark: gpulint check (cold and warm cache) against TorchFix 0.7.0 on the same files.

A script, not a test. Run from the repository root with the project's venv:

    .venv/bin/python bench/bench_torchfix.py            # about 5 minutes on 2 busy cores
    .venv/bin/python bench/bench_torchfix.py --runs 5 --sample 120

What it does, all offline except the one `pip install torchfix==0.7.0` into its own venv:

1. Corpus: a fixed random sample (seeded) of the installed torch package's Python sources
   plus every fixture script under fixtures/, copied into bench/.work/corpus/1x. Copies of
   it make the 4x and 16x corpora for the scaling run.
2. TorchFix: a separate venv in bench/.work/torchfix-venv with `pip install
   torchfix==0.7.0` (its dependencies are flake8, PyYAML and libcst<1.6; no torch). The
   script checks that no torch got installed there.
3. Times, median of --runs runs each: `gpulint check` cold (empty cache), `gpulint check`
   warm (cache filled by the previous run), and `torchfix --select ALL`. All use their
   default worker count (the machine's cores). Output goes to /dev/null.
4. Scaling: gpulint cold on 1x, 4x and 16x the corpus, one run each, with the peak
   resident memory (ru_maxrss of the process tree, from wait4) next to the peak for the
   corpus's largest file alone.

The load average is printed before and after each section: on a shared machine the
numbers are only as good as the quiet they were measured in.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / ".work"
TORCHFIX_VERSION = "0.7.0"


@dataclass
class Run:
    seconds: float
    max_rss_mb: float
    returncode: int
    stderr: str


def run_timed(cmd: Sequence[str], cwd: Path = ROOT, env: Optional[dict] = None) -> Run:
    """Wall time and peak RSS (largest process of the tree that was waited for) of one command."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    return Run(seconds, usage.ru_maxrss / 1024.0, proc.returncode, err.decode("utf-8", "replace"))


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def torch_sources() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        sys.exit("bench: torch is not installed in this interpreter; run with the project's .venv")
    return Path(spec.origin).parent


def build_corpus(sample: int, seed: int) -> tuple[Path, list[Path]]:
    """The 1x corpus: `sample` torch sources and the fixtures; returns (dir, files)."""
    base = WORK / "corpus" / "1x"
    if base.exists():
        shutil.rmtree(base)
    torch_dir = torch_sources()
    candidates = sorted(p for p in torch_dir.rglob("*.py") if p.is_file())
    chosen = sorted(random.Random(seed).sample(candidates, min(sample, len(candidates))))
    files = []
    for src in chosen:
        dst = base / "torch" / src.relative_to(torch_dir)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        files.append(dst)
    for src in sorted((ROOT / "fixtures").rglob("*.py")):
        dst = base / "fixtures" / src.relative_to(ROOT / "fixtures")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        files.append(dst)
    return base, files


def scaled_corpus(base: Path, factor: int) -> Path:
    target = WORK / "corpus" / f"{factor}x"
    if target.exists():
        shutil.rmtree(target)
    for i in range(factor):
        shutil.copytree(base, target / f"copy{i:02d}")
    return target


def torchfix_venv() -> Path:
    venv = WORK / "torchfix-venv"
    exe = venv / "bin" / "torchfix"
    if not exe.exists():
        print(f"bench: creating {venv} with torchfix=={TORCHFIX_VERSION} ...", flush=True)
        base_python = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"torchfix=={TORCHFIX_VERSION}"],
                       check=True)
    find_torch = "import importlib.util as u; print(u.find_spec('torch'))"
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", find_torch],
                           capture_output=True, text=True, check=True)
    if probe.stdout.strip() != "None":
        sys.exit(f"bench: torch got installed into {venv}; TorchFix must not pull torch (remove the venv)")
    return exe


def versions(torchfix_exe: Path) -> dict[str, str]:
    import importlib.metadata

    import gpulint

    out = {"python": platform.python_version(), "platform": platform.platform()}
    out["gpulint"] = gpulint.__version__
    out["libcst (gpulint)"] = importlib.metadata.version("libcst")
    probe = subprocess.run(
        [str(torchfix_exe.parent / "python"), "-c",
         "import importlib.metadata as m; print(m.version('torchfix'), m.version('libcst'), m.version('flake8'))"],
        capture_output=True, text=True, check=True)
    tf, cst, flake8 = probe.stdout.split()
    out["torchfix"], out["libcst (torchfix)"], out["flake8 (torchfix)"] = tf, cst, flake8
    return out


def gpulint_cmd(paths: Sequence[Path], cache_dir: Path) -> list[str]:
    return [sys.executable, "-m", "gpulint", "check", "--exit-zero", "--cache-dir", str(cache_dir), *map(str, paths)]


def median_runs(label: str, cmd: Sequence[str], runs: int, before=None) -> list[Run]:  # noqa: ANN001
    results = []
    for i in range(runs):
        if before is not None:
            before()
        result = run_timed(cmd)
        if result.returncode not in (0, 1):
            sys.exit(f"bench: {label} failed (exit {result.returncode}):\n{result.stderr[-2000:]}")
        results.append(result)
        print(f"  {label:<22} run {i + 1}/{runs}: {result.seconds:8.3f} s  peak {result.max_rss_mb:7.1f} MB",
              flush=True)
    return results


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample", type=int, default=80, help="torch source files in the corpus (default 80)")
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement; the median is reported")
    parser.add_argument("--torchfix-runs", type=int, default=None, help="runs of TorchFix (default: --runs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scales", default="1,4,16", help="corpus copies for the scaling run")
    args = parser.parse_args(argv)
    tf_runs = args.torchfix_runs or args.runs

    WORK.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc)
    print(f"bench: {started:%Y-%m-%d %H:%M} UTC, {load()}", flush=True)
    corpus, files = build_corpus(args.sample, args.seed)
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    size = sum(p.stat().st_size for p in files)
    largest = max(files, key=lambda p: p.stat().st_size)
    print(f"bench: corpus {len(files)} files, {lines} lines, {size / 1e6:.2f} MB; "
          f"largest {largest.relative_to(corpus)} ({largest.stat().st_size / 1e3:.0f} kB)", flush=True)
    torchfix = torchfix_venv()
    info = versions(torchfix)

    cache = WORK / "cache"

    def clear_cache() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    print(f"bench: timing ({args.runs} runs each, TorchFix {tf_runs}); {load()}", flush=True)
    cold = median_runs("gpulint cold", gpulint_cmd([corpus], cache), args.runs, before=clear_cache)
    median_runs("(fill cache)", gpulint_cmd([corpus], cache), 1, before=clear_cache)
    warm = median_runs("gpulint warm", gpulint_cmd([corpus], cache), args.runs)
    tf = median_runs("torchfix --select ALL", [str(torchfix), "--select", "ALL", str(corpus)], tf_runs)
    if "Finished checking" not in tf[-1].stderr:
        print(f"bench: warning: TorchFix did not report finishing:\n{tf[-1].stderr[-500:]}")
    after_timing = load()
    print(f"bench: {after_timing}", flush=True)

    med = {name: statistics.median(r.seconds for r in runs) for name, runs in
           (("cold", cold), ("warm", warm), ("torchfix", tf))}

    print(f"bench: scaling (gpulint cold, 1 run each); {load()}", flush=True)
    scaling = []
    alone = run_timed(gpulint_cmd([largest], WORK / "cache-largest") + ["--no-cache"])
    for factor in [int(x) for x in args.scales.split(",")]:
        target = corpus if factor == 1 else scaled_corpus(corpus, factor)
        result = run_timed(gpulint_cmd([target], cache) + ["--no-cache"])
        if result.returncode not in (0, 1):
            sys.exit(f"bench: scaling {factor}x failed:\n{result.stderr[-2000:]}")
        scaling.append((factor, len(files) * factor, result))
        print(f"  {factor:>3}x {len(files) * factor:>6} files: {result.seconds:8.3f} s  "
              f"peak {result.max_rss_mb:7.1f} MB", flush=True)
    after_scaling = load()
    print(f"bench: {after_scaling}", flush=True)

    base_seconds = scaling[0][2].seconds
    out = [
        f"## Benchmark run {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {info['platform']}, Python {info['python']}",
        f"- versions: gpulint {info['gpulint']} (libcst {info['libcst (gpulint)']}), TorchFix {info['torchfix']} "
        f"(libcst {info['libcst (torchfix)']}, flake8 {info['flake8 (torchfix)']})",
        f"- corpus: {len(files)} files, {lines} lines, {size / 1e6:.2f} MB ({args.sample} files sampled from the "
        f"installed torch package with seed {args.seed}, plus fixtures/)",
        f"- load: {after_timing} after the timing runs, {after_scaling} after the scaling runs",
        "",
        "| command | median of runs (s) | runs (s) | TorchFix / this |",
        "|---|---:|---|---:|",
        f"| gpulint check, cold (empty cache) | {med['cold']:.3f} | {', '.join(f'{r.seconds:.2f}' for r in cold)} "
        f"| {med['torchfix'] / med['cold']:.1f}x |",
        f"| gpulint check, warm (cache) | {med['warm']:.3f} | {', '.join(f'{r.seconds:.2f}' for r in warm)} "
        f"| {med['torchfix'] / med['warm']:.1f}x |",
        f"| torchfix --select ALL | {med['torchfix']:.3f} | {', '.join(f'{r.seconds:.2f}' for r in tf)} | 1.0x |",
        "",
        "| corpus | files | gpulint cold (s) | time / 1x time | peak RSS (MB) |",
        "|---|---:|---:|---:|---:|",
        f"| largest file alone | 1 | {alone.seconds:.3f} | | {alone.max_rss_mb:.1f} |",
    ]
    for factor, count, result in scaling:
        out.append(f"| {factor}x | {count} | {result.seconds:.3f} | {result.seconds / base_seconds:.2f} "
                   f"| {result.max_rss_mb:.1f} |")
    text = "\n".join(out) + "\n"
    (WORK / "results.md").write_text(text, encoding="utf-8")
    print()
    print(text)
    print(f"bench: also written to {WORK / 'results.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
