"""Issue 24: the verdict's reasons from recorded runs, each case on synthetic records (no torch, no runs).

Coverage per edit, exceptions counted, float16 truth on a CPU, behaviour changed on purpose,
training judged in the words of the lines above the verdict, one reason per verdict, and a
speed row that agrees with the speedup.
"""

from __future__ import annotations

import random
import sys
import types
from pathlib import Path

import pytest

from gpulint.core.source import decode_source
from gpulint.core.verification import MIXED_PRECISION
from gpulint.verify import events
from gpulint.verify.compare import Timing, TrainingSignal, compare
from gpulint.verify.events import RunRecord, Site, StepRecord
from gpulint.verify.judge import (
    exception_findings,
    exercise,
    finish_verdict,
    float16_outcome,
    named_changes,
    training_doubt_or_reason,
    uncovered_edits,
)
from gpulint.verify.project import Edit, RewrittenFile
from gpulint.verify.report import script_table, summary_table
from gpulint.verify.results import PARTLY_EXERCISED, ScriptResult, VerifyOptions
from gpulint.verify.rules import tolerance_for
from gpulint.verify.stats import Speedup, median_of_runs, speedup

LOSSES = [2.0 - 0.04 * i for i in range(30)]


def _record(losses: list[float] = LOSSES, status: str = events.STOPPED, **fields: object) -> RunRecord:
    steps = [StepRecord(i + 1, v, None if i == 0 else 0.01) for i, v in enumerate(losses)]
    record = RunRecord(status=status, steps=steps, environment={"device": "cpu", "device_name": "x86_64"},
                       memory={"peak_rss_bytes": 1 << 20},
                       training={"tensors": 4, "changed_tensors": 4, "moved": True, "relative_change": 0.3})
    for key, value in fields.items():
        setattr(record, key, value)
    return record


def _file(tmp_path: Path, old: str, new: str, applied: tuple[str, ...], edits: list[tuple[str, int, int, int]]
          ) -> RewrittenFile:
    path = tmp_path / "train.py"
    path.write_text(old)
    rewritten = RewrittenFile(path, decode_source(old.encode(), path), new, applied)
    rewritten.edits = [Edit(code, path, line, ((start, end),), new.splitlines()[start - 1].strip())
                       for code, line, start, end in edits]
    return rewritten


# --- coverage per edit -------------------------------------------------------------------------------
def test_a_rule_is_exercised_only_when_every_edit_ran(tmp_path: Path) -> None:
    """The issue's case: the val loader's rewrite never ran and the report still claimed the rule."""
    old = "train = DataLoader(a)\nval = DataLoader(b)\n"
    new = "train = DataLoader(a, pin_memory=True)\nval = DataLoader(b, pin_memory=True)\n"
    file = _file(tmp_path, old, new, ("GPU101",), [("GPU101", 1, 1, 1), ("GPU101", 2, 2, 2)])
    path = str(file.path)
    record = _record(sites={1: Site(1, "dataloader", [(path, 1)], {"pin_memory": True}),
                            2: Site(2, "dataloader", [(path, 2)], {"pin_memory": True})},
                     uses={1: {events.PHASE_TIMED: 28}})
    result = ScriptResult(path, applied=("GPU101",), files=[file])
    [rule] = exercise(result, record)
    assert rule.status == PARTLY_EXERCISED
    assert "1 of 2 edits ran; not the one at train.py:2" in rule.detail
    assert [e.exercised for e in rule.edits] == [True, False]
    uncovered = uncovered_edits([rule])
    assert uncovered == ["GPU101 at train.py:2 (val = DataLoader(b, pin_memory=True)): the rewritten DataLoader "
                         "(num_workers=None, pin_memory=True) at train.py:2 was built but never used"]
    result.rules, result.uncovered = [rule], uncovered
    finish_verdict(result)
    assert result.verdict == "PASS"  # a PASS that names what it does not cover
    text = script_table(result, VerifyOptions(paths=(file.path,)))
    assert "not covered by this verdict: GPU101 at train.py:2" in text
    assert text.rstrip().endswith("verdict: PASS, except the 1 edit listed as not covered")


# --- exceptions inside the steps ----------------------------------------------------------------------
def test_an_exception_the_rewrite_raises_is_a_reason_with_its_last_frame(tmp_path: Path) -> None:
    old = "logits = model(x)\nloss = f(logits)\ntry:\n    s.index_add_(0, y, logits)\nexcept:\n    pass\n"
    new = "with autocast():\n    logits = model(x)\n    loss = f(logits)\n" + old.split("\n", 2)[2]
    file = _file(tmp_path, old, new, ("GPU001",), [("GPU001", 1, 1, 3)])
    sample = {"type": "RuntimeError", "message": "index_add_(): self (Float) and source (BFloat16) must have the "
              "same scalar type", "raised_at": f"{file.path}:5", "function": "<module>",
              "reached": f"{file.path}:5", "key": "RuntimeError in train.py:<module>", "step": 2}
    rewritten = _record(exceptions={sample["key"]: 24}, exception_samples=[sample])
    found = exception_findings(_record(), rewritten, [file])
    assert found.reason is not None
    assert found.reason.startswith("the rewritten run raised RuntimeError 24 times inside the training steps "
                                   "(the original: 0), first after 1 completed step, caught by the script at "
                                   "train.py:4: index_add_()")
    assert "last frame train.py:4 in <module>" in found.reason  # the user's line, not the rewritten file's 5
    assert found.blamed == ()  # the line is outside GPU001's edit
    same = exception_findings(_record(exceptions={sample["key"]: 24}), rewritten, [file])
    assert same.reason is None and "the rewritten run as often" in same.lines[0]


# --- float16 ------------------------------------------------------------------------------------------
def _autocast(requested: str, ran: str) -> dict:
    return {"sites": {1: Site(1, "autocast", [("train.py", 5)], {"requested": f"torch.{requested}",
                                                                  "dtype": f"torch.{ran}", "enabled": True})},
            "uses": {1: {events.PHASE_TIMED: 10}}}


OVERFLOW = {"ops": 40, "max_abs": 1.8e5, "min_nonzero": 1e-5, "overflows": [
    {"func": "linear", "value": 1.8e5, "step": 1, "where": None}], "epsilons": []}


def test_float16_emulated_in_bfloat16_is_a_fail_when_the_probe_sees_an_overflow() -> None:
    """The issue's false PASS: float16 ran as bfloat16 on the CPU, where 1.8e5 fits."""
    rewritten = _record(ranges=OVERFLOW, **_autocast("float16", "bfloat16"))
    outcome = float16_outcome(_record(), rewritten, [], "cpu", emulated=True)
    assert outcome.reason is not None and outcome.reason.startswith("float16 overflow: linear")
    assert "65504" in outcome.reason and "bfloat16 emulation" in outcome.reason
    assert "bfloat16 emulation" in outcome.line and outcome.summary["bfloat16_emulation"] is True
    calm = _record(ranges={"ops": 40, "max_abs": 33.0, "overflows": [], "epsilons": []},
                   **_autocast("float16", "bfloat16"))
    quiet = float16_outcome(_record(), calm, [], "cpu", emulated=True)
    assert quiet.reason is None and not quiet.warnings and "largest magnitude 33" in quiet.line


def test_float16_chosen_only_on_other_gpus_is_a_warning_and_never_a_pass(tmp_path: Path) -> None:
    """amp-dtype "auto": bfloat16 here, float16 on a V100 or T4."""
    new = ("amp_dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16\n"
           "with torch.autocast('cuda', dtype=amp_dtype):\n    y = model(x)\n")
    file = _file(tmp_path, "y = model(x)\n", new, ("GPU001",), [("GPU001", 1, 1, 3)])
    rewritten = _record(ranges=OVERFLOW, **_autocast("bfloat16", "bfloat16"))
    outcome = float16_outcome(_record(), rewritten, [file], "cpu", emulated=True)
    assert outcome.reason is None
    assert outcome.warnings and "GPUs without bfloat16" in outcome.warnings[0]
    result = ScriptResult("train.py", warnings=outcome.warnings)
    finish_verdict(result)
    assert result.verdict == "INCONCLUSIVE"


def test_an_epsilon_below_float16s_smallest_step_is_a_warning() -> None:
    ranges = {"ops": 10, "max_abs": 1.0, "overflows": [], "epsilons": [
        {"func": "add", "value": 1e-15, "step": 3, "where": None}]}
    outcome = float16_outcome(_record(), _record(ranges=ranges, **_autocast("float16", "float16")), [], "cpu",
                              emulated=False)
    assert outcome.reason is None
    assert outcome.warnings[0].startswith("float16 underflow: add at an op outside the user's code adds 1.0e-15")
    assert "ran in float16 on this CPU" in outcome.line


# --- behaviour changed on purpose -------------------------------------------------------------------
def test_more_parameters_training_is_named_with_the_counts() -> None:
    """GPU302: 2 of 10 parameter tensors changed before, 10 of 10 after."""
    original = _record(training={"tensors": 10, "changed_tensors": 2, "moved": True})
    rewritten = _record(training={"tensors": 10, "changed_tensors": 10, "moved": True})
    [change] = named_changes(("GPU302",), original, rewritten)
    assert change.rules == ("GPU302",)
    assert change.text.startswith("more parameters train: 10 of 10 parameter tensors change in the rewrite, 2 of "
                                  "10 in the original (GPU302: with use_reentrant=False")


def test_workers_drawing_other_random_numbers_are_named_as_a_random_stream_change() -> None:
    loaders = {"sites": {1: Site(1, "dataloader", [("t.py", 3)], {"num_workers": 0, "generator": False})}}
    workers = {"sites": {1: Site(1, "dataloader", [("t.py", 3)], {"num_workers": 2, "generator": False})}}
    original = _record(global_rng={"torch": "Noisy"}, **loaders)
    [change] = named_changes(("GPU001", "GPU102"), original, _record(**workers))
    assert change.rules == ("GPU102",) and change.reference == "the random streams made equal"
    assert "the dataset (Noisy) draws from torch's process-wide generator" in change.text
    assert named_changes(("GPU102",), _record(**loaders), _record(**workers)) == []  # no draws: bit-exact


# --- did it train: the words of the lines above ---------------------------------------------------------
def test_the_training_doubt_never_contradicts_the_training_lines() -> None:
    """The issue: "no significant loss decrease" beside "loss decreasing (p=4.2e-07)" (parameters not measured)."""
    trend = compare(_record(), _record(), MIXED_PRECISION).training_original.trend
    unmeasured = TrainingSignal(None, None, 0, trend, steps=30)
    assert "loss decreasing" in unmeasured.describe()
    reason, doubt = training_doubt_or_reason(unmeasured, unmeasured)
    assert reason is None and doubt is not None
    assert "could not be measured" in doubt and "no significant" not in doubt


# --- one reason per verdict, consistent with the lines above -----------------------------------------
def test_the_loss_line_never_says_pass_above_a_fail() -> None:
    original = _record()
    rewritten = _record(LOSSES[:10], status=events.CRASHED, message="RuntimeError: boom")
    result = ScriptResult("train.py", applied=("GPU001",), tolerance=tolerance_for(["GPU001"]), original=original,
                          rewritten=rewritten, steps=30, warmup=2)
    result.comparison = compare(original, rewritten, MIXED_PRECISION)
    result.reasons = ["the rewritten script crashed after 10 steps: crashed: RuntimeError: boom",
                      "the rewritten script does not train: its weights did not move"]
    finish_verdict(result)
    text = script_table(result, VerifyOptions(paths=(Path("train.py"),)))
    assert "loss: PASS" not in text and "loss: identical bit for bit over 10 steps" in text
    lines = text.rstrip().splitlines()
    assert lines[-1] == "verdict: FAIL: the rewritten script crashed after 10 steps: crashed: RuntimeError: boom"
    assert lines[-2] == "also: the rewritten script does not train: its weights did not move"
    assert "PASS" not in summary_table([result]).splitlines()[1]


# --- speed ----------------------------------------------------------------------------------------------
def test_the_step_time_row_and_the_speedup_agree() -> None:
    """The issue: 2.9 ms -> 1.9 ms beside "1.02x" (a pooled median beside a median of ratios)."""
    rng = random.Random(1)
    original = [[0.0029 * (1 + rng.gauss(0, 0.01)) for _ in range(40)] for _ in range(3)]
    rewritten = [[t * f for t in run] for run, f in zip(
        [[0.0029 * (1 + rng.gauss(0, 0.01)) for _ in range(40)] for _ in range(3)], (0.6, 1.0, 0.62))]
    result = speedup(original, rewritten)
    assert result is not None
    shown_old, shown_new = median_of_runs(original), median_of_runs(rewritten)
    assert shown_old is not None and shown_new is not None
    assert result.estimate == pytest.approx(shown_old / shown_new)


def test_an_interval_spanning_a_factor_of_57_is_not_reported_as_a_result() -> None:
    """The issue's notebook: 0.55-31.61x."""
    wide = Speedup(1.2, 0.55, 31.61, 3)
    assert wide.too_noisy
    timing = Timing(["original", "rewritten"], [[0.01]], [[0.01]], [1.0], 2, speedup=wide)
    result = ScriptResult("nb.ipynb.py", applied=("GPU101",), tolerance=tolerance_for(["GPU101"]),
                          original=_record(), rewritten=_record(), steps=30, warmup=2, repeats=3, verdict="PASS")
    result.comparison = compare(result.original, result.rewritten, MIXED_PRECISION, timing)  # type: ignore[arg-type]
    text = script_table(result, VerifyOptions(paths=(Path("nb.ipynb"),)))
    assert "speed: too noisy for an estimate" in text and "1.20x" not in text
    assert "too noisy (0.55-31.61)" in summary_table([result])


# --- the JSON of every run ------------------------------------------------------------------------------
def test_torch_ops_and_classes_are_not_imported_user_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.ops and torch.classes carry a bare "_ops.py" / "_classes.py" as __file__."""
    from gpulint.verify.harness import _imported

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text("x = 1\n")
    for name, file in (("fake_ops", "_ops.py"), ("fake_classes", "_classes.py"), ("mine", str(tmp_path / "mine.py"))):
        module = types.ModuleType(name)
        module.__file__ = file
        monkeypatch.setitem(sys.modules, name, module)
    recorder = types.SimpleNamespace(mirror=None, user_roots=[str(tmp_path)])
    found = _imported(recorder)  # type: ignore[arg-type]
    assert [item["path"] for item in found] == [str(tmp_path / "mine.py")]


def test_an_edit_that_only_changes_imports_is_not_required_to_run(tmp_path: Path) -> None:
    old = "from torch.cuda.amp import autocast\nwith autocast():\n    y = model(x)\n"
    new = "from torch.amp import autocast\nwith autocast('cuda'):\n    y = model(x)\n"
    file = _file(tmp_path, old, new, ("GPU003",), [("GPU003", 1, 1, 1), ("GPU003", 2, 2, 2)])
    file.edits[0] = Edit("GPU003", file.path, 1, ((1, 1),), file.edits[0].text, runtime=False)
    record = _record(sites={1: Site(1, "autocast", [(str(file.path), 2)], {"enabled": True})},
                     uses={1: {events.PHASE_TIMED: 5}})
    [rule] = exercise(ScriptResult(str(file.path), applied=("GPU003",), files=[file]), record)
    assert rule.status == "exercised" and len(rule.edits) == 1


def test_each_finding_is_its_own_edit_even_on_adjacent_lines() -> None:
    """Two loaders on consecutive lines used to share one range, so the train loader "exercised" both edits."""
    from gpulint.config import CliOverrides, SettingsResolver
    from gpulint.core.options import STRICTNESS
    from gpulint.verify.project import rewrite_file

    script = Path(__file__).parent / "scripts" / "two_loaders.py"
    settings = SettingsResolver(CliOverrides(lint_tests=True)).for_path(script)
    # its batches stay on the CPU, so GPU101's reaches-cuda premise is undecided: pedantic reports it
    rewritten = rewrite_file(script, settings.with_values({STRICTNESS.key: "pedantic"}))
    loaders = [e for e in rewritten.edits if e.code == "GPU101"]  # (the scripts' gpulint.toml also lets GPU001 in)
    assert [(e.code, e.line, e.ranges) for e in loaders] == [("GPU101", 13, ((13, 13),)), ("GPU101", 14, ((14, 14),))]
    assert loaders[1].text.startswith("val_loader = DataLoader(") and rewritten.original_line(14) == 14
