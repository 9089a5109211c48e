"""What a rule is: code, name, docs, the nodes it visits, and `report`.

A rule is a small self-contained class. The engine instantiates it once per file with a
`FileContext`, walks the tree once for all rules, and calls the `visit_<Node>` /
`leave_<Node>` methods each rule defines (LibCST node class names).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, ClassVar, Optional

import libcst as cst

from gpulint.engine.fixes import Applicability
from gpulint.engine.pending import PendingFix

if TYPE_CHECKING:
    from gpulint.engine.context import FileContext

class Target(Enum):
    """Which files a rule looks at, by what they say about their device."""

    ANY = "any file"
    NOT_CPU_ONLY = "files not pinned to the CPU"
    GPU = "files with GPU evidence"


@dataclass(frozen=True)
class RuleDocs:
    """Rule documentation, in ruff's shape. Text is dedented on access."""

    what: str
    why: str  # with a measured figure and where it comes from
    example: str
    use_instead: str
    fix_safety: str

    def section(self, field: str) -> str:
        return textwrap.dedent(getattr(self, field)).strip("\n")


@dataclass
class Report:
    rule: "Rule"
    node: cst.CSTNode
    message: str
    fix: Optional[PendingFix]
    statement: Optional[cst.CSTNode]


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]  # one line, for tables
    impact: ClassVar[str] = ""  # the measured effect in a few words, with its source, for tables
    docs: ClassVar[RuleDocs]
    # The rule can only fire when one of these strings occurs in the file's text.
    needles: ClassVar[tuple[str, ...]] = ()
    # What the rule needs on CPython's `ast` tree before LibCST is worth running: groups that
    # must all match, each matching when any of its needles does: a qualified-name prefix
    # ("torch.optim.Adam"), a prefix*suffix ("torch.nn.*Sequential") or a called attribute
    # (".step("). A superset of what the rule can flag; None: always parsed. See
    # engine/ast_prefilter.py.
    ast_needles: ClassVar[Optional[tuple[tuple[str, ...], ...]]] = None
    target: ClassVar[Target] = Target.ANY
    fix: ClassVar[Optional[Applicability]] = None  # the fix the rule offers, for docs
    fix_detail: ClassVar[Optional[str]] = None  # when safety depends on the case, e.g. per optimizer
    preview: ClassVar[bool] = False  # new rules start opt-in so upgrades never turn CI red
    # False for rules about training steps, loaders and optimizers: test code runs fp32 references
    # and bitwise checks, so they stay silent in test files unless `lint-tests = true`
    in_tests: ClassVar[bool] = True

    def __init__(self, ctx: "FileContext") -> None:
        self.ctx = ctx

    @classmethod
    def url(cls, site: Optional[str]) -> Optional[str]:
        """The rule's page on the docs site, or None when no site is named (gpulint/docs_url.py)."""
        from gpulint.docs_url import rule_url

        return rule_url(cls.code, site)

    @classmethod
    def may_match(cls, text: str) -> bool:
        return not cls.needles or any(needle in text for needle in cls.needles)

    def applies(self) -> bool:
        """Whether the rule runs on this file at all (device scope)."""
        if self.target is Target.ANY:
            return True
        facts = self.ctx.device
        if self.target is Target.GPU:
            return facts.gpu_evidence
        return not facts.cpu_only

    def report(
        self,
        node: cst.CSTNode,
        message: str,
        fix: Optional[PendingFix] = None,
        statement: Optional[cst.CSTNode] = None,
    ) -> None:
        """Report `node`. `statement` (default: the statement being visited) scopes `# noqa`."""
        self.ctx.add_report(self, node, message, fix, statement)
