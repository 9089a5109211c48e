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

Right before LibCST parses a file, `libcst_refusal` bounds its memory. LibCST's peak memory
grows with the number of tokens, and for each token with the number of brackets open around
it (measured with LibCST 1.9: about 3 KB per token of flat code, up to 1.4 KB more per token
and enclosing bracket: 10 lines of calls nested 190 deep took 0.8 GB, a 40 KB file of 20,000
numbers inside 99 nested calls 5 GB). Three limits keep each cost under about 1.5 GB (3 GB
for a file at two limits at once) and sit far above real code: the 16,000 files of the
installed torch, its dependencies and the precision corpora reach at most 199,000 tokens,
27 nested brackets and 555,000 bracketed tokens.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import field
from typing import Iterator, Optional

from gpulint.project.ast_nodes import all_nodes, kept_depth, node_fields
from gpulint.records import dataclass

# Parsing costs about 0.7 GB of memory and 12 s per MB of source with LibCST (and 0.2 GB with
# `ast`); the largest file in the torch package is 1.4 MB. Bigger files are generated data.
MAX_CHARS = 2 * 1024 * 1024  # the default of the `max-file-size` setting, in bytes
MAX_DEPTH = 1000  # real code stays under 100 (the installed torch package: at most 94)
MAX_BRACKETS = 200  # CPython's own limit on nested brackets
_NESTING_MESSAGES = ("too many nested", "too many levels", "too complex", "nested too deeply")
_BRACKETS = re.compile(r"[()\[\]{}]")
TOO_DEEP = "file is nested too deeply to analyse"
# LibCST's memory (see the module docstring), checked by `libcst_refusal`
MAX_TOKENS = 400_000  # tokens in the file (real code: at most 199,000)
MAX_BRACKET_DEPTH = 100  # brackets open at once (real code: at most 27; CPython's own limit is 200)
MAX_BRACKETED = 1_000_000  # tokens counted once per bracket around them (real code: at most 555,000)
# A token: a string literal (an f-string's body is scanned as code: its fields are expressions),
# a comment (not counted), a bracket, a name or number, or a run of other characters.
_TOKEN = re.compile(r"""
    (?P<string>(?P<prefix>[rRbBuUfF]{1,2})?(?:\'\'\'(?:\\.|[^\\])*?\'\'\'|\"\"\"(?:\\.|[^\\])*?\"\"\"
        |'(?:\\.|[^'\\\r\n])*'|"(?:\\.|[^"\\\r\n])*"))
  | (?P<comment>\#[^\r\n]*)
  | (?P<open>[(\[{])
  | (?P<close>[)\]}])
  | \w+
  | [^\w\s()\[\]{}'"\#]+
""", re.VERBOSE | re.DOTALL)
_BRACES = re.compile(r"\{\{|\}\}|[{}]")


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
    a rule may match, and the generator costs more than the work. An expression context (`ctx`,
    always a node's last field, so popped right after it, and without a row) is weighed where it
    would be pushed, not pushed."""
    best, row = 0, 1
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    pop, push = stack.pop, stack.append
    node_type, bool_op, fields_of = ast.AST, ast.BoolOp, _DEPTH_FIELDS
    while stack:
        node, depth = pop()
        kind = type(node)
        if kind is bool_op:
            depth += len(node.values)  # type: ignore[attr-defined]
        if depth > best:
            best, row = depth, getattr(node, "lineno", row)
        depth += 1
        found = fields_of.get(kind)
        if found is None:
            found = fields_of[kind] = _depth_fields(kind)
        fields, has_ctx = found
        for name in fields:
            value = getattr(node, name, None)
            if isinstance(value, node_type):
                push((value, depth))
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, node_type):
                        push((item, depth))
        if has_ctx and depth > best and isinstance(getattr(node, "ctx", None), node_type):
            best = depth  # the context, popped next: deeper than any node so far, its row the current one
    return best, row


# per node type: its fields but a last `ctx`, and whether it has that `ctx` (nesting_depth)
_DEPTH_FIELDS: dict[type, tuple[tuple[str, ...], bool]] = {}


def _depth_fields(kind: type) -> tuple[tuple[str, ...], bool]:
    fields = node_fields(kind)
    if fields and fields[-1] == "ctx":
        return fields[:-1], True
    return fields, False


@dataclass(frozen=True)
class Weight:
    """What LibCST's memory grows with (see `libcst_refusal`)."""

    tokens: int = 0
    depth: int = 0  # the most brackets open at once
    depth_row: int = 1  # where that depth is first reached
    bracketed: int = 0  # each token counted once per bracket open around it


def weigh(text: str) -> Weight:
    """Tokens and bracket nesting of a file, in one pass of a regular expression.

    Strings and comments are skipped, so brackets in them do not count; an f-string's body is
    weighed as code at the depth it sits (its replacement fields are expressions LibCST
    parses). Only an estimate of Python's tokens, never below the real bracket nesting."""
    tokens = depth = best = bracketed = 0
    best_at = 0
    stack = [(text, 0, 0)]  # (text, depth around it, offset in the file)
    while stack:
        chunk, depth, base = stack.pop()
        for match in _TOKEN.finditer(chunk):
            kind = match.lastgroup
            if kind == "comment":
                continue
            if kind == "open":
                depth += 1
                if depth > best:
                    best, best_at = depth, base + match.start()
            elif kind == "string" and "f" in (match.group("prefix") or "").lower():
                body = match.group()[len(match.group("prefix")):]
                quote = 3 if len(body) >= 6 and body[:3] in ("\'\'\'", '"""') else 1
                start = match.start() + len(match.group("prefix")) + quote
                for field_start, field_end in _fields(chunk, start, match.end() - quote):
                    stack.append((chunk[field_start:field_end], depth + 1, base + field_start))
            tokens += 1
            bracketed += depth
            if kind == "close" and depth:
                depth -= 1
    return Weight(tokens, best, text.count("\n", 0, best_at) + 1, bracketed)


def _fields(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """(start, end) of the replacement fields of the f-string body `text[start:end]` (`{{` and `}}`
    are literal braces)."""
    level, opened = 0, start
    for brace in _BRACES.finditer(text, start, end):
        if brace.group() in ("{{", "}}") and level == 0:
            continue
        if brace.group()[0] == "{":
            if level == 0:
                opened = brace.start() + 1
            level += len(brace.group())
        elif level:
            level = max(0, level - len(brace.group()))
            if level == 0:
                yield opened, brace.start()


def libcst_refusal(text: str) -> Optional[Refusal]:
    """Why LibCST must not parse `text` (it could take more than about 1.5 GB), or None."""
    weight = weigh(text)
    if weight.depth > MAX_BRACKET_DEPTH:
        return Refusal(f"{TOO_DEEP} (brackets nested {weight.depth} deep; gpulint's limit is {MAX_BRACKET_DEPTH})",
                       weight.depth_row)
    if weight.tokens > MAX_TOKENS:
        return Refusal(f"file is too large to analyse ({weight.tokens:,} tokens; gpulint's limit is {MAX_TOKENS:,})")
    if weight.bracketed > MAX_BRACKETED:
        return Refusal(f"{TOO_DEEP} ({weight.bracketed:,} tokens inside brackets, each counted once per bracket "
                       f"around it; gpulint's limit is {MAX_BRACKETED:,})")
    return None


def text_size(text: str) -> int:
    """The text's size in bytes (as UTF-8), what `max-file-size` bounds."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def too_large(text: str, limit: int = MAX_CHARS) -> Optional[Refusal]:
    if len(text) <= limit // 4 or text_size(text) <= limit:  # (a character is at most 4 bytes)
        return None
    from gpulint.core.options import format_size

    return Refusal(f"file is too large to analyse ({text_size(text) / 2**20:.1f} MB; max-file-size is "
                   f"{format_size(limit)})")


# Trees the project pass parsed (dispatch/project_scan.py), by the digest of their text (project/facts.py
# `text_digest`): the linter of that very text, in this process, takes its tree instead of parsing it again.
# Bounded by the characters of their texts (an `ast` tree takes about 35 bytes per character).
MAX_HANDED_CHARS = 2 * 1024 * 1024
_handed: dict[str, tuple[ast.Module, int]] = {}
_handed_chars = [0]


def hand_over(digest: str, tree: ast.Module, chars: int) -> bool:
    """Keep `tree`, parsed from a text of `chars` characters whose digest is `digest`, for `take_tree`;
    False when the trees kept already hold MAX_HANDED_CHARS."""
    if digest in _handed or _handed_chars[0] + chars > MAX_HANDED_CHARS:
        return False
    _handed[digest] = (tree, chars)
    _handed_chars[0] += chars
    return True


def take_tree(digest: str) -> Optional[ast.Module]:
    """The tree handed over for a text with this digest, once (a second lint of the text parses it again)."""
    kept = _handed.pop(digest, None)
    if kept is None:
        return None
    _handed_chars[0] -= kept[1]
    return kept[0]


def drop_trees() -> None:
    """Forget every tree handed over (a new project pass hands over its own)."""
    _handed.clear()
    _handed_chars[0] = 0


def python_check(text: str, before_libcst: bool = True, limit: int = MAX_CHARS,
                 tree: Optional[ast.Module] = None) -> PythonCheck:
    """Parse with CPython; `before_libcst` also measures the depth LibCST would face. `tree`: what
    `ast.parse(text)` returned before (`take_tree`), taken instead of parsing again."""
    refusal = too_large(text, limit)
    if refusal is not None:
        return PythonCheck(False, refusal)
    try:
        if tree is None:
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
    kept = kept_depth(tree)  # the project pass walked this tree already and kept its depth (no walk again)
    if before_libcst and kept is None:
        all_nodes(tree)  # the walk that weighs the depth keeps its list, which the prefilter and rules read next
        kept = kept_depth(tree)
    if before_libcst and (kept is None or kept > MAX_DEPTH):  # (the deepest node's row matters past the limit)
        depth, row = nesting_depth(tree)
        if depth > MAX_DEPTH:
            return PythonCheck(True, Refusal(f"{TOO_DEEP} (nesting depth {depth} > {MAX_DEPTH})", row))
    return PythonCheck(True, tree=tree)
