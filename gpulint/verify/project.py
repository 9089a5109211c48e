"""What a verification rewrites: an entry script and the project's own modules it imports.

A fix in `mingpt/model.py` is verified by running `projects/chargpt/chargpt.py` with the
rewritten model.py in place. The project root is the nearest folder above the script holding
pyproject.toml, setup.py, setup.cfg or .git; the project's modules are the files under that
root that the script imports, directly or through each other (`ast`, nothing is imported).
For each rewritten file this module also finds, per applied rule, the lines of the rewrite
that rule produced, so the harness's record of what ran can be tied to a rule. No torch here.
"""

from __future__ import annotations

import ast
import difflib
import os
from collections import Counter
from dataclasses import field
from pathlib import Path
from typing import Any, Iterable, Optional

from gpulint.core.source import SourceError, SourceFile, read_source
from gpulint.engine.linter import fix_text, lint_text
from gpulint.output.diff import unified_diff
from gpulint.records import dataclass

ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
SKIP_PARTS = frozenset({"site-packages", "dist-packages", ".venv", "venv", ".tox", ".nox", "node_modules",
                        "__pycache__", ".git"})
MAX_MODULES = 500


def project_root(script: Path) -> Path:
    """The nearest folder at or above the script's that marks a project; else the script's folder."""
    start = Path(os.path.realpath(script)).parent
    home = Path(os.path.expanduser("~"))
    for folder in (start, *start.parents):
        if folder == home or folder == Path(folder.anchor):
            break
        if any((folder / marker).exists() for marker in ROOT_MARKERS):
            return folder
    return start


def is_entry_script(tree: ast.Module) -> bool:
    """A file that does something when run: a `__main__` guard, or loops, `with` blocks or calls at top level.

    A module of definitions (classes, functions, constants) is not run by itself: its fixes are
    verified through a script that imports it.
    """
    def executes(body: Iterable[ast.stmt]) -> bool:
        for node in body:
            if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Raise, ast.Assert)):
                return True
            if isinstance(node, ast.Expr) and isinstance(node.value, (ast.Call, ast.Await)):
                return True
            if isinstance(node, ast.If):
                test = ast.unparse(node.test) if hasattr(ast, "unparse") else ""
                if "__name__" in test and "__main__" in test:
                    return True
                if "TYPE_CHECKING" in test:
                    continue
                if executes(node.body) or executes(node.orelse):
                    return True
            if isinstance(node, ast.Try) and (executes(node.body) or executes(node.finalbody)):
                return True
        return False

    return executes(tree.body)


def needs_torchrun(tree: ast.Module) -> bool:
    """The script joins a process group from torchrun's environment (env://), rather than spawning its own.

    Such a script fails when run as `python train.py`; verify launches it through torchrun.
    """
    calls_init = spawns = sets_master = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name == "init_process_group":
                calls_init = True
                if any(k.arg == "init_method" for k in node.keywords):
                    sets_master = True
            elif name in ("spawn", "start_processes"):
                spawns = True
        elif isinstance(node, ast.Constant) and node.value == "MASTER_ADDR":
            sets_master = True
    return calls_init and not spawns and not sets_master


def _imported_names(tree: ast.AST, package: Optional[str]) -> set[str]:
    """Absolute module names this file imports (relative imports resolved against `package`)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if package is None:
                    continue
                base_parts = package.split(".") if package else []
                if node.level - 1 > len(base_parts):
                    continue
                base_parts = base_parts[:len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if not base:
                continue
            parts = base.split(".")
            names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
            for alias in node.names:
                if alias.name != "*":
                    names.add(f"{base}.{alias.name}")
    return names


def _find_module(name: str, search: list[Path]) -> Optional[tuple[Path, str]]:
    """(file, package of the file) for a module name, searching like the import system (files only)."""
    parts = name.split(".")
    for folder in search:
        base = folder.joinpath(*parts)
        for candidate, package in ((base.with_suffix(".py"), ".".join(parts[:-1])),
                                   (base / "__init__.py", name)):
            if candidate.is_file():
                return candidate, package
    return None


def _skipped(path: Path, root: Path) -> bool:
    try:
        relative = path.relative_to(root)
    except ValueError:
        return True
    return any(part in SKIP_PARTS for part in relative.parts)


def imported_project_files(script: Path, root: Path, extra_search: Iterable[Path] = (),
                           source: Optional[bytes] = None) -> list[Path]:
    """Files under `root` that `script` imports, directly or through each other (static, conservative);
    `source` is the script's code when it is not on disk (a notebook's cells)."""
    script = Path(os.path.realpath(script))
    search = [script.parent, root]
    for entry in extra_search:
        real = Path(os.path.realpath(entry))
        if real == root or root in real.parents:
            search.append(real)
    seen: dict[Path, None] = {}
    queue: list[tuple[Path, Optional[str]]] = [(script, None)]
    while queue and len(seen) < MAX_MODULES:
        path, package = queue.pop(0)
        try:
            tree = ast.parse(source if path == script and source is not None else path.read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue
        for name in sorted(_imported_names(tree, package)):
            found = _find_module(name, search)
            if found is None:
                continue
            module, module_package = found
            module = Path(os.path.realpath(module))
            if module == script or module in seen or _skipped(module, root):
                continue
            seen[module] = None
            queue.append((module, module_package))
    return list(seen)


@dataclass(frozen=True)
class Edit:
    """One finding's fix as it landed in the rewritten file: a rule is exercised only when all its edits ran."""

    code: str
    path: Path  # the user's file
    line: int  # the finding's line in the user's file
    ranges: tuple[tuple[int, int], ...]  # 1-based lines of the rewritten file from this edit, whole statements
    text: str = ""  # the edit's first rewritten line, stripped, for the report
    runtime: bool = True  # False: the edit only changes imports, so nothing of it runs inside a step

    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


@dataclass
class RewrittenFile:
    path: Path  # the user's file
    source: SourceFile
    new_text: str
    applied: tuple[str, ...]
    ranges: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # rule -> rewritten line ranges
    edits: list[Edit] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.new_text != self.source.text

    def original_line(self, line: int) -> int:
        """The user's line for a line of the rewritten file (an inserted line maps to the line it precedes)."""
        old, new = self.source.text.splitlines(), self.new_text.splitlines()
        for _, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            if j1 < line <= j2:  # equal, or edited in place: line by line, as far as the old block reaches
                return min(i1 + (line - 1 - j1), max(i2 - 1, i1)) + 1
        return line

    def new_bytes(self) -> bytes:
        return self.source.encode(self.new_text)

    def diff(self, label: Optional[str] = None) -> str:
        return unified_diff(label or str(self.path), self.source.text, self.new_text)


def _fixable(path: Path, text: str, settings: Any) -> list[Any]:
    return [f for f in lint_text(path, text, settings).findings if f.fix is not None and f.fix.is_applicable(True)]


def rewrite_file(path: Path, settings: Any) -> RewrittenFile:
    """All applicable fixes (unsafe included, as selected), with each applied rule's rewritten lines.

    Raises SourceError (unreadable) and the engine's InternalError; a file that does not parse
    comes back unchanged with `parsed` findings left to the caller.
    """
    return rewrite_source(path, read_source(path), settings)


def rewrite_source(path: Path, source: SourceFile, settings: Any) -> RewrittenFile:
    """`rewrite_file` of text that is not read from `path` (a notebook's cells as a script)."""
    outcome = fix_text(path, source.text, settings, unsafe=True)
    before = _fixable(path, source.text, settings)
    after = Counter(f.code for f in _fixable(path, outcome.text, settings)) if outcome.text != source.text else None
    if after is None:
        return RewrittenFile(path, source, source.text, ())
    counts = Counter(f.code for f in before)
    applied = tuple(sorted(code for code, count in counts.items() if count > after.get(code, 0)))
    result = RewrittenFile(path, source, outcome.text, applied)
    fixed = [f for f in before if f.code in applied]
    result.edits = edit_ranges(path, source.text, outcome.text, fixed)
    result.ranges = rule_ranges(source.text, outcome.text, fixed)
    return result


def _finding_spans(before: str, after: str, findings: list[Any]) -> list[tuple[Any, list[tuple[int, int]]]]:
    """Each finding with the 1-based line ranges of `after` that its edits produced (not yet widened)."""
    old, new = before.splitlines(), after.splitlines()
    hunks = [op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes() if op[0] != "equal"]
    spans: list[tuple[Any, list[tuple[int, int]]]] = []
    for finding in findings:
        rows = [finding.location.row, finding.end_location.row]
        for edit in finding.fix.edits:
            rows += [edit.location.row, edit.end_location.row]
        first, last = min(rows) - 1, max(rows) - 1  # 0-based, inclusive
        found = []
        for tag, i1, i2, j1, j2 in hunks:
            touches = (i1 <= last and i2 - 1 >= first) if i2 > i1 else (first <= i1 <= last + 1)
            if not touches:
                continue
            if tag == "replace" and i2 - i1 == j2 - j1 and i2 - i1 > 1:  # lines edited in place: this finding's own
                low, high = max(first, i1), min(last, i2 - 1)
                found.append((j1 + (low - i1) + 1, j1 + (high - i1) + 1))
            else:
                found.append((j1 + 1, max(j2, j1 + 1)))
        spans.append((finding, found))
    claimed = {line for _, found in spans for start, end in found for line in range(start, end + 1)}
    unclaimed = [(j1 + 1, max(j2, j1 + 1)) for _, i1, i2, j1, j2 in hunks
                 if not claimed & set(range(j1 + 1, max(j2, j1 + 1) + 1))]
    codes_with_spans = {finding.code for finding, found in spans if found}
    # a rule whose edits moved in a later fixing round: the hunks nobody claimed
    return [(finding, found or (list(unclaimed) if finding.code not in codes_with_spans else []))
            for finding, found in spans]


def rule_ranges(before: str, after: str, findings: list[Any]) -> dict[str, list[tuple[int, int]]]:
    """For each rule, the 1-based line ranges of `after` that came from its edits, widened to whole statements."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for finding, found in _finding_spans(before, after, findings):
        if found:
            spans.setdefault(finding.code, []).extend(found)
    statements = _statement_spans(after)
    return {code: _widen(ranges, statements) for code, ranges in spans.items()}


def edit_ranges(path: Path, before: str, after: str, findings: list[Any]) -> list[Edit]:
    """One Edit per fixed finding, with the rewritten lines it produced (widened to whole statements)."""
    statements = _statement_spans(after)
    lines = after.splitlines()
    edits = []
    for finding, found in _finding_spans(before, after, findings):
        widened = tuple(_widen(found, statements))
        text = ""
        for start, end in widened:
            text = next((lines[i - 1].strip() for i in range(start, min(end, len(lines)) + 1)
                         if 0 < i <= len(lines) and lines[i - 1].strip() and not lines[i - 1].lstrip().startswith(
                             ("import ", "from "))), "")
            if text:
                break
        rows = [lines[i - 1].strip() for start, end in widened for i in range(start, min(end, len(lines)) + 1)
                if 0 < i <= len(lines) and lines[i - 1].strip()]
        imports_only = bool(rows) and all(row.startswith(("import ", "from ", "(", ")")) or row.endswith(",")
                                          for row in rows)
        edits.append(Edit(finding.code, path, finding.location.row, widened, text[:100], not imports_only))
    return edits


def _statement_spans(text: str) -> list[tuple[int, int]]:
    """Line spans of every statement (a compound statement: its header only) and decorator."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        end = getattr(node, "end_lineno", node.lineno) or node.lineno
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            end = max(node.lineno, body[0].lineno - 1)
        spans.append((node.lineno, end))
        for decorator in getattr(node, "decorator_list", []):
            spans.append((decorator.lineno, getattr(decorator, "end_lineno", decorator.lineno) or decorator.lineno))
    return spans


def _widen(ranges: list[tuple[int, int]], statements: list[tuple[int, int]]) -> list[tuple[int, int]]:
    widened = []
    for start, end in ranges:
        low, high = start, end
        for s_start, s_end in statements:
            if s_start <= end and s_end >= start:
                low, high = min(low, s_start), max(high, s_end)
        widened.append((low, high))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(widened):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def classify(path: Path) -> Optional[bool]:
    """True: an entry script; False: a module of definitions; None: unreadable or not Python."""
    try:
        tree = ast.parse(read_source(path).text)
    except (SourceError, SyntaxError, ValueError):
        return None
    return is_entry_script(tree)
