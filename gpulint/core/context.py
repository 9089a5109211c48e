"""Everything rules may ask about one file; analyses are computed on first use only."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

import libcst as cst

from gpulint.core.arguments import KeywordArgs, keyword_args
from gpulint.core.names import NameTable
from gpulint.core.pending import ImportPlanner, PendingFinding, PendingFix, Reporter
from gpulint.core.settings import Settings
from gpulint.core.style import CodeStyle, detect
from gpulint.project.facts import FileFacts
from gpulint.project.view import ProjectView

T = TypeVar("T")


class FileContext:
    def __init__(self, path: Path, text: str, module: cst.Module, settings: Settings,
                 project: Optional[ProjectView] = None) -> None:
        self.path = path
        # the other files of the project, as far as they matter here (a file alone: its own facts)
        self.project = project if project is not None else ProjectView.alone(FileFacts())
        self.text = text
        self.module = module
        self.settings = settings
        self.names = NameTable(module)
        self.imports = ImportPlanner(module, self.names)
        self.findings: list[PendingFinding] = []
        self.statements: list[cst.CSTNode] = []  # the statements around the node being visited
        self._analyses: dict[Callable[..., Any], Any] = {}
        self._style: Optional[CodeStyle] = None

    @property
    def style(self) -> CodeStyle:
        """How this file writes code (quotes, line length, indentation), read when a fix needs it."""
        if self._style is None:
            unit = self.module.default_indent.replace("\f", "").replace("\v", "")
            self._style = detect(self.text, self.settings.line_length, unit)
        return self._style

    def analysis(self, compute: Callable[["FileContext"], T]) -> T:
        """Run a whole-file analysis once and share its result between rules."""
        if compute not in self._analyses:
            self._analyses[compute] = compute(self)
        return self._analyses[compute]

    def qualname(self, expr: cst.CSTNode) -> Optional[str]:
        return self.names.qualified_name(expr)

    def kwargs(self, call: cst.Call) -> KeywordArgs:
        return keyword_args(call, self.names)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def add_finding(
        self,
        rule: Reporter,
        node: cst.CSTNode,
        message: str,
        fix: Optional[PendingFix],
        statement: Optional[cst.CSTNode] = None,
        note: str = "",
    ) -> None:
        if statement is None and self.statements:
            statement = self.statements[-1]
        self.findings.append(PendingFinding(rule, node, message, fix, statement, note))
