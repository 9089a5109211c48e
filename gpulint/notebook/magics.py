"""IPython syntax in a code cell, replaced by Python that keeps every other position.

A cell is Python for IPython, plus magics: `%matplotlib inline`, `!pip install x`,
`files = !ls`, `model?`, and cell magics on the first line (`%%time`). gpulint lints the
Python around them, so each magic line becomes a placeholder of the same row: nothing (at the
top level) or `pass` (inside a block, where a statement is needed). `%time stmt` and
`%timeit stmt` run `stmt`, so the statement is kept and only the prefix dropped. A cell whose
cell magic runs something other than Python (`%%bash`, `%%writefile`) is not linted.

What is copied from the cell and what is not is recorded as pieces, so positions in the code
map back to the cell exactly, and an edit is written back only where it touches copied text.
"""

from __future__ import annotations

import ast
import re
from dataclasses import field
from functools import lru_cache
from typing import Optional

from gpulint.records import dataclass

# cell magics whose body is Python run in the kernel: the body is linted
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
# line magics that run the Python statement that follows them
STATEMENT_MAGICS = frozenset({"time", "timeit"})

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)?")
_ASSIGNED_MAGIC = re.compile(r"[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*[!%]")
_MAGIC_NAME = re.compile(r"%%?([A-Za-z_][\w.]*)")
# IPython's help: `model?`, `torch.nn??`, `?obj`, `*Loader*?` (a name, or a pattern, and question marks)
_HELP = re.compile(r"\?{0,2}[A-Za-z_*][\w.*]*(?:\(\))?\?{0,2}")
# IPython's automagics (on by default) and default shell aliases: `pip install x`, `cd data`, `ls -la`
# run without `%` or `!`. Such a line is read as one only when it is not Python by itself.
AUTOMAGICS = frozenset({
    "pip", "conda", "mamba", "cd", "ls", "ll", "lf", "lk", "lx", "ldir", "pwd", "cat", "cp", "mv", "rm", "rmdir",
    "mkdir", "man", "env", "set_env", "history", "load_ext", "reload_ext", "unload_ext", "matplotlib", "reset",
    "run", "who", "whos", "alias", "unalias", "bookmark", "dhist", "pushd", "popd", "time", "timeit", "autoreload",
    "store", "xdel", "tb", "pdb", "config", "edit", "load", "save", "pycat", "less", "more", "clear", "sx", "sc",
})
_AUTOMAGIC = re.compile(r"(?P<name>[A-Za-z_]\w*)(?:\s+(?P<rest>\S.*))?")


@dataclass(frozen=True)
class Piece:
    """`length` characters of the code at `code_start` stand for the cell's text at `source_start`;
    `copied` pieces are that text itself, others (placeholders) only point at the line they replace."""

    code_start: int
    source_start: int
    length: int
    copied: bool = True


@dataclass
class CellCode:
    text: str = ""
    pieces: list[Piece] = field(default_factory=list)
    skipped: Optional[str] = None  # why the whole cell is not linted (a cell magic that is not Python)
    magics: list[tuple[int, str]] = field(default_factory=list)  # (row, line) of every magic replaced

    def add(self, text: str, source_start: int, copied: bool = True) -> None:
        if not text:
            return
        last = self.pieces[-1] if self.pieces else None
        if copied and last is not None and last.copied and last.code_start + last.length == len(self.text) \
                and last.source_start + last.length == source_start:
            self.pieces[-1] = Piece(last.code_start, last.source_start, last.length + len(text))
        else:
            self.pieces.append(Piece(len(self.text), source_start, len(text), copied))
        self.text += text


def split_lines(text: str) -> list[str]:
    """Lines with their endings; `\\r\\n`, `\\r` and `\\n` end a line, as for Python."""
    return [m.group() for m in _LINE.finditer(text) if m.group()]


class _Scanner:
    """Just enough of Python's tokenizer to know whether a line starts a new statement:
    open brackets, open strings (triple-quoted ones span lines) and backslash continuations."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: Optional[str] = None  # the open triple quote
        self.continued = False

    @property
    def at_statement_start(self) -> bool:
        return self.depth == 0 and self.quote is None and not self.continued

    def feed(self, line: str) -> None:
        body = line.rstrip("\r\n")
        i, n = 0, len(body)
        self.continued = False
        while i < n:
            char = body[i]
            if self.quote is not None:
                if char == "\\":
                    i += 2
                    continue
                if body.startswith(self.quote, i):
                    i += len(self.quote)
                    self.quote = None
                    continue
                if len(self.quote) == 1 and i == n - 1:
                    break
                i += 1
                continue
            if char == "#":
                break
            if char in "\"'":
                triple = body[i:i + 3]
                self.quote = triple if triple in ('"""', "'''") else char
                i += len(self.quote)
                continue
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            elif char == "\\" and i == n - 1:
                self.continued = True
            i += 1
        if self.quote is not None and len(self.quote) == 1:
            # a one-quote string ends with its line, unless the line goes on with a backslash
            self.continued = body.endswith("\\")
            if not self.continued:
                self.quote = None


def is_magic_line(line: str) -> bool:
    """A line (at the start of a statement) that IPython, not Python, reads."""
    stripped = line.strip()
    if not stripped:
        return False
    if stripped[0] in "%!?":
        return True
    if _ASSIGNED_MAGIC.match(stripped):
        return True
    if _is_automagic(stripped):
        return True
    return "?" in stripped and _HELP.fullmatch(stripped) is not None


def _is_automagic(stripped: str) -> bool:
    """`pip install x`, `cd ..`, `ls -la data/`: an automagic name, then words that are not Python."""
    match = _AUTOMAGIC.fullmatch(stripped)
    if match is None or match["name"] not in AUTOMAGICS or match["rest"] is None:
        return False
    if match["rest"][0] in "=([{.,:;)]}" or re.match(r"(?:[-+*/%&|^@]|//|\*\*|<<|>>)=", match["rest"]):
        return False  # `pip = 3`, `cd(x)`, `ls.append(x)`, `time += 1`: Python
    return not compiles(stripped)


@lru_cache(maxsize=4096)
def compiles(code: str) -> bool:
    """Whether `code` is valid Python for this interpreter (top-level `await` counts as invalid:
    the rest of gpulint parses with CPython's and LibCST's module grammar). Remembered: a notebook's
    cells are read by the project pass, then again when it is linted."""
    try:
        compile(code, "<cell>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _newline(line: str) -> str:
    return line[len(line.rstrip("\r\n")):]


def transform(source: str) -> CellCode:
    """The cell's Python, with the pieces that map it back to the cell."""
    lines = split_lines(source)
    out = CellCode()
    if lines and lines[0].lstrip().startswith("%%"):
        match = _MAGIC_NAME.match(lines[0].lstrip())
        name = match.group(1) if match else ""
        if name not in PYTHON_CELL_MAGICS:
            out.skipped = f"cell magic %%{name}" if name else "cell magic"
            return out
        out.magics.append((1, lines[0].rstrip("\r\n")))
        out.add(_newline(lines[0]), 0, copied=False)
        start = 1
    else:
        if compiles(source):  # plain Python (most cells): copied whole, no guessing at magics
            out.add(source, 0)
            return out
        start = 0
    scanner = _Scanner()
    offset = sum(len(line) for line in lines[:start])
    continuing_magic = False
    for row, line in enumerate(lines[start:], start=start + 1):
        if continuing_magic or (scanner.at_statement_start and is_magic_line(line)):
            body = line.rstrip("\r\n")
            out.magics.append((row, body))
            if continuing_magic:  # the rest of a magic continued with a backslash: an empty line
                out.add(_newline(line), offset, copied=False)
            else:
                _replace_magic(out, line, offset)
            continuing_magic = body.endswith("\\")
        else:
            scanner.feed(line)
            out.add(line, offset)
        offset += len(line)
    return out


def _replace_magic(out: CellCode, line: str, offset: int) -> None:
    body = line.rstrip("\r\n")
    indent = body[:len(body) - len(body.lstrip())]
    stripped = body.lstrip()
    match = _MAGIC_NAME.match(stripped)
    if match is not None and not stripped.startswith("%%") and match.group(1) in STATEMENT_MAGICS:
        rest = stripped[match.end():]
        statement = rest.lstrip()
        if statement and not statement.startswith("-"):  # `%timeit -n 3 f()`: options, not a statement
            out.add(indent, offset)
            out.add(statement + _newline(line), offset + len(body) - len(statement))
            return
    placeholder = (indent + "pass" if indent else "") + _newline(line)
    out.add(placeholder, offset, copied=False)


# a code cell that holds no Python at all: a YAML document shown as an example (`model_root: ../checkpoints/` under
# a `Base:` key), or shell commands, some written without their `!` (`!cd demo`, then `python run.py`). Jupyter
# would fail on it too, but there is no Python in it for any rule, so gpulint says nothing (blind17: FuxiCTR's
# tutorials, 33 such cells)
_YAML_ENTRY = re.compile(r"(?:-\s+)?[\w.\-]+\s*:(?:\s|$)|-(?:\s|$)|[\[{]")
_YAML_KEY = re.compile(r"[\w.\-]+\s*:(?:\s|$)")
_SHELL_COMMANDS = frozenset({"python", "python3", "bash", "sh", "nohup", "wget", "curl", "git", "export", "unzip",
                             "tar", "echo", "source", "sudo", "apt", "apt-get", "nvidia-smi", "torchrun",
                             "accelerate", "deepspeed"}) | AUTOMAGICS
_COMMAND = re.compile(r"(?P<name>[A-Za-z_][\w\-]*)(?:\s+[^\s=(].*)?")


def not_python(source: str) -> Optional[str]:
    """What a code cell that does not parse holds instead of Python ("YAML", "shell"), or None
    when it may be Python with a mistake (then GPU000 says the cell was not linted)."""
    lines = [line.strip() for line in _LINE.findall(source)]
    significant = [line for line in lines if line and not line.startswith("#")]
    if not significant:
        return None
    if _YAML_KEY.match(significant[0]) and _yaml_lines(significant):
        return "YAML"
    if all(line[0] in "!%" or _shell_command(line) for line in significant):
        return "shell"
    return None


def _yaml_lines(lines: list[str]) -> bool:
    """Every line a YAML entry (`key: value`, `- item`), or inside a flow collection a line above opened."""
    depth = 0
    for line in lines:
        if depth <= 0 and not _YAML_ENTRY.match(line):
            return False
        code = re.sub(r"'[^']*'|\"[^\"]*\"", "", line)  # brackets in quoted strings do not count
        depth += code.count("[") + code.count("{") - code.count("]") - code.count("}")
    return True


def _shell_command(line: str) -> bool:
    match = _COMMAND.fullmatch(line)
    return match is not None and match["name"] in _SHELL_COMMANDS and not compiles(line)
