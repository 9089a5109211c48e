"""What a rule is: one class that holds everything about it.

A rule module (`gpulint/rules/gpuNNN_<name>.py`, written by `scripts/new_rule.py`) defines one
`Rule` subclass: its code, name and docs with examples, the needles that keep it off files it
cannot match, the files it targets, its fix safety, its typed options, and what `gpulint
verify` checks for its rewrite. The registry (`gpulint/rules/__init__.py`) finds it; nothing
else lists it. The engine instantiates the rule once per file with a `FileContext`, walks the
tree once for all rules, and calls the `visit_<Node>` / `leave_<Node>` methods each rule
defines (LibCST node class names).

This module does not import LibCST, so the rules that only carry metadata (GPU000, GPU900)
can be named by the parts of gpulint that run before any file is parsed.
"""

from __future__ import annotations

import textwrap
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, Optional

from gpulint.analysis.device import device_facts
from gpulint.analysis.evidence import Decision, Evidence, Premise, decide, pedantic, undecided_note
from gpulint.core.edits import Applicability
from gpulint.core.options import Option
from gpulint.core.verification import Verification
from gpulint.records import dataclass

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.analysis.ast_context import AstContext, Detection
    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix
    from gpulint.core.settings import Settings
    from gpulint.project.view import ProjectView

class Target(Enum):
    """Which files a rule looks at, by what they say about their device."""

    ANY = "any file"
    NOT_CPU_ONLY = "files not pinned to the CPU"
    GPU = "files with GPU evidence"


@dataclass(frozen=True)
class FixCase:
    """One case of a rule's fix and what gpulint gives there, backed by a fixture.

    docs/fix-safety.md and the rule's page print these, and tests/rules/test_fix_safety.py
    lints each fixture and asserts its findings of the rule carry exactly `gives`.
    """

    case: str
    gives: Optional[Applicability]  # None: reported without a fix
    fixture: str  # a file of fixtures/rules/<CODE>/

    @property
    def gives_text(self) -> str:
        return "no fix" if self.gives is None else self.gives.value


@dataclass(frozen=True)
class RuleDocs:
    """Rule documentation, in ruff's shape. Text is dedented on access.

    `example` is code the rule flags and `use_instead` code it leaves alone: both are linted
    by the tests (tests/rules/test_registry.py), so the docs cannot drift from the rule.
    """

    what: str
    why: str  # with a measured figure and where it comes from
    example: str
    use_instead: str
    fix_safety: str
    # what the project must show before the rule reports (analysis/evidence.py): each premise of
    # the message, checked by the detector one by one; undecided ones are reported only when pedantic
    premises: tuple[Premise, ...] = ()
    # the cases of the fix, each with the fixture that shows it (docs/fix-safety.md is made of these)
    fix_cases: tuple[FixCase, ...] = ()

    def section(self, field: str) -> str:
        return textwrap.dedent(getattr(self, field)).strip("\n")


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
    # the habit of the GPU-optimisation guide the rule checks (a key of output/docs.py GUIDE_HABITS); "" for
    # the rules about gpulint itself (GPU000, GPU900)
    habit: ClassVar[str] = ""
    # runs only when selected by its exact code (`--select GPU601`), even with preview on and under `ALL`:
    # advice that pays off often but that most projects would not take unasked (torch.compile)
    opt_in: ClassVar[bool] = False
    # False for rules about training steps, loaders and optimizers: test code runs fp32 references
    # and bitwise checks, so they stay silent in test files unless `lint-tests = true`
    in_tests: ClassVar[bool] = True
    # False: silent inside a `test*` function that compares results, in any file (a test exercising the API on
    # purpose: detectron2's `test_autocast`), though the rule still reads test files; a rule that stays out of
    # test files (`in_tests = False`) is silent there too
    in_test_functions: ClassVar[bool] = True
    # the rule's own configuration keys (read with `self.ctx.settings.value(OPTION)`)
    options: ClassVar[tuple[Option[Any], ...]] = ()
    # what `gpulint verify` checks for the rewrite; None: the rule has no fix to verify
    verification: ClassVar[Optional[Verification]] = None
    # True when the rule detects on CPython's `ast` (it overrides `detect`; set by the base): the
    # engine then never runs LibCST for it unless a fix must be built (`build_fix`)
    on_ast: ClassVar[bool] = False

    def __init__(self, ctx: Any) -> None:
        # a FileContext (LibCST visitors) or, for rules on `ast`, an AstContext
        self.ctx = ctx

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.on_ast = cls.detect is not Rule.detect

    def detect(self, ctx: "AstContext") -> None:
        """Find the rule's cases on the file's `ast` tree and `ctx.report` each (issue 25). A rule that
        overrides this runs on `ast` only; LibCST is parsed for it only to build a fix."""

    def build_fix(self, detection: "Detection", fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        """The fix for `detection`, built on the LibCST node `node` whose span is the detection's.
        Only called when edits are needed (fix, --diff, --show-fixes, edit-carrying output, server
        actions). Its applicability must equal the detection's predicted `fix`."""
        return None

    @classmethod
    def url(cls, site: Optional[str]) -> Optional[str]:
        """The rule's page on the docs site, or None when no site is named (gpulint/core/docs_url.py)."""
        from gpulint.core.docs_url import rule_url

        return rule_url(cls.code, site)

    @classmethod
    def may_match(cls, text: str) -> bool:
        return not cls.needles or any(needle in text for needle in cls.needles)

    @classmethod
    def needles_elsewhere(cls, project: Optional["ProjectView"]) -> bool:
        """Whether the project facts show what `ast_needles` look for where the tree cannot: a function of
        another project module that hands out an object the needles name (GPU302: `get_checkpoint_fn()`)."""
        return False

    @classmethod
    def may_report(cls, project: "ProjectView", settings: Optional["Settings"] = None) -> bool:
        """Whether the rule can report anything in a file with these project facts. Decided from the
        facts alone, before LibCST parses the file: a rule that cannot report is not worth a parse.
        With `strictness = "pedantic"`, GPU rules also look at files whose device is undecided."""
        if cls.target is Target.ANY:
            return True
        facts = device_facts(project)
        if cls.target is Target.GPU:
            if facts.gpu_evidence or project.devices & {"xpu", "framework"}:
                return True
            return settings is not None and pedantic(settings) and not facts.cpu_only
        return not facts.cpu_only

    def applies(self) -> bool:
        """Whether the rule runs on this file at all (device scope)."""
        return self.may_report(self.ctx.project, self.ctx.settings)

    def report(
        self,
        node: "cst.CSTNode",
        message: str,
        fix: Optional["PendingFix"] = None,
        statement: Optional["cst.CSTNode"] = None,
        note: str = "",
    ) -> None:
        """Report `node`. `statement` (default: the statement being visited) scopes `# noqa`. Rules that
        stay out of test files also stay out of `test_*` functions that compare against a reference.

        `message` is one claim on one line (under about 120 characters); `note` says what it leaves
        out, such as why no fix is offered; a fix's own message says what the fix does and any caveat.
        """
        if not (self.in_tests and self.in_test_functions) and not self.ctx.settings.lint_tests:
            from gpulint.analysis.test_code import in_test_function

            if in_test_function(self.ctx, node):
                return
        self.ctx.add_finding(self, node, message, fix, statement, note)

    def decide(self, evidence: dict[Premise, Evidence]) -> Decision:
        """Whether the evidence for the rule's premises allows a finding (`strictness` decides about
        undecided ones). Every premise named must be one the rule's docs list, so docs and detector agree."""
        documented = self.docs.premises
        stray = [p.key for p in evidence if p not in documented]
        if stray:
            raise ValueError(f"{self.code} judges premises its docs do not list: {', '.join(stray)}")
        return decide(evidence, pedantic(self.ctx.settings))

    def report_decided(
        self,
        decision: Decision,
        node: "cst.CSTNode",
        message: str,
        fix: Optional["PendingFix"] = None,
        statement: Optional["cst.CSTNode"] = None,
        note: str = "",
    ) -> None:
        """Report when `decision` allows it. A finding resting on undecided premises (pedantic) says
        which. (Its fix keeps the safety the rule gives it: a premise a fix's safety depends on, such as
        GPU101's CPU tensors, makes the rule offer that fix as unsafe when it is not shown.)"""
        if self.on_ast:
            self.ctx.report(self, node, message, statement=statement, note=note, decision=decision)
            return
        if not decision.report:
            return
        if decision.assumed:
            assumed = undecided_note(decision.undecided)
            note = f"{assumed}; {note}" if note else assumed
        self.report(node, message, fix, statement, note)
