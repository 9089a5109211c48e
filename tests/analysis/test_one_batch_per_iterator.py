"""analysis/loaders.py's MANY_PER_ITERATOR premise on small sources (blind18: pytorch-vq-vae's notebook draws every
training step's batch as `next(iter(training_loader))`): which loaders only ever give one batch per iterator."""

from __future__ import annotations

import ast
import textwrap

import pytest

from gpulint.analysis.loaders import one_batch_per_iterator
from tests.analysis.contexts import ast_context

IMPORTS = "from torch.utils.data import DataLoader\n"


def refuted(source: str, imported: bool = False) -> bool:
    """The premise is refuted for the source's first DataLoader call."""
    ctx = ast_context(IMPORTS + textwrap.dedent(source), imported=imported)
    call = next(n for n in ctx.nodes(ast.Call) if isinstance(n, ast.Call) and ctx.qualname(n.func)
                == "torch.utils.data.DataLoader")
    return one_batch_per_iterator(ctx, call)


@pytest.mark.parametrize("source", [
    "loader = DataLoader(data)\nfor step in range(100):\n    x = next(iter(loader))\n",
    "loader = DataLoader(data)\n(x, _) = next(iter(loader))\n",
    "loader = DataLoader(data)\nx = next(iter(loader), None)\nprint(len(loader))\n",
    "loader = DataLoader(data)\nx = iter(loader).__next__()\n",
    "def f(data):\n    loader = DataLoader(data)\n    return next(iter(loader))\n",
    "loader = DataLoader(data)\ndef batch():\n    return next(iter(loader))\n",  # a function reading the global
    "def f(data):\n    loader = DataLoader(data)\n"
    "    def batch():\n        return next(iter(loader))\n    return batch\n",  # a closure
])
def test_one_batch_from_each_fresh_iterator(source: str) -> None:
    assert refuted(source)


@pytest.mark.parametrize("source", [
    "loader = DataLoader(data)\n",  # never read here: another cell or file may iterate it
    "loader = DataLoader(data)\nx = next(iter(loader))\nfor batch in loader:\n    pass\n",
    "loader = DataLoader(data)\nbatches = iter(loader)\nfor step in range(100):\n    x = next(batches)\n",
    "loader = DataLoader(data)\nx = next(iter(loader))\ntrain(loader)\n",
    "def f(data):\n    loader = DataLoader(data)\n    next(iter(loader))\n    return loader\n",
    "loader = DataLoader(data)\nx = next(iter(loader))\nloader = DataLoader(other)\nfor b in loader:\n    pass\n",
    "loader = DataLoader(data)\nx = next(iter(enumerate(loader)))\n",
    "loader = DataLoader(data)\nx = next(iter(loader), *rest)\n",
    "def iter(x):\n    return x\nloader = DataLoader(data)\nx = next(iter(loader))\n",  # not the builtin
    "class Holder:\n    loader = DataLoader(data)\n    first = next(iter(loader))\n",
    "self.loader = DataLoader(data)\nx = next(iter(self.loader))\n",  # an attribute: not followed
])
def test_loaders_iterated_kept_or_handed_on_are_shown(source: str) -> None:
    assert not refuted(source)


def test_a_module_level_loader_of_an_imported_module_is_shown() -> None:
    source = "loader = DataLoader(data)\nx = next(iter(loader))\n"
    assert refuted(source) and not refuted(source, imported=True)
    main = "if __name__ == '__main__':\n    loader = DataLoader(data)\n    x = next(iter(loader))\n"
    assert refuted(main, imported=True)  # bound only when run by hand: nothing imports it
