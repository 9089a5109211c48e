"""Rule cases from fixtures/rules/<CODE>/*.py, each with its expectations in its header.

A case file starts with comment lines the test reads:

    # gpulint-test: select=GPU101,GPU102 amp-dtype=bfloat16   (optional; default: the folder's code)
    # gpulint-test: requires=transformers==4.27.1              (optional: a pin of the project around the
                                                             case, of a library core/floors.py LIBRARIES names,
                                                             or of torch: its floor and end, as a
                                                             requirements.txt's `torch==2.0.1` gives them)
    # expect: 8:10 GPU101: DataLoader without pin_memory ...  (one line per finding: exact row:column, code
                                                             and the message, which the test compares too)

No `# expect:` line means the case must be clean. `<case>.fixed.py` beside it holds the
exact result of `gpulint fix --unsafe-fixes` with the same settings. `python
scripts/update_fixed_fixtures.py <case>.py` writes the messages of the expectations that
have none, and the fixed output, for review. A `#` in a message is written `[hash]`, so that a
pinned message quoting a suppression comment is not one itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Optional

from gpulint.core.floors import LIBRARIES
from gpulint.core.options import TORCH_VERSION
from gpulint.core.settings import Settings
from gpulint.project.requirements import TORCH, package, pip_range
from gpulint.rules import all_options
from gpulint.selectors import parse_codes

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "rules"
_EXPECT = re.compile(r"^#\s*expect:\s*(\d+):(\d+)\s+(GPU\d+)(?::\s+(.*\S))?\s*$")
_SETTINGS = re.compile(r"^#\s*gpulint-test:\s*(.*)$")
HASH = "[hash]"  # how a pinned message writes `#` (see the module docstring)
_ANY_EXPECT = re.compile(r"#\s*expect\b", re.IGNORECASE)  # what a reader takes for an expectation


class CaseError(Exception):
    """An expectation the loader would otherwise drop without a word: malformed, or below the header."""

@dataclass(frozen=True)
class Case:
    path: Path
    settings: Settings
    expected: tuple[tuple[int, int, str], ...]
    # the message pinned for each expectation (row, column, code, message); None: not pinned yet
    messages: tuple[tuple[int, int, str, Optional[str]], ...] = ()

    @property
    def fixed_path(self) -> Path:
        return self.path.with_name(self.path.stem + ".fixed.py")

    @property
    def id(self) -> str:
        return f"{self.path.parent.name}/{self.path.stem}"


def load_case(path: Path) -> Case:
    code = path.parent.name
    select = (code,)
    options: dict[str, object] = {}
    requires: list[str] = []  # as a requirements.txt beside the case would pin them
    known = {option.key: option for option in all_options()}
    expected = []
    messages: list[tuple[int, int, str, Optional[str]]] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    header = next((i for i, line in enumerate(lines) if line.strip() and not line.startswith("#")), len(lines))
    for number, line in enumerate(lines[header:], header + 1):
        if _ANY_EXPECT.search(line):
            raise CaseError(f"{path}:{number}: an expectation below the header is never read")
    for number, line in enumerate(lines[:header], 1):
        m = _EXPECT.match(line)
        if m:
            expected.append((int(m.group(1)), int(m.group(2)), m.group(3)))
            message = m.group(4).replace(HASH, "#") if m.group(4) is not None else None
            messages.append((int(m.group(1)), int(m.group(2)), m.group(3), message))
            continue
        if _ANY_EXPECT.search(line):
            raise CaseError(f"{path}:{number}: not `# expect: ROW:COL GPUnnn: message`: {line!r}")
        m = _SETTINGS.match(line)
        if m:
            for item in m.group(1).split():
                key, _, value = item.partition("=")
                if key == "select":
                    select = parse_codes(value)
                elif key == "requires":
                    requires.append(value)
                else:
                    options[key] = known[key].kind.from_text(value)  # any option, typed by its kind
    libraries = tuple((name, *pip_range(requires, package(name))) for name in LIBRARIES)
    torch_floor, torch_above = pip_range(requires, TORCH)
    pinned = torch_floor is not None and TORCH_VERSION.key not in options  # a configured torch-version wins
    if pinned:
        options[TORCH_VERSION.key] = torch_floor  # as SettingsResolver reads a pin
    settings = Settings(select=select, preview=True, libraries=tuple(r for r in libraries if r[1:] != (None, None)),
                        torch_above=torch_above if pinned else None)
    settings = settings.with_values(options)
    return Case(path, settings, tuple(sorted(expected)), tuple(sorted(messages, key=lambda m: m[:3])))


def all_cases() -> list[Case]:
    return [load_case(p) for p in sorted(FIXTURES.glob("*/*.py")) if not p.name.endswith(".fixed.py")]


def exec_fixture(text: str, name: str) -> ModuleType:
    """Run a fixture's (original or fixed) code as a fresh module, for runtime tests."""
    module = ModuleType(name)
    exec(compile(text, f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - our own fixture
    return module
