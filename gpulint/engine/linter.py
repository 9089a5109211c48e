"""Lint one file's text: prefilter, parse with `ast`, run the rules on it; LibCST (engine/libcst_pass.py) only
for the rules still on it and for building fixes."""

from __future__ import annotations

import ast
import traceback
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from gpulint.analysis.device import may_have_gpu_evidence
from gpulint.analysis.evidence import pedantic
from gpulint.core import floors
from gpulint.core.edits import Change, Fix, apply_edits, compose, select_edits
from gpulint.core.findings import Finding, FixEdit, Location
from gpulint.core.options import TORCH_VERSION
from gpulint.core.settings import Settings
from gpulint.engine import ast_prefilter
from gpulint.engine.guard import libcst_refusal, python_check, take_tree, text_size, too_large
from gpulint.engine.lint_result import AstRun, InternalError, LintResult, syntax_finding
from gpulint.engine.profile import NO_PROFILE, Profile
from gpulint.engine.suppressions import apply_suppressions
from gpulint.project.facts import FileFacts, scan, text_digest
from gpulint.project.view import ProjectView
from gpulint.records import dataclass
from gpulint.rules import all_rules
from gpulint.rules.base import Rule, Target
from gpulint.rules.gpu000_invalid_file import InvalidFile, may_hold_findings

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.analysis.ast_context import AstContext, Detection

__all__ = ["MAX_FIX_ROUNDS", "FixOutcome", "InternalError", "LintResult", "enabled_rules", "fix_text", "lint_text",
           "parse", "syntax_finding"]

MAX_FIX_ROUNDS = 10


def enabled_rules(settings: Settings, rules: Optional[Sequence[type[Rule]]] = None) -> list[type[Rule]]:
    """The rules that run on a file with these settings (GPU000 is the engine's own: never a visitor)."""
    candidates = [r for r in all_rules() if r is not InvalidFile] if rules is None else rules
    return [r for r in candidates if settings.is_enabled(r.code, r.preview, r.opt_in)]


def parse(text: str) -> "cst.Module":
    """The text's LibCST tree (LibCST is loaded on first use)."""
    from gpulint.engine import libcst_pass

    return libcst_pass.parse(text)


def _run_ast_rules(path: Path, text: str, tree: ast.Module, settings: Settings, view: ProjectView,
                   rules: Sequence[type[Rule]], profile: Profile) -> AstRun:
    """Run the rules that detect on `ast` and place what they report (no LibCST involved)."""
    from gpulint.analysis.ast_context import AstContext

    current = "analysis"
    try:
        with profile.phase("rules"):
            ctx = AstContext(path, text, tree, settings, view, libcst_refusal)
            instances: dict[str, Rule] = {}
            for rule_type in rules:
                current = rule_type.code
                rule = rule_type(ctx)
                if rule.applies():
                    instances[rule.code] = rule
            current = "rules"
            for rule in instances.values():
                profile.timed(rule.code, rule.detect)(ctx)
        current = "placing findings"
        with profile.phase("placing"):
            findings = [_ast_finding(ctx, detection) for detection in ctx.detections]
        return AstRun(ctx, instances, list(ctx.detections), findings)
    except RecursionError:
        ctx = AstContext(path, text, tree, settings, view)
        return AstRun(ctx, {}, [], [syntax_finding(str(path), "file is nested too deeply to analyse")])
    except Exception as exc:  # a bug in gpulint: surface it, never swallow it
        raise InternalError(str(path), f"{type(exc).__name__} in {current}: {exc}", traceback.format_exc()) from exc


def _ast_finding(ctx: "AstContext", detection: "Detection") -> Finding:
    """A finding at the detection's span, in 1-based character columns (`ast` counts UTF-8 bytes)."""
    span = detection.span
    location = Location(span.lineno, ctx.column(span.lineno, span.col_offset) + 1)
    end_location = Location(span.end_lineno, ctx.column(span.end_lineno, span.end_col_offset) + 1)
    first, last = detection.statement_rows
    noqa_rows = (min(first, location.row), max(last, end_location.row)) if first else \
        (location.row, end_location.row)
    fix: Optional[Fix[FixEdit]] = Fix(detection.fix, detection.fix_message, ()) if detection.fix is not None \
        else None
    return Finding(
        path=str(ctx.path), code=detection.code, name=detection.name,
        message=detection.message, location=location, end_location=end_location, fix=fix,
        noqa_rows=noqa_rows, note=detection.note,
    )


def _own_facts(tree: Optional[ast.Module], project: Optional[ProjectView], same_text: bool) -> FileFacts:
    """The facts of the file linted: the project's, when they were read from this very text (`same_text`)."""
    if project is not None and same_text:
        return project.own
    return scan(tree) if tree is not None else FileFacts()


def lint_text(path: Path, text: str, settings: Settings, rules: Optional[Sequence[type[Rule]]] = None,
              profile: Profile = NO_PROFILE, project: Optional[ProjectView] = None,
              edits: bool = True) -> LintResult:
    """Findings for one file's decoded text. Raises InternalError on a bug in a rule.

    `project` carries facts from the other files of the project (dispatch/project_scan.py);
    without it the file is judged alone. Without `edits` (`check` in a format that shows no edits),
    the fixes of rules on `ast` are their predictions (applicability and message, no edits) and
    LibCST is not parsed for them; with it, their fixes are built (`Rule.build_fix`).
    """
    # the project pass's tree of this very text, when it handed one over (dispatch/project_scan.py): taken
    # first, so that a file no rule reads lets it go
    same_text = project is not None and bool(project.own.source) and project.own.source == text_digest(text)
    handed = take_tree(project.own.source) if project is not None and same_text else None
    with profile.phase("prefilter"):
        active = enabled_rules(settings) if rules is None else list(rules)
        candidates = [r for r in active if r.may_match(text)]
        if settings.test_file and not settings.lint_tests:
            candidates = [r for r in candidates if r.in_tests]  # fp32 references, bitwise checks: not training
        if any(r.target is Target.GPU for r in candidates) and not pedantic(settings) \
                and not may_have_gpu_evidence(text, project):
            candidates = [r for r in candidates if r.target is not Target.GPU]  # no GPU evidence possible
    if not candidates and (not settings.is_enabled(InvalidFile.code) or too_large(text, settings.max_file_size)):
        return LintResult()  # too large for any parse, but no rule could match anyway
    # CPython's parser first: cheap, and it keeps input that crashes LibCST away from it.
    # When no rule can match, that is all; a syntax error it reports is confirmed with
    # LibCST below, so syntax newer than this interpreter's is not misreported.
    with profile.phase("parse"):
        check = python_check(text, before_libcst=bool(candidates), limit=settings.max_file_size, tree=handed)
    if check.refusal is not None:
        refusal = check.refusal
        return LintResult([syntax_finding(str(path), refusal.message, refusal.row, refusal.column)], parsed=False)
    if not check.valid and not may_hold_findings(text) and not pedantic(settings):
        return LintResult(parsed=False)  # Python 2 or another language, naming no torch: nothing went unchecked
    if check.tree is not None and candidates:
        # the second prefilter: only rules whose needles the `ast` tree meets are worth LibCST
        with profile.phase("prefilter"):
            candidates = ast_prefilter.narrow(text, check.tree, candidates,
                                              project.star_modules if project is not None else None, project)
    if check.valid and not candidates:
        return LintResult()
    with profile.phase("analysis"):
        # the file's own facts come from the text being linted (a fix round changes it): the project
        # pass's, when it read this very text, else read again
        own = _own_facts(check.tree, project, same_text)
        view = project.with_own(own) if project is not None else ProjectView.alone(own)
        if own.legacy_torch:  # code that runs only on torch 0.4 or older: no advice that needs a newer torch
            settings = settings.with_values({TORCH_VERSION.key: floors.legacy_floor(settings.torch_version)})
        # the third prefilter: rules the project facts already silence (device scope, GPU301's
        # untrained models, GPU001 where 16-bit training is done another way) cost no detection
        if ast_prefilter.ENABLED:
            candidates = [r for r in candidates if r.may_report(view, settings)]
    if check.valid and not candidates:
        return LintResult()
    ast_run: Optional[AstRun] = None
    ast_findings: list[Finding] = []
    if check.tree is not None and any(r.on_ast for r in candidates):
        # rules on `ast` (issue 25) read the tree the guard parsed; LibCST is not needed to report them
        ast_run = _run_ast_rules(path, text, check.tree, settings, view,
                                 [r for r in candidates if r.on_ast], profile)
        ast_findings = ast_run.findings
        candidates = [r for r in candidates if not r.on_ast]
        if not edits or not any(d.fix is not None for d in ast_run.detections):
            ast_run = None  # nothing to build: the predictions stand
        if not candidates and ast_run is None:
            findings = apply_suppressions(path, text, ast_findings, (r.code for r in active))
            findings.sort(key=lambda f: f.sort_key)
            return LintResult(findings)
    from gpulint.engine import libcst_pass  # LibCST from here on: loaded by the first file that needs it

    if not candidates and ast_run is not None:
        # LibCST only to build the ast rules' fixes: where it cannot, the findings stand without them
        return libcst_pass.lint_for_fixes(path, text, settings, view, ast_run, active, profile)
    check = replace(check, tree=None)  # the `ast` tree is not needed past here: free it before LibCST
    return libcst_pass.lint_on_libcst(path, text, settings, view, check, candidates, ast_run, ast_findings, active,
                                      profile, edits)


@dataclass
class FixOutcome:
    text: str
    applied: int
    findings: list[Finding]  # what remains after fixing
    parsed: bool = True
    # what the fixes changed, in offsets of the text before fixing: everything else must be
    # written back unchanged (checked before every write, see core/source.py)
    changes: tuple[Change, ...] = ()
    too_large: bool = False  # not fixed because of max-fix-size (a finding says so; `check` has no such finding)


def fix_text(path: Path, text: str, settings: Settings, unsafe: bool,
             rules: Optional[Sequence[type[Rule]]] = None, profile: Profile = NO_PROFILE,
             project: Optional[ProjectView] = None) -> FixOutcome:
    """Apply fixes round after round until none applies, re-parsing after each round."""
    applied_total = 0
    changes: tuple[Change, ...] = ()
    result = lint_text(path, text, settings, rules, profile, project)
    if text_size(text) > settings.max_fix_size:  # each fix round parses the file again: bound the work
        fixable = sum(1 for f in result.findings if f.fix is not None and f.fix.is_applicable(unsafe))
        if fixable and settings.is_enabled(InvalidFile.code):
            from gpulint.core.options import format_size

            message = (f"file is too large to fix ({text_size(text) / 1024:.0f} KB; max-fix-size is "
                       f"{format_size(settings.max_fix_size)}): {fixable} fixable finding"
                       f"{'s' if fixable != 1 else ''} left unfixed")
            result.findings.append(syntax_finding(str(path), message))
            result.findings.sort(key=lambda f: f.sort_key)
        return FixOutcome(text, 0, result.findings, result.parsed, too_large=True)
    for _ in range(MAX_FIX_ROUNDS):
        fixes = [f.fix for f in result.findings if f.fix is not None and f.fix.edits and f.fix.is_applicable(unsafe)]
        if not fixes:
            break
        with profile.phase("fixing"):
            edits, applied = select_edits(fixes)
            new_text = apply_edits(text, edits)
        if applied == 0 or new_text == text:
            break
        try:
            with profile.phase("fixing"):
                parse(new_text)
        except Exception as exc:  # noqa: BLE001 - whatever LibCST raises, the file is never written
            raise InternalError(str(path), f"a fix produced code that does not parse ({exc}); file left unchanged",
                                traceback.format_exc()) from None
        changes = compose(changes, text, edits)
        text = new_text
        applied_total += applied
        result = lint_text(path, text, settings, rules, profile, project)
    return FixOutcome(text, applied_total, result.findings, result.parsed, changes)
