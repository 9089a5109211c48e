"""What the language server says about one buffer, without the protocol: findings, fixes, docs.

Kept apart from the pygls wiring (lsp.py) so it is plain functions of text and settings. The
buffer is linted as `gpulint check - --stdin-filename PATH` lints it: the configuration that
applies to PATH (per-file settings, select and ignore, per-file-ignores) and the command
line's own selection from the editor's settings on top.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from gpulint.config import CliOverrides, SettingsResolver
from gpulint.core.edits import Applicability, Edit, diff_changes, minimize
from gpulint.core.findings import Finding
from gpulint.core.positions import LineIndex
from gpulint.core.settings import ConfigError, Settings
from gpulint.project.view import ProjectView
from gpulint.selectors import parse_codes

_CODE = re.compile(r"GPU\d{3}")


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
    def from_client(cls, data: Any) -> "EditorSettings":
        """Settings from the client's JSON; a `gpulint` table inside it is used when there is one.
        Raises ConfigError for a value that is not a list of codes or a flag."""
        if isinstance(data, dict) and isinstance(data.get("gpulint"), dict):
            data = data["gpulint"]
        if not isinstance(data, dict):
            return cls()

        def codes(key: str) -> Optional[tuple[str, ...]]:
            value = data.get(key)
            if value is None:
                return None
            if isinstance(value, str):
                value = value.split(",")
            if not isinstance(value, list):
                raise ConfigError(f"editor setting gpulint.{key}: expected a list of codes, got {value!r}")
            return parse_codes(value)

        preview = data.get("preview")
        return cls(select=codes("select"), extend_select=codes("extendSelect") or (), ignore=codes("ignore") or (),
                   preview=preview if isinstance(preview, bool) else None,
                   configuration=data.get("configuration") if isinstance(data.get("configuration"), str) else None,
                   isolated=data.get("isolated") is True)

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


@dataclass
class BufferReport:
    findings: list[Finding] = field(default_factory=list)
    excluded: bool = False
    error: Optional[str] = None  # a configuration error, shown to the user


def settings_for(path: Path, editor: EditorSettings) -> tuple[Optional[Settings], BufferReport]:
    """The settings for `path`, or (None, why nothing is linted: excluded, or a configuration error)."""
    try:
        resolver = editor.resolver()
        if resolver.is_excluded(path):
            return None, BufferReport(excluded=True)
        return resolver.for_path(path), BufferReport()
    except ConfigError as exc:
        return None, BufferReport(error=str(exc))


def lint_buffer(path: Path, text: str, editor: EditorSettings, project: Optional[ProjectView] = None) -> BufferReport:
    """The findings for an editor's buffer of `path`. Raises the engine's InternalError on a bug."""
    from gpulint.engine.linter import lint_text

    settings, report = settings_for(path, editor)
    if settings is not None:
        report.findings = lint_text(path, text, settings, project=project).findings
    return report


def fix_all_edits(path: Path, text: str, editor: EditorSettings, project: Optional[ProjectView] = None) -> list[Edit]:
    """The edits of every safe fix (`gpulint fix`), as minimal replacements of the buffer's text."""
    from gpulint.engine.linter import fix_text

    settings, _ = settings_for(path, editor)
    if settings is None:
        return []
    outcome = fix_text(path, text, settings, unsafe=False, project=project)
    return [Edit(c.start, c.end, c.text) for c in outcome.changes]


def noqa_edits(text: str, finding: Finding) -> list[Edit]:
    """The edit that adds `# noqa: CODE` for one finding (none where a comment cannot go)."""
    from gpulint.engine.suppressions import add_noqa

    new_text, covered = add_noqa(text, [finding])
    if not covered or new_text == text:
        return []
    return [minimize(text[c.start:c.end], c.text, c.start) for c in diff_changes(text, new_text)]


def fix_title(finding: Finding) -> str:
    assert finding.fix is not None
    if finding.fix.applicability is Applicability.SAFE:
        return f"gpulint: {finding.fix.message} ({finding.code})"
    return f"gpulint: {finding.fix.message} ({finding.code}, unsafe fix: may change numerics or behaviour)"


def codes_at(text: str, positions: Positions, offset: int, findings: Sequence[Finding]) -> list[str]:
    """Rule codes for a hover: the findings under the cursor, else a code written there (`# noqa: GPU101`)."""
    codes = []
    for finding in findings:
        start = positions.location_offset(finding.location.row, finding.location.column)
        end = positions.location_offset(finding.end_location.row, finding.end_location.column)
        if start <= offset <= max(end, start + 1) and finding.code not in codes:
            codes.append(finding.code)
    if codes:
        return codes
    for match in _CODE.finditer(text, max(0, offset - 6), min(len(text), offset + 6)):
        if match.start() <= offset <= match.end():
            return [match.group()]
    return []


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
