"""Benchmark: the CPU a cold `gpulint check` costs on training code, side by side with ruff and TorchFix.

A script, not a test. From the repository root, with the project's venv:

    git worktree add --detach /tmp/mainbase main      # "today": main's code, timed alongside
    GPULINT_CORPUS=/path/to/corpus .venv/bin/python bench/bench_cold.py --baseline /tmp/mainbase --runs 7
    .venv/bin/python bench/bench_cold.py --baseline /tmp/mainbase --jobs 1 --no-torchfix

The corpus is training-heavy: pytorch/examples, karpathy/nanoGPT and karpathy/minGPT at the
commits pinned in bench/precision/repos.toml (prepared by bench/precision/prepare.py under
GPULINT_CORPUS). Every command runs on the same files, one after the other within each round
and the rounds repeated (`--runs`), so machine load hits them alike:

- `gpulint check --no-cache --isolated --exit-zero` of this checkout (cold: no results cache, no
  project-facts cache), and of `--baseline`, another checkout, when given (its code on PYTHONPATH);
- the same with `--preview` (GPU301 included);
- `ruff check --select ALL --no-cache --exit-zero` (the ruff on PATH or in this venv);
- `torchfix --select ALL` from its own venv (bench/.work/torchfix-venv, made by bench_torchfix.py).

Each checkout's gpulint is byte-compiled first (`compileall`), as `pip install` leaves an installed
package: without it, a machine with PYTHONDONTWRITEBYTECODE set (this one) compiles gpulint's modules
again in every run, which no user pays.

`--startup` times what a user waits for before any linting: `gpulint --version`, and a warm
`gpulint check` (results and facts cached) of the same files, beside `ruff --version` and a warm
`ruff check`. Wall time is what matters there; both columns are printed.

For each command: the median CPU seconds (user + system of the process and every child it waited
for, from `wait4`) and wall seconds, and the ratio of CPU against this checkout's gpulint.
CPU time depends less on how busy the machine is than wall time, but not nothing: two processes
on the two hyperthreads of one core each run slower, so gpulint's two workers cost more CPU
than one worker doing the same work (`--jobs 1` measures the work alone). The load average is
printed with every round.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
TRAINING_REPOS = ("pytorch+examples", "karpathy+nanoGPT", "karpathy+minGPT")
TORCHFIX = ROOT / "bench" / ".work" / "torchfix-venv" / "bin" / "torchfix"


@dataclass
class Measure:
    label: str
    command: list[str]
    env: dict[str, str]
    cwd: Path = ROOT  # `python -m gpulint` imports from its working directory first: the checkout timed
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)

    def run(self) -> None:
        started = time.perf_counter()
        proc = subprocess.Popen(self.command, cwd=self.cwd, env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        self.wall.append(time.perf_counter() - started)
        self.cpu.append(usage.ru_utime + usage.ru_stime)
        proc.stderr.close()
        code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):
            raise SystemExit(f"bench: {self.label} exited {code}: {err.decode('utf-8', 'replace')[-2000:]}")


def imported_from(checkout: Path, env: dict[str, str]) -> Path:
    """The gpulint package `python -m gpulint` runs, from that checkout, with that environment."""
    probe = subprocess.run([sys.executable, "-c", "import gpulint; print(gpulint.__file__)"], cwd=checkout, env=env,
                           capture_output=True, text=True, check=True)
    return Path(probe.stdout.strip()).resolve().parent


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def python_files(paths: Sequence[Path]) -> int:
    return sum(1 for p in paths for _ in p.rglob("*.py"))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path,
                        default=Path(os.environ.get("GPULINT_CORPUS", "~/.cache/gpulint/corpus")))
    parser.add_argument("--repos", nargs="*", default=list(TRAINING_REPOS), help="corpus folders to lint")
    parser.add_argument("--runs", type=int, default=5, help="rounds; medians are reported")
    parser.add_argument("--baseline", type=Path, default=None, help="another gpulint checkout to time alongside")
    parser.add_argument("--no-torchfix", action="store_true", help="skip TorchFix (its venv is missing)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="gpulint's -j (default: its own, one worker per core); 1 measures the work alone")
    parser.add_argument("--startup", action="store_true",
                        help="time --version and a warm (cached) check instead of the cold check")
    args = parser.parse_args(argv)
    corpus = args.corpus.expanduser()
    paths = [corpus / r for r in args.repos]
    missing = [str(p) for p in paths if not p.is_dir()]
    if missing:
        sys.exit(f"bench: not in the corpus: {', '.join(missing)} (bench/precision/prepare.py fetches them)")
    targets = [str(p) for p in paths]
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    gpulint = [sys.executable, "-m", "gpulint", "check", "--no-cache", "--isolated", "--exit-zero"]
    if args.jobs is not None:
        gpulint += ["-j", str(args.jobs)]
    checkouts = [("this checkout", ROOT)]
    if args.baseline is not None:
        checkouts.append(("baseline", args.baseline.resolve()))
    measures = []
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    for name, checkout in checkouts:
        env = dict(base_env, PYTHONPATH=str(checkout))
        package = imported_from(checkout, env)
        if package != checkout / "gpulint":
            sys.exit(f"bench: the {name} run would import {package}, not {checkout / 'gpulint'}")
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True, stdout=subprocess.DEVNULL)
        if args.startup:
            measures += startup_measures(name, checkout, env, targets, args.jobs)
            continue
        measures += [Measure(f"gpulint check ({name})", gpulint + targets, env, checkout),
                     Measure(f"gpulint check --preview ({name})", gpulint + ["--preview"] + targets, env, checkout)]
    if args.startup:
        measures += ruff_startup_measures(ruff, targets, base_env)
        args.no_torchfix = True
    else:
        measures.append(Measure("ruff check --select ALL", [ruff, "check", "--select", "ALL", "--no-cache",
                                                             "--exit-zero", "--isolated", *targets], base_env))
    if not args.no_torchfix:
        if not TORCHFIX.exists():
            sys.exit(f"bench: {TORCHFIX} is missing: run bench/bench_torchfix.py once (it makes the venv), "
                     "or pass --no-torchfix")
        measures.append(Measure("torchfix --select ALL", [str(TORCHFIX), "--select", "ALL", *targets], base_env))
    versions = subprocess.run([ruff, "--version"], capture_output=True, text=True).stdout.strip()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"{started}; corpus: {', '.join(args.repos)} ({python_files(paths)} Python files); {versions}; "
          f"Python {sys.version.split()[0]}; {os.cpu_count()} CPUs; gpulint -j {args.jobs or 'default'}")
    print(f"before: {load()}")
    for round_ in range(args.runs):
        print(f"round {round_ + 1}/{args.runs}: {load()}", flush=True)
        for measure in measures:
            measure.run()
            print(f"  {measure.label:<42} cpu {measure.cpu[-1]:7.2f} s  wall {measure.wall[-1]:7.2f} s", flush=True)
    print(f"after: {load()}")
    print(table(measures, ratios=not args.startup))
    return 0


def startup_measures(name: str, checkout: Path, env: dict[str, str], targets: list[str],
                     jobs: Optional[int]) -> list[Measure]:
    """`--version`, and a check answered from a cache this function fills first (its own folder)."""
    cache = Path(tempfile.mkdtemp(prefix="gpulint-bench-cache-"))
    atexit.register(shutil.rmtree, cache, True)
    warm = [sys.executable, "-m", "gpulint", "check", "--isolated", "--exit-zero", "--cache-dir", str(cache / "c")]
    if jobs is not None:
        warm += ["-j", str(jobs)]
    subprocess.run(warm + targets, cwd=checkout, env=env, stdout=subprocess.DEVNULL, check=True)
    return [Measure(f"gpulint --version ({name})", [sys.executable, "-m", "gpulint", "--version"], env, checkout),
            Measure(f"gpulint check, warm ({name})", warm + targets, env, checkout)]


def ruff_startup_measures(ruff: str, targets: list[str], env: dict[str, str]) -> list[Measure]:
    cache = Path(tempfile.mkdtemp(prefix="ruff-bench-cache-"))
    atexit.register(shutil.rmtree, cache, True)
    warm = [ruff, "check", "--select", "ALL", "--exit-zero", "--isolated", "--cache-dir", str(cache)]
    subprocess.run(warm + targets, env=env, stdout=subprocess.DEVNULL, check=True)
    return [Measure("ruff --version", [ruff, "--version"], env), Measure("ruff check, warm", warm + targets, env)]


def table(measures: Sequence[Measure], ratios: bool = True) -> str:
    """Medians as a markdown table, each command's CPU against this checkout's gpulint (the first)."""
    reference = statistics.median(measures[0].cpu)
    ratio_head = " CPU / this gpulint's |" if ratios else ""
    lines = ["", "| command | CPU (median) | CPU (min-max) | wall (median) |" + ratio_head,
             "|---|---:|---:|---:|" + ("---:|" if ratios else "")]
    for measure in measures:
        cpu = statistics.median(measure.cpu)
        line = (f"| `{measure.label}` | {cpu:.3f} s | {min(measure.cpu):.3f}-{max(measure.cpu):.3f} s "
                f"| {statistics.median(measure.wall):.3f} s |")
        lines.append(line + (f" {cpu / reference:.2f}x |" if ratios else ""))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
