"""Pin the messages of fixture cases and write their <case>.fixed.py; review the diff before committing.

    python scripts/update_fixed_fixtures.py fixtures/rules/GPU101/basic.py ...

An `# expect: ROW:COL CODE` line without a message gets the message of the finding at that place;
a pinned message is never rewritten (a changed message is a change to review by hand).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import re

from gpulint.engine.linter import fix_text, lint_text
from tests.fixture_cases import HASH, Case, load_case

_UNPINNED = re.compile(r"^(#\s*expect:\s*(\d+):(\d+)\s+(GPU\d+))\s*$")


def pin_messages(case: Case) -> Case:
    """Write the found messages into the case's unpinned expectations (its header only)."""
    text = case.path.read_bytes().decode("utf-8")  # line endings kept as they are
    found: dict[tuple[int, int, str], str] = {}
    for finding in lint_text(case.path, text, case.settings).findings:
        found.setdefault((finding.location.row, finding.location.column, finding.code), finding.message)
    lines = text.splitlines(keepends=True)
    changed = False
    for index, line in enumerate(lines):
        if not line.startswith("#"):
            break
        m = _UNPINNED.match(line.rstrip("\r\n"))
        message = found.get((int(m.group(2)), int(m.group(3)), m.group(4))) if m else None
        if m and message is not None:
            ending = line[len(line.rstrip("\r\n")):]
            lines[index] = f"{m.group(1)}: {message.replace('#', HASH)}{ending}"
            changed = True
    if not changed:
        return case
    case.path.write_bytes("".join(lines).encode("utf-8"))
    print(f"pinned messages in {case.path}")
    return load_case(case.path)


def main(paths: list[str]) -> None:
    for name in paths:
        if name.endswith(".fixed.py"):
            continue  # an expected output, not a case (a shell glob names both)
        case = pin_messages(load_case(Path(name).resolve()))
        text = case.path.read_text(encoding="utf-8")
        fixed = fix_text(case.path, text, case.settings, unsafe=True).text
        if fixed == text:
            if case.fixed_path.exists():
                case.fixed_path.unlink()
                print(f"removed {case.fixed_path} (the fix changes nothing)")
            continue
        case.fixed_path.write_text(fixed, encoding="utf-8")
        print(f"wrote {case.fixed_path}")


if __name__ == "__main__":
    main(sys.argv[1:])
