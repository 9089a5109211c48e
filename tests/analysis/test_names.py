"""Qualified-name resolution through imports, aliases and shadowing."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from gpulint.core.arguments import keyword_args
from gpulint.core.names import NameTable


def calls(source: str) -> tuple[NameTable, list[cst.Call]]:
    module = cst.parse_module(textwrap.dedent(source))
    names = NameTable(module)
    found: list[cst.Call] = []

    class Collect(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)

    module.visit(Collect())
    return names, found


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import torch\ntorch.optim.Adam()", "torch.optim.Adam"),
        ("import torch as th\nth.optim.Adam()", "torch.optim.Adam"),
        ("import torch.optim as optim\noptim.Adam()", "torch.optim.Adam"),
        ("import torch.optim\ntorch.optim.Adam()", "torch.optim.Adam"),
        ("from torch.optim import AdamW as W\nW()", "torch.optim.AdamW"),
        ("from torch.utils import data\ndata.DataLoader()", "torch.utils.data.DataLoader"),
        ("from torch import optim as O\nO.SGD()", "torch.optim.SGD"),
        ("def f():\n    from torch.optim import Adam\n    Adam()", "torch.optim.Adam"),
        ("from torch.optim import Adam\ndef f():\n    Adam()", "torch.optim.Adam"),
    ],
)
def test_resolves_through_imports(source: str, expected: str) -> None:
    names, found = calls(source)
    assert names.qualified_name(found[-1].func) == expected


@pytest.mark.parametrize(
    "source",
    [
        "class Adam: pass\nAdam()",
        "from torch.optim import Adam\nclass Adam(Adam): pass\nAdam()",
        "from torch.optim import Adam\nAdam = wrap(Adam)\nAdam()",
        "from torch.optim import Adam\ndef f(Adam):\n    Adam()",
        "import torch\ndef f():\n    torch = load()\n    torch.optim.Adam()",
        "from torch.optim import *\nAdam()",
        "Adam()",
        "from torch.optim import Adam\nfor Adam in optimizers:\n    Adam()",
        "from torch.optim import Adam\nwith make() as Adam:\n    Adam()",
        "make()()",
    ],
)
def test_local_or_unknown_names_resolve_to_nothing(source: str) -> None:
    names, found = calls(source)
    assert names.qualified_name(found[-1].func) is None


def test_class_scope_is_not_visible_in_methods() -> None:
    source = """
    from torch.optim import Adam
    class Trainer:
        Adam = object
        def build(self):
            return Adam()
    """
    names, found = calls(source)
    assert names.qualified_name(found[-1].func) == "torch.optim.Adam"


def test_global_statement_binds_in_module_scope() -> None:
    source = """
    from torch.optim import Adam
    def setup():
        global Adam
        Adam = None
    Adam()
    """
    names, found = calls(source)
    assert names.qualified_name(found[-1].func) is None


def test_keyword_args_look_through_visible_dicts_only() -> None:
    source = """
    def f(ds, given):
        kw = {"batch_size": 8}
        kw["pin_memory"] = True
        kw.update(num_workers=2)
        a(ds, **kw, shuffle=True)
        b(ds, **given)
    """
    names, found = calls(source)
    a = next(c for c in found if isinstance(c.func, cst.Name) and c.func.value == "a")
    b = next(c for c in found if isinstance(c.func, cst.Name) and c.func.value == "b")
    kwargs = keyword_args(a, names)
    assert kwargs.complete
    assert set(kwargs.values) == {"batch_size", "pin_memory", "num_workers", "shuffle"}
    assert kwargs.from_splat == {"batch_size", "pin_memory", "num_workers"}
    assert not keyword_args(b, names).complete


@pytest.mark.parametrize(
    ("source", "spelled"),
    [
        ("from .optim import Adam\nAdam()", ".optim.Adam"),
        ("from . import optim\noptim.Adam()", ".optim.Adam"),
        ("from ..data import sets\nsets.Images()", "..data.sets.Images"),
    ],
)
def test_relative_imports_keep_their_dots(source: str, spelled: str) -> None:
    """A relative import is the project's own module, never torch: its spelling keeps the dots."""
    names, found = calls(source)
    assert names.qualified_name(found[-1].func) == spelled
