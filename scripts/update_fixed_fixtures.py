"""Write <case>.fixed.py for fixture cases whose fix output changed; review the diff before committing.

    python scripts/update_fixed_fixtures.py fixtures/rules/GPU101/basic.py ...
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpulint.engine.linter import fix_text
from tests.fixture_cases import load_case


def main(paths: list[str]) -> None:
    for name in paths:
        case = load_case(Path(name).resolve())
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
