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
import importlib.util
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
from gpulint.core.source import SourceError, SourceFile, decode_source
from gpulint.core.verification import Verification
from gpulint.engine.files import PathError, Walker
from gpulint.engine.linter import InternalError
from gpulint.notebook import is_notebook
from gpulint.output.progress import progress_wanted
from gpulint.rules.gpu000_invalid_file import InvalidFile
from gpulint.verify import events, guard
from gpulint.verify.compare import Timing, build_timing, compare
from gpulint.verify.events import RunRecord
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
    EXERCISED,
    FAIL,
    INCONCLUSIVE,
    NO_EFFECT,
    NOT_EXERCISED,
    NOT_TRACKED,
    PASS,
    SKIP,
    Plan,
    RuleStatus,
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

    # --- work folder --------------------------------------------------------------------------------
    @property
    def workdir(self) -> Path:
        """Created on first use: a verification that runs nothing leaves nothing behind."""
        if self._workdir is None:
            if self.options.workdir is not None:
                self.options.workdir.mkdir(parents=True, exist_ok=True)
                self._workdir = Path(tempfile.mkdtemp(prefix="verify-", dir=self.options.workdir))
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

    def run_one(self, plan: Plan, result: ScriptResult, version: str, mode: str, folder: Path) -> RunRecord:
        label = f"{version} {mode}"
        overrides = {f.path: (f.new_bytes() if version == "rewritten" else f.source.raw) for f in plan.files}
        spec = RunSpec(
            script=plan.script, folder=folder, steps=result.steps, device=self.device, warmup=result.warmup, mode=mode,
            seed=self.options.seed, threads=self.options.threads, timeout=self.options.timeout,
            script_args=self.options.script_args, roots=(plan.root, Path.cwd()), overrides=overrides,
            sys_path=plan.sys_path, exclude=(self.workdir,), nproc=plan.nproc, torchrun=plan.torchrun,
        )
        record = run_harness(spec, self.progress(label, result.steps), self.site_folder)
        words = events.STATUS_WORDS.get(record.status, record.status)
        line = f"  {label:<22} {words}: {len(record.steps)} of {result.steps} steps in {record.wall_s or 0:.1f} s"
        if progress_wanted():
            line = "\r" + line + " " * 12
        self.echo(line, err=True)
        return record

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
            changed = changes(before, fingerprint(roots, exclude))
            result.isolation = {"files_checked": len(before), "changed": changed}
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
        timing = None
        if self.timing_worthwhile(result):
            timing = self.time_runs(plan, result, runs)
        self.judge(result, timing)

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
        tolerance = result.tolerance
        assert tolerance is not None
        from gpulint.verify.compare import check_run_losses

        return check_run_losses(original, rewritten, tolerance.tolerance).passed

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
        """FAIL reasons, INCONCLUSIVE doubts and notes; then the verdict."""
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
            self._judge_speed(result, timing)
        if result.reasons:
            result.verdict = FAIL
        elif result.doubts:
            result.verdict = INCONCLUSIVE
        else:
            result.verdict = PASS
        result.passed = result.verdict == PASS

    def _judge_runs(self, result: ScriptResult, timing: Optional[Timing]) -> None:
        original, rewritten = result.original, result.rewritten
        assert original is not None and rewritten is not None and result.tolerance is not None
        result.comparison = compare(original, rewritten, result.tolerance.tolerance, timing)
        loss = result.comparison.loss
        partial = [(label, r) for label, r in (("original", original), ("rewritten", rewritten)) if not r.completed]
        if loss is not None and not loss.passed:
            reason = loss.reason
            for code in result.applied:  # what a mismatch may mean when this rule set the tolerance
                verification = rule_for(code)
                if verification is not None and verification.mismatch_hint and verification.tolerance == loss.tolerance:
                    reason += f"; {verification.mismatch_hint}"
            result.reasons.append(reason)
        for label, record in partial:
            if record.status == events.CRASHED and label == "rewritten":
                result.reasons.append(f"the rewritten script crashed after {len(record.steps)} steps: "
                                      + describe_failure(record))
            elif label == "rewritten" or record.status != events.CRASHED:
                compared = (f"the {loss.compared_steps} steps both ran match" if loss and loss.passed
                            else "only the steps both ran were compared")
                result.doubts.append(f"the {label} run {events.STATUS_WORDS.get(record.status, record.status)} after "
                                     f"{len(record.steps)} of {result.steps} steps; {compared}")
            else:
                result.doubts.append(f"the original run crashed after {len(original.steps)} steps ("
                                     f"{describe_failure(original)}); only those steps were compared")
        if not partial and len(rewritten.steps) < len(original.steps):
            result.reasons.append(f"the rewritten script stopped after {len(rewritten.steps)} steps, "
                                  f"the original ran {len(original.steps)}")
        self._judge_training(result)
        result.rules = exercise(result, rewritten)
        for rule in result.rules:
            if rule.status in (NOT_EXERCISED, NOT_TRACKED):
                result.doubts.append(f"{rule.code} {rule.status}: {rule.detail}")

    def _judge_training(self, result: ScriptResult) -> None:
        """Matching losses mean something only if the runs trained: weights moved and the loss went down."""
        comparison = result.comparison
        assert comparison is not None
        old, new = comparison.training_original, comparison.training_rewritten
        if old.trained and new.moved is False:
            result.reasons.append("the rewritten script does not train: " + new.describe())
        elif old.trained and new.trained:
            return
        elif old.moved is False and new.moved is False:
            result.doubts.append("neither run trains, so matching losses prove nothing: the weights did not move "
                                 "(a learning rate of 0, frozen parameters, or every step skipped)")
        elif not old.trained and not new.trained:
            steps = (min(len(result.original.steps), len(result.rewritten.steps))
                     if result.original and result.rewritten else 0)
            result.doubts.append(f"neither run shows a significant loss decrease over {steps} steps (original: "
                                 f"{old.describe()}; rewritten: {new.describe()}), so matching losses do not show "
                                 "that the rewrite trains the same; run more --steps")
        elif not old.trained:
            result.doubts.append(f"the original run shows no training ({old.describe()}); the rewritten one does")
        else:
            result.doubts.append(f"the rewritten run shows no significant training ({new.describe()})")

    def _judge_speed(self, result: ScriptResult, timing: Optional[Timing]) -> None:
        minimum = self.options.min_speedup
        assert minimum is not None
        if timing is None or timing.speedup is None:
            why = "; ".join(timing.failures) if timing and timing.failures else "no timed runs"
            result.doubts.append(f"--min-speedup {minimum:g}: speed not measured ({why})")
            return
        speedup = timing.speedup
        if speedup.low < minimum:
            result.reasons.append(f"speedup {speedup.estimate:.2f}x (95% CI {speedup.low:.2f}-{speedup.high:.2f}x): "
                                  f"its lower bound is below --min-speedup {minimum:g}x")

    def _notes(self, result: ScriptResult) -> None:
        original, rewritten = result.original, result.rewritten
        assert original is not None
        if self.device == "cpu" and mixed_precision(result.applied):
            result.notes.append("ran on the CPU: the mixed-precision loss check is meaningful; its speed is this "
                                "CPU's bfloat16, not a GPU's tensor cores")
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
            where += f" (bfloat16: {machine.cpu_bf16})"
        timing = (f"{o.repeats} interleaved timed run{'s' if o.repeats != 1 else ''} of each version"
                  if o.repeats else "no timed runs")
        launcher = f", torchrun --nproc-per-node {o.nproc}" if o.nproc > 1 else ""
        kept = f"; rewrites and logs kept in {self.workdir}" if self.keep and self._workdir else ""
        return (f"gpulint verify: {count} script{'s' if count != 1 else ''}, up to {o.steps} steps a run{where}"
                f"{launcher}; a checked run of each version, {timing}{kept}")


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


def exercise(result: ScriptResult, record: RunRecord) -> list[RuleStatus]:
    """For each applied rule: did the construct it rewrote run inside the timed steps of the rewritten run?"""
    statuses = []
    for code in result.applied:
        rule = rule_for(code)
        if rule is None:
            statuses.append(RuleStatus(code, NOT_TRACKED, "verify has no record of what this rule's rewrite runs"))
            continue
        if not rule.constructs:
            statuses.append(RuleStatus(code, NO_EFFECT, rule.evidence))
            continue
        ranges = {os.path.realpath(f.path): f.ranges.get(code, []) for f in result.files if code in f.applied}
        tied = any(ranges.values())
        kinds = [s for s in record.sites.values() if s.kind in rule.constructs]

        matched = [s for s in kinds if _rewritten_here(s, rule, ranges if tied else None)]
        timed = sum(record.uses.get(s.id, {}).get(events.PHASE_TIMED, 0) for s in matched)
        if timed:
            used = [s for s in matched if record.uses.get(s.id, {}).get(events.PHASE_TIMED)]
            where = ", ".join(f"{_describe_site(s)} at {s.where()}" for s in used[:3])
            statuses.append(RuleStatus(code, EXERCISED, f"{where}: used {timed} times in the timed steps"))
            continue
        if matched:
            warm = sum(record.uses.get(s.id, {}).get(events.PHASE_WARMUP, 0) for s in matched)
            site = matched[0]
            if warm:
                detail = (f"the rewritten {_describe_site(site)} at {site.where()} was used only in the warm-up "
                          f"steps, never in the timed ones")
            else:
                detail = f"the rewritten {_describe_site(site)} at {site.where()} was built but never used"
        else:
            lines = [f"{Path(p).name}:{a}" + (f"-{b}" if b != a else "") for p, rs in ranges.items() for a, b in rs]
            detail = f"the rewritten code ({', '.join(lines[:3]) or 'unknown lines'}) never ran"
            others = [s for s in kinds if record.uses.get(s.id, {}).get(events.PHASE_TIMED)]
            if others:
                detail += "; the run used " + ", ".join(f"{_describe_site(s)} at {s.where()}" for s in others[:3])
        statuses.append(RuleStatus(code, NOT_EXERCISED, f"{detail} ({rule.evidence}: not seen)"))
    return statuses


def _rewritten_here(site: events.Site, rule: Verification, ranges: Optional[dict[str, list[tuple[int, int]]]]) -> bool:
    """The construct was built by the rewritten lines (`ranges`, by real path), or, when the rule's edits
    cannot be tied to lines (None), it looks like what the rule writes."""
    if ranges is None:
        return rule.expected(site.kind, site.details)
    for path, line in site.frames:
        for start, end in ranges.get(os.path.realpath(path), []):
            if start <= line <= end:
                return True
    return False


def _describe_site(site: events.Site) -> str:
    d = site.details
    if site.kind == "optimizer":
        return f"{d.get('class', 'optimizer')}{' (fused)' if d.get('fused') else ''}"
    if site.kind == "dataloader":
        return f"DataLoader (num_workers={d.get('num_workers')}, pin_memory={d.get('pin_memory')})"
    if site.kind == "autocast":
        return f"autocast({d.get('device_type')}, {d.get('dtype', '').replace('torch.', '')})"
    if site.kind == "grad_scaler":
        return "GradScaler"
    if site.kind == "checkpoint":
        return f"{d.get('function', 'checkpoint')}(use_reentrant={d.get('use_reentrant')})"
    return site.kind


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
            if result.verdict in (FAIL, ERROR):
                echo(f"gpulint verify: {result.path}: FAIL: " + "; ".join(result.reasons or ["failed"]), err=True)
            elif result.verdict == INCONCLUSIVE:
                echo(f"gpulint verify: {result.path}: INCONCLUSIVE: " + "; ".join(result.doubts), err=True)
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
