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


def test_size_average_sums_and_keeps_no_element() -> None:
    """`size_average=False` picks a sum over a mean: the loss is still one 0-dim value (blind11: LSTNet)."""
    text = "crit = nn.MSELoss(size_average=False)\nloss = crit(out, y)\nprint(loss.data[0])\n"
    assert "indexes a 0-dim loss" in evidence(text)
    assert evidence(text.replace("size_average=False", "reduce=False")) == ""
    assert evidence(text.replace("size_average=False", "reduction='sum'")) != ""
    assert evidence(text.replace("size_average=False", "reduction=mode")) == ""


# LSTNet's train(): a loss from the criterion it is handed, backward, then the torch 0.3 read
TRAIN = """\
    criterion = nn.MSELoss(size_average=False)


    def train(model, criterion, optim, loader):
        total_loss = 0
        for X, Y in loader:
            model.zero_grad()
            loss = criterion(model(X), Y)
            loss.backward()
            optim.step()
            total_loss += loss.data[0]
        return total_loss
"""


def ceiling(text: str) -> object:
    facts = facts_of_text(textwrap.dedent(text))
    assert facts is not None
    return facts.torch_ceiling


@pytest.mark.parametrize("text", [
    TRAIN,
    TRAIN.replace("total_loss += loss.data[0]", "print('%.3f' % float(loss.data[0]))"),
    TRAIN.replace("criterion(model(X), Y)", "F.mse_loss(model(X), Y)"),
    # at module level, the read before the backward call
    "loss = criterion(out, y)\nprint(loss.data[0])\nloss.backward()\n",
])
def test_a_loss_read_by_index_after_its_backward_caps_the_torch_at_1_0(text: str) -> None:
    """`.backward()` without arguments makes the loss one value, and a loss call returns it 0-dim since torch
    0.4: indexing it raises from torch 1.0 on. The code runs on torch 0.4 at most."""
    assert ceiling(text) == (1, 0)


@pytest.mark.parametrize("text", [
    TRAIN.replace("loss.data[0]", "loss.item()"),
    TRAIN.replace("total_loss += loss.data[0]", "print(X.data[0])"),  # a batch's first row
    TRAIN.replace("            loss.backward()\n", ""),  # no backward: nothing says it is one value
    TRAIN.replace("loss.backward()", "loss.backward(torch.ones_like(loss))"),  # any shape
    TRAIN.replace("            optim.step()\n", "            loss = loss + reg\n"),  # bound again: any shape
    TRAIN.replace("loss = criterion(model(X), Y)", "loss, aux = criterion(model(X), Y)"),  # an element of a tuple
    TRAIN.replace("loss = criterion(model(X), Y)", "loss = model(X).sum(1)"),  # no loss call
    TRAIN.replace("size_average=False", "reduction='none'"),  # one loss per element
    TRAIN.replace("            total_loss += loss.data[0]\n",
                  "            try:\n                total_loss += loss.data[0]\n"
                  "            except IndexError:\n                total_loss += loss.item()\n"),
    # the backward call in another function
    "def step(loss):\n    loss.backward()\n\n\ndef log(out, y):\n    loss = criterion(out, y)\n"
    "    print(loss.data[0])\n",
    # a parameter of the function
    "def log(loss):\n    loss.backward()\n    print(loss.data[0])\n",
])
def test_no_zero_dim_loss_ceiling(text: str) -> None:
    assert ceiling(text) is None
