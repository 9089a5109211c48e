"""Everything rules may ask about one file; analyses are computed on first use only."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

import libcst as cst

from gpulint.analysis.device import DeviceFacts, device_facts
from gpulint.analysis.facts import FileFacts
from gpulint.analysis.kwargs import KeywordArgs, keyword_args
from gpulint.analysis.names import NameTable
from gpulint.analysis.project import ProjectView
from gpulint.engine.pending import ImportPlanner, PendingFix

if TYPE_CHECKING:
    from gpulint.config import Settings
    from gpulint.rules.base import Report, Rule

T = TypeVar("T")


class FileContext:
    def __init__(self, path: Path, text: str, module: cst.Module, settings: "Settings",
                 project: Optional[ProjectView] = None) -> None:
        self.path = path
        # the other files of the project, as far as they matter here (a file alone: its own facts)
        self.project = project if project is not None else ProjectView.alone(FileFacts())
        self.text = text
        self.module = module
        self.settings = settings
        self.names = NameTable(module)
        self.imports = ImportPlanner(module, self.names)
        self.reports: list["Report"] = []
        self._statement_stack: list[cst.CSTNode] = []
        self._analyses: dict[Callable[..., Any], Any] = {}

    @cached_property
    def device(self) -> DeviceFacts:
        return device_facts(self.project)

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

    def add_report(
        self,
        rule: "Rule",
        node: cst.CSTNode,
        message: str,
        fix: Optional[PendingFix],
        statement: Optional[cst.CSTNode] = None,
    ) -> None:
        from gpulint.rules.base import Report

        if statement is None and self._statement_stack:
            statement = self._statement_stack[-1]
        self.reports.append(Report(rule, node, message, fix, statement))
