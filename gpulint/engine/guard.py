"""What LibCST must never see: CPython's parser checks every file first.

LibCST's native parser crashes the whole process (SIGSEGV) or takes minutes on input
nested a few thousand levels deep (`((((...))))`, `a and b and ...` chains,
`a[0][0]...`), which no `try` can catch. CPython's own parser refuses such input
quickly and cleanly, costs about a tenth of LibCST's parse, and gives better syntax
error messages, so every file goes through `ast.parse` first:

- it parses: the file is valid for this interpreter. Before LibCST sees it, the depth
  of its tree (as LibCST would nest it) must stay under `MAX_DEPTH`;
- it fails on nesting (recursion, memory, "too many nested parentheses") or has more
  than `MAX_BRACKETS` open brackets: reported as is, LibCST never runs;
- any other syntax error: LibCST may still parse it (syntax newer than this
  interpreter), so the caller decides.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass, field
from typing import Optional

# Parsing costs about 0.7 GB of memory and 12 s per MB of source with LibCST (and 0.2 GB with
# `ast`); the largest file in the torch package is 1.4 MB. Bigger files are generated data.
MAX_CHARS = 2 * 1024 * 1024  # the default of the `max-file-size` setting, in bytes
MAX_DEPTH = 1000  # real code stays under 100 (the installed torch package: at most 94)
MAX_BRACKETS = 200  # CPython's own limit on nested brackets
_NESTING_MESSAGES = ("too many nested", "too many levels", "too complex", "nested too deeply")
_BRACKETS = re.compile(r"[()\[\]{}]")
TOO_DEEP = "file is nested too deeply to analyse"


@dataclass(frozen=True)
class Refusal:
    """Why a file must not reach LibCST, and where."""

    message: str
    row: int = 1
    column: int = 1


@dataclass(frozen=True)
class PythonCheck:
    valid: bool  # CPython parsed the file
    refusal: Optional[Refusal] = None  # set: report this, do not parse with LibCST
    # CPython's tree when it parsed, for the AST prefilter (engine/ast_prefilter.py)
    tree: Optional[ast.Module] = field(default=None, repr=False, compare=False)


def bracket_depth(text: str) -> int:
    """Deepest bracket nesting, counting brackets in strings and comments too (an upper bound)."""
    depth = best = 0
    for match in _BRACKETS.finditer(text):
        if match.group() in "([{":
            depth += 1
            if depth > best:
                best = depth
        elif depth:
            depth -= 1
    return best


def nesting_depth(tree: ast.AST) -> tuple[int, int]:
    """(depth, row) of the deepest node, counting a chain of `and`/`or` as LibCST nests it.

    `ast.iter_child_nodes` inlined (same children, same order): this walk runs on every file
    a rule may match, and the generator costs more than the work."""
    best, row = 0, 1
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    pop, push = stack.pop, stack.append
    node_type, bool_op = ast.AST, ast.BoolOp
    while stack:
        node, depth = pop()
        if type(node) is bool_op:
            depth += len(node.values)
        if depth > best:
            best, row = depth, getattr(node, "lineno", row)
        depth += 1
        for name in node._fields:
            try:
                value = getattr(node, name)
            except AttributeError:
                continue
            if isinstance(value, node_type):
                push((value, depth))
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, node_type):
                        push((item, depth))
    return best, row


def text_size(text: str) -> int:
    """The text's size in bytes (as UTF-8), what `max-file-size` bounds."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def too_large(text: str, limit: int = MAX_CHARS) -> Optional[Refusal]:
    if len(text) <= limit // 4 or text_size(text) <= limit:  # (a character is at most 4 bytes)
        return None
    from gpulint.core.options import format_size

    return Refusal(f"file is too large to analyse ({text_size(text) / 2**20:.1f} MB; max-file-size is "
                   f"{format_size(limit)})")


def python_check(text: str, before_libcst: bool = True, limit: int = MAX_CHARS) -> PythonCheck:
    """Parse with CPython; `before_libcst` also measures the depth LibCST would face."""
    refusal = too_large(text, limit)
    if refusal is not None:
        return PythonCheck(False, refusal)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc. are not ours to print
            tree = ast.parse(text)
    except (RecursionError, MemoryError):
        return PythonCheck(False, Refusal(TOO_DEEP))
    except SyntaxError as exc:
        message = f"SyntaxError: {exc.msg}"
        row, column = exc.lineno or 1, max(1, exc.offset or 1)
        if any(part in (exc.msg or "") for part in _NESTING_MESSAGES) or bracket_depth(text) > MAX_BRACKETS:
            return PythonCheck(False, Refusal(message, row, column))
        return PythonCheck(False)
    except ValueError as exc:  # e.g. NUL bytes; source.py refuses those earlier
        return PythonCheck(False, Refusal(f"SyntaxError: {exc}"))
    if before_libcst:
        depth, row = nesting_depth(tree)
        if depth > MAX_DEPTH:
            return PythonCheck(True, Refusal(f"{TOO_DEEP} (nesting depth {depth} > {MAX_DEPTH})", row))
    return PythonCheck(True, tree=tree)
