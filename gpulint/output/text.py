"""Human-readable output: one finding a line, then a summary."""

from __future__ import annotations

from typing import Sequence

from gpulint.core.edits import Applicability
from gpulint.core.findings import Finding
from gpulint.output.display import quote_path
from gpulint.records import dataclass


def fix_marker(finding: Finding, unsafe: bool = False) -> str:
    """` [*]` when `gpulint fix` (with --unsafe-fixes, when `unsafe`) would fix the finding, as ruff marks it."""
    fix = finding.fix
    return " [*]" if fix is not None and fix.is_applicable(unsafe) else ""


def position(finding: Finding) -> str:
    """`row:column`, or `cell N:row:column` in a notebook (rows counted in the cell, as ruff does)."""
    loc = finding.location
    cell = f"cell {finding.cell.number}:" if finding.cell is not None else ""
    return f"{cell}{loc.row}:{loc.column}"


def concise_line(finding: Finding, unsafe: bool = False) -> str:
    marker = fix_marker(finding, unsafe)
    return f"{quote_path(finding.path)}:{position(finding)}: {finding.code}{marker} {finding.message}"


def render_concise(findings: Sequence[Finding], ctx: object = None) -> str:
    unsafe = bool(getattr(ctx, "unsafe_fixes", False))
    return "".join(concise_line(f, unsafe) + "\n" for f in findings)


@dataclass(frozen=True)
class Summary:
    findings: int
    safe_fixable: int
    unsafe_fixable: int
    fixed: int = 0
    errors: int = 0  # files that went unchecked (an internal error, a stopped worker)

    @classmethod
    def of(cls, findings: Sequence[Finding], fixed: int = 0, errors: int = 0) -> "Summary":
        safe = sum(1 for f in findings if f.fix is not None and f.fix.applicability is Applicability.SAFE)
        unsafe = sum(1 for f in findings if f.fix is not None and f.fix.applicability is Applicability.UNSAFE)
        return cls(len(findings), safe, unsafe, fixed, errors)

    def text(self, fixing: bool = False, unsafe_enabled: bool = False) -> str:
        lines = []
        if self.fixed:
            lines.append(f"Fixed {self.fixed} finding{'s' if self.fixed != 1 else ''}.")
        if self.errors:  # never "All checks passed!" when a file went unchecked
            noun = "file" if self.errors == 1 else "files"
            lines.append(f"gpulint could not check {self.errors} {noun} (see above).")
        if self.findings == 0:
            if not self.fixed and not self.errors:
                lines.append("All checks passed!")
            return "\n".join(lines) + "\n"
        noun = "finding" if self.findings == 1 else "findings"
        head = f"Found {self.findings} {noun}" + (" remaining" if fixing else "") + "."
        lines.append(head)
        if fixing:
            hidden = self.unsafe_fixable if not unsafe_enabled else 0
            if hidden:
                lines.append(f"({hidden} more fixable with `gpulint fix --unsafe-fixes`.)")
            return "\n".join(lines) + "\n"
        # as ruff counts: with --unsafe-fixes every fix counts as fixable by the command that applies them
        fixable = self.safe_fixable + (self.unsafe_fixable if unsafe_enabled else 0)
        command = "`gpulint fix --unsafe-fixes`" if unsafe_enabled else "`gpulint fix`"
        if fixable:
            lines.append(f"[*] {fixable} fixable with {command}.")
        if self.unsafe_fixable and not unsafe_enabled:
            lines.append(f"({self.unsafe_fixable} more fixable with `gpulint fix --unsafe-fixes`.)")
        return "\n".join(lines) + "\n"
