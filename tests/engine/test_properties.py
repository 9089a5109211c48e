"""Invariants over generated input (hypothesis, hypothesmith).

- check never crashes, whatever the text;
- every fix re-parses, and fixing is idempotent;
- fixes change nothing outside their edits' ranges;
- findings do not depend on the job count or on the cache.

Example counts are bounded and generation is derandomized, so the module runs the same
way in CI every time, in well under a minute on two cores. Set GPULINT_HYPOTHESIS_SCALE=10
to explore ten times as many examples locally.
"""

from __future__ import annotations

import ast
import os
import tempfile
import warnings
from pathlib import Path

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulint.core.edits import apply_edits, select_edits
from gpulint.core.settings import Settings
from gpulint.dispatch.jobs import run_jobs
from gpulint.engine.cache import ResultCache
from gpulint.engine.linter import MAX_FIX_ROUNDS, fix_text, lint_text
from gpulint.engine.runner import Job, Mode

# hypothesmith's generated programs make Python warn about odd literals while they are built
pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")

SCALE = max(1, int(os.environ.get("GPULINT_HYPOTHESIS_SCALE", "1")))


def ci(examples: int) -> settings:
    """Fixed, derandomized settings: the same examples on every run, no database, no deadline."""
    return settings(
        max_examples=examples * SCALE, derandomize=True, database=None, deadline=None, print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                               HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


ALL = Settings(preview=True)  # every rule, preview ones included
PATH = Path("generated.py")

# -- generated training code: the shapes the rules look at, in random combinations -----------

IMPORTS = [
    "import torch", "import torch as th", "import torch.nn as nn", "from torch import optim",
    "import torch.optim as optim", "from torch.optim import AdamW, SGD as Sgd",
    "from torch.utils.data import DataLoader", "from torch.utils.data import DataLoader as DL",
    "from torch.utils import data", "from torch.utils.data import TensorDataset",
    "from torch.cuda.amp import GradScaler, autocast", "from torch.amp import autocast as ac",
    "from torch.utils.checkpoint import checkpoint",
]
LOADER_KWARGS = ["batch_size=32", "shuffle=True", "pin_memory=False", "pin_memory=True", "num_workers=0",
                 "num_workers=2", "num_workers=n", "drop_last=True", "**kw"]
OPT_KWARGS = ["lr=1e-3", "weight_decay=0.01", "fused=False", "fused=True", "foreach=True", "momentum=0.9",
              "differentiable=True"]
SIMPLE = [
    'device = torch.device("cuda")', 'device = torch.device("cpu")', "model = model.cuda()",
    "model = model.to(device)", "kw = dict(batch_size=8)", "kw = {'num_workers': 0}", "n = 4",
    "scaler = torch.cuda.amp.GradScaler()", "scaler = GradScaler()", "x = torch.ones(3)",
    "ds = TensorDataset(torch.ones(4, 2))", "class Adam:\n    pass", "def DataLoader(*a, **k):\n    return a",
    "loss = model(x).sum()", "loss.backward()", "optimizer.step()", "optimizer.zero_grad()",
    "out = checkpoint(block, x)", "torch.backends.cudnn.benchmark = True",
]


@st.composite
def call_args(draw: st.DrawFn, first: str, pool: list[str]) -> str:
    args = [first] + draw(st.lists(st.sampled_from(pool), max_size=4, unique=True))
    if draw(st.booleans()):
        return "(" + ", ".join(args) + ")"
    trailing = "," if draw(st.booleans()) else ""
    return "(\n    " + ",\n    ".join(args) + trailing + "\n)"


@st.composite
def statements(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 6))
    if kind == 0:
        ctor = draw(st.sampled_from(["DataLoader", "DL", "data.DataLoader", "torch.utils.data.DataLoader"]))
        ds = draw(st.sampled_from(["ds", "dataset", "TensorDataset(x)", "make()"]))
        return f"loader = {ctor}" + draw(call_args(ds, LOADER_KWARGS))
    if kind == 1:
        ctor = draw(st.sampled_from(["torch.optim.Adam", "torch.optim.AdamW", "optim.SGD", "th.optim.Adagrad",
                                     "AdamW", "Sgd", "optim.Adam"]))
        return f"optimizer = {ctor}" + draw(call_args("model.parameters()", OPT_KWARGS))
    if kind == 2:
        body = draw(st.lists(statements(), min_size=1, max_size=3))
        head = draw(st.sampled_from(["for x, y in loader:", "def train(model, ds):", "if True:",
                                     "with torch.autocast('cuda'):", "with autocast():", "while step < 10:",
                                     "class Trainer:\n    def fit(self):"]))
        indent = "        " if "\n" in head else draw(st.sampled_from(["    ", "\t", "  "]))
        lines = [indent + line if line.strip() else line for stmt in body for line in stmt.split("\n")]
        if not any(line.strip() and not line.strip().startswith("#") for line in lines):
            lines.append(indent + "pass")  # a block needs a statement
        return head + "\n" + "\n".join(lines)
    if kind == 3:
        return draw(st.sampled_from(SIMPLE))
    if kind == 4:
        stmt = draw(statements())
        comment = draw(st.sampled_from(["  # noqa: GPU101", "  # noqa", "  # gpulint: ignore[GPU201]",
                                        "  # unrelated", "  # noqa: E501, GPU102"]))
        first, _, rest = stmt.partition("\n")
        return first + comment + ("\n" + rest if rest else "")
    if kind == 5:
        return draw(st.sampled_from(["", "# a comment", '"""A docstring."""', "pass"]))
    return "for x, y in loader:\n    with torch.autocast('cuda'):\n        loss = model(x)\n    loss.backward()\n" \
           "    optimizer.step()\n    optimizer.zero_grad()"


@st.composite
def training_programs(draw: st.DrawFn) -> str:
    imports = draw(st.lists(st.sampled_from(IMPORTS), min_size=1, max_size=6, unique=True))
    body = draw(st.lists(statements(), min_size=1, max_size=8))
    newline = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    text = "\n".join(imports + body) + "\n"
    if draw(st.booleans()):
        text = text.rstrip("\n")  # no trailing newline
    return text.replace("\n", newline)


def generated_programs() -> st.SearchStrategy[str]:
    """hypothesmith's grammar-based programs, headed by imports so the rules look at them."""
    header = "import torch\nfrom torch.utils.data import DataLoader\nfrom torch import optim\n"
    return hypothesmith.from_grammar().map(lambda body: header + body)


def parses(text: str) -> bool:
    try:
        cst.parse_module(text)
    except Exception:  # noqa: BLE001 - any refusal of LibCST's means "does not parse"
        return False
    return True


# -- check never crashes ----------------------------------------------------------------------

@ci(200)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300))
def test_check_never_crashes_on_any_text(text: str) -> None:
    findings = lint_text(PATH, "from torch.utils.data import DataLoader\n" + text, ALL).findings
    for finding in findings:
        assert finding.location.row >= 1 and finding.location.column >= 1


@ci(100)
@given(generated_programs())
def test_check_never_crashes_on_generated_programs(text: str) -> None:
    lint_text(PATH, text, ALL)


@ci(150)
@given(training_programs())
def test_check_never_crashes_on_training_code(text: str) -> None:
    for finding in lint_text(PATH, text, ALL).findings:
        assert finding.code != "GPU000", finding.message  # generated code is valid


# -- fixes -----------------------------------------------------------------------------------

def _outside(text: str, edits) -> list[str]:  # noqa: ANN001
    """The pieces of `text` that no edit touches, in order."""
    pieces, cursor = [], 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        if edit.start > cursor or not pieces:  # the first piece, empty when an edit starts the file
            pieces.append(text[cursor:edit.start])
        cursor = max(cursor, edit.end)
    pieces.append(text[cursor:])
    return pieces


def _fix_rounds(text: str) -> str:
    """fix_text's loop, checking after every round that nothing outside the edits changed."""
    for _ in range(MAX_FIX_ROUNDS):
        findings = lint_text(PATH, text, ALL).findings
        fixes = [f.fix for f in findings if f.fix is not None]
        if not fixes:
            return text
        edits, applied = select_edits(fixes)
        new_text = apply_edits(text, edits)
        if applied == 0 or new_text == text:
            return text
        edits = [e for fix in fixes for e in fix.edits]
        assert all(0 <= e.start <= e.end <= len(text) for e in edits), "edit outside the file"
        pieces = _outside(text, edits)
        assert new_text.startswith(pieces[0]) and new_text.endswith(pieces[-1])
        cursor = len(pieces[0])
        for piece in pieces[1:]:  # every untouched piece is still there, in order
            found = new_text.find(piece, cursor)
            assert found >= 0, f"text outside the edits changed: {piece!r}"
            cursor = found + len(piece)
        text = new_text
    return text


@ci(150)
@given(training_programs())
def test_fixes_reparse_are_idempotent_and_stay_inside_their_edits(text: str) -> None:
    outcome = fix_text(PATH, text, ALL, unsafe=True)
    assert parses(outcome.text), "a fix produced code LibCST cannot parse"
    if _valid_for_this_python(text):
        assert _valid_for_this_python(outcome.text), "a fix produced code Python cannot parse"
    again = fix_text(PATH, outcome.text, ALL, unsafe=True)
    assert again.text == outcome.text, "a second fix run changed the file"
    assert again.applied == 0
    assert outcome.text == _fix_rounds(text), "fix changed text beyond its edits"
    newline = "\r\n" if "\r\n" in text else "\n"
    if newline == "\r\n":
        assert "\n" not in outcome.text.replace("\r\n", ""), "a fix mixed newline styles"


@ci(60)
@given(generated_programs())
def test_fixes_on_generated_programs_reparse_and_are_idempotent(text: str) -> None:
    outcome = fix_text(PATH, text, ALL, unsafe=True)
    assert parses(outcome.text)
    assert fix_text(PATH, outcome.text, ALL, unsafe=True).text == outcome.text


def _valid_for_this_python(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


# -- determinism: jobs and cache -------------------------------------------------------------

@ci(4)
@given(st.lists(training_programs(), min_size=9, max_size=12))
def test_findings_do_not_depend_on_jobs_or_cache(programs: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = []
        for i, text in enumerate(programs):
            path = root / f"f{i:02d}.py"
            path.write_bytes(text.encode())
            paths.append(path)

        def findings(workers: int, cache: ResultCache | None) -> list[dict]:
            jobs = [Job(p, ALL, Mode.CHECK, cache=cache) for p in paths]
            return [f.to_dict() for r in run_jobs(jobs, workers=workers) for f in r.findings]

        serial = findings(1, None)
        assert findings(2, None) == serial
        cache = ResultCache.open(root / "cache")
        assert findings(2, cache) == serial  # cold: computed in the pool, stored
        assert findings(1, cache) == serial  # warm: read back
        assert findings(3, cache) == serial


@pytest.mark.parametrize("workers", [1, 2])
def test_fix_results_do_not_depend_on_jobs(tmp_path: Path, workers: int) -> None:
    text = ("import torch\nfrom torch.utils.data import DataLoader\ndevice = torch.device('cuda')\n"
            "loader = DataLoader(ds)\nopt = torch.optim.AdamW(m.parameters())\n")
    for i in range(10):
        (tmp_path / f"t{i}.py").write_text(text)
    jobs = [Job(p, ALL, Mode.FIX, unsafe=True) for p in sorted(tmp_path.glob("*.py"))]
    reports = run_jobs(jobs, workers=workers)
    expected = fix_text(PATH, text, ALL, unsafe=True).text
    assert [p.read_text() for p in sorted(tmp_path.glob("*.py"))] == [expected] * 10
    assert sum(r.fixed for r in reports) == 10 * fix_text(PATH, text, ALL, unsafe=True).applied
