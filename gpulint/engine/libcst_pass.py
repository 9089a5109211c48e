"""The part of linting that needs LibCST: building the fixes of the rules on `ast`, and rules that visit LibCST.

Every rule that reports detects on `ast` (issue 25, GPU301 last); the visitor pass below is left with
GPU900, a candidate by its needles that visits nothing (engine/suppressions.py makes its findings).

engine/linter.py imports this module only when a file needs it, so a `check` whose files need no
LibCST tree never loads the library (about a fifth of a second of every process's start).
"""

from __future__ import annotations

import ast
import bisect
import difflib
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Optional, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState

from gpulint.core.context import FileContext
from gpulint.core.edits import Edit, Fix, minimize
from gpulint.core.findings import Finding, FixEdit, Location
from gpulint.core.layout import Frame, fit, long_lines
from gpulint.core.lines import LineIndex
from gpulint.core.pending import InsertStatements, PendingEdit, PendingFinding, Replace
from gpulint.core.positions import Span, SpanTable, compute_spans
from gpulint.core.settings import Settings
from gpulint.core.walk import trivia_skip, walk
from gpulint.engine.guard import PythonCheck, libcst_refusal
from gpulint.engine.lint_result import (
    NO_LIBCST_NOTE,
    AstRun,
    InternalError,
    LintResult,
    syntax_finding,
    without_fixes,
)
from gpulint.engine.profile import NO_PROFILE, Profile
from gpulint.engine.suppressions import apply_suppressions
from gpulint.project.view import ProjectView
from gpulint.records import dataclass
from gpulint.rules.base import Rule


def _syntax_error_finding(path: Path, text: str, exc: cst.ParserSyntaxError) -> Finding:
    """Python's own message and position when it agrees the code is invalid (they read better)."""
    try:
        ast.parse(text)
    except SyntaxError as py_exc:
        row = py_exc.lineno or 1
        column = py_exc.offset or 1
        return syntax_finding(str(path), f"SyntaxError: {py_exc.msg}", row, max(1, column))
    except (ValueError, RecursionError, MemoryError):
        pass
    return syntax_finding(str(path), f"SyntaxError: {exc.message}", exc.raw_line, exc.raw_column + 1)


def cannot_parse_message(exc: cst.ParserSyntaxError) -> str:
    reason = " ".join(str(exc.message).split())
    return (f"gpulint cannot parse this file although Python can (LibCST: {reason}); the rules that need LibCST "
            "did not check it and no fix applies to it. Form feeds or tabs inside the indentation are the usual cause")


def parse(text: str) -> cst.Module:
    return cst.parse_module(text)


class _Dispatch(cst.CSTVisitor):
    """Walks the tree once and calls each rule's visit_/leave_ methods for that node type."""

    def __init__(self, ctx: FileContext, rules: Iterable[Rule], profile: Profile = NO_PROFILE) -> None:
        self.ctx = ctx
        self.visitors: dict[type, list] = {}
        self.leavers: dict[type, list] = {}
        for rule in rules:
            for attr in dir(rule):
                if attr.startswith("visit_") or attr.startswith("leave_"):
                    node_type = getattr(cst, attr[6:], None)
                    if isinstance(node_type, type):
                        table = self.visitors if attr.startswith("visit_") else self.leavers
                        table.setdefault(node_type, []).append(profile.timed(rule.code, getattr(rule, attr)))
        # layout nodes are not entered unless some rule visits a layout node type
        self.skip = trivia_skip(set(self.visitors) | set(self.leavers))

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            self.ctx.statements.append(node)
        for visit in self.visitors.get(type(node), ()):
            visit(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        for leave in self.leavers.get(type(original_node), ()):
            leave(original_node)
        if isinstance(original_node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            self.ctx.statements.pop()


def _anchors(edits: Iterable[PendingEdit]) -> list[cst.CSTNode]:
    """The nodes whose positions an edit is built on."""
    nodes = [edit.node if isinstance(edit, Replace) else edit.anchor for edit in edits]
    return [node for node in nodes if node is not None]


def _indent_unit(module: cst.Module) -> str:
    """One level of indentation for new blocks. LibCST takes it from the first indented line,
    form feeds included (`\f    pass`); a form feed in the middle of an indentation would
    change what Python counts, so new code never gets one."""
    unit = module.default_indent.replace("\f", "").replace("\v", "")
    return unit or "    "


def _render(module: cst.Module, new: object, indent: tuple[str, ...]) -> str:
    if isinstance(new, str):
        return new
    nodes = [new] if isinstance(new, cst.CSTNode) else list(new)  # type: ignore[call-overload]
    state = CodegenState(default_indent=_indent_unit(module), default_newline=module.default_newline,
                         indent_tokens=list(indent))
    for node in nodes:
        node._codegen(state)
    return "".join(state.tokens)


class _Inexact(Exception):
    """A fix's edit cannot be placed on the file's bytes exactly; the fix is not offered."""


class _Placer:
    """Turns reports into findings once the spans of the nodes involved are known."""

    def __init__(self, ctx: FileContext, reports: list[PendingFinding], fit: bool = True) -> None:
        self.ctx = ctx
        self.fit = fit  # break the long lines a replacement makes (not when no edit is shown or applied)
        self.text = ctx.text
        self.index = LineIndex(ctx.text)
        nodes: list[cst.CSTNode] = []
        for report in reports:
            nodes.append(report.node)
            if report.statement is not None:
                nodes.append(report.statement)
                body = getattr(report.statement, "body", None)
                if isinstance(report.statement, cst.BaseCompoundStatement) and isinstance(body, cst.CSTNode):
                    nodes.append(body)
            if report.fix is not None:
                nodes.extend(_anchors(report.fix.edits))
        self.spans: SpanTable = compute_spans(ctx.module, nodes, ctx.text)

    def span(self, node: cst.CSTNode) -> Span:
        return self.spans[id(node)]

    def node_range(self, node: cst.CSTNode) -> tuple[int, int]:
        """The node's code without surrounding whitespace, comments or parentheses."""
        span = self.span(node)
        start = min(self.index.first_token(span.start), len(self.text))
        end = max(start, self.index.last_token_end(start, min(span.end, len(self.text))))
        # a `with (...)` statement's lpar/rpar is one node or MaybeSentinel, not a sequence
        lpar, rpar = getattr(node, "lpar", ()), getattr(node, "rpar", ())
        for _ in lpar if isinstance(lpar, (list, tuple)) else ():
            if start < end and self.text[start] == "(":
                start = self.index.first_token(start + 1)
        for _ in rpar if isinstance(rpar, (list, tuple)) else ():
            if end > start and self.text[end - 1] == ")":
                end = self.index.last_token_end(start, end - 1)
        return start, end

    def finding(self, report: PendingFinding) -> Finding:
        start, end = self.node_range(report.node)
        location = Location(*self.index.location(start))
        end_location = Location(*self.index.location(end))
        noqa_rows = (location.row, end_location.row)
        statement = report.statement
        if statement is not None:
            s_start, s_end = self.node_range(statement)
            first_row = self.index.location(s_start)[0]
            if isinstance(statement, cst.BaseCompoundStatement):
                body_start = self.span(statement.body).start
                last_row = self.index.location(min(body_start, len(self.text)))[0]
            else:
                last_row = self.index.location(s_end)[0]
            noqa_rows = (min(first_row, location.row), max(last_row, end_location.row))
        fix = None
        note = report.note
        if report.fix is not None and report.fix.edits:
            try:
                edits = tuple(edit for pending in report.fix.edits for edit in self.edits(pending))
                fix = Fix(report.fix.applicability, report.fix.message, edits)
            except _Inexact:  # an edit over text LibCST does not reproduce could touch the wrong bytes
                note = _INEXACT_NOTE
        rule = report.rule
        return Finding(
            path=str(self.ctx.path), code=rule.code, name=rule.name, message=report.message,
            location=location, end_location=end_location, fix=fix, noqa_rows=noqa_rows, note=note,
        )

    def edits(self, pending: PendingEdit) -> tuple[FixEdit, ...]:
        return tuple(FixEdit(
            edit.start, edit.end, edit.content,
            Location(*self.index.location(edit.start)), Location(*self.index.location(edit.end)),
        ) for edit in self._text_edits(pending))

    def _mapped_replace(self, span: Span, new: str) -> tuple[Edit, ...]:
        """Replace the node's code where the file has whitespace LibCST dropped (form feeds).

        The edit is the smallest difference between the node's generated code and `new`,
        moved onto the file; it must not cover any dropped whitespace, which it would delete.
        Where that one edit would (a statement inserted above a function whose `def` line starts
        with a form feed, and a line changed inside it), each change is its own edit instead.
        """
        offsets = self.spans.offsets
        assert offsets is not None
        old = offsets.generated[span.generated_start:span.generated_end]
        newline = self.ctx.module.default_newline
        if span.end > len(self.text) and old.endswith(newline):
            old = old[: -len(newline)]  # the file has no trailing newline (`new` lost it already)
        pieces = [minimize(old, new, span.generated_start)]
        if offsets.dropped_inside(pieces[0].start, pieces[0].end):
            matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
            pieces = [Edit(span.generated_start + i1, span.generated_start + i2, new[j1:j2])
                      for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]
        edits = []
        for local in pieces:
            if offsets.dropped_inside(local.start, local.end):
                raise _Inexact()
            start = offsets.to_file(local.start, at_end=False)
            end = start if local.end == local.start else offsets.to_file(local.end, at_end=True)
            if self.text[start:end] != old[local.start - span.generated_start:local.end - span.generated_start]:
                raise _Inexact()
            edits.append(Edit(start, end, local.content))
        return tuple(edits)

    def _above_own_comments(self, anchor: cst.BaseStatement, line_start: int) -> int:
        """Where code inserted before `anchor` goes: above the comment lines directly over it, which
        describe it (or suppress its findings), so they stay attached to it."""
        leading = getattr(anchor, "leading_lines", ())
        count = 0
        for line in reversed(leading):
            if line.comment is None:
                break  # a blank line ends the comment block that belongs to the statement
            count += 1
        starts = self.index.starts
        row = bisect.bisect_right(starts, line_start) - 1
        if count == 0 or row - count < 0:
            return line_start
        for above in range(row - count, row):
            if not self.index.line_text(above + 1).lstrip(" \t\f").startswith("#"):
                return line_start  # the text does not show those comment lines: stay put
        return starts[row - count]

    def _fitted(self, pending: Replace, span: Span, end: int) -> str:
        """The replacement's code, with the lines it makes too long broken (core/layout.py)."""
        module = self.ctx.module
        if isinstance(pending.new, str):
            return pending.new
        nodes = [pending.new] if isinstance(pending.new, cst.CSTNode) else list(pending.new)
        if not self.fit:
            return _render(module, nodes, span.indent)
        start = min(span.start, len(self.text))
        line_start = self.index.line_start(start)
        prefix = self.text[line_start:start]
        old = self.text[start:end]
        suffix = ""
        if not old.endswith(("\n", "\r")):
            rest = self.text[end:]
            cut = min((i for i in (rest.find("\n"), rest.find("\r")) if i >= 0), default=len(rest))
            suffix = rest[:cut]
        frame = Frame(prefix, suffix, span.indent, module.default_newline)
        style = self.ctx.style
        old_long = long_lines(prefix + old + suffix, style.width)
        return _render(module, fit(nodes, frame, style, old_long), span.indent)

    def _text_edits(self, pending: PendingEdit) -> tuple[Edit, ...]:
        module = self.ctx.module
        newline = module.default_newline
        if not self.spans.aligned:
            raise _Inexact()
        if isinstance(pending, Replace):
            span = self.span(pending.node)
            end = min(span.end, len(self.text))
            new = self._fitted(pending, span, end)
            if span.end > len(self.text) and new.endswith(newline):
                new = new[: -len(newline)]  # the file has no trailing newline
            if span.generated_start < 0:  # generated code and file agree here
                return (minimize(self.text[span.start:end], new, span.start),)
            return self._mapped_replace(span, new)
        assert isinstance(pending, InsertStatements)
        if pending.anchor is None:
            offset, indent = len(self.text), ""
            prefix = newline if self.text and not self.text.endswith(("\n", "\r")) else ""
        else:
            span = self.span(pending.anchor)
            first = self.index.first_token(span.start)
            line_start = self.index.line_start(first)
            indent = self.text[line_start:first]
            if "\f" in indent or "\v" in indent:  # not indentation to copy: what Python counts
                indent = "".join(span.indent)
            prefix = ""
            if pending.after:
                offset = span.end
                if offset > len(self.text) or not self.text[:offset].endswith(("\n", "\r")):
                    offset = min(offset, len(self.text))
                    prefix = newline
            else:
                offset = self._above_own_comments(pending.anchor, line_start)
        lines = pending.code.splitlines()
        body = "".join((indent + line if line.strip() else "") + newline for line in lines)
        if prefix and body.endswith(newline):
            body = body[: -len(newline)]
        return (Edit(offset, offset, prefix + body),)


# the LibCST node classes an `ast` node class can be (a detection's node is found among them by span)
_CST_TYPES: dict[str, tuple[type[cst.CSTNode], ...]] = {
    "Call": (cst.Call,), "Name": (cst.Name,), "Attribute": (cst.Attribute,), "Subscript": (cst.Subscript,),
    "keyword": (cst.Arg,), "Starred": (cst.Arg, cst.StarredElement), "Dict": (cst.Dict,), "List": (cst.List,),
    "Tuple": (cst.Tuple,), "Set": (cst.Set,), "Lambda": (cst.Lambda,), "Compare": (cst.Comparison,),
    "BinOp": (cst.BinaryOperation,), "BoolOp": (cst.BooleanOperation,), "UnaryOp": (cst.UnaryOperation,),
    "IfExp": (cst.IfExp,), "Await": (cst.Await,), "NamedExpr": (cst.NamedExpr,),
    "Constant": (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString, cst.Name,
                 cst.Ellipsis),
    "JoinedStr": (cst.FormattedString, cst.ConcatenatedString),
    "ListComp": (cst.ListComp,), "SetComp": (cst.SetComp,), "DictComp": (cst.DictComp,),
    "GeneratorExp": (cst.GeneratorExp,),
    "Assign": (cst.Assign,), "AnnAssign": (cst.AnnAssign,), "AugAssign": (cst.AugAssign,), "Expr": (cst.Expr,),
    "Return": (cst.Return,), "Import": (cst.Import,), "ImportFrom": (cst.ImportFrom,),
    "For": (cst.For,), "AsyncFor": (cst.For,), "While": (cst.While,), "If": (cst.If,), "With": (cst.With,),
    "AsyncWith": (cst.With,), "FunctionDef": (cst.FunctionDef,), "AsyncFunctionDef": (cst.FunctionDef,),
    "ClassDef": (cst.ClassDef,), "Try": (cst.Try,), "alias": (cst.ImportAlias,),
}


class _Candidates(cst.CSTVisitor):
    def __init__(self, types: tuple[type[cst.CSTNode], ...]) -> None:
        self.types = types
        self.found: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.types):
            self.found.append(node)
        return True


@dataclass
class _Built:
    index: int  # of the detection in AstRun
    pending: PendingFinding


def _build_ast_fixes(fctx: FileContext, run: AstRun) -> list[_Built]:
    """Find each fixable detection's LibCST node (same span) and have its rule build the fix; its
    applicability must be the one predicted (`check` showed that one)."""
    wanted = [(i, d) for i, d in enumerate(run.detections) if d.fix is not None and d.code in run.rules]
    if not wanted:
        return []
    types = tuple({t for _, d in wanted for t in _CST_TYPES.get(d.node_type, (cst.CSTNode,))})
    collector = _Candidates(types)
    walk(fctx.module, collector)
    placer = _Placer(fctx, [])
    placer.spans = compute_spans(fctx.module, collector.found, fctx.text)  # the candidates' positions only
    ranges = [(placer.node_range(node), node) for node in collector.found]
    out: list[_Built] = []
    for index, detection in wanted:
        span = detection.span
        start = run.ctx.offset(span.lineno, span.col_offset)
        end = run.ctx.offset(span.end_lineno, span.end_col_offset)
        kinds = _CST_TYPES.get(detection.node_type, (cst.CSTNode,))
        node = _node_at(start, end, [(r, n) for r, n in ranges if isinstance(n, kinds)])
        rule = run.rules[detection.code]
        fix = rule.build_fix(detection, fctx, node) if node is not None else None
        built = fix.applicability if fix is not None else None
        if built != detection.fix:
            raise AssertionError(f"{detection.code} predicted a {detection.fix.value if detection.fix else 'no'} fix "
                                 f"at {span.lineno}:{span.col_offset + 1} but built "
                                 f"{built.value if built is not None else 'none'}")
        assert node is not None and fix is not None
        out.append(_Built(index, PendingFinding(rule, node, detection.message, fix, None, detection.note)))
    return out




def _node_at(start: int, end: int, ranges: list[tuple[tuple[int, int], cst.CSTNode]]) -> Optional[cst.CSTNode]:
    """The node whose code is exactly start..end; else the one starting there (a block's end differs by
    its trailing comments); else the smallest one holding it (a decorated def starts at its `@`)."""
    exact = [node for (s, e), node in ranges if s == start and e == end]
    if exact:
        return exact[-1]  # the innermost of nodes with one span (`(x)`'s parentheses are stripped)
    same_start = [(e, node) for (s, e), node in ranges if s == start and e >= end]
    if same_start:
        return min(same_start, key=lambda item: item[0])[1]
    holding = [(e - s, node) for (s, e), node in ranges if s <= start and e >= end]
    return min(holding, key=lambda item: item[0])[1] if holding else None


def _with_built_fixes(placer: "_Placer", run: AstRun, built: list[_Built]) -> list[Finding]:
    """The ast findings, with the fixes built for them placed as text edits."""
    findings = list(run.findings)
    for item in built:
        pending = item.pending
        assert pending.fix is not None
        finding = findings[item.index]
        try:
            edits = tuple(edit for part in pending.fix.edits for edit in placer.edits(part))
        except _Inexact:  # an edit over text LibCST does not reproduce could touch the wrong bytes
            findings[item.index] = replace(finding, fix=None, note=_INEXACT_NOTE)
            continue
        fix = Fix(pending.fix.applicability, pending.fix.message, edits) if edits else None
        findings[item.index] = replace(finding, fix=fix)
    return findings


def lint_for_fixes(path: Path, text: str, settings: Settings, view: ProjectView, run: AstRun,
                    active: Sequence[type[Rule]], profile: Profile) -> LintResult:
    """Only rules on `ast` ran: parse LibCST to build their fixes. A file LibCST cannot take keeps its
    findings without fixes (no GPU000 finding: `check` without edits would not have one either)."""
    findings = run.findings
    if libcst_refusal(text) is None:
        try:
            with profile.phase("parse"):
                module = parse(text)
        except (cst.ParserSyntaxError, RecursionError, SyntaxError, ValueError):
            findings = without_fixes(findings, NO_LIBCST_NOTE)
        else:
            current = "building fixes"
            try:
                fctx = FileContext(path, text, module, settings, view)
                with profile.phase("fixing"):
                    built = _build_ast_fixes(fctx, run)
                current = "placing findings"
                with profile.phase("placing"):
                    placer = _Placer(fctx, [b.pending for b in built])
                    findings = _with_built_fixes(placer, run, built)
            except RecursionError:
                findings = without_fixes(findings, NO_LIBCST_NOTE)
            except Exception as exc:  # a bug in gpulint: surface it, never swallow it
                raise InternalError(str(path), f"{type(exc).__name__} in {current}: {exc}",
                                    traceback.format_exc()) from exc
    else:
        findings = without_fixes(findings, NO_LIBCST_NOTE)
    findings = apply_suppressions(path, text, findings, (r.code for r in active))
    findings.sort(key=lambda f: f.sort_key)
    return LintResult(findings)


_INEXACT_NOTE = "no automatic fix here: gpulint cannot reproduce the whitespace in this code exactly"


def lint_on_libcst(path: Path, text: str, settings: Settings, view: ProjectView, check: PythonCheck,
                   candidates: Sequence[type[Rule]], ast_run: Optional[AstRun], ast_findings: list[Finding],
                   active: Sequence[type[Rule]], profile: Profile, edits: bool) -> LintResult:
    """The rest of `lint_text` for rules that visit LibCST (GPU900 alone, which visits nothing), and the fixes
    of the rules on `ast` that `ast_run` holds (None: their predictions stand)."""
    if ast_run is not None:  # in case LibCST refuses the file below: findings without the fixes it cannot build
        ast_findings = without_fixes(ast_findings, NO_LIBCST_NOTE)
    with profile.phase("parse"):
        too_costly = libcst_refusal(text)  # LibCST's memory grows with tokens and their nesting: bound it
    if too_costly is not None:
        return LintResult([syntax_finding(str(path), too_costly.message, too_costly.row, too_costly.column),
                           *ast_findings], parsed=False)
    profile.count("parsed")
    try:
        with profile.phase("parse"):
            module = parse(text)
    except cst.ParserSyntaxError as exc:
        if check.valid:  # Python accepts the file: the limit is LibCST's, not a syntax error
            return LintResult([syntax_finding(str(path), cannot_parse_message(exc), exc.raw_line,
                                              exc.raw_column + 1), *ast_findings], parsed=False)
        return LintResult([_syntax_error_finding(path, text, exc)], parsed=False)
    except RecursionError:
        return LintResult([syntax_finding(str(path), "file is nested too deeply to analyse")], parsed=False)
    except (SyntaxError, ValueError) as exc:
        return LintResult([syntax_finding(str(path), f"SyntaxError: {exc}")], parsed=False)
    current = "analysis"
    built: list[_Built] = []
    try:
        with profile.phase("analysis"):
            ctx = FileContext(path, text, module, settings, view)
            instances = []
            for rule_type in candidates:
                current = rule_type.code
                rule = rule_type(ctx)
                if rule.applies():
                    instances.append(rule)
        current = "rules"
        if instances:
            with profile.phase("rules"):
                dispatch = _Dispatch(ctx, instances, profile)
                walk(module, dispatch, dispatch.skip)
        if ast_run is not None:
            current = "building fixes"
            with profile.phase("fixing"):
                built = _build_ast_fixes(ctx, ast_run)
        current = "placing findings"
        with profile.phase("placing"):
            placer = _Placer(ctx, ctx.findings + [b.pending for b in built] if ast_run is not None else ctx.findings,
                             fit=edits)
            findings = [placer.finding(r) for r in ctx.findings]
            if not edits:  # placed to learn whether each fix applies; laid out only where edits are shown or applied
                findings = [replace(f, fix=replace(f.fix, edits=())) if f.fix is not None else f for f in findings]
            if ast_run is not None:
                ast_findings = _with_built_fixes(placer, ast_run, built)
            findings += ast_findings
        current = "suppressions"
        findings = apply_suppressions(path, text, findings, (r.code for r in active))
    except RecursionError:
        return LintResult([syntax_finding(str(path), "file is nested too deeply to analyse")])
    except Exception as exc:  # a bug in gpulint: surface it, never swallow it
        raise InternalError(str(path), f"{type(exc).__name__} in {current}: {exc}", traceback.format_exc()) from exc
    findings.sort(key=lambda f: f.sort_key)
    return LintResult(findings)
