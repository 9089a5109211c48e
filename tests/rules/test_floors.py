"""The torch floor: one table of what each written symbol needs, and every fix checks it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpulint.core import floors
from gpulint.core.settings import Settings
from gpulint.engine.linter import lint_text
from tests.fixture_cases import ROOT


def test_the_docs_print_the_table() -> None:
    assert floors.table_markdown() in (ROOT / "docs" / "fix-safety.md").read_text(encoding="utf-8")


def test_too_new_names_the_newest_symbol() -> None:
    assert floors.too_new(None, [floors.GRAD_SCALER]) is None  # no floor known: every symbol allowed
    assert floors.too_new((2, 3), [floors.GRAD_SCALER, floors.AUTOCAST]) is None
    found = floors.too_new((2, 0), [floors.AUTOCAST, floors.GRAD_SCALER, floors.SHARDED_GRAD_SCALER])
    assert found is not None and found.symbol.code == floors.GRAD_SCALER
    assert found.reason() == "torch.amp.GradScaler needs torch 2.3 (torch-version is 2.0)"



def test_above_ceiling_names_the_symbol_no_runnable_torch_has() -> None:
    """A ceiling is the first torch the code cannot run on: a symbol of that release or later is out of reach."""
    assert floors.above_ceiling(None, [floors.GRAD_SCALER]) is None
    assert floors.above_ceiling((1, 11), [floors.AUTOCAST]) is None  # torch.autocast (1.10) on torch 1.10
    found = floors.above_ceiling((1, 11), [floors.AUTOCAST, floors.GRAD_SCALER])
    assert found is not None and found.symbol.code == floors.GRAD_SCALER
    assert found.reason() == ("torch.amp.GradScaler needs torch 2.3; the code runs only on torch older than 1.11 "
                              "(it, or a module it imports or that imports it, relies on what that release removed, "
                              "or asserts an "
                              "older torch)")
    assert floors.above_ceiling((1, 12), [floors.MATMUL_PRECISION]) is not None

STEP = """
    import torch
    device = torch.device("cuda")
    model = Net().to(device)
    optimizer = OPTIMIZER
    for x, y in loader:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
"""
AMP = STEP.replace("OPTIMIZER", "make()")
FSDP = "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n" + textwrap.dedent(AMP).replace(
    "Net().to(device)", "FSDP(Net().to(device))")
CHECKPOINT = "from torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)\n"
AMP_API = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"
AUTOCAST_API = "import torch\nwith torch.cuda.amp.autocast():\n    pass\n"
CUSTOM_FWD = "import torch\n@torch.cuda.amp.custom_fwd\ndef f(x):\n    return x\n"


def _fixes(source: str, code: str, floor: str, **options: str) -> list[tuple[bool, str]]:
    version = tuple(int(part) for part in floor.split("."))
    settings = Settings(select=(code,), preview=True).with_values({"torch-version": version, **options})
    return [(f.fix is not None, f.note) for f in lint_text(Path("t.py"), textwrap.dedent(source), settings).findings
            if f.code == code]


# refuted: the advice itself needs the symbol, so below its torch the finding's premise is refuted and
# nothing is reported (the precision issue: advice an API the pinned torch lacks cannot pay off); otherwise
# the finding stays and only the fix is withheld, with a note naming the symbol
@pytest.mark.parametrize(("source", "code", "below", "at", "symbol", "options", "refuted"), [
    (AMP, "GPU001", "2.2", "2.3", floors.GRAD_SCALER, {}, False),  # auto: the choice and the scaler, both 2.3
    (AMP, "GPU001", "2.2", "2.3", floors.GRAD_SCALER, {"amp-dtype": "float16"}, False),
    (AMP, "GPU001", "1.9", "1.10", floors.AUTOCAST, {"amp-dtype": "bfloat16"}, False),  # torch.cuda.amp's advice
    (FSDP, "GPU001", "2.0", "2.1", floors.SHARDED_GRAD_SCALER, {"amp-dtype": "float16"}, False),
    (STEP.replace("OPTIMIZER", "torch.optim.Adam(model.parameters())").replace(
        'torch.device("cuda")', 'torch.device(args.device)'),  # wherever the command line says
     "GPU201", "2.3", "2.4", floors.FUSED_CPU, {},
     True),
    (STEP.replace("OPTIMIZER", "torch.optim.Adagrad(model.parameters())"), "GPU201", "2.11", "2.12",
     floors.fused("Adagrad"), {}, True),
    (CHECKPOINT, "GPU302", "1.12", "1.13", floors.USE_REENTRANT, {}, True),
    (AMP_API, "GPU003", "2.2", "2.3", floors.GRAD_SCALER, {}, True),
    (AUTOCAST_API, "GPU003", "1.9", "1.10", floors.AUTOCAST, {}, True),  # torch.autocast, below torch.amp's 1.12
    (CUSTOM_FWD, "GPU003", "2.3", "2.4", floors.CUSTOM_FWD, {}, True),
])
def test_each_fix_checks_the_floor_of_what_it_writes(source: str, code: str, below: str, at: str, symbol: str,
                                                     options: dict[str, str], refuted: bool) -> None:
    """Just below the symbol's version: no fix, and the note names it (or no finding, where the advice needs the
    symbol); at the version: a fix."""
    found = _fixes(source, code, below, **options)
    if refuted:
        assert found == []
    else:
        [(fixed, note)] = found
        assert not fixed and note.startswith("no ") and f"{symbol} needs torch" in note
    assert [fixed for fixed, _ in _fixes(source, code, at, **options)] == [True]


def test_every_symbol_of_the_table_is_one_a_fix_writes() -> None:
    """No entry is dead: each names what some rule's fix code refers to."""
    used = {floors.AUTOCAST, floors.AMP_AUTOCAST, floors.GRAD_SCALER, floors.CUSTOM_FWD, floors.SHARDED_GRAD_SCALER,
            floors.BF16_CHECK, floors.FUSED_CPU, floors.USE_REENTRANT, floors.PIN_MEMORY, floors.NUM_WORKERS,
            floors.NON_BLOCKING, floors.PERSISTENT_WORKERS, floors.SDPA, floors.SDPA_SCALE, floors.MATMUL_PRECISION,
            floors.CUDNN_BENCHMARK, floors.COMPILE, floors.FOREACH_MUL_ADD, floors.FOREACH_LERP} | {
        floors.fused(o) for o in ("Adam", "AdamW", "SGD", "Adagrad")}
    assert used == set(floors.SYMBOLS)
