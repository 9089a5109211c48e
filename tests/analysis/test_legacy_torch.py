"""Evidence that a file runs only on torch 0.4 or older (project/facts.py `legacy_torch`)."""

from __future__ import annotations

import textwrap

import pytest

from gpulint.core import floors
from gpulint.project.facts import facts_of_text


def evidence(text: str) -> str:
    facts = facts_of_text(textwrap.dedent(text))
    assert facts is not None
    return facts.legacy_torch


@pytest.mark.parametrize("text", [
    "loss = criterion(out, y)\nprint(loss.data[0])\n",
    "total = model(x).pow(2).mean()\ntrain_loss += total_loss.data[0]\n",
    "loss_l, loss_c = criterion(out, targets)\nprint(loss_l.data[0], loss_c.data[0])\n",
    "err = F.cross_entropy(out, y)\nprint(err.data[0])\n",
    "correct += pred.eq(target).sum().data[0]\n",
    "print(self.loss.data[0])\n",
])
def test_a_zero_dim_loss_read_by_index(text: str) -> None:
    assert "indexes a 0-dim loss (an IndexError since torch 1.0)" in evidence(text)


@pytest.mark.parametrize("text", [
    "print(loss.item())\n",
    "print(x.data[0])\n",  # a batch's first row: valid on every torch
    "print(losses.data[0])\n",  # a collection of losses
    "print(loss.data[1])\nprint(loss.data[0:2])\n",
    "crit = nn.CrossEntropyLoss(reduction='none')\nloss = crit(out, y)\nprint(loss.data[0])\n",  # per element
    "print(x.sum(0).data[0])\n",  # a reduction over one dim keeps the others
    "x = Variable(x, volatile=True)\n",  # torch 0.4 through 2.x accept it with a warning
    "try:\n    v = loss.data[0]\nexcept IndexError:\n    v = loss.item()\n",
    "if torch.__version__ < '0.4':\n    v = loss.data[0]\nelse:\n    v = loss.item()\n",
])
def test_no_evidence(text: str) -> None:
    assert evidence(text) == ""


def test_the_first_read_is_named() -> None:
    assert evidence("a = 1\nprint(loss.data[0])\nprint(loss.data[0])\n").startswith("line 2: `loss.data[0]`")


def test_the_legacy_floor_keeps_an_older_declared_one() -> None:
    assert floors.legacy_floor(None) == (0, 4) and floors.legacy_floor((2, 1)) == (0, 4)
    assert floors.legacy_floor((0, 3)) == (0, 3)
    # what torch 0.4 has is never withheld on its account
    assert floors.too_new(floors.LEGACY_TORCH, [floors.PIN_MEMORY, floors.NUM_WORKERS, floors.NON_BLOCKING,
                                                 floors.CUDNN_BENCHMARK]) is None


def test_a_code_floor_says_where_it_came_from() -> None:
    """A floor lowered by the file's own code is no torch-version setting: the no-fix note must not say it is."""
    for declared in (None, (2, 1)):
        reason = floors.too_new(floors.legacy_floor(declared), [floors.USE_REENTRANT])
        assert reason is not None and "loss.data[0]" in reason.reason() and "torch-version" not in reason.reason()
    declared_old = floors.too_new(floors.legacy_floor((0, 3)), [floors.USE_REENTRANT])
    assert declared_old is not None and "(torch-version is 0.3)" in declared_old.reason()
