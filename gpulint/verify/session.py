"""`gpulint verify`: rewrite each script (and its project's modules), run both versions, judge, report.

For every entry script:
1. rewrite it and the project's own modules it imports (project.py); nothing to rewrite: SKIP;
2. a checked run of each version (deterministic, fully instrumented): losses, memory, which
   rewritten constructs ran, whether the weights moved;
3. timed runs with the script's own settings, interleaved original/rewritten in ABBA order,
   `--repeats` of each, for a speedup with a confidence interval;
4. a verdict: PASS, FAIL, INCONCLUSIVE (nothing shows the rewrite was tested: no training,
   a rule NOT EXERCISED, a run cut short), SKIP or ERROR.

Every run happens in its own sandbox (sandbox.py, guard.py); gpulint's work folder is
deleted at the end unless --workdir names one. No torch in this process: the runs, and the
probe of what the machine can do, are subprocesses.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import itertools
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Optional, Union

import click

from gpulint.config import CliOverrides, SettingsResolver
from gpulint.core.extras import install_hint, torch_problem
from gpulint.core.settings import ConfigError, Settings
from gpulint.core.source import SourceError, SourceFile, decode_source, output_refusal
from gpulint.core.verification import RANDOM_STREAMS, TRAINED_PARAMETERS, Tolerance
from gpulint.engine.files import PathError, Walker
from gpulint.engine.linter import InternalError
from gpulint.notebook import is_notebook
from gpulint.output.progress import progress_wanted
from gpulint.rules.gpu000_invalid_file import InvalidFile
from gpulint.verify import events, guard
from gpulint.verify.compare import (
    NOISE_RECHECK_FACTOR,
    NOISE_RECHECK_RUNS,
    NoiseFloor,
    Timing,
    build_timing,
    check_run_losses,
    compare,
    noise_floor,
    wants_more_noise,
)
from gpulint.verify.events import RunRecord
from gpulint.verify.judge import (
    autocast_bits,
    exception_findings,
    exercise,
    fewer_parameters,
    finish_verdict,
    float16_outcome,
    named_changes,
    partial_run_lines,
    speed_reason,
    subset_failure,
    training_doubt_or_reason,
    uncovered_edits,
)
from gpulint.verify.probe import Machine, ProbeError, probe
from gpulint.verify.process import RunSpec, describe_failure, run_harness
from gpulint.verify.project import (
    RewrittenFile,
    classify,
    imported_project_files,
    needs_torchrun,
    project_root,
    rewrite_file,
    rewrite_source,
)
from gpulint.verify.results import (
    ERROR,
    FAIL,
    INCONCLUSIVE,
    NOT_EXERCISED,
    NOT_TRACKED,
    SKIP,
    Plan,
    ScriptResult,
    VerifyOptions,
)
from gpulint.verify.rules import (
    mixed_precision,
    rule_for,
    tolerance_for,
)
from gpulint.verify.sandbox import changes, fingerprint, remove_tree

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INCONCLUSIVE = 0, 1, 2, 3
NUMERICS_ONLY_STEPS = 12  # checked steps when mixed precision is emulated on this CPU (no speed measured)
MIN_BLAME_STEPS = 5  # a subset rerun runs to the failing step, and at least this many steps
MAX_BLAME_RUNS = 6  # subset reruns for one failure: each rule alone, then pairs while runs are left

class UsageError(Exception):
    """Bad options or a missing dependency: exit 2 with the message."""


def adapt_warmup(steps: int, warmup: int) -> tuple[int, Optional[str]]:
    """Keep at least one timed step: --warmup 10 with --steps 5 becomes 2, with a note."""
    if warmup < steps - 1 or steps < 2:
        return (warmup if steps >= 2 else 0), None
    adapted = (steps - 1) // 2
    return adapted, f"--warmup {warmup} lowered to {adapted} for {steps} steps (so that some steps are timed)"


def check_options(options: VerifyOptions) -> None:
    if not options.paths:
        raise UsageError("give the training script to verify: gpulint verify train.py [-- script arguments]")
    problem = torch_problem()
    if problem is not None:
        raise UsageError(problem)
    if options.plot_path is not None and importlib.util.find_spec("matplotlib") is None:
        raise UsageError(f"--plot needs matplotlib: {install_hint('verify', 'matplotlib')}")
    if options.steps < 1:
        raise UsageError("--steps must be at least 1")
    if options.warmup < 0:
        raise UsageError("--warmup must be 0 or more")
    if options.repeats < 0:
        raise UsageError("--repeats must be 0 or more")
    if options.min_speedup is not None and options.repeats == 0:
        raise UsageError("--min-speedup needs timed runs: drop --repeats 0")
    if options.nproc < 1:
        raise UsageError("--nproc-per-node must be at least 1")
    for path in options.paths:
        if not os.path.lexists(path):
            raise UsageError(f"{path}: no such file or directory")


def check_outputs(options: VerifyOptions, inputs: list[Path]) -> None:
    """Every output path is checked before any run: its folder exists, it is not a script or an input."""
    outputs = [(flag, path) for flag, path in (("--json", options.json_path), ("--plot", options.plot_path))
               if path is not None]
    resolved_inputs = {os.path.realpath(p) for p in inputs}
    for flag, path in outputs:
        real = os.path.realpath(path)
        if real in resolved_inputs or path.suffix == ".py":
            raise UsageError(f"{flag} {path}: refusing to write the report over a Python file (did {flag} take the "
                             f"script's path? write {flag}=report{'.json' if flag == '--json' else '.png'} "
                             "before the script)")
        if path.is_dir():
            raise UsageError(f"{flag} {path}: is a folder; name a file")
        refusal = output_refusal(path)  # a link or a second name of a file of yours (issue 22)
        if refusal is not None:
            raise UsageError(f"{flag} {path}: {refusal}; name a new file")
        parent = Path(real).parent
        if not parent.is_dir():
            raise UsageError(f"{flag} {path}: folder {parent} does not exist")
        if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
            raise UsageError(f"{flag} {path}: not writable")
    if len(outputs) == 2 and os.path.realpath(outputs[0][1]) == os.path.realpath(outputs[1][1]):
        raise UsageError("--json and --plot name the same file")
    if options.workdir is not None:
        work = os.path.realpath(options.workdir)
        for path in inputs:
            if os.path.realpath(path).startswith(work + os.sep):
                raise UsageError(f"--workdir {options.workdir}: holds {path}, a file being verified")


class Verifier:
    def __init__(self, options: VerifyOptions, echo: Callable[..., None] = click.echo) -> None:
        self.options = options
        self.echo = echo
        try:
            # a script named for verification is rewritten even where linting treats it as test code
            self.resolver = SettingsResolver(CliOverrides(select=options.select, preview=options.preview,
                                                          lint_tests=True))
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        self.keep = options.workdir is not None
        self._workdir: Optional[Path] = None
        self.internal_error = False
        self.machine: Optional[Machine] = None
        self.uncovered: list[str] = []  # modules with fixes that no verified script imports
        self.site_folder: Optional[str] = None
        # notebooks run as scripts: the script's path (beside the notebook, never written there) -> its code
        self.scripts: dict[Path, SourceFile] = {}
        self.script_notes: dict[Path, list[str]] = {}
        self.device = "cpu"  # decided in start(), from --device and the machine
        self.float16 = "native"  # on the CPU: "native" float16 autocast, or "bfloat16" (emulation); see start()

    # --- work folder --------------------------------------------------------------------------------
    @property
    def workdir(self) -> Path:
        """Created on first use: a verification that runs nothing leaves nothing behind."""
        if self._workdir is None:
            if self.options.workdir is not None:
                self.options.workdir.mkdir(parents=True, exist_ok=True)
                # absolute: the runs start in their sandboxes, where a relative --workdir names nothing
                self._workdir = Path(tempfile.mkdtemp(prefix="verify-", dir=os.path.abspath(self.options.workdir)))
            else:
                self._workdir = Path(tempfile.mkdtemp(prefix="gpulint-verify-"))
        return self._workdir

    def cleanup(self) -> None:
        if self._workdir is not None and not self.keep:
            problem = remove_tree(self._workdir)
            if problem:
                self.echo(f"gpulint: warning: {problem}", err=True)
            self._workdir = None

    # --- planning -------------------------------------------------------------------------------------
    def candidates(self) -> tuple[list[Path], bool]:
        """Python files named or found; whether any path was a folder."""
        walker = Walker()
        try:
            files = sorted(walker.files(list(self.options.paths)))
        except PathError as exc:
            raise UsageError(str(exc)) from None
        if not files:
            raise UsageError("no Python files found in " + ", ".join(map(str, self.options.paths)))
        folders = [Path(p) for p in self.options.paths if Path(p).is_dir()]
        for notebook in sorted(Walker(suffixes=(".ipynb",)).files(folders)):
            self.echo(f"gpulint verify: {notebook}: not run (a folder's notebooks run only when named, since a "
                      f"notebook is often not a training run): gpulint verify {notebook}", err=True)
        return files, bool(folders)

    def settings(self, path: Path) -> Settings:
        try:
            return self.resolver.for_path(path)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None

    def rewrite(self, path: Path) -> RewrittenFile:
        try:
            if path in self.scripts:
                return rewrite_source(path, self.scripts[path], self.settings(path))
            return rewrite_file(path, self.settings(path))
        except InternalError as exc:
            self.internal_error = True
            raise _RewriteError(f"gpulint internal error while rewriting {path}: {exc.detail}") from None
        except SourceError as exc:
            raise _RewriteError(f"cannot read {path}: {exc}") from None

    def plan(self) -> tuple[list[Union[Plan, ScriptResult]], list[Path]]:
        """Entry scripts to verify (or their early verdicts), and every file read (the inputs).

        A module (definitions only) is not run: its fixes are verified through the scripts that
        import it. A module with fixes that no verified script imports is reported, not run.
        """
        files, _ = self.candidates()
        named = {os.path.realpath(p) for p in self.options.paths if Path(p).is_file()}
        plans: list[Union[Plan, ScriptResult]] = []
        inputs = list(files)
        scripts_of = [self._as_script(p, plans) if is_notebook(str(p)) else p for p in files]
        files = [p for p in scripts_of if p is not None]
        kinds = {path: True if path in self.scripts else classify(path) for path in files}
        scripts = [p for p in files if kinds[p] is not False]
        modules = [p for p in files if kinds[p] is False]
        covered: set[str] = set()
        for script in scripts:
            result = self._plan_one(script)
            plans.append(result)
            if isinstance(result, Plan):
                covered.update(os.path.realpath(f.path) for f in result.files)
                inputs += [f.path for f in result.files]
        for module in modules:
            if os.path.realpath(module) in covered:
                continue
            try:
                rewritten = self.rewrite(module)
            except _RewriteError as exc:
                plans.append(ScriptResult(str(module), verdict=ERROR, reasons=[str(exc)]))
                continue
            if rewritten.changed:
                self.uncovered.append(self._describe_uncovered(module))
            elif os.path.realpath(module) in named:
                plans.append(ScriptResult(str(module), verdict=SKIP, passed=True))
        if not plans:
            raise UsageError(f"{', '.join(map(str, self.options.paths))} holds no training script, only modules "
                             "(definitions, no top-level code); their fixes are verified through a script that "
                             "imports them. " + " ".join(self.uncovered))
        return plans, inputs

    def _as_script(self, notebook: Path, plans: list[Union[Plan, ScriptResult]]) -> Optional[Path]:
        """The notebook's code cells as a script beside it (only in the sandboxes), or its ERROR verdict."""
        from gpulint.notebook.model import NotebookError, load_notebook
        from gpulint.notebook.script import notebook_script

        try:
            raw = notebook.read_bytes()
            exported = notebook_script(load_notebook(raw), notebook.name)
        except (OSError, NotebookError) as exc:
            plans.append(ScriptResult(str(notebook), verdict=ERROR, reasons=[f"cannot read the notebook: {exc}"]))
            return None
        if exported.refusal is not None:
            plans.append(ScriptResult(str(notebook), verdict=ERROR,
                                      reasons=[f"cannot run the notebook as a script: {exported.refusal}"]))
            return None
        script = notebook.with_name(notebook.name + ".py")
        self.scripts[script] = decode_source(exported.text.encode("utf-8"), script)
        self.script_notes[script] = [f"{notebook.name} runs as {script.name}: its code cells in order, in its "
                                     "folder"] + exported.notes
        return script

    def _describe_uncovered(self, module: Path) -> str:
        root = project_root(module)
        users = []
        walker = Walker()
        try:
            for candidate in sorted(walker.files([root]))[:2000]:
                if candidate != module and classify(candidate) and Path(os.path.realpath(module)) in \
                        imported_project_files(candidate, root, self._search(root)):
                    users.append(os.path.relpath(candidate))
                    if len(users) == 5:
                        break
        except PathError:
            pass
        hint = (f"verify a script that imports it: {', '.join(users)}" if users
                else "no script in its project imports it")
        return f"{module}: a module with fixes; {hint}."

    @staticmethod
    def _search(root: Path) -> list[Path]:
        extra = [root / "src"] if (root / "src").is_dir() else []
        return extra + [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]

    def _plan_one(self, script: Path) -> Union[Plan, ScriptResult]:
        try:
            entry = self.rewrite(script)
        except _RewriteError as exc:
            return ScriptResult(str(script), verdict=ERROR, reasons=[str(exc)])
        try:
            parsed = self.settings(script)
            from gpulint.engine.linter import lint_text

            if any(f.code == InvalidFile.code for f in lint_text(script, entry.source.text, parsed).findings):
                return ScriptResult(str(script), verdict=ERROR,
                                    reasons=["gpulint cannot parse the script (syntax error)"])
        except InternalError as exc:
            self.internal_error = True
            return ScriptResult(str(script), verdict=ERROR, reasons=[f"gpulint internal error: {exc.detail}"])
        root = project_root(script)
        search = self._search(root)
        modules = []
        virtual = self.scripts.get(script)
        imported = imported_project_files(script, root, search, virtual.raw if virtual is not None else None)
        for path in imported:
            try:
                rewritten = self.rewrite(path)
            except _RewriteError as exc:
                return ScriptResult(str(script), verdict=ERROR, reasons=[str(exc)])
            if rewritten.changed:
                modules.append(rewritten)
        sys_path: tuple[Path, ...] = ()
        real_script_dir = Path(os.path.realpath(script)).parent
        for folder in [root, *search]:
            folder = Path(os.path.realpath(folder))
            if folder != real_script_dir and any(Path(os.path.realpath(m.path)).is_relative_to(folder)
                                                 for m in modules) and folder not in sys_path:
                sys_path += (folder,)
        distributed = any(needs_torchrun(tree) for tree in _trees([script, *imported], self.scripts))
        plan = Plan(script, root, [entry, *modules], sys_path, nproc=self.options.nproc if distributed else 1,
                    torchrun=distributed)
        plan.notes += self.script_notes.get(script, [])
        if self.options.nproc > 1 and not distributed:
            plan.notes.append(f"--nproc-per-node {self.options.nproc} ignored: the script does not join a process "
                              "group from torchrun's environment (it starts its own processes, or none)")
        return plan

    # --- running --------------------------------------------------------------------------------------
    def progress(self, label: str, total: int) -> Optional[Callable[[int], None]]:
        stream = sys.stderr
        if not progress_wanted(stream):  # a terminal only: never in CI or a pipe
            return None

        def show(done: int) -> None:
            filled = int(24 * min(done, total) / max(total, 1))
            stream.write(f"\r  {label:<22} [{'#' * filled}{'.' * (24 - filled)}] {done}/{total} steps")
            stream.flush()
        return show

    def run_one(self, plan: Plan, result: ScriptResult, version: str, mode: str, folder: Path,
                overrides: Optional[dict[Path, bytes]] = None, extra: tuple[str, ...] = (),
                steps: Optional[int] = None, label: str = "") -> RunRecord:
        """One run in its own sandbox: `version` picks the files ("original"/"rewritten") unless `overrides`
        gives them (a rewrite with some of the rules); `extra` adds harness options."""
        label = label or f"{version} {mode}"
        steps = steps or result.steps
        if overrides is None:
            overrides = {f.path: (f.new_bytes() if version == "rewritten" else f.source.raw) for f in plan.files}
        harness_args = self.harness_args(result, mode) + extra
        spec = RunSpec(
            script=plan.script, folder=folder, steps=steps, device=self.device, warmup=min(result.warmup, steps - 1),
            mode=mode, seed=self.options.seed, threads=self.options.threads, timeout=self.options.timeout,
            script_args=self.options.script_args, roots=(plan.root, Path.cwd()), overrides=overrides,
            sys_path=plan.sys_path, exclude=(self.workdir,), nproc=plan.nproc, torchrun=plan.torchrun,
            harness_args=harness_args,
        )
        record = run_harness(spec, self.progress(label, steps), self.site_folder)
        words = events.STATUS_WORDS.get(record.status, record.status)
        line = f"  {label:<22} {words}: {len(record.steps)} of {steps} steps in {record.wall_s or 0:.1f} s"
        if progress_wanted():
            line = "\r" + line + " " * 12
        self.echo(line, err=True)
        return record

    def harness_args(self, result: ScriptResult, mode: str) -> tuple[str, ...]:
        args: tuple[str, ...] = ("--float16", self.float16)
        if mode == "checked" and mixed_precision(result.applied):
            args += ("--probe-ranges",)
        return args

    def verify(self, plan: Union[Plan, ScriptResult], index: int) -> ScriptResult:
        from gpulint.verify.report import script_header

        if isinstance(plan, ScriptResult):
            self.echo(script_header(plan), err=True)
            return plan
        entry = plan.files[0]
        result = ScriptResult(str(plan.script), files=[f for f in plan.files if f.changed])
        result.applied = tuple(sorted({code for f in result.files for code in f.applied}))
        result.diff = "".join(f.diff(os.path.relpath(f.path)) for f in result.files)
        if not result.files:
            result.verdict, result.passed = SKIP, True
            result.notes.append("no applicable fixes in the script or the project modules it imports: "
                                "nothing to verify")
            self.echo(script_header(result), err=True)
            return result
        result.tolerance = tolerance_for(result.applied)
        self.prepare(result)
        result.notes += plan.notes
        if plan.torchrun and plan.nproc == 1:
            result.notes.append("launched through torchrun with 1 process: the script joins a process group from "
                                "torchrun's environment; --nproc-per-node N runs N")
        self.echo(script_header(result), err=True)
        if self.options.show_diff:
            self.echo(result.diff, nl=False)
        folder = self.workdir / f"{index:02d}-{entry.path.stem}"
        if self.keep:
            result.rewritten_path = str(self._keep_rewrites(plan, folder / "rewritten"))
        runs = folder / "runs"
        roots, exclude = (plan.root, Path.cwd()), (self.workdir,)
        before = fingerprint(roots, exclude)
        try:
            self._run_all(plan, result, runs)
        finally:
            after = fingerprint(roots, exclude)
            changed = changes(before, after)
            result.isolation = {"files_checked": len(before), "changed": changed,  # what was not: issue 22
                                "not_checked": sorted(set(before.not_checked()) | set(after.not_checked()))}
            if changed:
                shown = "; ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
                result.notes.append(f"WARNING: files of yours changed while verify ran (by you, or by a program "
                                    f"or native code of the script that the sandbox does not confine): {shown}")
        return result

    def _run_all(self, plan: Plan, result: ScriptResult, runs: Path) -> None:
        result.original = self.run_one(plan, result, "original", "checked", runs / "original-checked")
        if result.original.status == events.ERROR:
            result.verdict = ERROR
            result.reasons.append(result.original.message)
            return
        if result.original.completed or (result.original.status == events.TIMEOUT and result.original.steps):
            result.rewritten = self.run_one(plan, result, "rewritten", "checked", runs / "rewritten-checked")
        if result.rewritten is not None and result.rewritten.steps and result.original.steps:
            self.check_numerics(plan, result, runs)
        timing = None
        if self.timing_worthwhile(result):
            timing = self.time_runs(plan, result, runs)
        self.judge(result, timing)

    # --- numerics: reference, noise floor, blame --------------------------------------------------------
    def subset_overrides(self, plan: Plan, codes: tuple[str, ...]) -> dict[Path, bytes]:
        """The plan's files rewritten with only `codes` (the others as the user wrote them)."""
        resolver = SettingsResolver(CliOverrides(select=codes, preview=self.options.preview, lint_tests=True))
        overrides = {}
        for f in plan.files:
            try:
                partial = rewrite_source(f.path, f.source, resolver.for_path(f.path))
            except (ConfigError, InternalError, SourceError):
                partial = None
            overrides[f.path] = partial.new_bytes() if partial is not None else f.source.raw
        return overrides

    def check_numerics(self, plan: Plan, result: ScriptResult, runs: Path) -> None:
        """The loss check against the right reference, with the noise floor when the rule's own tolerance is
        not enough, and blame by subsets when it still fails."""
        original, rewritten = result.original, result.rewritten
        assert original is not None and rewritten is not None and result.tolerance is not None
        found = named_changes(result.applied, original, rewritten)
        result.changes = [change.text for change in found]
        result.change_kinds = [change.kind for change in found]
        attributed = tuple(sorted({code for change in found for code in change.rules}))
        rest = tuple(code for code in result.applied if code not in attributed)
        comparison = compare(original, rewritten, result.tolerance.tolerance)
        result.comparison = comparison
        if attributed and not rest:
            comparison.loss = None
            result.reference = ("not compared: the rewrite changes " + " and ".join(c.kind for c in found)
                                + f" by design ({', '.join(attributed)}; see the change below), and applies no "
                                "other rule whose numerics a loss comparison could check")
            return
        base, base_overrides = original, None
        tolerance = result.tolerance.tolerance
        if attributed:
            base_overrides = self.subset_overrides(plan, attributed)
            base = self.run_one(plan, result, "original", "checked", runs / "reference-checked", base_overrides,
                                label="reference checked")
            result.extra_runs["reference"] = base
            how = " and ".join(c.reference for c in found if c.rules)
            result.reference = f"the original with {', '.join(attributed)} applied ({how})"
            tolerance = tolerance_for(rest).tolerance
            if not base.steps:
                result.doubts.append("the reference run (" + result.reference + ") did not run: "
                                     + describe_failure(base))
                comparison.loss = None
                return
        if tolerance.noise_bits is not None:  # one ulp of what the regions really computed in, here
            tolerance = dataclasses.replace(tolerance, noise_bits=autocast_bits(rewritten) or tolerance.noise_bits)
        loss = check_run_losses(base, rewritten, tolerance)
        wanted = self.options.noise == "always" or (self.options.noise == "auto" and not loss.within_own_tolerance
                                                     and not loss.identical)
        if wanted and self.options.noise_runs > 0 and loss.compared_steps and (
                loss.rewritten_diverged is None or self.options.noise == "always"):
            noise = self.measure_noise(plan, result, runs, base, base_overrides, tolerance, self.options.noise_runs)
            loss = check_run_losses(base, rewritten, tolerance, noise)
            if wants_more_noise(loss):  # a FAIL just beyond a thin estimate: sample the floor again first
                first, measured = loss, noise.runs
                noise = self.measure_noise(plan, result, runs, base, base_overrides, tolerance, NOISE_RECHECK_RUNS)
                added = f"run {noise.runs}" if noise.runs == measured + 1 else f"runs {measured + 1}-{noise.runs}"
                noise.added = (f"{added} added: with {measured}, {first.failed_at} was "
                               f"{first.over_allowance or 0:.2f}x its allowance, within {NOISE_RECHECK_FACTOR:g}x")
                loss = check_run_losses(base, rewritten, tolerance, noise)
        comparison.loss = loss
        self.blame_failure(plan, result, runs, base, attributed, rest)

    def measure_noise(self, plan: Plan, result: ScriptResult, runs: Path, base: RunRecord,
                      overrides: Optional[dict[Path, bytes]], tolerance: Tolerance, total: int) -> NoiseFloor:
        """The floor over `total` perturbed runs: the ones measured before, and more (run k nudges with seed k)."""
        records = list(result.noise_records)
        for k in range(len(records) + 1, total + 1):
            extra = ("--perturb", str(k)) + (("--perturb-bits", str(tolerance.noise_bits))
                                             if tolerance.noise_bits else ())
            records.append(self.run_one(plan, result, "original", "checked", runs / f"noise-{k}", overrides, extra,
                                        label=f"noise floor {k}"))
        result.noise_records = records
        failures = [f"run {k}: {describe_failure(r)}" for k, r in enumerate(records, 1) if not r.completed]
        return noise_floor(base.losses, [r.losses for r in records], tolerance.noise_precision, tolerance.last_n,
                           failures)

    def blame_failure(self, plan: Plan, result: ScriptResult, runs: Path, base: RunRecord,
                      attributed: tuple[str, ...], rest: tuple[str, ...]) -> None:
        """With several rules and a failing comparison: rerun each rule alone (then pairs) up to the failing
        step, and name the rule or the pair that reproduces the failure."""
        comparison, rewritten = result.comparison, result.rewritten
        assert comparison is not None and rewritten is not None
        loss = comparison.loss
        raised = exception_findings(base, rewritten, result.files)
        failing_step: Optional[int] = None
        if raised.reason is not None and not raised.blamed:
            failing_step = raised.first_step or 1
        elif loss is not None and not loss.passed:
            per_step = loss.rewritten_diverged or (loss.worst_step if loss.reason.startswith("loss differs") else None)
            failing_step = per_step or loss.compared_steps  # a mean of the last losses needs the whole run
        if failing_step is None or len(rest) < 2 or not self.options.blame:
            return
        steps = min(result.steps, max(MIN_BLAME_STEPS, failing_step + 1))
        noise = loss.noise if loss is not None else None
        culprits: list[tuple[str, ...]] = []
        candidates = [(code,) for code in rest]
        pairs = list(itertools.combinations(rest, 2)) if len(rest) > 2 else []
        tried = 0
        for group in candidates + pairs:
            if group in pairs and (culprits or tried >= MAX_BLAME_RUNS):
                break
            tried += 1
            overrides = self.subset_overrides(plan, tuple(sorted(attributed + group)))
            record = self.run_one(plan, result, "rewritten", "checked", runs / f"blame-{'-'.join(group)}", overrides,
                                  steps=steps, label=f"blame {'+'.join(group)}")
            result.extra_runs["blame " + "+".join(group)] = record
            failure = subset_failure(base, record, tolerance_for(group).tolerance, noise, steps)
            result.blame.append(f"{' + '.join(group)} {'alone' if len(group) == 1 else 'together'} "
                                f"({len(record.steps)} steps): {failure or 'matches'}")
            if failure:
                culprits.append(group)
        if culprits:
            names = " and ".join("+".join(group) for group in culprits)
            hints = [rule_for(code) for group in culprits for code in group]
            draws = result.original is not None and bool(result.original.global_rng)
            streams = [code for group in culprits for code in group if draws and rule_for(code) is not None
                       and RANDOM_STREAMS in rule_for(code).changes]  # type: ignore[union-attr]
            cause = f"caused by {names} ({'it reproduces' if len(culprits) == 1 else 'each reproduces'} the failure"
            cause += " alone)" if all(len(g) == 1 for g in culprits) else " together, neither alone)"
            if streams:
                cause += f"; {', '.join(streams)} changes the random streams"
            extra = [h.mismatch_hint for h in hints if h is not None and h.mismatch_hint
                     and (RANDOM_STREAMS not in h.changes or streams)]
            if extra:
                cause += f"{': ' if streams else '; '}{extra[0]}"
            result.blame.insert(0, cause)
        else:
            result.blame.insert(0, f"no single rule{' or pair' if pairs else ''} reproduces the failure alone: it "
                                   f"needs {' + '.join(rest)} together")

    def prepare(self, result: ScriptResult) -> None:
        """Steps, warm-up and repeats for this script on this machine; say when they were adapted."""
        o = self.options
        result.steps, result.repeats = o.steps, o.repeats
        machine = self.machine
        assert machine is not None
        if self.device == "cpu" and mixed_precision(result.applied) and machine.cpu_bf16 == "emulated":
            result.steps = min(o.steps, NUMERICS_ONLY_STEPS)
            result.repeats = 0
            result.notes.append(
                f"this CPU has no native bfloat16 (torch CPU capability {machine.cpu_capability or '?'}): mixed "
                f"precision is emulated and runs several times slower than fp32, so this is a numerics-only check "
                f"of {result.steps} steps and no speed is measured; steps that ran before a timeout are kept")
        result.warmup, note = adapt_warmup(result.steps, o.warmup)
        if note:
            result.notes.append(note)

    def _keep_rewrites(self, plan: Plan, folder: Path) -> Path:
        entry_copy = folder
        for f in plan.files:
            if not f.changed and f is not plan.files[0]:
                continue
            try:
                relative = Path(os.path.realpath(f.path)).relative_to(plan.root)
            except ValueError:
                relative = Path(f.path.name)
            target = folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f.new_bytes())
            if f is plan.files[0]:
                entry_copy = target
        return entry_copy

    def timing_worthwhile(self, result: ScriptResult) -> bool:
        original, rewritten = result.original, result.rewritten
        if result.repeats == 0 or original is None or rewritten is None:
            return False
        if not (original.completed and rewritten.completed) or result.steps <= max(result.warmup, 1):
            return False  # the first step is never timed, nor are the warm-up steps
        comparison = result.comparison
        if comparison is not None and comparison.loss is not None and not comparison.loss.passed:
            return False  # a FAIL needs no speed: the timed runs would only cost time
        base = result.extra_runs.get("reference", original)
        if exception_findings(base, rewritten, result.files).reason:
            return False
        f16 = float16_outcome(original, rewritten, result.files, self.device, self.float16 == "bfloat16")
        return f16.reason is None

    def time_runs(self, plan: Plan, result: ScriptResult, runs: Path) -> Timing:
        """Timed runs with the script's own settings, interleaved ABBA so that drift hits both versions."""
        order: list[str] = []
        for i in range(result.repeats):
            order += ["original", "rewritten"] if i % 2 == 0 else ["rewritten", "original"]
        records = []
        for n, version in enumerate(order):
            record = self.run_one(plan, result, version, "timed", runs / f"{n + 1:02d}-{version}-timed")
            records.append(record)
            if not record.completed:  # a timed run that crashes or times out would do so again: stop here
                order = order[:n + 1]
                break
        return build_timing(order, records, result.warmup, os.cpu_count())

    # --- judging ------------------------------------------------------------------------------------
    def judge(self, result: ScriptResult, timing: Optional[Timing]) -> None:
        """Reasons (the verdict's own first), doubts, warnings and notes; then the verdict (judge.py)."""
        o = self.options
        original, rewritten = result.original, result.rewritten
        assert original is not None and result.tolerance is not None
        self._notes(result)
        if original.status == events.NO_BACKWARD:
            result.reasons.append("not a training script: it never calls backward(), so there are no steps to compare")
        elif not original.steps or not (original.completed or original.status == events.TIMEOUT):
            ran = f" (after {len(original.steps)} steps)" if original.steps else ""
            result.reasons.append(f"the original script does not run{ran}, so the rewrite cannot be judged: "
                                  + describe_failure(original))
        elif rewritten is None or not rewritten.steps:
            assert rewritten is not None
            result.reasons.append("the rewritten script does not run: " + describe_failure(rewritten))
        else:
            self._judge_runs(result, timing)
        if o.min_speedup is not None and not result.reasons:
            reason, doubt = speed_reason(timing, o.min_speedup)
            result.reasons += [reason] if reason else []
            result.doubts += [doubt] if doubt else []
        result.uncovered = uncovered_edits(result.rules)
        finish_verdict(result)

    def _judge_runs(self, result: ScriptResult, timing: Optional[Timing]) -> None:
        original, rewritten = result.original, result.rewritten
        assert original is not None and rewritten is not None and result.tolerance is not None
        if result.comparison is None:
            result.comparison = compare(original, rewritten, result.tolerance.tolerance)
        comparison = result.comparison
        comparison.timing = timing
        loss = comparison.loss
        base = result.extra_runs.get("reference", original)
        reasons, doubts = partial_run_lines(result, loss.compared_steps if loss else 0, bool(loss and loss.passed))
        crashed = [r for r in reasons if r.startswith("the rewritten script crashed")]
        suffix = f"; {result.blame[0]}" if result.blame else ""
        result.reasons += crashed
        raised = exception_findings(base, rewritten, result.files)
        result.exceptions = raised.lines
        if raised.reason:
            where = f" (inside {', '.join(raised.blamed)}'s edit)" if raised.blamed else ""
            result.reasons.append(raised.reason + where + suffix)
        f16 = float16_outcome(original, rewritten, result.files, self.device, self.float16 == "bfloat16")
        result.float16 = dict(f16.summary, line=f16.line)
        if f16.reason:
            result.reasons.append(f16.reason)
        result.warnings += f16.warnings
        if loss is not None:
            if loss.diverged:
                result.notes.append(f"both runs diverged (NaN or inf loss) at step {loss.diverged}, the rewrite as the "
                                    f"original: the {loss.compared_steps} steps before it were compared")
            elif loss.original_diverged and loss.passed:
                after = (f"the rewrite's from step {loss.rewritten_diverged}" if loss.rewritten_diverged
                         else "the rewrite's stays finite")
                result.notes.append(f"the original's loss is not finite from step {loss.original_diverged} ({after}): "
                                    f"the {loss.compared_steps} steps before it were compared")
            if loss.doubt:
                result.doubts.append(loss.doubt)
            elif not loss.passed and not raised.reason:
                mismatch = loss.reason + suffix
                if not result.blame:
                    for code in result.applied:  # what a mismatch may mean when this rule set the tolerance
                        verification = rule_for(code)
                        if verification is not None and verification.mismatch_hint and \
                                verification.tolerance == loss.tolerance:
                            mismatch += f"; {verification.mismatch_hint}"
                result.reasons.append(mismatch)
        fewer = fewer_parameters(base, rewritten)
        if fewer:
            result.reasons.append(fewer)
        untrained, doubt = training_doubt_or_reason(comparison.training_original, comparison.training_rewritten)
        fixed = TRAINED_PARAMETERS in result.change_kinds
        if doubt and fixed and comparison.training_rewritten.trained:
            doubt = None  # the original trained too little because of the bug the rewrite fixes: named above
        result.reasons += [untrained] if untrained else []
        result.doubts += [doubt] if doubt else []
        result.reasons += [r for r in reasons if r not in crashed]
        result.doubts += doubts
        result.rules = exercise(result, rewritten)
        for rule in result.rules:
            if rule.status in (NOT_EXERCISED, NOT_TRACKED):
                result.doubts.append(f"{rule.code} {rule.status}: {rule.detail}")

    def _notes(self, result: ScriptResult) -> None:
        original, rewritten = result.original, result.rewritten
        assert original is not None
        if self.device == "cpu" and mixed_precision(result.applied):
            result.notes.append("ran on the CPU: the mixed-precision loss check compares CPU autocast numerics (its op "
                                "lists differ from CUDA's), and its speed is this CPU's, not a GPU's tensor cores")
        for label, record in (("original", original), ("rewritten", rewritten)):
            if record is None:
                continue
            if record.adaptations:
                result.notes.append(f"{label} adapted to the CPU: " + "; ".join(record.adaptations))
            if record.status == events.FINISHED:
                result.notes.append(f"the {label} script ended by itself after {len(record.steps)} steps")
            if record.step_mode == "backward" and record.steps:
                result.notes.append(f"the {label} script steps no torch.optim optimizer: a step is counted at each "
                                    "backward pass")
            if any(s.accumulation_unscaled for s in record.steps):
                result.notes.append(f"the {label} script divides its loss for gradient accumulation: the loss shown "
                                    "is the step's loss before the division, as the script reports it")
            blocked = record.guard.get("blocked", [])
            if blocked:
                shown = "; ".join(blocked[:3]) + (f" and {len(blocked) - 3} more" if len(blocked) > 3 else "")
                result.notes.append(f"the {label} run tried to change your files and was stopped: {shown}")
            from_user = [i["path"] for i in record.imported if i.get("from") == "user"]
            rewritten_paths = {os.path.realpath(f.path) for f in result.files}
            shadowed = [p for p in from_user if os.path.realpath(p) in rewritten_paths]
            if shadowed and label == "rewritten":
                result.doubts.append("the rewritten run imported the original, not the rewritten, "
                                     + ", ".join(shadowed) + " (it is found through a path gpulint cannot redirect)")
            if record.log_bytes and record.log_bytes > 2 * (8 << 20):
                result.notes.append(f"the {label} run printed {record.log_bytes / (1 << 20):.0f} MiB; only the last "
                                    "part of its output was kept")

    # --- the whole run ------------------------------------------------------------------------------
    def start(self, plans: list[Union[Plan, ScriptResult]]) -> None:
        """Ask the machine what it can do, once, before the first run."""
        if not any(isinstance(p, Plan) and any(f.changed for f in p.files) for p in plans):
            return
        try:
            self.machine = probe()
        except ProbeError as exc:
            raise UsageError(str(exc)) from None
        o = self.options
        if o.device == "cuda" and not self.machine.cuda_available:
            raise UsageError("--device cuda was requested but torch.cuda.is_available() is False on this machine")
        self.device = "cuda" if o.device == "cuda" or (o.device == "auto" and self.machine.cuda_available) else "cpu"
        fp16_fast = self.machine.cpu_fp16 == "native"
        if o.float16 == "native" and not self.machine.cpu_fp16_autocast:
            raise UsageError(f"--float16 native: torch {self.machine.torch} has no float16 autocast on the CPU")
        native = self.machine.cpu_fp16_autocast and (o.float16 == "native" or (o.float16 == "auto" and fp16_fast))
        self.float16 = "native" if native or self.device == "cuda" else "bfloat16"
        if o.nproc > 1:
            if not self.machine.distributed:
                raise UsageError("--nproc-per-node needs torch.distributed, which this torch build lacks")
            gpus = len(self.machine.cuda_devices)
            if self.device == "cuda" and o.nproc > gpus:
                raise UsageError(f"--nproc-per-node {o.nproc} needs {o.nproc} GPUs; this machine has {gpus} "
                                 "(add --device cpu to run the processes on the CPU with gloo)")
            if self.device == "cpu" and not self.machine.gloo:
                raise UsageError("--nproc-per-node on the CPU needs the gloo backend, which this torch build lacks")
        self.site_folder = guard.write_site_folder(self.workdir / "site")

    def header(self, count: int) -> str:
        o = self.options
        machine = self.machine
        where = "" if machine is None else f", device {self.device}"
        if machine is not None and self.device == "cpu":
            float16 = "float16 as float16" if self.float16 == "native" else "float16 as bfloat16 (emulation)"
            where += f" (bfloat16: {machine.cpu_bf16}; {float16})"
        timing = (f"{o.repeats} interleaved timed run{'s' if o.repeats != 1 else ''} of each version"
                  if o.repeats else "no timed runs")
        launcher = f", torchrun --nproc-per-node {o.nproc}" if o.nproc > 1 else ""
        kept = f"; rewrites and logs kept in {self.workdir}" if self.keep and self._workdir else ""
        noise = {"auto": f"a noise floor of {o.noise_runs} perturbed run{'s' if o.noise_runs != 1 else ''} when a "
                         "deviation needs one", "always": f"a noise floor of {o.noise_runs} perturbed run"
                         f"{'s' if o.noise_runs != 1 else ''}"}.get(o.noise, "no noise floor")
        if o.noise in ("auto", "always") and o.noise_runs < NOISE_RECHECK_RUNS:
            noise += f" ({NOISE_RECHECK_RUNS} before a FAIL within {NOISE_RECHECK_FACTOR:g}x of its allowance)"
        if o.noise_runs == 0:
            noise = "no noise floor"
        return (f"gpulint verify: {count} script{'s' if count != 1 else ''}, up to {o.steps} steps a run{where}"
                f"{launcher}; a checked run of each version, {noise}, {timing}{kept}")


class _RewriteError(Exception):
    pass


def _trees(paths: list[Path], scripts: Optional[dict[Path, SourceFile]] = None) -> list[ast.Module]:
    trees = []
    for path in paths:
        try:
            trees.append(ast.parse(scripts[path].raw if scripts and path in scripts else path.read_bytes()))
        except (SyntaxError, ValueError, OSError):
            continue
    return trees


def exit_code(results: list[ScriptResult], internal_error: bool, uncovered: list[str]) -> int:
    verdicts = {r.verdict for r in results}
    if internal_error:
        return EXIT_USAGE
    if verdicts & {FAIL, ERROR}:
        return EXIT_FAIL
    if INCONCLUSIVE in verdicts or uncovered:
        return EXIT_INCONCLUSIVE
    return EXIT_PASS


def verify_main(options: VerifyOptions, echo: Callable[..., None] = click.echo) -> int:
    """Entry point for the CLI: returns the exit code (0 PASS, 1 FAIL, 2 usage, 3 INCONCLUSIVE)."""
    from gpulint.verify import report

    verifier: Optional[Verifier] = None
    previous = _interrupt_on_sigterm()
    try:
        try:
            check_options(options)
            check_outputs(options, [Path(p) for p in options.paths if Path(p).is_file()])
            verifier = Verifier(options, echo)
            plans, inputs = verifier.plan()
            check_outputs(options, inputs)
            verifier.start(plans)
            echo(verifier.header(len(plans)), err=True)
            results = [verifier.verify(plan, i) for i, plan in enumerate(plans)]
        except UsageError as exc:
            echo(f"gpulint: error: {exc}", err=True)
            return EXIT_USAGE
        echo(report.text_report(results, options, verifier.uncovered))
        try:
            if options.json_path is not None:
                report.write_json(options.json_path, results, options, verifier.machine, verifier.uncovered)
                echo(f"wrote {options.json_path}", err=True)
            if options.plot_path is not None:
                report.write_plot(options.plot_path, results)
                echo(f"wrote {options.plot_path}", err=True)
        except (report.PlotError, OSError) as exc:
            echo(f"gpulint: error: {exc}", err=True)
            return EXIT_USAGE
        for result in results:
            if result.verdict in (FAIL, ERROR, INCONCLUSIVE):
                word = "INCONCLUSIVE" if result.verdict == INCONCLUSIVE else "FAIL"
                echo(f"gpulint verify: {result.path}: {word}: {result.verdict_reason or 'failed'}", err=True)
        return exit_code(results, verifier.internal_error, verifier.uncovered)
    finally:
        if verifier is not None:
            verifier.cleanup()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _interrupt_on_sigterm() -> Any:
    """`kill` or a CI timeout must still end the runs and delete the work folder, as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, interrupt)
    except (ValueError, OSError):
        return None


if __name__ == "__main__":  # pragma: no cover - `gpulint verify` is the entry point
    sys.exit("use `gpulint verify`")
