"""Turn what the runs recorded into one verdict with one reason, and the lines that back it up.

Pure judgement, no runs: the session (session.py) runs the scripts, then hands the records here.
Everything a reader needs to act on a verdict is decided in this module, in this order:

1. does each version run, and does the rewrite raise where the original did not (exceptions inside
   the training steps are counted, also the ones the script catches);
2. float16: does a region the rewrite computes in float16 overflow (or lose an added epsilon);
3. the loss against the rule's own tolerance plus the measured noise floor (compare.py);
4. behaviour the rewrite changes on purpose, named (other random streams, more parameters training);
5. did both versions train, and did every edit run in the timed steps (coverage per edit).

No torch here.
"""

from __future__ import annotations

import math
import os
from dataclasses import field
from pathlib import Path
from typing import Iterable, Optional

from gpulint.core.verification import RANDOM_STREAMS, TRAINED_PARAMETERS, Tolerance, Verification
from gpulint.records import dataclass
from gpulint.verify import events
from gpulint.verify.compare import NoiseFloor, Timing, TrainingSignal, check_losses
from gpulint.verify.events import RunRecord
from gpulint.verify.instruments import FLOAT16_MAX, FLOAT16_TINY
from gpulint.verify.process import describe_failure
from gpulint.verify.project import Edit, RewrittenFile
from gpulint.verify.results import (
    EXERCISED,
    FAIL,
    INCONCLUSIVE,
    NO_EFFECT,
    NOT_EXERCISED,
    NOT_TRACKED,
    PARTLY_EXERCISED,
    PASS,
    EditStatus,
    RuleStatus,
    ScriptResult,
)
from gpulint.verify.rules import mixed_precision, rule_for


# --- behaviour changed on purpose -------------------------------------------------------------------
@dataclass
class NamedChange:
    kind: str  # RANDOM_STREAMS or TRAINED_PARAMETERS
    rules: tuple[str, ...]  # the applied rules that make it (empty: none of them says it may)
    text: str
    reference: str = ""  # how the rest of the rewrite is then compared


def _declaring(applied: Iterable[str], kind: str) -> tuple[str, ...]:
    found = []
    for code in applied:
        verification = rule_for(code)
        if verification is not None and kind in verification.changes:
            found.append(code)
    return tuple(sorted(found))


def _loaders(record: RunRecord) -> list[dict]:
    return [site.details for site in record.sites.values() if site.kind == "dataloader"]


def named_changes(applied: Iterable[str], original: RunRecord, rewritten: RunRecord) -> list[NamedChange]:
    """What the rewrite changes by design, seen in the runs: the random numbers a dataset draws (it draws
    from a process-wide generator while loading, and the rewrite moves loading into workers or gives the
    loader a generator), and the number of parameters that train."""
    applied = tuple(applied)
    found = []
    old_loaders, new_loaders = _loaders(original), _loaders(rewritten)
    workers_added = (old_loaders and new_loaders and max((d.get("num_workers") or 0) for d in old_loaders) == 0
                     and any((d.get("num_workers") or 0) > 0 for d in new_loaders))
    generator_added = (old_loaders and not any(d.get("generator") for d in old_loaders)
                       and any(d.get("generator") for d in new_loaders))
    if original.global_rng and (workers_added or generator_added):
        rules = _declaring(applied, RANDOM_STREAMS)
        generators = ", ".join(f"{name}'s" for name in sorted(original.global_rng))
        datasets = ", ".join(sorted(set(original.global_rng.values())))
        how = ("moves loading into worker processes, which draw from seeds of their own" if workers_added
               else "gives the loader a generator of its own")
        found.append(NamedChange(
            RANDOM_STREAMS, rules,
            f"random streams: the dataset ({datasets}) draws from {generators} process-wide generator while a "
            f"batch loads, and {', '.join(rules) or 'the rewrite'} {how}, so its random augmentation differs "
            "from the original's (same distribution, other numbers; seed a generator per item to make it "
            "reproducible)",
            "the random streams made equal"))
    old = original.training or {}
    new = rewritten.training or {}
    old_changed, new_changed = int(old.get("changed_tensors", 0) or 0), int(new.get("changed_tensors", 0) or 0)
    tensors = int(new.get("tensors", 0) or 0)
    if new_changed > old_changed and old.get("tensors"):
        rules = _declaring(applied, TRAINED_PARAMETERS)
        why = (f" ({', '.join(rules)}: with use_reentrant=False a checkpointed block's parameters receive "
               "gradients even when its inputs do not require grad; the reentrant default gave them none)"
               if rules else "")
        found.append(NamedChange(
            TRAINED_PARAMETERS, rules,
            f"more parameters train: {new_changed} of {tensors} parameter tensors change in the rewrite, "
            f"{old_changed} of {old.get('tensors')} in the original{why}",
            "the same parameters training"))
    return found


def fewer_parameters(original: RunRecord, rewritten: RunRecord) -> Optional[str]:
    old, new = original.training or {}, rewritten.training or {}
    old_changed, new_changed = int(old.get("changed_tensors", 0) or 0), int(new.get("changed_tensors", 0) or 0)
    if new.get("tensors") and 0 < new_changed < old_changed:
        return (f"the rewrite trains fewer parameters: {new_changed} of {new.get('tensors')} parameter tensors "
                f"change, {old_changed} of {old.get('tensors')} in the original")
    return None


# --- exceptions inside the steps --------------------------------------------------------------------
@dataclass
class ExceptionFinding:
    reason: Optional[str]  # the rewrite raises where the original did not
    lines: list[str] = field(default_factory=list)
    blamed: tuple[str, ...] = ()  # the rules whose edit holds the line the exception reached
    first_step: Optional[int] = None


def _where(location: str, files: list[RewrittenFile]) -> tuple[str, Optional[int], Optional[RewrittenFile]]:
    """A rewritten file's path:line as the user's file and line."""
    path, _, line = location.rpartition(":")
    if not line.isdigit():
        return location, None, None
    for rewritten in files:
        if os.path.realpath(rewritten.path) == os.path.realpath(path):
            return f"{rewritten.path.name}:{rewritten.original_line(int(line))}", int(line), rewritten
    return f"{Path(path).name}:{line}", int(line), None


def _edits_at(files: list[RewrittenFile], rewritten: Optional[RewrittenFile], line: Optional[int]) -> tuple[str, ...]:
    if rewritten is None or line is None:
        return ()
    return tuple(sorted({e.code for e in rewritten.edits if any(a <= line <= b for a, b in e.ranges)}))


def _first(step: object) -> str:
    """The harness records the step in progress; an exception after an optimizer step belongs to the one done."""
    if not isinstance(step, int):
        return ""
    if step <= 1:
        return ", first before any step completed"
    return f", first after {step - 1} completed step{'s' if step != 2 else ''}"


def exception_findings(original: RunRecord, rewritten: RunRecord, files: list[RewrittenFile]) -> ExceptionFinding:
    finding = ExceptionFinding(None)
    samples = {s.get("key"): s for s in rewritten.exception_samples}
    new = {key: count for key, count in rewritten.exceptions.items() if count > original.exceptions.get(key, 0)}
    for key, count in sorted(original.exceptions.items()):
        finding.lines.append(f"the original run raised {key} {count} time{'s' if count != 1 else ''} inside its "
                             "steps" + (", the rewritten run as often" if rewritten.exceptions.get(key) == count
                                        else f", the rewritten run {rewritten.exceptions.get(key, 0)}"))
    for key, count in sorted(new.items(), key=lambda item: -item[1]):
        sample = samples.get(key, {})
        reached, line, where_file = _where(str(sample.get("reached", "?")), files)
        raised, _, _ = _where(str(sample.get("raised_at", "?")), files)
        message = sample.get("message") or ""
        text = (f"the rewritten run raised {sample.get('type', key)} {count} time{'s' if count != 1 else ''} inside "
                f"the training steps (the original: {original.exceptions.get(key, 0)})"
                f"{_first(sample.get('step'))}, "
                f"{'caught by the script' if rewritten.completed else 'reaching'} at {reached}: "
                f"{message or '(no message)'}; last frame {raised} in {sample.get('function', '?')}")
        finding.lines.append(text)
        if finding.reason is None:
            finding.reason = text
            finding.blamed = _edits_at(files, where_file, line)
            finding.first_step = sample.get("step")
    return finding


# --- float16 ------------------------------------------------------------------------------------------
@dataclass
class Float16Outcome:
    reason: Optional[str] = None
    warnings: list[str] = field(default_factory=list)
    line: str = ""  # the report's "float16:" line
    summary: dict = field(default_factory=dict)


def _autocast_sites(record: RunRecord) -> list[dict]:
    return [dict(s.details, used=bool(record.uses.get(s.id))) for s in record.sites.values()
            if s.kind == "autocast" and s.details.get("enabled", True) is not False]


def autocast_bits(record: RunRecord) -> Optional[int]:
    """Mantissa bits of the 16-bit type the run's autocast regions computed in (the coarser when both ran)."""
    ran = {str(s.get("dtype", "")).replace("torch.", "") for s in _autocast_sites(record) if s["used"]}
    if "bfloat16" in ran:
        return 7
    return 10 if "float16" in ran else None


def may_choose_float16(files: list[RewrittenFile]) -> bool:
    """The rewrite writes a run-time choice between bfloat16 and float16 (amp-dtype "auto")."""
    return any(f.changed and mixed_precision(f.applied) and "is_bf16_supported" in f.new_text
               and ("float16" in f.new_text or "torch.half" in f.new_text) for f in files)


def float16_outcome(original: RunRecord, rewritten: RunRecord, files: list[RewrittenFile], device: str,
                    emulated: bool) -> Float16Outcome:
    """What ran in float16, and what the range probe predicts for float16 where this CPU ran bfloat16."""
    outcome = Float16Outcome()
    sites = [s for s in _autocast_sites(rewritten) if s["used"]]
    requested = {str(s.get("requested", s.get("dtype", ""))).replace("torch.", "") for s in sites}
    ran = {str(s.get("dtype", "")).replace("torch.", "") for s in sites}
    certain = "float16" in requested
    conditional = not certain and may_choose_float16(files)
    probe = rewritten.ranges or {}
    outcome.summary = {"requested": sorted(requested), "ran": sorted(ran), "bfloat16_emulation":
                       certain and emulated and device == "cpu", "float16_on_other_gpus": conditional,
                       "probe": probe or None}
    if not sites:
        return outcome
    if device == "cpu":
        if certain and emulated:
            outcome.line = ("float16 regions ran in bfloat16 on this CPU (bfloat16 emulation: it has no float16 "
                            "arithmetic); float16's range was checked by the range probe")
        elif certain:
            outcome.line = "float16 regions ran in float16 on this CPU (CPU float16 autocast)"
        elif conditional:
            outcome.line = ("the rewrite chooses bfloat16 where supported, as here, and float16 otherwise (V100, "
                            "T4); the range probe checked what float16 would do")
        else:
            outcome.line = "the autocast regions ran in " + (", ".join(sorted(ran)) or "?") + " on this CPU"
    if not (certain or conditional) or not probe:
        return outcome
    outcome.line += (f"; largest magnitude {probe.get('max_abs', 0):.3g} (float16 limit {FLOAT16_MAX:g})"
                     + (f", smallest non-zero {probe['min_nonzero']:.2g}" if probe.get("min_nonzero") else "")
                     + f" over {probe.get('ops', 0)} results")
    if original.ranges and original.ranges.get("overflows"):
        outcome.warnings.append("the original's own 16-bit autocast regions overflow float16's range too: "
                                + _probe_place(original.ranges["overflows"][0], files))
        return outcome
    overflows = probe.get("overflows") or []
    if overflows:
        place = _probe_place(overflows[0], files)
        value = overflows[0].get("value")
        size = f"|x| = {value:.3g}" if isinstance(value, (int, float)) and math.isfinite(value) else "inf/NaN"
        what = (f"float16 overflow: {place} produced {size} at step {overflows[0].get('step')}, beyond float16's "
                f"{FLOAT16_MAX:g}")
        if certain:
            suffix = (", so on a GPU this region turns the loss into inf/NaN and the GradScaler's scale collapses "
                      "(predicted by the range probe: this CPU ran the region in bfloat16, bfloat16 emulation)"
                      if emulated and device == "cpu" else "")
            outcome.reason = what + suffix
        else:
            outcome.warnings.append(what + ": on GPUs without bfloat16, where the rewrite chooses float16, the loss "
                                    "turns inf/NaN (predicted by the range probe)")
    for epsilon in (probe.get("epsilons") or [])[:2]:
        outcome.warnings.append(
            f"float16 underflow: {_probe_place(epsilon, files)} adds {epsilon.get('value', 0):.1e}, below "
            f"float16's smallest step {FLOAT16_TINY:.1e}: in float16 it adds nothing, so a log or a division "
            "it guards can meet 0" + ("" if certain else " (where the rewrite chooses float16)"))
    return outcome


def _probe_place(found: dict, files: list[RewrittenFile]) -> str:
    where = found.get("where")
    place = _where(where, files)[0] if where else "an op outside the user's code"
    return f"{found.get('func', '?')} at {place}"


# --- did it train -------------------------------------------------------------------------------------
def training_doubt_or_reason(old: TrainingSignal, new: TrainingSignal) -> tuple[Optional[str], Optional[str]]:
    """(reason, doubt): matching losses mean something only if the runs trained. The words are those of
    the "training:" lines above the verdict, never a claim those lines contradict."""
    old_missing, new_missing = old.missing(), new.missing()
    if old_missing is None and new.moved is False:
        return "the rewritten script does not train: " + (new_missing or ""), None
    if old_missing is None and new_missing is None:
        return None, None
    if old.moved is False and new.moved is False:
        return None, ("neither run trains, so matching losses prove nothing: the weights did not move "
                      "(a learning rate of 0, frozen parameters, or every step skipped)")
    if old_missing is not None and new_missing is not None:
        if old_missing == new_missing:
            return None, f"neither run shows training, so matching losses prove nothing: in each, {old_missing}"
        return None, (f"neither run shows training, so matching losses prove nothing: in the original "
                      f"{old_missing}; in the rewrite {new_missing}")
    if old_missing is not None:
        return None, f"the original run shows no training ({old_missing}); the rewritten one does"
    return None, f"the rewritten run shows no training ({new_missing})"


# --- coverage per edit ------------------------------------------------------------------------------
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
    if site.kind == "attention":
        return f"scaled_dot_product_attention(is_causal={d.get('is_causal')})"
    if site.kind == "foreach":
        return f"torch.{d.get('function', '_foreach')}({d.get('tensors')} tensors)"
    return site.kind


def _in_ranges(site: events.Site, ranges: dict[str, list[tuple[int, int]]]) -> bool:
    for path, line in site.frames:
        for start, end in ranges.get(os.path.realpath(path), []):
            if start <= line <= end:
                return True
    return False


def _edit_status(edit: Edit, rule: Verification, record: RunRecord) -> EditStatus:
    ranges = {os.path.realpath(edit.path): list(edit.ranges)}
    kinds = [s for s in record.sites.values() if s.kind in rule.constructs]
    matched = [s for s in kinds if _in_ranges(s, ranges)]
    timed = sum(record.uses.get(s.id, {}).get(events.PHASE_TIMED, 0) for s in matched)
    if timed:
        used = [s for s in matched if record.uses.get(s.id, {}).get(events.PHASE_TIMED)]
        where = ", ".join(f"{_describe_site(s)} at {s.where()}" for s in used[:3])
        return EditStatus(edit.where(), edit.text, True, f"{where}: used {timed} times in the timed steps")
    if matched:
        site = matched[0]
        if sum(record.uses.get(s.id, {}).get(events.PHASE_WARMUP, 0) for s in matched):
            detail = (f"the rewritten {_describe_site(site)} at {site.where()} was used only in the warm-up steps, "
                      "never in the timed ones")
        else:
            detail = f"the rewritten {_describe_site(site)} at {site.where()} was built but never used"
    else:
        shown = ", ".join(f"{edit.path.name}:{a}" + (f"-{b}" if b != a else "") for a, b in edit.ranges[:3])
        detail = f"the rewritten code ({shown or 'unknown lines'}) never ran"
    return EditStatus(edit.where(), edit.text, False, detail)


def exercise(result: ScriptResult, record: RunRecord) -> list[RuleStatus]:
    """For each applied rule and each of its edits: did the construct it rewrote run in the timed steps?
    A rule is EXERCISED only when all its edits ran; PARTLY EXERCISED names the ones that did not."""
    statuses = []
    for code in result.applied:
        rule = rule_for(code)
        if rule is None:
            statuses.append(RuleStatus(code, NOT_TRACKED, "verify has no record of what this rule's rewrite runs"))
            continue
        if not rule.constructs:
            statuses.append(RuleStatus(code, NO_EFFECT, rule.evidence))
            continue
        edits = [e for f in result.files for e in f.edits if e.code == code and e.ranges and e.runtime]
        if not edits:  # the edits cannot be tied to lines: any construct that looks like the rule's output
            statuses.append(_untied_status(code, rule, record))
            continue
        done = [_edit_status(edit, rule, record) for edit in edits]
        ran = [e for e in done if e.exercised]
        if len(ran) == len(done):
            detail = "; ".join(e.detail for e in ran[:2]) + (f" (all {len(done)} edits)" if len(done) > 1 else "")
            statuses.append(RuleStatus(code, EXERCISED, detail, done))
            continue
        missed = [e for e in done if not e.exercised]
        if ran:
            detail = (f"{len(ran)} of {len(done)} edits ran; not the one at {missed[0].where}: {missed[0].detail}")
            statuses.append(RuleStatus(code, PARTLY_EXERCISED, detail, done))
            continue
        detail = missed[0].detail
        others = [s for s in record.sites.values() if s.kind in rule.constructs
                  and record.uses.get(s.id, {}).get(events.PHASE_TIMED)]
        if others and "never ran" in detail:
            detail += "; the run used " + ", ".join(f"{_describe_site(s)} at {s.where()}" for s in others[:3])
        statuses.append(RuleStatus(code, NOT_EXERCISED, f"{detail} ({rule.evidence}: not seen)", done))
    return statuses


def _untied_status(code: str, rule: Verification, record: RunRecord) -> RuleStatus:
    matched = [s for s in record.sites.values() if s.kind in rule.constructs and rule.expected(s.kind, s.details)]
    used = [s for s in matched if record.uses.get(s.id, {}).get(events.PHASE_TIMED)]
    if used:
        timed = sum(record.uses[s.id][events.PHASE_TIMED] for s in used)
        where = ", ".join(f"{_describe_site(s)} at {s.where()}" for s in used[:3])
        return RuleStatus(code, EXERCISED, f"{where}: used {timed} times in the timed steps")
    return RuleStatus(code, NOT_EXERCISED, f"nothing the rewrite builds ran in the timed steps ({rule.evidence}: "
                                           "not seen)")


# --- the verdict ------------------------------------------------------------------------------------
def finish_verdict(result: ScriptResult) -> None:
    """FAIL on any reason, else INCONCLUSIVE on any warning or doubt, else PASS; the first reason is the
    verdict's own, and a PASS names the edits it does not cover."""
    if result.reasons:
        result.verdict = FAIL
    elif result.warnings or result.doubts:
        result.verdict = INCONCLUSIVE
    else:
        result.verdict = PASS
    result.passed = result.verdict == PASS


def uncovered_edits(rules: list[RuleStatus]) -> list[str]:
    lines = []
    for rule in rules:
        if rule.status == PARTLY_EXERCISED:
            for edit in rule.edits:
                if not edit.exercised:
                    text = f" ({edit.text})" if edit.text else ""
                    lines.append(f"{rule.code} at {edit.where}{text}: {edit.detail}")
    return lines


def partial_run_lines(result: ScriptResult, compared: int, loss_matched: bool) -> tuple[list[str], list[str]]:
    """(reasons, doubts) for runs that stopped before --steps."""
    reasons: list[str] = []
    doubts: list[str] = []
    original, rewritten = result.original, result.rewritten
    assert original is not None and rewritten is not None
    for label, record in (("original", original), ("rewritten", rewritten)):
        if record.completed:
            continue
        if record.status == events.CRASHED and label == "rewritten":
            reasons.append(f"the rewritten script crashed after {len(record.steps)} steps: "
                           + describe_failure(record))
        elif label == "rewritten" or record.status != events.CRASHED:
            what = (f"the {compared} steps both ran match" if loss_matched else "only the steps both ran were compared")
            doubts.append(f"the {label} run {events.STATUS_WORDS.get(record.status, record.status)} after "
                          f"{len(record.steps)} of {result.steps} steps; {what}")
        else:
            doubts.append(f"the original run crashed after {len(original.steps)} steps ({describe_failure(original)})"
                          "; only those steps were compared")
    if rewritten.completed and original.completed and len(rewritten.steps) < len(original.steps):
        reasons.append(f"the rewritten script stopped after {len(rewritten.steps)} steps, the original ran "
                       f"{len(original.steps)}")
    return reasons, doubts


def speed_reason(timing: Optional[Timing], minimum: float) -> tuple[Optional[str], Optional[str]]:
    if timing is None or timing.speedup is None:
        why = "; ".join(timing.failures) if timing and timing.failures else "no timed runs"
        return None, f"--min-speedup {minimum:g}: speed not measured ({why})"
    speedup = timing.speedup
    if speedup.low < minimum:
        return (f"speedup {speedup.estimate:.2f}x (95% CI {speedup.low:.2f}-{speedup.high:.2f}x): its lower bound "
                f"is below --min-speedup {minimum:g}x"), None
    return None, None



def subset_failure(base: RunRecord, record: RunRecord, tolerance: Tolerance, noise: Optional[NoiseFloor],
                   steps: int) -> Optional[str]:
    """How a rewrite with some of the rules fails against the reference over its first `steps` steps."""
    if not record.steps:
        return "does not run: " + describe_failure(record)
    if record.status == events.CRASHED:
        return f"crashes after {len(record.steps)} steps: " + describe_failure(record)
    raised = exception_findings(base, record, [])
    if raised.reason:
        return raised.reason
    skipped = [s.step for s in base.steps[:steps] + record.steps if s.skipped]
    check = check_losses(base.losses[:steps], record.losses[:steps], tolerance, skipped, noise)
    return None if check.passed else check.reason
