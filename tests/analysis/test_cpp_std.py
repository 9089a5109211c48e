"""A torch ceiling from a native extension pinned to C++14, carried through the imports (project/cpp_std.py)."""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path
from typing import Optional

import pytest
from click.testing import CliRunner

from gpulint.cli import main
from gpulint.project.cpp_std import CPP14_CEILING, pins_pre_cpp17, propagate
from gpulint.project.facts import facts_of_text
from gpulint.project.view import Project

LOAD_CPP14 = """\
from torch.utils.cpp_extension import load

_backend = load(name="_ops", extra_cflags=["-O3", "-std=c++14"], sources=["ops.cu"])
"""
PLAIN = "import torch\n"


def pinned(source: str) -> bool:
    tree = ast.parse(textwrap.dedent(source))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") in (
        "load", "load_inline", "CUDAExtension", "CppExtension")]
    return any(pins_pre_cpp17(call, tree) for call in calls)


@pytest.mark.parametrize("source", [
    "load(name='x', extra_cflags=['-O3', '-std=c++14'], sources=[])",
    "load(name='x', extra_cuda_cflags=['-O3', '--std=c++11'], sources=[])",
    "load_inline(name='x', cpp_sources=[s], extra_cflags=['-std=gnu++14'])",
    # a list bound elsewhere, with a Windows branch in MSVC's spelling
    "import os\nif os.name == 'posix':\n    f = ['-O3', '-std=c++14']\nelse:\n    f = ['/O2', '/std:c++17']\n"
    "load(name='x', extra_cflags=f, sources=[])",
    "nvcc = ['-O3']\nnvcc.append('-std=c++14')\nload(name='x', extra_cuda_cflags=nvcc, sources=[])",
    "CUDAExtension(name='_ops', sources=[], extra_compile_args={'cxx': ['-std=c++14'], 'nvcc': ['-O3']})",
])
def test_a_pre_cpp17_standard_is_pinned(source: str) -> None:
    assert pinned(source)


@pytest.mark.parametrize("source", [
    "load(name='x', extra_cflags=['-O3', '-std=c++17'], sources=[])",
    "load(name='x', extra_cflags=['-O3'], sources=[])",
    "load(name='x', sources=['a.cpp'])",
    "CUDAExtension(name='_ops', sources=[], extra_compile_args={'cxx': ['-O3'], 'nvcc': ['-std=c++17']})",
    # both standards in the same flags: which one wins is not shown
    "load(name='x', extra_cflags=['-std=c++14', '-std=c++17'], sources=[])",
    "load(name='x', extra_cflags=['/std:c++14'], sources=[])",  # MSVC: a Windows build, not GCC's
])
def test_no_pre_cpp17_pin(source: str) -> None:
    assert not pinned(source)


def test_a_cpp14_build_is_the_files_torch_ceiling() -> None:
    facts = facts_of_text(LOAD_CPP14)
    assert facts is not None and facts.cpp14_build and facts.torch_ceiling is None  # carried by the view
    plain = facts_of_text("from torch.utils.cpp_extension import load\n\n_b = load(name='x', sources=['a.cu'])\n")
    assert plain is not None and not plain.cpp14_build and plain.torch_ceiling is None


def test_setup_py_names_its_cpp14_extensions() -> None:
    facts = facts_of_text(textwrap.dedent("""\
        from setuptools import setup
        from torch.utils.cpp_extension import BuildExtension, CUDAExtension
        flags = ['-O3', '-std=c++14']
        setup(name='ops', ext_modules=[
            CUDAExtension(name='_ops14', sources=['a.cu'], extra_compile_args={'cxx': flags, 'nvcc': flags}),
            CUDAExtension(name='_ops17', sources=['b.cu'], extra_compile_args={'cxx': ['-std=c++17']}),
        ], cmdclass={'build_ext': BuildExtension})
        """))
    assert facts is not None and facts.cpp14_extensions == ("_ops14",)
    assert set(facts.extensions) == {"_ops14", "_ops17"} and facts.torch_ceiling is None


def ceilings(files: dict[str, str]) -> dict[str, Optional[tuple[int, int]]]:
    facts = {name: facts_of_text(textwrap.dedent(text)) for name, text in files.items()}
    project = Project(Path("/p"), {k: v for k, v in facts.items() if v is not None})
    out: dict[str, Optional[tuple[int, int]]] = {}
    for name in files:
        view = project.view(Path("/p") / name)
        assert view is not None
        out[name] = view.torch_ceiling
    return out


def test_the_ceiling_reaches_importers_at_any_depth() -> None:
    found = ceilings({
        "ops/backend.py": LOAD_CPP14,
        "ops/__init__.py": "from .functions import *\n",
        "ops/functions.py": "from .backend import _backend\n",
        "model/renderer.py": "import ops\n",
        "model/network.py": "from model.renderer import Renderer\n",
        "model/deeper.py": "import model.network\n",
        "train.py": "from model.deeper import Net\n",
        "other.py": PLAIN,
    })
    assert found == {"ops/backend.py": CPP14_CEILING, "ops/__init__.py": CPP14_CEILING,
                     "ops/functions.py": CPP14_CEILING, "model/renderer.py": CPP14_CEILING,
                     "model/network.py": CPP14_CEILING, "model/deeper.py": CPP14_CEILING,
                     "train.py": CPP14_CEILING, "other.py": None}


def test_an_import_cycle_converges() -> None:
    found = ceilings({
        "backend.py": LOAD_CPP14,
        "a.py": "import b\nimport backend\n",
        "b.py": "import a\n",
        "c.py": "import d\n",  # a cycle with no evidence on it stays uncapped
        "d.py": "import c\n",
    })
    assert found == {"backend.py": CPP14_CEILING, "a.py": CPP14_CEILING, "b.py": CPP14_CEILING,
                     "c.py": None, "d.py": None}


def test_try_except_import_error_caps_only_when_every_branch_is_capped() -> None:
    found = ceilings({
        "setup.py": textwrap.dedent("""\
            from setuptools import setup
            from torch.utils.cpp_extension import CUDAExtension
            setup(ext_modules=[CUDAExtension(name='_ops', sources=['a.cu'],
                                             extra_compile_args={'cxx': ['-std=c++14'], 'nvcc': ['-std=c++14']})])
            """),
        "ops/backend.py": LOAD_CPP14,
        "ops/both.py": "try:\n    import _ops as _backend\nexcept ImportError:\n    from .backend import _backend\n",
        "ops/fallback.py": "try:\n    from .backend import _backend\nexcept ImportError:\n    _backend = None\n",
        "ops/python.py": "try:\n    from .backend import _backend\n"
                         "except ImportError:\n    from .pure import _backend\n",
        "ops/pure.py": PLAIN,
        "ops/reraise.py": "try:\n    from .backend import _backend\nexcept ImportError:\n"
                          "    raise ImportError('build the extension first')\n",
        "ops/installed.py": "import _ops\n",
    })
    assert found["ops/both.py"] == CPP14_CEILING  # the installed extension or the one built at import
    assert found["ops/fallback.py"] is None  # runs without the extension
    assert found["ops/python.py"] is None  # a pure-Python fallback
    assert found["ops/reraise.py"] == CPP14_CEILING  # no other way through
    assert found["ops/installed.py"] == CPP14_CEILING
    assert found["setup.py"] is None and found["ops/pure.py"] is None


def test_if_else_branches_cap_when_each_imports_capped_code() -> None:
    found = ceilings({
        "backend.py": LOAD_CPP14,
        "net_a.py": "import backend\n",
        "net_b.py": "import backend\n",
        "net_tcnn.py": "import tinycudann\n",
        "main_all.py": "import sys\nif __name__ == '__main__':\n    if sys.argv[1] == 'a':\n"
                       "        from net_a import Net\n    else:\n        from net_b import Net\n",
        "main_tcnn.py": "import sys\nif __name__ == '__main__':\n    if sys.argv[1] == 'a':\n"
                        "        from net_a import Net\n    else:\n        from net_tcnn import Net\n",
        "main_if.py": "import sys\nif sys.argv[1] == 'a':\n    from net_a import Net\n",
    })
    assert found["main_all.py"] == CPP14_CEILING
    assert found["main_tcnn.py"] is None  # the tiny-cuda-nn path runs without the extension
    assert found["main_if.py"] is None  # no else: a path imports nothing


def test_a_helper_takes_the_ceiling_of_its_capped_importers() -> None:
    found = ceilings({
        "backend.py": LOAD_CPP14,
        "net.py": "import backend\n",
        "helpers/trainer.py": "import torch\n\n\ndef train(model):\n    return model\n",
        "main.py": "import net\nfrom helpers.trainer import train\n",
        "main2.py": "import net\nimport helpers.trainer\n",
        "tools/util.py": "def f():\n    return 1\n",
        "main3.py": "import net\nfrom tools.util import f\n",
        "tools/run.py": "from tools.util import f\n",  # an uncapped importer: the helper is not capped
    })
    assert found["helpers/trainer.py"] == CPP14_CEILING
    assert found["tools/util.py"] is None


def test_propagate_takes_the_lowest_and_the_highest_branch() -> None:
    own = {"a": (2, 0), "b": (2, 1), "x": None, "y": None, "h": None, "z": None}
    requires = {"x": [[["a"], ["b"]]],  # alternatives: capped at the higher one
                "y": [[["a"]], [["b"]]],  # both unconditional: the lower one
                "z": [[["h"]]]}
    found = propagate(list(own), own, requires, {"h": ["x", "y"]}, ["h"])
    assert found == {"a": (2, 0), "b": (2, 1), "x": (2, 1), "y": (2, 0), "h": (2, 1), "z": (2, 1)}


def test_torch_ngp_layout_silences_gpu003_but_not_the_tcnn_path(tmp_path: Path) -> None:
    """ashawkey/torch-ngp in miniature: the ray-marching ops built as C++14 (at import and by setup.py), the
    renderer importing them, a network on the renderer; the trainer module and the scripts run only with them.
    An SDF trainer whose script may take a tiny-cuda-nn network without the ops keeps its findings."""
    files = {
        "pyproject.toml": "[project]\nname = 'ngp'\n",
        "raymarching/setup.py": textwrap.dedent("""\
            from setuptools import setup
            from torch.utils.cpp_extension import BuildExtension, CUDAExtension
            flags = ['-O3', '-std=c++14']
            setup(name='raymarching', ext_modules=[CUDAExtension(
                name='_raymarching', sources=['src/r.cu'], extra_compile_args={'cxx': flags, 'nvcc': flags})],
                cmdclass={'build_ext': BuildExtension})
            """),
        "raymarching/backend.py": LOAD_CPP14,
        "raymarching/__init__.py": "from .raymarching import *\n",
        "raymarching/raymarching.py": textwrap.dedent("""\
            import torch
            from torch.cuda.amp import custom_fwd
            try:
                import _raymarching as _backend
            except ImportError:
                from .backend import _backend
            """),
        "nerf/renderer.py": "import torch\nimport raymarching\n",
        "nerf/network.py": "from .renderer import Renderer\n",
        "nerf/utils.py": textwrap.dedent("""\
            import torch


            def train(model, loader, fp16):
                scaler = torch.cuda.amp.GradScaler(enabled=fp16)
                return scaler
            """),
        "main_nerf.py": "import torch\nfrom nerf.utils import *\nfrom nerf.network import NeRFNetwork\n",
        "sdf/utils.py": textwrap.dedent("""\
            import torch


            def train(model, loader, fp16):
                with torch.cuda.amp.autocast(enabled=fp16):
                    return model(loader)
            """),
        "sdf/network.py": "from nerf.renderer import Renderer\n",
        "sdf/network_tcnn.py": "import tinycudann as tcnn\n",
        "main_sdf.py": textwrap.dedent("""\
            import sys
            from sdf.utils import *
            if __name__ == '__main__':
                if sys.argv[1] == 'tcnn':
                    from sdf.network_tcnn import SDFNetwork
                else:
                    from sdf.network import SDFNetwork
            """),
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["check", "--output-format", "json", "--preview", "--no-cache",
                                       "--isolated", "--select", "GPU003", str(tmp_path)])
    assert result.exit_code in (0, 1), result.output
    found = sorted(Path(f["filename"]).relative_to(tmp_path).as_posix() for f in json.loads(result.stdout))
    assert found == ["sdf/utils.py"]
