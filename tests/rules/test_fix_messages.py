"""Messages a user reads once: one claim on a first line under 120 characters; the rest in notes
and fix messages, where each says what the fix does, why none is offered, or what to do by hand."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from gpulint.core.settings import Settings
from gpulint.engine.linter import lint_text
from tests.fixture_cases import FIXTURES, Case, all_cases, load_case

CASES = all_cases()
_HEDGE = re.compile(r",\s+or\b")  # "X, or Y": the message does not know which


def _findings(case: Case) -> list:
    return lint_text(case.path, case.path.read_text(encoding="utf-8"), case.settings).findings


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_messages_are_one_short_claim(case: Case) -> None:
    for finding in _findings(case):
        assert len(finding.message) <= 120, finding.message
        assert "\n" not in finding.message and not _HEDGE.search(finding.message), finding.message
        assert not finding.message.endswith("."), finding.message  # ruff's style: no full stop


def _only(name: str) -> list:
    return _findings(load_case(FIXTURES / name))


def test_lifetime_note_only_when_the_function_runs_more_than_once() -> None:
    [again] = _only("GPU001/train_per_epoch_lifetime_note.py")
    assert again.fix is not None and "train_epoch() runs more than once" in again.fix.message
    [once] = _only("GPU001/train_runs_once_no_lifetime_note.py")
    assert once.fix is not None and "more than once" not in once.fix.message


def test_a_fix_withheld_says_why_in_its_note() -> None:
    [finding] = _only("GPU001/tiny_constant_no_float16_fix.py")
    assert finding.fix is None
    assert finding.note == 'no float16 fix: 1e-8 flushes to zero in float16; amp-dtype = "bfloat16" gets a fix'
    [irregular] = _only("GPU001/two_optimizers_reported_without_fix.py")
    assert irregular.note.startswith("no fix: the step calls backward() 2 times")


def test_gpu101_says_what_to_add_where_the_copies_are_not_visible() -> None:
    [finding] = _only("GPU101/copies_not_visible_note.py")
    assert finding.fix is not None and "non_blocking" not in finding.fix.message
    assert "pass non_blocking=True to the .to(device) / .cuda() calls" in finding.note
    [async_copies] = _only("GPU101/all_copies_made_asynchronous.py")
    assert async_copies.fix is not None and async_copies.note == ""
    assert async_copies.fix.message == ("Add `pin_memory=True`, and `non_blocking=True` to the 2 copies of its "
                                        "batches to the GPU in the module")


def test_the_fix_message_names_the_dtype_written() -> None:
    [auto] = _only("GPU001/for_loop_clip_grad_norm.py")
    assert auto.fix is not None and auto.fix.message.startswith(
        "Wrap the forward pass and loss in torch.autocast: bfloat16 on GPUs that compute in it natively, else "
        "float16 with a GradScaler")
    [forced] = _only("GPU001/tiny_constant_gets_bfloat16.py")
    assert forced.fix is not None and forced.fix.message.endswith(
        "(bfloat16); bfloat16 because 1e-15 flushes to zero in float16")


ACCELERATE = """
    import torch
    from accelerate import Accelerator
    from torch.utils.data import DataLoader
    from torchvision.datasets import CIFAR10

    accelerator = Accelerator()  # on a CUDA machine:
    assert torch.cuda.is_available()
    loader = DataLoader(CIFAR10("data"), batch_size=64)
    model, loader = accelerator.prepare(Net(), loader)
"""
LIGHTNING = """
    import lightning as L
    import torch
    from torch.utils.data import DataLoader
    from torchvision.datasets import CIFAR10

    trainer = L.Trainer(accelerator="cuda")

    class Data(L.LightningDataModule):
        def train_dataloader(self):
            return DataLoader(CIFAR10("data"), batch_size=64)
"""


def _gpu101(source: str, pedantic: bool = False) -> list:
    values = (("strictness", "pedantic"),) if pedantic else ()
    return lint_text(Path("t.py"), textwrap.dedent(source), Settings(select=("GPU101",), values=values)).findings


def test_gpu101_names_the_framework_that_copies_the_batches() -> None:
    """Accelerate copies the batches blocking unless its DataLoaderConfiguration says non_blocking (undecided
    `pays-off`: reported when pedantic); Lightning and Fabric already pass non_blocking=True: the note says so,
    or says nothing."""
    assert _gpu101(ACCELERATE) == []
    [accelerate] = _gpu101(ACCELERATE, pedantic=True)
    assert accelerate.note.startswith("pedantic: not shown here: pays-off; Accelerate copies its batches to the "
                                      "GPU: pass dataloader_config="
                                      "DataLoaderConfiguration(non_blocking=True) to Accelerator()")
    configured = ACCELERATE.replace("from accelerate import Accelerator",
                                    "from accelerate import Accelerator, DataLoaderConfiguration").replace(
        "Accelerator()", "Accelerator(dataloader_config=DataLoaderConfiguration(non_blocking=True))")
    [asynchronous] = _gpu101(configured)
    assert asynchronous.fix is not None and asynchronous.note == ""
    [lightning] = _gpu101(LIGHTNING)
    assert lightning.fix is not None and lightning.note == ""
