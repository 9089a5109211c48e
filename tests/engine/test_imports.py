"""Fixes that need an import use the file's own aliases and add the import only once."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst

from gpulint.core.context import FileContext
from gpulint.core.edits import apply_edits
from gpulint.core.names import NameTable
from gpulint.core.pending import ImportPlanner
from gpulint.core.settings import Settings
from gpulint.engine.libcst_pass import _Placer


def plan(source: str, module: str, name: str, prefer_from: bool = False) -> tuple[str, str]:
    text = textwrap.dedent(source)
    tree = cst.parse_module(text)
    names = NameTable(tree)
    ref = ImportPlanner(tree, names).reference(module, name, prefer_from=prefer_from)
    if ref.edit is None:
        return ref.expr, text
    ctx = FileContext(Path("x.py"), text, tree, Settings())
    placer = _Placer(ctx, [])
    placer.spans.update(__import__("gpulint.core.positions", fromlist=["compute_spans"]).compute_spans(
        tree, [ref.edit.anchor] if ref.edit.anchor is not None else []))
    return ref.expr, apply_edits(text, list(placer._text_edits(ref.edit)))


def test_reuses_the_files_torch_alias() -> None:
    expr, text = plan("import torch as th\nx = 1\n", "torch.amp", "GradScaler")
    assert expr == "th.amp.GradScaler"
    assert text == "import torch as th\nx = 1\n"


def test_reuses_an_existing_from_import() -> None:
    expr, _ = plan("from torch.utils.checkpoint import checkpoint as ckpt\n", "torch.utils.checkpoint", "checkpoint")
    assert expr == "ckpt"


def test_reuses_a_module_alias() -> None:
    expr, _ = plan("import torch.utils.checkpoint as cp\n", "torch.utils.checkpoint", "checkpoint_sequential",
                   prefer_from=True)
    assert expr == "cp.checkpoint_sequential"


def test_adds_import_after_docstring_and_future_imports() -> None:
    source = '''\
    """Train."""
    from __future__ import annotations
    import os

    x = 1
    '''
    expr, text = plan(source, "torch.amp", "GradScaler")
    assert expr == "torch.amp.GradScaler"
    # a third-party import: its own isort section after the standard library's
    assert text == '"""Train."""\nfrom __future__ import annotations\nimport os\n\nimport torch.amp\n\nx = 1\n'


def test_from_import_avoids_a_users_own_name() -> None:
    source = "import torch\n\ndef checkpoint(state):\n    pass\n"
    expr, text = plan(source, "torch.utils.checkpoint", "checkpoint", prefer_from=True)
    assert expr == "torch.utils.checkpoint.checkpoint"  # `import torch` reaches it; the user's function is untouched
    assert text == source


def test_aliases_when_torch_name_is_taken() -> None:
    source = "torch = None\n"
    expr, text = plan(source, "torch.utils.checkpoint", "checkpoint")
    assert expr == "checkpoint"
    assert text.startswith("from torch.utils.checkpoint import checkpoint\n")


def module_import(source: str, module: str) -> str:
    """The file after `ImportPlanner.module_alias(module)` adds `import module`."""
    text = textwrap.dedent(source)
    tree = cst.parse_module(text)
    ref = ImportPlanner(tree, NameTable(tree)).module_alias(module)
    assert ref.edit is not None
    ctx = FileContext(Path("x.py"), text, tree, Settings())
    placer = _Placer(ctx, [])
    placer.spans.update(__import__("gpulint.core.positions", fromlist=["compute_spans"]).compute_spans(
        tree, [ref.edit.anchor] if ref.edit.anchor is not None else []))
    return apply_edits(text, list(placer._text_edits(ref.edit)))


def test_a_standard_library_import_goes_into_its_section_in_order() -> None:
    source = "import argparse\nimport sys\n\nimport torch\nfrom torch.utils.data import DataLoader\n\nx = 1\n"
    assert module_import(source, "os") == source.replace("import sys\n", "import os\nimport sys\n")


def test_a_new_standard_library_section_comes_first_with_a_blank_line() -> None:
    source = "import torch\nfrom torch.utils.data import DataLoader\n\nx = 1\n"
    assert module_import(source, "os") == "import os\n\n" + source


def test_plain_imports_come_before_from_imports_of_the_package() -> None:
    source = "import numpy as np\nfrom torch import nn, optim\n\nmodel = nn.Linear(2, 2)\n"
    assert module_import(source, "torch") == (
        "import numpy as np\nimport torch\nfrom torch import nn, optim\n\nmodel = nn.Linear(2, 2)\n")


def test_an_import_joins_its_packages_imports_not_the_projects_own() -> None:
    """`mymodels` may be the project's own (its section comes last): torch's imports are where torch goes."""
    source = "import torch\nfrom torch import nn\n\nfrom mymodels.blocks import Block\nfrom zoo import Net\n\nx = 1\n"
    expr, text = plan(source, "torch.utils.checkpoint", "checkpoint", prefer_from=True)
    assert expr == "checkpoint"
    assert text == source.replace("from torch import nn\n",
                                  "from torch import nn\nfrom torch.utils.checkpoint import checkpoint\n")


def test_a_file_without_imports_keeps_pep8_blank_lines_after_the_new_one() -> None:
    assert module_import("class Net:\n    pass\n", "torch") == "import torch\n\n\nclass Net:\n    pass\n"
    assert module_import("x = 1\n", "torch") == "import torch\n\nx = 1\n"
