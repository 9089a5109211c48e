"""`gpulint verify`: rewrite each script, run original and rewrite, compare, report.

No torch in this process: the runs happen in harness subprocesses.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import click

from gpulint.config import CliOverrides, ConfigError, SettingsResolver
from gpulint.engine.files import PathError, Walker
from gpulint.engine.linter import InternalError, fix_text, lint_text
from gpulint.engine.runner import unified_diff
from gpulint.engine.source import SourceError, read_source
from gpulint.rules import SYNTAX_ERROR
from gpulint.verify import events
from gpulint.verify.compare import Comparison, ToleranceChoice, compare, tolerance_for
from gpulint.verify.events import RunRecord
from gpulint.verify.process import RunSpec, describe_failure, run_harness

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
AMP_CODES = frozenset({"GPU001", "GPU002"})


class UsageError(Exception):
    """Bad options or a missing dependency: exit 2 with the message."""


@dataclass(frozen=True)
class VerifyOptions:
    paths: tuple[Path, ...]
    script_args: tuple[str, ...] = ()
    steps: int = 60
    warmup: int = 10
    device: str = "auto"
    select: Optional[tuple[str, ...]] = None
    preview: Optional[bool] = None
    json_path: Optional[Path] = None
    plot_path: Optional[Path] = None
    min_speedup: Optional[float] = None
    timeout: float = 600.0
    threads: Optional[int] = None
    seed: int = 0
    workdir: Optional[Path] = None  # where rewritten copies and logs go (default: a new temp dir)
    show_diff: bool = True


@dataclass
class ScriptResult:
    path: str
    applied: tuple[str, ...] = ()
    diff: str = ""
    rewritten_path: Optional[str] = None
    tolerance: Optional[ToleranceChoice] = None
    original: Optional[RunRecord] = None
    rewritten: Optional[RunRecord] = None
    comparison: Optional[Comparison] = None
    passed: bool = False
    verdict: str = "PENDING"  # then PASS, FAIL, SKIP (nothing to rewrite) or ERROR (could not rewrite or run it)
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_environment(options: VerifyOptions) -> None:
    if importlib.util.find_spec("torch") is None:
        raise UsageError("gpulint verify runs the scripts and needs torch: pip install 'gpulint[verify]'")
    if options.plot_path is not None and importlib.util.find_spec("matplotlib") is None:
        raise UsageError("--plot needs matplotlib: pip install 'gpulint[verify]' (or matplotlib)")
    if options.steps < 1:
        raise UsageError("--steps must be at least 1")
    if not 0 <= options.warmup < options.steps:
        raise UsageError(f"--warmup must be between 0 and --steps - 1 (got {options.warmup} with --steps {options.steps})")


def applied_codes(path: Path, before: str, after: str, settings) -> tuple[str, ...]:  # noqa: ANN001
    """Codes whose fixes the rewrite applied: fixable findings that are gone afterwards."""
    def fixable(text: str) -> Counter:
        return Counter(f.code for f in lint_text(path, text, settings).findings
                       if f.fix is not None and f.fix.is_applicable(True))
    remaining = fixable(after)
    return tuple(sorted(code for code, count in fixable(before).items() if count > remaining.get(code, 0)))


class Verifier:
    def __init__(self, options: VerifyOptions, echo: Callable[..., None] = click.echo) -> None:
        self.options = options
        self.echo = echo
        try:
            self.resolver = SettingsResolver(CliOverrides(select=options.select, preview=options.preview))
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        self.workdir = options.workdir or Path(tempfile.mkdtemp(prefix="gpulint-verify-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.internal_error = False

    def scripts(self) -> list[Path]:
        walker = Walker()
        try:
            files = list(walker.files(list(self.options.paths) or [Path(".")]))
        except PathError as exc:
            raise UsageError(str(exc)) from None
        if not files:
            raise UsageError("no Python files found in " + ", ".join(map(str, self.options.paths)))
        return sorted(files)

    def rewrite(self, path: Path, index: int) -> ScriptResult:
        result = ScriptResult(str(path))
        try:
            source = read_source(path)
        except SourceError as exc:
            result.verdict, result.reasons = "ERROR", [f"cannot read the script: {exc}"]
            return result
        try:
            settings = self.resolver.for_path(path)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        try:
            outcome = fix_text(path, source.text, settings, unsafe=True)
            if not outcome.parsed or any(f.code == SYNTAX_ERROR.code for f in outcome.findings):
                result.verdict, result.reasons = "ERROR", ["gpulint cannot parse the script (syntax error)"]
                return result
            result.applied = applied_codes(path, source.text, outcome.text, settings)
        except InternalError as exc:
            self.internal_error = True
            result.verdict, result.reasons = "ERROR", [f"gpulint internal error while rewriting: {exc.detail}"]
            return result
        if outcome.text == source.text:
            result.verdict, result.passed = "SKIP", True
            result.notes.append("no applicable fixes: nothing to verify")
            return result
        target = self.workdir / f"{index:02d}-{path.stem}" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.encode(outcome.text))
        result.rewritten_path = str(target)
        result.diff = unified_diff(str(path), source.text, outcome.text)
        result.tolerance = tolerance_for(result.applied)
        return result

    def spec(self, script: Path, original: Path, label: str, folder: Path) -> RunSpec:
        o = self.options
        return RunSpec(
            script=script, as_file=original, events=folder / f"{label}.jsonl",
            log=folder / f"{label}.log", steps=o.steps, device=o.device, seed=o.seed, threads=o.threads,
            timeout=o.timeout, script_args=o.script_args,
        )

    def progress(self, label: str) -> Optional[Callable[[int], None]]:
        stream = sys.stderr
        if not stream.isatty():
            return None
        total = self.options.steps

        def show(done: int) -> None:
            filled = int(24 * min(done, total) / total)
            stream.write(f"\r  {label:<9} [{'#' * filled}{'.' * (24 - filled)}] {done}/{total} steps")
            stream.flush()
        return show

    def run_one(self, script: Path, original: Path, label: str, folder: Path) -> RunRecord:
        record = run_harness(self.spec(script, original, label, folder), self.progress(label))
        line = f"  {label:<9} {record.status}: {len(record.steps)}/{self.options.steps} steps in {record.wall_s or 0:.1f} s"
        if sys.stderr.isatty():
            line = "\r" + line + " " * 12
        self.echo(line, err=True)
        return record

    def verify(self, path: Path, index: int) -> ScriptResult:
        from gpulint.verify.report import script_header

        result = self.rewrite(path, index)
        self.echo(script_header(result), err=True)
        if result.verdict != "PENDING" or result.rewritten_path is None:
            return result
        if self.options.show_diff:
            self.echo(result.diff, nl=False)
        rewritten = Path(result.rewritten_path)
        result.original = self.run_one(path, path, "original", rewritten.parent)
        if result.original.status == events.ERROR:
            result.verdict = "ERROR"
            result.reasons.append(result.original.message)
            return result  # the harness refused the request (e.g. --device cuda without CUDA): same for the rewrite
        if result.original.completed:
            result.rewritten = self.run_one(rewritten, path, "rewritten", rewritten.parent)
        self.judge(result)
        result.passed = not result.reasons
        result.verdict = "PASS" if result.passed else "FAIL"
        return result

    def judge(self, result: ScriptResult) -> None:
        """Collect the reasons to fail (none: PASS) and the notes worth reading."""
        o = self.options
        original, rewritten = result.original, result.rewritten
        assert original is not None and result.tolerance is not None
        if original.status == events.NO_BACKWARD:
            result.reasons.append("not a training script: it never calls backward(), so there are no steps to compare")
            return
        if not original.completed:
            result.reasons.append("the original script does not run, so the rewrite cannot be judged: "
                                  + describe_failure(original))
            return
        assert rewritten is not None
        if not rewritten.completed:
            result.reasons.append("the rewritten script does not run: " + describe_failure(rewritten))
            return
        result.comparison = compare(original, rewritten, result.tolerance.tolerance, o.warmup)
        loss = result.comparison.loss
        if loss is not None and not loss.passed:
            reason = loss.reason
            if "GPU102" in result.applied and loss.tolerance.rank == 0:
                reason += ("; with worker processes a Dataset that draws from the global RNG in __getitem__ gets "
                           "different random numbers (seed a generator per item to make them reproducible)")
            result.reasons.append(reason)
        if len(rewritten.steps) < len(original.steps):
            result.reasons.append(f"the rewritten script stopped after {len(rewritten.steps)} steps, "
                                  f"the original ran {len(original.steps)}")
        speedup = result.comparison.speedup
        if o.min_speedup is not None:
            if speedup is None:
                result.reasons.append("speedup could not be measured (too few steps after the warm-up)")
            elif speedup < o.min_speedup:
                result.reasons.append(f"speedup {speedup:.2f}x is below --min-speedup {o.min_speedup:g}x")
        device = original.environment.get("device")
        if device == "cpu" and AMP_CODES & set(result.applied):
            result.notes.append("ran on the CPU: the mixed-precision loss check is meaningful, its speedup is not "
                                "(CPU autocast runs bfloat16 without tensor cores)")
        for label, record in (("original", original), ("rewritten", rewritten)):
            if record.adaptations:
                result.notes.append(f"{label} adapted to the CPU: " + "; ".join(record.adaptations))
            if record.status == events.FINISHED:
                result.notes.append(f"the {label} script ended by itself after {len(record.steps)} steps")

    def run(self) -> list[ScriptResult]:
        scripts = self.scripts()
        self.echo(f"gpulint verify: {len(scripts)} script{'s' if len(scripts) != 1 else ''}, {self.options.steps} steps "
                  f"each (timing after {self.options.warmup} warm-up steps), device {self.options.device}; "
                  f"rewrites and logs in {self.workdir}", err=True)
        return [self.verify(path, i) for i, path in enumerate(scripts)]


def verify_main(options: VerifyOptions, echo: Callable[..., None] = click.echo) -> int:
    """Entry point for the CLI: returns the exit code."""
    from gpulint.verify import report

    try:
        check_environment(options)
        verifier = Verifier(options, echo)
        results = verifier.run()
    except UsageError as exc:
        echo(f"gpulint: error: {exc}", err=True)
        return EXIT_USAGE
    usage = [r for r in results if r.original and r.original.status == events.ERROR]
    echo(report.text_report(results, options))
    if options.json_path is not None:
        report.write_json(options.json_path, results, options)
        echo(f"wrote {options.json_path}", err=True)
    if options.plot_path is not None:
        try:
            report.write_plot(options.plot_path, results, options.warmup)
            echo(f"wrote {options.plot_path}", err=True)
        except report.PlotError as exc:
            echo(f"gpulint: error: {exc}", err=True)
            return EXIT_USAGE
    if usage:
        echo(f"gpulint: error: {usage[0].original.message}", err=True)  # type: ignore[union-attr]
        return EXIT_USAGE
    if verifier.internal_error:
        return EXIT_USAGE
    failed = [r for r in results if not r.passed]
    for result in failed:
        echo(f"gpulint verify: {result.path}: " + "; ".join(result.reasons or ["failed"]), err=True)
    return EXIT_FAIL if failed else EXIT_PASS


if __name__ == "__main__":  # pragma: no cover - `gpulint verify` is the entry point
    sys.exit("use `gpulint verify`")
