"""How a file writes its code, so generated code reads like the code around it.

The project's line length comes from settings (`line-length`, else the project's ruff, black or
flake8 configuration, else 88); the quote character, the indentation unit and how the file
breaks long calls are read from the file itself, once, when a fix is built or placed.
"""

from __future__ import annotations

import io
import re
import tokenize

from gpulint.records import dataclass

DEFAULT_LINE_LENGTH = 88
_STRING_START = re.compile(r"^[a-zA-Z]{0,2}(['\"])")


@dataclass(frozen=True)
class CodeStyle:
    width: int = DEFAULT_LINE_LENGTH  # the line length generated code keeps to
    quote: str = '"'  # the quote character of the file's strings
    unit: str = "    "  # one indentation level
    hanging: bool = True  # long calls break after the bracket (black); False: continuation aligned with it

    def string(self, value: str) -> str:
        """`value` as a string literal in the file's quote style (value holds no quotes or backslashes)."""
        return f"{self.quote}{value}{self.quote}"


_FORM_FEED = re.compile(r"(?:^|(?<=[\r\n]))[ \t\f]*\f")


def detect(text: str, width: int, unit: str) -> CodeStyle:
    """The file's quote character (the one most of its plain strings use; double on a tie) and
    its way of breaking long bracketed code (a line ending in an open bracket is black's
    hanging style; a continuation line starting under an open bracket is the aligned one)."""
    single = double = hanging = aligned = 0
    # a form feed at the start of a line (after spaces or not) resets Python's column count: columns are read
    # as if it were not there, so a page break above a call does not change the style detected
    text = _FORM_FEED.sub("", text)
    depth: list[int] = []  # columns just after each open bracket
    last_row = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            kind, value, (row, column), (end_row, _), line = token
            if kind == tokenize.STRING and "\n" not in value:
                match = _STRING_START.match(value)
                if match and not value.startswith(("'''", '"""'), len(match.group(0)) - 1):
                    inner = value[len(match.group(0)):-1]
                    if "'" not in inner and '"' not in inner:
                        if match.group(1) == "'":
                            single += 1
                        else:
                            double += 1
            elif kind == tokenize.OP and value in "([{":
                rest = line[column + 1:].split("#", 1)[0].strip()
                if not rest:
                    hanging += 1
                depth.append(column + 1)
            elif kind == tokenize.OP and value in ")]}":
                if depth:
                    depth.pop()
            if depth and row != last_row and kind not in (tokenize.NL, tokenize.COMMENT) and row > 1 \
                    and column == depth[-1] and line[:column].strip() == "":
                aligned += 1
            last_row = end_row
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    quote = "'" if single > double else '"'
    return CodeStyle(width=width, quote=quote, unit=unit or "    ", hanging=hanging >= aligned)
