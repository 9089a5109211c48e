"""Hostile tests, edits: a fix changes its edits and not one byte more, or it is refused.

Issue 10, items 5 (form feeds: LibCST drops them, which shifted every offset after them),
the bytes-outside-the-edits invariant checked before every write (`fix`, `--diff`, stdin),
and 21 (valid Python that LibCST rejects is "gpulint cannot parse this file", not a syntax
error). Every test runs with the results cache on and off.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpulint.core.settings import Settings
from gpulint.engine import linter
from gpulint.engine.linter import fix_text
from tests.conftest import Gpulint

ALL = Settings(preview=True)
# a torchvision dataset yields CPU tensors, so GPU101's fix is the safe one (docs/fix-safety.md)
HEAD = ("import torch\nfrom torch.utils.data import DataLoader\nfrom torchvision.datasets import MNIST\n"
        "ds = MNIST('data')\n")
# the copy asks for non_blocking: a blocking one in a loop over an unnamed loader, which GPU101's fix cannot
# reach, leaves its `pays-off` undecided
LOOP = ("device = torch.device('cuda')\nmodel = model.to(device)\n"
        "opt = torch.optim.AdamW(model.parameters())\n"
        "for x, y in DataLoader(ds):\n    x = x.to(device, non_blocking=True)\n    loss = model(x).sum()\n"
        "    loss.backward()\n"
        "    opt.step()\n")

MOVES = "for x in loader:\n    x = x.to('cuda')\n"  # the batches reach the GPU


def pinned(text: str) -> str:
    """GPU101's fix: the loader's memory pinned, and the copies of its batches asynchronous."""
    return text.replace("(ds)", "(ds, pin_memory=True)").replace("to('cuda')", "to('cuda', non_blocking=True)")

# (text with form feeds, the same text without them). LibCST's code generation loses each of
# these form feeds, so positions taken from it were off by one after them.
FORM_FEEDS = {
    "before-an-import": (HEAD.replace("from", "\ffrom") + LOOP, HEAD + LOOP),
    "start-of-file": ("\f" + HEAD + LOOP, HEAD + LOOP),
    "space-then-ff": (HEAD + " \f" + LOOP, HEAD + LOOP),
    "two-ff-before-the-loop": (HEAD + LOOP.replace("for x", "\f\ffor x"), HEAD + LOOP),
    "ff-before-a-fixed-statement": (HEAD + "loader = DataLoader(ds)\n\fopt = torch.optim.Adam(p)\n" + MOVES,
                                    HEAD + "loader = DataLoader(ds)\nopt = torch.optim.Adam(p)\n" + MOVES),
    "ff-between-fixed-statements": (HEAD + LOOP.replace("opt =", "\fopt ="), HEAD + LOOP),
}


def _without_form_feeds(text: str) -> str:
    return text.replace(" \f", "").replace("\f", "")


@pytest.mark.parametrize("case", sorted(FORM_FEEDS))
def test_form_feeds_are_kept_and_the_fix_lands_where_it_should(gl: Gpulint, tmp_path: Path, case: str) -> None:
    with_ff, plain = FORM_FEEDS[case]
    assert _without_form_feeds(with_ff) == plain
    expected = fix_text(Path("p.py"), plain, Settings(), True).text  # the same fixes, without form feeds
    assert expected != plain
    path = tmp_path / "train.py"
    path.write_text(with_ff)
    result = gl.fix("--unsafe-fixes", path)
    assert "internal error" not in result.output and result.exit_code in (0, 1), result.output
    fixed = path.read_text()
    assert fixed.count("\f") == with_ff.count("\f"), "a form feed was lost"
    assert _without_form_feeds(fixed) == expected, "the fix landed elsewhere than without form feeds"


@pytest.mark.parametrize("case", sorted(FORM_FEEDS))
def test_positions_after_a_form_feed_are_exact(gl: Gpulint, tmp_path: Path, case: str) -> None:
    with_ff, _ = FORM_FEEDS[case]
    path = tmp_path / "train.py"
    path.write_text(with_ff)
    result = gl.check("--select", "GPU101", path)
    calls = [n for n in ast.walk(ast.parse(with_ff)) if isinstance(n, ast.Call)
             and getattr(n.func, "id", None) == "DataLoader"]
    expected = [f"{path}:{c.lineno}:{c.col_offset + 1}: GPU101" for c in calls]
    assert [line.split(" [*]")[0] for line in result.stdout.splitlines() if "GPU101" in line] == expected


def test_a_trailing_carriage_return_is_kept(gl: Gpulint, tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    text = HEAD + "loader = DataLoader(ds)\n" + MOVES + "\r"
    path.write_bytes(text.encode())
    gl.fix(path)
    assert path.read_bytes() == pinned(text).encode()


# -- the invariant itself: a fix that would touch other bytes is refused, never written ----------

@pytest.fixture
def stray_edit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in the fixing machinery: it also changes a byte no fix asked for (valid code still)."""
    real = linter.apply_edits

    def apply_edits(text, edits):  # noqa: ANN001, ANN202
        return real(text, edits).replace("import torch\n", "import torch \n", 1)

    monkeypatch.setattr(linter, "apply_edits", apply_edits)


def test_a_fix_that_changes_bytes_outside_its_edits_is_refused(gl: Gpulint, tmp_path: Path, stray_edit: None) -> None:
    path = tmp_path / "train.py"
    raw = (HEAD + "loader = DataLoader(ds)\n" + MOVES).encode()
    path.write_bytes(raw)
    result = gl.fix(path)
    assert path.read_bytes() == raw, "a fix that breaks the invariant was written"
    assert "would change text outside its edits; not written" in result.stderr
    assert result.exit_code == 1 and "internal error" not in result.output
    assert "GPU101" in result.stdout  # the finding still stands


def test_the_invariant_holds_for_diff_and_stdin_too(gl: Gpulint, tmp_path: Path, stray_edit: None) -> None:
    path = tmp_path / "train.py"
    raw = (HEAD + "loader = DataLoader(ds)\n" + MOVES).encode()
    path.write_bytes(raw)
    diff = gl.fix("--diff", path)
    assert "+loader" not in diff.stdout and "not written" in diff.stderr
    piped = gl("fix", "-", "--stdin-filename", str(path), input=raw)
    assert piped.stdout_bytes == raw and "not written" in piped.stderr
    assert path.read_bytes() == raw


# -- item 21: valid Python that LibCST cannot parse -------------------------------------------

LIBCST_REJECTS = {
    "form-feeds-before-an-indent": "def f(x):\n\f\f    if x:\n        return 1\n",
    "space-tab-indent": "def f(x):\n    if x:\n \t       return 1\n",
    "space-ff-indent": "def f(x):\n \f    if x:\n        return 1\n",
}


@pytest.mark.parametrize("case", sorted(LIBCST_REJECTS))
def test_valid_python_libcst_rejects_is_not_called_a_syntax_error(gl: Gpulint, tmp_path: Path, case: str) -> None:
    text = HEAD + "loader = DataLoader(ds)\n" + MOVES + LIBCST_REJECTS[case]
    ast.parse(text)  # CPython accepts it
    odd = tmp_path / "odd.py"
    odd.write_text(text)
    (tmp_path / "train.py").write_text(HEAD + "loader = DataLoader(ds)\n" + MOVES)
    for result in (gl.check(tmp_path), gl.fix(tmp_path)):
        lines = [line for line in result.stdout.splitlines() if line.startswith(str(odd))]
        # the loader rules read CPython's `ast` (issue 25): they check the file LibCST refuses; only its
        # fixes, which LibCST builds, are out of reach
        assert [line.split()[1] for line in lines] == ["GPU101", "GPU102"], result.stdout
        assert not any("SyntaxError" in line or "GPU000" in line for line in lines)
        assert result.exit_code == 1 and "internal error" not in result.output
    assert odd.read_text() == text
    assert "pin_memory=True" in (tmp_path / "train.py").read_text(), "the other file was not fixed"
    shown = gl.check(tmp_path, "--show-fixes").stdout
    assert "gpulint cannot parse this file to edit it" in shown


@pytest.mark.parametrize("case", sorted(LIBCST_REJECTS))
def test_a_step_in_a_file_libcst_rejects_is_reported_without_a_fix(gl: Gpulint, tmp_path: Path, case: str) -> None:
    """GPU001 detects on `ast` (issue 25): where LibCST refuses valid Python, the step is still reported; only
    the fix (and its prediction), which LibCST builds, are out of reach, and the note says so."""
    text = HEAD + "model = torch.nn.Linear(512, 512).cuda()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n" \
        + "for x, y in loader:\n    loss = model(x.cuda()).sum()\n    loss.backward()\n    opt.step()\n" \
        + LIBCST_REJECTS[case]
    ast.parse(text)
    odd = tmp_path / "odd.py"
    odd.write_text(text)
    shown = gl.check(odd, "--select", "GPU001", "--show-fixes")
    assert "gpulint cannot parse this file to edit it" in shown.stdout
    for result in (shown, gl.fix(odd, "--select", "GPU001", "--unsafe-fixes")):
        lines = [line for line in result.stdout.splitlines() if line.startswith(str(odd))]
        assert [line.split()[1] for line in lines] == ["GPU001"], result.stdout
        assert "internal error" not in result.output
    assert odd.read_text() == text


def test_a_cr_only_file_with_a_coding_cookie_is_read_as_python_reads_it(gl: Gpulint, tmp_path: Path) -> None:
    """Found by the byte-invariant property test: the cookie went unseen without a \\n."""
    header = "# -*- coding: cp1252 -*-\r# \u201csmart\u201d \u20ac\r"
    text = header + (HEAD + "loader = DataLoader(ds)\n" + MOVES).replace("\n", "\r")
    path = tmp_path / "train.py"
    path.write_bytes(text.encode("cp1252"))
    result = gl.fix(path)
    assert "GPU000" not in result.stdout, result.stdout
    assert path.read_bytes() == pinned(text).encode("cp1252")


# found by fuzzing form feeds into every fixture case (2,838 cases, as in the issue) ----------

def test_removing_an_own_line_suppression_keeps_its_form_feed(gl: Gpulint, tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text("import torch\n\f# gpulint: ignore[GPU201]\nx = torch.zeros(3)\n")
    gl.fix("--select", "GPU201,GPU900", path)
    assert path.read_text() == "import torch\n\f\nx = torch.zeros(3)\n"


def test_a_form_feed_in_the_first_indentation_never_reaches_new_code(gl: Gpulint, tmp_path: Path) -> None:
    """LibCST takes its indentation unit from the first indented line, form feeds included."""
    text = ("import torch\nimport torch.nn as nn\n\n\nclass Base(nn.Module):\n\f\f    pass\n\n\n"
            "class Block(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"
            "        self.fc = nn.Linear(d, d)\n\n    def forward(self, x):\n        return self.fc(x)\n\n\n"
            "class Net(Base):\n    def __init__(self, d=64):\n        super().__init__()\n"
            "        self.blocks = nn.Sequential(*[Block(d) for _ in range(12)])\n\n"
            "    def forward(self, x):\n        return self.blocks(x)\n\n\n"
            "model = Net().cuda()\nopt = torch.optim.AdamW(model.parameters())\n"  # GPU301 reports trained models
            "model(torch.randn(8, 64)).sum().backward()\nopt.step()\n")
    path = tmp_path / "model.py"
    path.write_text(text)
    result = gl.fix("--unsafe-fixes", "--select", "GPU301", path)
    assert "internal error" not in result.output
    fixed = path.read_text()
    assert fixed != text and "checkpoint" in fixed
    ast.parse(fixed)
    assert fixed.count("\f") == 2 and "\f\f    pass" in fixed


# -- issue 22, item 14: a BOM and a coding declaration that disagree --------------------------------

@pytest.mark.parametrize("command", ["check", "fix"])
def test_a_bom_with_another_coding_declaration_is_named(gl: Gpulint, tmp_path: Path, command: str) -> None:
    """It said "cannot determine encoding: encoding problem: utf-8"."""
    path = tmp_path / "train.py"
    raw = b"\xef\xbb\xbf# -*- coding: latin-1 -*-\nimport torch\n"
    path.write_bytes(raw)
    result = gl(command, str(path))
    assert result.exit_code == 1
    assert (f"{path}:1:1: GPU000 cannot lint file: the file starts with a UTF-8 byte order mark but its coding "
            "declaration says 'latin-1'; Python refuses such a file: remove one of them") in result.stdout
    assert path.read_bytes() == raw
    path.write_bytes(b"\xef\xbb\xbf# coding: utf-8\nimport torch\n")  # agreeing: fine
    assert gl(command, str(path)).exit_code == 0
