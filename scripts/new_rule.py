"""Write a new rule: its module and its fixture folder, nothing else.

    python scripts/new_rule.py GPU401 some-name

writes `gpulint/rules/gpu401_some_name.py` (a rule that already works: its detector on CPython's
`ast` flags calls of a placeholder torch function and predicts its fix, which is built on LibCST
only when edits are needed, so every generic test passes until you make it yours) and
`fixtures/rules/GPU401/` with a flagged case, its fixed output and a clean one. The registry finds the rule by
itself; `python scripts/update_docs.py` puts it in the README table, the docs, the fix-safety table and the
site's nav.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MODULE = '''"""{code} {name}: TODO say in one line what the rule finds."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from gpulint.analysis.evidence import SHOWN, Premise
from gpulint.core.edits import Applicability
from gpulint.core.verification import NEUTRAL, Verification
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:  # LibCST is imported only where a fix is built, never to find the problem
    import libcst as cst

    from gpulint.analysis.ast_context import AstContext, Detection
    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

# TODO the API the rule looks for, as `ctx.names.qualname` spells it (through any import alias); torch's
# names, floors and argument positions shared by several rules belong in gpulint/core/torch_api.py
API = "torch.{function}"
# TODO one Premise per claim the message makes; the detector gives evidence for each (analysis/evidence.py)
CALLED = Premise("called-without-fast", "TODO what the code must show: `{function}()` is called without fast=True.")


class {cls}(Rule):
    code = "{code}"
    name = "{name}"
    summary = "TODO one line, for the rule table"
    impact = "TODO the measured effect in a few words, with its source"
    needles = ("{function}",)  # the rule can only fire when one of these occurs in the text
    ast_needles = ((API,),)  # ... and when the `ast` tree resolves one of these names
    target = Target.ANY
    preview = True  # new rules start opt-in, so upgrading gpulint never turns a CI red by itself
    fix = Applicability.SAFE
    # TODO what `gpulint verify` checks for the rewrite: a tolerance, the harness constructs that show the
    # fix ran (none: the fix has no runtime effect), and that evidence in words (gpulint/core/verification.py)
    verification = Verification(NEUTRAL, (), "the rewritten call runs")
    docs = RuleDocs(
        what="""
        TODO what the rule checks for.
        """,
        why="""
        TODO why it matters, with a measured figure and where it comes from.
        """,
        example="""
        import torch

        torch.{function}()
        """,
        use_instead="""
        import torch

        torch.{function}(fast=True)
        """,
        fix_safety="""
        TODO whether the fix keeps behaviour (safe) or may change numerics or semantics (unsafe), and when
        none is offered.
        """,
        premises=(CALLED,),
        # TODO one case per kind of fix it builds (or withholds), each shown by a fixture of fixtures/rules/{code}/:
        # docs/fix-safety.md prints them and tests/rules/test_fix_safety.py checks each on its fixture
        fix_cases=(FixCase("`fast=True` added", Applicability.SAFE, "basic.py"),),
    )

    def detect(self, ctx: AstContext) -> None:
        """Find the problem on CPython's `ast` tree; predict the fix that `build_fix` will build."""
        for call in ctx.nodes(ast.Call):
            assert isinstance(call, ast.Call)
            if ctx.names.qualname(call.func) != API or ctx.kwargs(call).has("fast"):
                continue
            decision = self.decide({{CALLED: SHOWN}})
            ctx.report(self, call, "{function}() without fast=True: TODO say why that costs and what to do",
                       fix=Applicability.SAFE, fix_message="Add `fast=True`", decision=decision)

    def build_fix(self, detection: Detection, fctx: FileContext, node: cst.CSTNode) -> Optional[PendingFix]:
        """The fix, on the LibCST node at the finding's span (only when edits are needed: fix, --diff ...).
        Its applicability must be the one `detect` predicted (a test checks every fixture)."""
        import libcst as cst

        from gpulint.core.pending import PendingFix, Replace
        from gpulint.core.rewrite import add_keyword

        assert isinstance(node, cst.Call)
        return PendingFix.safe("Add `fast=True`", Replace(node, add_keyword(node, "fast", "True")))
'''

FLAGGED = '''# gpulint-test: select={code}
# expect: 5:1 {code}: {function}() without fast=True: TODO say why that costs and what to do
import torch

torch.{function}()
'''

FIXED = '''# gpulint-test: select={code}
# expect: 5:1 {code}: {function}() without fast=True: TODO say why that costs and what to do
import torch

torch.{function}(fast=True)
'''

CLEAN = '''# gpulint-test: select={code}
import torch

torch.{function}(fast=True)
'''


def class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))


def scaffold(code: str, name: str, root: Path = ROOT) -> list[Path]:
    """Write the rule module and its fixture folder under `root`; the paths written."""
    if not re.fullmatch(r"GPU\d{3}", code):
        raise ValueError(f"{code!r}: a code is GPU and three digits, such as GPU401")
    if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", name):
        raise ValueError(f"{name!r}: a name is lower-case words joined by dashes, such as some-name")
    rules = root / "gpulint" / "rules"
    taken = [p.name for p in rules.glob("gpu*.py") if p.name[3:6] == code[3:] or p.stem[7:] == name.replace("-", "_")]
    if taken:
        raise ValueError(f"{code} {name}: the code or the name is taken ({', '.join(taken)})")
    values = {"code": code, "name": name, "cls": class_name(name), "function": name.replace("-", "_") + "_api"}
    module = rules / f"gpu{code[3:]}_{name.replace('-', '_')}.py"
    cases = root / "fixtures" / "rules" / code
    if cases.exists():
        raise ValueError(f"{cases} exists already")
    cases.mkdir(parents=True)
    written = [module, cases / "basic.py", cases / "basic.fixed.py", cases / "with_fast_not_flagged.py"]
    for path, template in zip(written, (MODULE, FLAGGED, FIXED, CLEAN)):
        path.write_text(template.format(**values), encoding="utf-8")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("code", help="the new rule's code, such as GPU401")
    parser.add_argument("name", help="its name, lower-case words joined by dashes, such as some-name")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to write into")
    args = parser.parse_args(argv)
    try:
        written = scaffold(args.code.upper(), args.name, args.root)
    except ValueError as exc:
        print(f"new_rule: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path.relative_to(args.root)}")
    print("next: make the rule yours, then `python scripts/update_docs.py` (README table, rule page, fix-safety "
          "table, site nav) "
          "and the README's test command, `python -m pytest`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
