"""GPU000 invalid-file: a file gpulint could not read or parse.

Not a tree visitor: the engine reports these findings itself (engine/linter.py,
engine/runner.py). The class carries the code, the docs and the enable/disable switch.
"""

from __future__ import annotations

from gpulint.rules.base import Rule, RuleDocs


class InvalidFile(Rule):
    code = "GPU000"
    name = "invalid-file"
    summary = "File cannot be read or parsed"
    impact = "a file nobody checks fails the gate instead"
    docs = RuleDocs(
        what="""
        Reports a file gpulint could not analyse: a syntax error, bytes that do not decode,
        a binary file, a file that cannot be read, or one over a limit on the work for one file:
        `max-file-size`, or gpulint's own bounds on what its parser may face (100 nested brackets,
        400,000 tokens, 1,000,000 tokens inside brackets), which the message names.
        """,
        why="""
        A file that is silently skipped is a file nobody checks. The other files are still
        linted; this finding makes the run exit 1 so a CI gate notices.
        """,
        example="""
        def train(:
            ...
        """,
        use_instead="""
        def train():
            ...
        """,
        fix_safety="No fix.",
    )

    def applies(self) -> bool:
        return False  # nothing to visit: the engine reports GPU000 itself
