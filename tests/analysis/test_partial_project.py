"""One file in a big project costs one file: the project pass reads only what that file's view needs,
and the view is the one the whole project gives."""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path

import pytest

from gpulint.dispatch import project_scan
from gpulint.dispatch.project_scan import FactsCache, _partial_project, _project_files, scan_projects
from gpulint.project.view import scan_files

ROOT = Path(__file__).resolve().parent.parent.parent

TREE = {
    "pyproject.toml": "",
    "train.py": """
        import torch
        from torch.utils.data import DataLoader
        from pkg.data import Images
        from pkg import models
        from pkg.models.deep import *
        scaler = torch.cuda.amp.GradScaler()
        model = models.Net().cuda()
        loader = DataLoader(Images("x"), batch_size=8)
        for x, y in loader:
            loss = model(x.cuda()).sum()
            loss.backward()
    """,
    "pkg/__init__.py": "from .data import Images\n",
    "pkg/data/__init__.py": "from .images import Images as Images\nfrom .. import helpers\n",
    "pkg/data/images.py": """
        from PIL import Image
        import torch
        from torch.utils.data import Dataset
        class Images(Dataset):
            def __init__(self, root):
                self.root = root
            def __getitem__(self, i):
                return torch.tensor(Image.open(self.root))
    """,
    "pkg/helpers.py": "from . import models\nN_LAYERS = 4\n",
    "pkg/models/__init__.py": "from .net import Net\n",
    "pkg/models/net.py": """
        import torch.nn as nn
        from .blocks import Block
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.Sequential(*[Block(512) for _ in range(24)])
    """,
    "pkg/models/blocks.py": """
        import torch.nn as nn
        from ..models import net  # a cycle
        class Block(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.fc = nn.Linear(width, width)
    """,
    "pkg/models/deep.py": "import torch\nDEEP = torch.bfloat16\n",
    "src/lib/__init__.py": "",
    "src/lib/opt.py": "import torch\nOPTIMIZERS = {'sgd': torch.optim.SGD}\n",
    "tools/run.py": "from lib.opt import OPTIMIZERS\nimport pkg.data.images\nx = 1\n",
    "tools/broken.py": "def broken(:\n",
    "tools/helpers.py": "this is not python\n",  # shadows pkg.helpers? no: another folder
    "tools/use_helpers.py": "import helpers\nimport torch\ntorch.cuda.synchronize()\n",
    "unrelated/a.py": "import os\nprint(os.getcwd())\n",
    "unrelated/b.py": "from unrelated import a\n",
    "uses_package.py": "import pkg.models.deep\n",  # reaches pkg/__init__.py without spelling `from pkg`
    # scripts: one nothing imports, one imported from another folder through sys.path (unresolvable)
    "scripts/alone.py": "import torch\ndef train(model, opt):\n    model(1).backward()\n    opt.step()\n",
    "scripts/reached.py": "import torch\ndef train(model, opt):\n    model(1).backward()\n    opt.step()\n",
    "other/runner.py": "import sys\nsys.path.append('scripts')\nfrom reached import train\n",
    # a fused-attention option: the model's callers, what they import, what it imports give it values
    "flash/__init__.py": "",
    "flash/config.py": "from dataclasses import dataclass\n@dataclass\nclass Cfg:\n    use_flash_attn: bool = False\n",
    "flash/presets.py": "from flash.config import Cfg\nSMALL = Cfg(use_flash_attn=True)\n",
    "flash/model.py": """
        import torch.nn as nn
        from flash.config import Cfg
        class Attn(nn.Module):
            def __init__(self, cfg, flash=False):
                super().__init__()
                self.flash = flash
                self.fused = cfg.use_flash_attn
    """,
    "flash_train.py": "from flash.model import Attn\nfrom flash import presets\nm = Attn(presets.SMALL, flash=False)\n",
    # private methods nothing calls: the modules that import a class's module (a subclass) and those it imports
    # (its base, which calls `_build`) decide
    "exps/basic.py": "class Basic(object):\n    def __init__(self):\n        self.model = self._build()\n",
    "exps/zero.py": """
        import torch
        from exps.basic import Basic
        class Zero(Basic):
            def _build(self):
                return torch.nn.Linear(4, 4)
            def _select_optimizer(self):
                return torch.optim.Adam(self.model.parameters())
    """,
    "exps/tuned.py": "from exps.zero import Zero\nclass Tuned(Zero):\n"
                     "    def fit(self):\n        self._select_optimizer()\n",
    "exps/plain.py": "import torch\nfrom exps.basic import Basic\nclass Plain(Basic):\n"
                     "    def _select_optimizer(self):\n        return torch.optim.Adam(self.model.parameters())\n",
    "exps/run.py": "from exps.tuned import Tuned\nfrom exps.plain import Plain\n",
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("project")
    for name, text in TREE.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
              "source": ["import torch\n", "from pkg.models import blocks\n", "torch.cuda.init()\n"]}]
    (root / "explore.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                                    "nbformat_minor": 5}), encoding="utf-8")
    return root


def _same_views(root: Path, members: list[Path]) -> None:
    """Each member linted alone, as `gpulint check member` does: a project built for it, whole or partial.
    (A fresh whole project per member: views computed one after another share what a project learns
    about an import cycle, so a view can depend on the views asked before it.)"""
    paths = _project_files(root, members)
    facts = FactsCache()
    for member in members:
        whole = scan_files(root, paths, facts)
        part = _partial_project(root, paths, [member], facts)
        assert part.view(member) == whole.view(member), member
        assert len(part.facts) <= len(whole.facts)


def test_every_file_of_a_tricky_tree_gets_the_view_of_the_whole_project(tree: Path) -> None:
    """Packages that re-export, `from . import x`, `from .. import x`, a cycle, a star import, `src/`, a
    file that does not parse, a caller chain: each file alone sees what the whole project shows it."""
    members = sorted(p for p in tree.rglob("*.py")) + [tree / "explore.ipynb"]
    _same_views(tree, members)


def test_a_file_reads_only_what_its_view_needs(tree: Path) -> None:
    blocks = tree / "pkg" / "models" / "blocks.py"
    paths = _project_files(tree, [blocks])
    # a notebook is a member when it is linted, never a caller: the whole project leaves it out too
    assert "explore.ipynb" not in _partial_project(tree, paths, [blocks], FactsCache()).facts
    paths = _project_files(tree, [tree / "unrelated" / "a.py"])
    part = _partial_project(tree, paths, [tree / "unrelated" / "a.py"], FactsCache())
    assert sorted(part.facts) == ["unrelated/a.py", "unrelated/b.py"]
    images = _partial_project(tree, paths, [tree / "pkg" / "data" / "images.py"], FactsCache())
    assert "train.py" in images.facts and "tools/run.py" in images.facts  # its callers decide its device
    assert "unrelated/a.py" not in images.facts and "src/lib/opt.py" in images.facts  # what tools/run.py imports


def test_a_script_imported_only_through_sys_path_is_no_script(tree: Path) -> None:
    paths = _project_files(tree, [])
    for name, script in (("alone", True), ("reached", False)):
        member = tree / "scripts" / f"{name}.py"
        assert _partial_project(tree, paths, [member], FactsCache()).view(member).script is script  # type: ignore[union-attr]


def test_private_methods_nothing_calls_are_judged_from_the_files_around(tree: Path) -> None:
    """exps/zero.py's `_select_optimizer` is called by a subclass in a module that imports it; exps/plain.py's
    by nothing (the base's `_build` hook is called by the base): the partial project reads the same files."""
    paths = _project_files(tree, [])
    for name, uncalled in (("zero", frozenset()), ("plain", frozenset({"Plain._select_optimizer"}))):
        member = tree / "exps" / f"{name}.py"
        assert _partial_project(tree, paths, [member], FactsCache()).view(member).unreached == uncalled  # type: ignore[union-attr]


def test_views_of_this_repository_match_the_whole_project() -> None:
    """A real tree of several hundred files (the package, its tests, fixtures and examples): a seeded
    sample of its files, each linted alone."""
    paths = _project_files(ROOT, [])
    sample = random.Random(25).sample(sorted(p for p in paths if str(p).endswith(".py")), 12)
    _same_views(ROOT, sample)


def test_scan_projects_takes_the_partial_path_for_a_few_files(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = project_scan._partial_project

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - a spy
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(project_scan, "_partial_project", counted)
    one = tree / "pkg" / "models" / "net.py"
    views = scan_projects([one], [one])
    assert calls and views[str(one)].gpu_callers  # train.py moves the model to the GPU
    calls.clear()
    everything = sorted(tree.rglob("*.py"))
    scan_projects(everything, [tree])
    assert not calls  # the whole project is linted: one full scan


def test_a_view_does_not_depend_on_the_views_asked_before_it(tree: Path) -> None:
    """pkg/__init__.py and pkg/data/__init__.py import each other: what they offer is solved for the
    cycle as a whole, so `check tools/run.py` and `check .` give tools/run.py the same view."""
    paths = _project_files(tree, [])
    members = sorted(p for p in tree.rglob("*.py"))
    forward = scan_files(tree, paths, FactsCache())
    backward = scan_files(tree, paths, FactsCache())
    first = {m: forward.view(m) for m in members}
    second = {m: backward.view(m) for m in reversed(members)}
    assert first == second
    run = tree / "tools" / "run.py"
    assert sorted(first[run].imported_classes) == ["pkg.Images", "pkg.data.images.Images"]


_SPELLED_CASES = [
    ("import model\n", True),
    ("from . import model as m", True),  # no newline at the end
    ("x = 1\n    from .model import Net\n", True),  # indented, in a function
    ("from pkg import (a,  # (b)\n    model)\n", True),  # the `)` that closes it is in a comment
    ("from pkg import \\\n    model\n", True),
    ("from pkg import \\\r\n    model\r\n", True),
    ("import a.model.b\n", True),
    ("model = 1\n", False),
    ("import models\n", False),
    ("from a import b\nmodel = 1\n", False),
]


@pytest.mark.parametrize("text, spelled", _SPELLED_CASES)
def test_the_text_test_for_an_import_keeps_every_statement_that_spells_the_word(text: str, spelled: bool) -> None:
    """A superset of the import statements that spell the word: whatever it keeps is then resolved."""
    assert project_scan._spells_import_of(text.encode(), project_scan._Words({"model"})) is spelled


def test_a_module_in_a_package_reads_its_own_package_not_its_siblings(tmp_path: Path) -> None:
    """Every package's script imports `.model`: the word is everywhere, the importers are one."""
    for n in range(6):
        package = tmp_path / f"p{n}"
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "model.py").write_text("import torch.nn as nn\n\nclass Net(nn.Module):\n    pass\n")
        (package / "train.py").write_text("import torch\nfrom .model import Net\n\nmodel = Net().cuda()\n")
    (tmp_path / "pyproject.toml").write_text("")
    member = tmp_path / "p3" / "model.py"
    paths = _project_files(tmp_path, [member])
    facts = FactsCache()
    part = _partial_project(tmp_path, paths, [member], facts)
    assert sorted(part.facts) == ["p3/model.py", "p3/train.py"]
    parsed = sorted(Path(name).relative_to(tmp_path).as_posix() for name in facts.known)
    assert parsed == ["p3/model.py", "p3/train.py"]  # the other packages' scripts are never parsed
    assert part.view(member) == scan_files(tmp_path, paths, FactsCache()).view(member)


def test_a_model_sees_the_values_its_callers_and_their_imports_give_a_fused_attention_option(tree: Path) -> None:
    member = tree / "flash" / "model.py"
    paths = _project_files(tree, [member])
    view = _partial_project(tree, paths, [member], FactsCache()).view(member)
    assert view is not None
    assert view.option_values("flash") == {"off"}  # flash_train.py, a caller
    assert view.option_values("use_flash_attn") == {"on"}  # flash/presets.py, which the caller imports
    assert view.class_calls("Attn") == 1 and view.class_calls("Cfg") == 0  # by keyword only
    assert view.option_defaults("use_flash_attn") == {"Cfg": frozenset({False})}  # flash/config.py, an import


@pytest.mark.parametrize("words", [{"model"}, {"data", "train"}, {"nn"}, {"torch", "utils"}, {"F"}])
def test_the_import_word_index_answers_as_the_text_test_does(words: set[str]) -> None:
    """One pass per file (the index) serves every round of callers: it must keep exactly what the
    regular expressions keep, on the texts above and on every fixture and shipped source file."""
    root = Path(__file__).resolve().parents[2]
    texts = [t.encode() for t, _ in _SPELLED_CASES] + [
        p.read_bytes() for folder in ("fixtures", "gpulint") for p in sorted((root / folder).rglob("*.py"))]
    pattern = project_scan._Words(words)
    index = project_scan._ImportIndex()
    kept = 0
    for number, raw in enumerate(texts):
        expected = project_scan._spells_import_of(raw, pattern)
        assert index.spells(str(number), raw, pattern) is expected, raw[:200]
        kept += expected
    assert kept and kept < len(texts)  # both answers were exercised


NGP = {
    "pyproject.toml": "",
    "ops/setup.py": "from torch.utils.cpp_extension import CUDAExtension\n"
                    "e = CUDAExtension(name='_ops', sources=['a.cu'], extra_compile_args={'nvcc': ['-std=c++14']})\n",
    "ops/__init__.py": "from .ops import *\n",
    "ops/ops.py": "try:\n    import _ops as _backend\nexcept ImportError:\n    from .backend import _backend\n",
    "ops/backend.py": "from torch.utils.cpp_extension import load\n"
                      "_backend = load(name='_ops', extra_cuda_cflags=['-std=c++14'], sources=['a.cu'])\n",
    "nerf/renderer.py": "import ops\n",
    "nerf/network.py": "from nerf.renderer import Renderer\n",
    "nerf/utils.py": "import torch\n\n\ndef train(model):\n    return torch.cuda.amp.GradScaler()\n",
    "nerf/gui.py": "from nerf.utils import *\n",
    "main.py": "from nerf.gui import Gui\nfrom nerf.utils import *\nfrom nerf.network import Net\n",
    "tools/unrelated.py": "import torch\n",
}


def test_a_helper_alone_sees_the_cpp14_ceiling_its_callers_import(tmp_path: Path) -> None:
    """nerf/utils.py linted alone: its callers (main.py, through nerf/gui.py too) import the C++14 ops three
    modules down, and every setup.py names the compiled extensions: the partial project reads all of it."""
    for name, text in NGP.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    members = sorted(tmp_path.rglob("*.py"))
    _same_views(tmp_path, members)
    utils = tmp_path / "nerf" / "utils.py"
    part = _partial_project(tmp_path, _project_files(tmp_path, [utils]), [utils], FactsCache())
    view = part.view(utils)
    assert view is not None and view.torch_ceiling == (2, 1)


LAZY_NATIVE = {
    "pyproject.toml": "",
    "train.py": "def build():\n    from nets.attn import Net\n    return Net()\n",
    "nets/attn.py": "import ops.functional as OF\n",
    "ops/functional.py": "from . import functions\n",
    "ops/functions/__init__.py": "from .mask import *\n",
    "ops/functions/mask.py": "from .. import ext\nfrom .. import functional\n",
    "ops/ext/__init__.py": "from torch.utils.cpp_extension import load\n\ngpu = load('mask', ['mask.cu'])\n",
}


def test_a_script_alone_sees_the_kernels_its_function_level_import_reaches(tmp_path: Path) -> None:
    """train.py linted alone imports its model in a function, five modules above the package that builds native
    kernels (ProjectView.native_importees): the partial project follows imports in functions down too."""
    for name, text in LAZY_NATIVE.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    _same_views(tmp_path, sorted(tmp_path.rglob("*.py")))
    train = tmp_path / "train.py"
    part = _partial_project(tmp_path, _project_files(tmp_path, [train]), [train], FactsCache())
    view = part.view(train)
    assert view is not None and view.native_importees


@pytest.mark.parametrize("elsewhere", ["import torch\n\ndef run(model, device):\n    return model.to(device)\n",
                                       "import numpy\n\ndef run(values):\n    return numpy.mean(values)\n"])
def test_whether_the_project_shows_an_accelerator_is_read_beyond_the_views_files(tmp_path: Path,
                                                                                elsewhere: str) -> None:
    """ProjectView.accelerated_project asks the whole project: a partial scan reads the facts of the other
    files whose text may show an accelerator (and only those), and gives the whole project's answer."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "trainer.py").write_text("import torch\n\nopt = torch.optim.Adam(model.parameters())\n")
    (tmp_path / "unrelated.py").write_text(elsewhere)
    (tmp_path / "notes.py").write_text("TEXT = 'nothing to see'\n")
    member = tmp_path / "trainer.py"
    paths = _project_files(tmp_path, [member])
    facts = FactsCache()
    part = _partial_project(tmp_path, paths, [member], facts)
    view = part.view(member)
    assert view is not None and view == scan_files(tmp_path, paths, FactsCache()).view(member)
    assert view.accelerated_project is ("device" in elsewhere)
    parsed = sorted(Path(name).relative_to(tmp_path).as_posix() for name in facts.known)
    assert "notes.py" not in parsed
