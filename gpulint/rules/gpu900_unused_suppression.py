"""GPU900: a suppression comment that no longer suppresses anything.

Not a tree visitor: the engine applies suppressions after every other rule has reported
(`gpulint/engine/suppressions.py`) and reports the comments that matched nothing under
this code. The class carries the code, the docs and the enable/disable switch.
"""

from __future__ import annotations

import re

from gpulint.core.edits import Applicability
from gpulint.core.verification import NEUTRAL, Verification
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

# a suppression directive that names gpulint codes: only those can be unused (a bare noqa comment is
# other linters' too, and a fifth of real files carry one: 422 of 2285 in the torch package)
NAMES_GPULINT_CODES = re.compile(r"#[ \t]*noqa:[^\r\n]*GPU[0-9]|#[ \t]*gpulint:", re.IGNORECASE)


class UnusedSuppression(Rule):
    code = "GPU900"
    name = "unused-suppression"
    summary = "Suppression comment that suppresses nothing"
    impact = "keeps the suppressed backlog shrinking"
    needles = ("noqa", "gpulint")
    target = Target.ANY
    fix = Applicability.SAFE
    verification = Verification(NEUTRAL, (), "removes an unused suppression comment: nothing to run")
    docs = RuleDocs(
        what="""
        Checks for `# noqa: GPU...`, `# gpulint: ignore[GPU...]` and file-level
        `# gpulint: noqa` comments that no longer suppress any finding, and for codes in
        such comments that are not gpulint rules. Only codes of rules enabled in the run are
        judged, so `--select GPU201` never reports a `# noqa: GPU101`. A bare `# noqa` is
        shared with other linters and never reported.
        """,
        why="""
        A stale suppression is a blind spot waiting to happen: once the code under it changes,
        a new finding of the same rule on that statement is silently hidden. Suppressions that
        are removed as soon as they stop being needed keep `--add-noqa` adoption honest: the
        suppressed backlog can only shrink.
        """,
        example="""
        # the DataLoader was fixed, the comment stayed
        loader = DataLoader(ds, pin_memory=True, num_workers=4)  # noqa: GPU101
        """,
        use_instead="""
        loader = DataLoader(ds, pin_memory=True, num_workers=4)
        """,
        fix_safety="""
        Safe: the fix removes the unused code from the comment, or the whole directive when
        no code in it is used; other tools' codes (`# noqa: E501, GPU101`) and the rest of the
        comment are kept. A misplaced file-level `# gpulint: noqa` is reported without a fix:
        move it above the first statement.
        """,
        fix_cases=(
            FixCase("unused suppression removed",
                    Applicability.SAFE, "unused_noqa_removed.py"),
        ),
    )

    @classmethod
    def may_match(cls, text: str) -> bool:
        return NAMES_GPULINT_CODES.search(text) is not None

    def applies(self) -> bool:
        return False  # nothing to visit; see gpulint/engine/suppressions.py
