"""What the language server says about one buffer, without the protocol: findings, fixes, docs.

Kept apart from the protocol wiring (lsp.py) so it is plain functions of text and settings. The
buffer is linted as `gpulint check - --stdin-filename PATH` lints it: the configuration that
applies to PATH (per-file settings, select and ignore, per-file-ignores) and the command
line's own selection from the editor's settings on top.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional, Sequence

from gpulint.config import CliOverrides, SettingsResolver
from gpulint.core.edits import Applicability, Edit
from gpulint.core.findings import Finding
from gpulint.core.lines import LineIndex
from gpulint.core.settings import ConfigError
from gpulint.records import dataclass
from gpulint.selectors import parse_codes
from gpulint.server.cells import NotebookCells, changed_edits, notebook_of

_CODE = re.compile(r"GPU\d{3}")


# The editor's `gpulint` settings the server reads, and the JSON types each may have. The VS Code
# extension's package.json declares the same keys (tests/server/test_extension.py compares them).
SETTING_TYPES: dict[str, tuple[str, ...]] = {
    "select": ("array", "null"),
    "extendSelect": ("array",),
    "ignore": ("array",),
    "preview": ("boolean", "null"),
    "configuration": ("string", "null"),
    "isolated": ("boolean",),
}
# read by the editor's client itself (the VS Code extension), sent along with the rest: not unknown
CLIENT_SETTINGS = frozenset({"path", "trace"})
_JSON_TYPES: dict[str, tuple[type, ...]] = {"array": (list,), "null": (type(None),), "boolean": (bool,),
                                            "string": (str,), "number": (int, float), "object": (dict,)}


def _json_type(value: Any) -> str:
    return next((name for name, kinds in _JSON_TYPES.items() if isinstance(value, kinds)), type(value).__name__)


@dataclass(frozen=True)
class EditorSettings:
    """The editor's `gpulint` settings (initializationOptions or workspace/didChangeConfiguration)."""

    select: Optional[tuple[str, ...]] = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    preview: Optional[bool] = None
    configuration: Optional[str] = None  # one configuration file for every file, as --config
    isolated: bool = False  # no configuration files, as --isolated

    @classmethod
    def read(cls, data: Any) -> tuple["EditorSettings", list[str]]:
        """Settings from the client's JSON (a `gpulint` table inside it is used when there is one),
        and what is wrong in it: each setting of the wrong type, with codes that are not codes, or
        unknown, is named and left at its default."""
        if isinstance(data, dict) and "gpulint" in data:  # {"gpulint": {...}}, as most editors send them
            data = data["gpulint"]
        if data is None:
            return cls(), []
        if not isinstance(data, dict):
            return cls(), [f"the gpulint settings must be an object, not {_json_type(data)}; using the defaults"]
        problems: list[str] = []
        values: dict[str, Any] = {}
        for key, value in data.items():
            kinds = SETTING_TYPES.get(key)
            if kinds is None:
                if key not in CLIENT_SETTINGS:
                    problems.append(f"unknown setting gpulint.{key}; ignored")
                continue
            if key in ("select", "extendSelect", "ignore") and isinstance(value, str):
                value = value.split(",")  # "GPU1,GPU201", as on the command line
            if _json_type(value) not in kinds:
                expected = " or ".join("a list of codes" if k == "array" else k for k in kinds)
                problems.append(f"gpulint.{key} must be {expected}, not {_json_type(value)} {value!r}; "
                                f"using its default")
                continue
            if isinstance(value, list):
                try:
                    value = parse_codes(value)
                except ConfigError as exc:
                    problems.append(f"gpulint.{key}: {exc}; using its default")
                    continue
            values[key] = value
        return cls(select=values.get("select"), extend_select=values.get("extendSelect", ()),
                   ignore=values.get("ignore", ()), preview=values.get("preview"),
                   configuration=values.get("configuration"), isolated=values.get("isolated", False)), problems

    def resolver(self) -> SettingsResolver:
        """A fresh resolver: configuration files are read again, so an edit to one takes effect."""
        overrides = CliOverrides(select=self.select, extend_select=self.extend_select, ignore=self.ignore,
                                 preview=self.preview)
        return SettingsResolver(overrides, config_file=self.configuration, isolated=self.isolated)


class Positions:
    """Character offsets of a text to LSP positions and back, in the negotiated encoding
    (UTF-16 code units unless the client offers UTF-32, i.e. code points, or UTF-8 bytes)."""

    def __init__(self, text: str, encoding: str = "utf-16") -> None:
        self.text = text
        self.index = LineIndex(text)
        self.encoding = encoding

    def _units(self, chars: str) -> int:
        if self.encoding == "utf-32":
            return len(chars)
        if self.encoding == "utf-8":
            return len(chars.encode("utf-8", errors="surrogatepass"))
        return len(chars.encode("utf-16-le", errors="surrogatepass")) // 2

    def position(self, offset: int) -> tuple[int, int]:
        row, column = self.index.location(min(max(offset, 0), len(self.text)))
        start = self.index.starts[row - 1]
        return row - 1, self._units(self.text[start:start + column - 1])

    def offset(self, line: int, character: int) -> int:
        if line >= len(self.index.starts):
            return len(self.text)
        start = self.index.starts[line]
        end = self.index.starts[line + 1] if line + 1 < len(self.index.starts) else len(self.text)
        units = 0
        for position in range(start, end):
            if units >= character or self.text[position] in "\r\n":
                return position
            units += self._units(self.text[position])
        return end

    def location_offset(self, row: int, column: int) -> int:
        """The offset of a finding's 1-based (row, column)."""
        return min(self.index.starts[min(row, len(self.index.starts)) - 1] + column - 1, len(self.text))


def notebook_noqa_edits(cells: NotebookCells, finding: Finding) -> dict[int, list[Edit]]:
    """The edits, by cell index, that add `# noqa: CODE` for a finding of a notebook (as --add-noqa)."""
    from gpulint.engine.suppressions import add_noqa
    from gpulint.notebook.lint import apply_to_cells, to_program
    from gpulint.notebook.model import NotebookError
    from gpulint.notebook.program import build_program

    program = build_program(notebook_of(cells))
    placed = to_program(program, finding)
    if placed is None:
        return {}
    new_text, covered = add_noqa(program.text, [placed])
    if not covered or new_text == program.text:
        return {}
    try:
        sources = apply_to_cells(program, changed_edits(program.text, new_text))
    except NotebookError:
        return {}
    return {index: changed_edits(cells[index][1], source) for index, source in sources.items()}


def noqa_edits(text: str, finding: Finding) -> list[Edit]:
    """The edit that adds `# noqa: CODE` for one finding (none where a comment cannot go)."""
    from gpulint.engine.suppressions import add_noqa

    new_text, covered = add_noqa(text, [finding])
    if not covered or new_text == text:
        return []
    return changed_edits(text, new_text)


def fix_title(finding: Finding) -> str:
    assert finding.fix is not None
    if finding.fix.applicability is Applicability.SAFE:
        return f"gpulint: {finding.fix.message} ({finding.code})"
    return f"gpulint: {finding.fix.message} ({finding.code}, unsafe fix: may change numerics or behaviour)"


def code_written_at(text: str, offset: int) -> Optional[str]:
    """A rule code written at `offset` (`# noqa: GPU101`), if any: its docs need no lint."""
    for match in _CODE.finditer(text, max(0, offset - 6), min(len(text), offset + 6)):
        if match.start() <= offset <= match.end():
            return match.group()
    return None


def codes_at(positions: Positions, offset: int, findings: Sequence[Finding]) -> list[str]:
    """Rule codes of the findings under the cursor, for a hover."""
    codes = []
    for finding in findings:
        start = positions.location_offset(finding.location.row, finding.location.column)
        end = positions.location_offset(finding.end_location.row, finding.end_location.column)
        if start <= offset <= max(end, start + 1) and finding.code not in codes:
            codes.append(finding.code)
    return codes


def docs_site(path: Path, editor: EditorSettings) -> Optional[str]:
    """The docs site rule links point to for `path` (`docs-url`, else the package metadata's), as
    the CLI decides; None: no links. A configuration error is reported by linting, not here."""
    from gpulint.core.docs_url import docs_site as default_site

    try:
        return editor.resolver().docs_site(path)
    except ConfigError:
        return default_site(None)


def rule_docs(code: str, site: Optional[str] = None) -> Optional[str]:
    """A rule's documentation as Markdown, as `gpulint rule CODE` prints it."""
    from gpulint.output.docs import rule_markdown
    from gpulint.rules import rule_by_code

    rule = rule_by_code(code)
    return rule_markdown(rule, site) if rule is not None else None
