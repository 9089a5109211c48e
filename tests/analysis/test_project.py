"""The project model: facts from the files around a file change what its rules say.

Each test writes a small project of its own to a temporary directory and runs the real CLI on
it, the way a user runs `gpulint check`, with and without the results cache.
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path
from typing import Optional

import pytest
from click.testing import CliRunner

from gpulint.cli import main
from gpulint.project.facts import IN_MEMORY, NOTHING, WORK, ClassFacts, facts_of_text
from gpulint.project.view import Project, ProjectView


def write(root: Path, files: dict[str, str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def findings(root: Path, *args: str, cache: Optional[Path] = None) -> list[tuple[str, int, str]]:
    options = ["--no-cache"] if cache is None else ["--cache-dir", str(cache)]
    result = CliRunner().invoke(main, ["check", "--output-format", "json", "--preview", *options, *args, str(root)])
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    return sorted((Path(f["filename"]).relative_to(root).as_posix(), f["location"]["row"], f["code"]) for f in out)


def codes(found: list[tuple[str, int, str]], path: str) -> list[str]:
    return [code for name, _, code in found if name == path]


TRAIN_STEP = """\
def train(model, loader, optimizer):
    for x, y in loader:
        loss = model(x).sub(y).pow(2).mean()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":  # a script runs its step (a function nothing reaches never runs)
    train(model, loader, optimizer)
"""


# ---------------------------------------------------------------------------------------------
# callers decide the device and the loss scaling

def test_grad_scaler_in_the_caller_keeps_fused_sgd_away(tmp_path: Path) -> None:
    """yolov5: SGD with momentum is built in utils/, the GradScaler lives in train.py."""
    write(tmp_path, {
        "utils/__init__.py": "",
        "utils/torch_utils.py": """\
            import torch

            def smart_optimizer(model, momentum):
                return torch.optim.SGD(model.parameters(), lr=0.01, momentum=momentum, nesterov=True)

            def plain_optimizer(model):
                return torch.optim.SGD(model.parameters(), lr=0.01)
            """,
        "train.py": """\
            import torch
            from utils.torch_utils import plain_optimizer, smart_optimizer

            scaler = torch.amp.GradScaler("cuda")
            optimizer = smart_optimizer(model.cuda(), 0.937) if momentum else plain_optimizer(model.cuda())
            """,
    })
    found = findings(tmp_path, "--select", "GPU201")
    # the SGD with momentum is silent; the one without momentum keeps no buffer and is reported
    assert [(name, row) for name, row, _ in found] == [("utils/torch_utils.py", 7)]


def test_a_grad_scaler_in_the_module_the_optimizer_is_handed_to_keeps_fused_sgd_away(tmp_path: Path) -> None:
    """DeiT/MAE's shape: main.py builds SGD with momentum and hands it, with a scaler, to engine.py's
    train_one_epoch, which calls scaler.step(optimizer). Fused SGD would be broken there (issue 21, (b))."""
    write(tmp_path, {
        "engine.py": """\
            import torch

            def train_one_epoch(model, loader, optimizer, scaler):
                for x, y in loader:
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = model(x.cuda()).sub(y.cuda()).pow(2).mean()
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
            """,
        "main.py": """\
            import torch
            from engine import train_one_epoch

            model = torch.nn.Linear(512, 512).cuda()
            momentum = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            plain = torch.optim.SGD(model.parameters(), lr=0.1)
            adam = torch.optim.AdamW(model.parameters(), lr=0.1)
            """,
    })
    found = findings(tmp_path, "--select", "GPU201")
    assert [(name, row) for name, row, _ in found] == [("main.py", 6), ("main.py", 7)]  # not line 5


def test_a_scaler_class_beside_the_caller_keeps_fused_sgd_away(tmp_path: Path) -> None:
    """ConvNeXt's shape (blind3): main.py takes SGD with momentum from optim_factory.py and its loss scaler, a
    class wrapping a GradScaler, from utils.py; optim_factory.py imports neither."""
    write(tmp_path, {
        "utils.py": """\
            import torch

            class NativeScaler:
                def __init__(self):
                    self._scaler = torch.cuda.amp.GradScaler()

                def __call__(self, loss, optimizer):
                    self._scaler.scale(loss).backward()
                    self._scaler.step(optimizer)
                    self._scaler.update()
            """,
        "optim_factory.py": """\
            import torch

            def create_optimizer(model):
                return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            """,
        "main.py": """\
            import torch
            from optim_factory import create_optimizer
            from utils import NativeScaler

            model = torch.nn.Linear(512, 512).cuda()
            optimizer = create_optimizer(model)
            loss_scaler = NativeScaler()
            """,
    })
    assert findings(tmp_path, "--select", "GPU201") == []


SELF_TESTED_DATASET = """\
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset

    class Clips(Dataset):
        def __init__(self, files):
            self.files = files

        def __len__(self):
            return len(self.files)

        def __getitem__(self, i):
            return torch.tensor(list(Image.open(self.files[i]).getdata()))

    if __name__ == "__main__":
        device = torch.device("cuda")
        loader = DataLoader(Clips(["a.png"]), batch_size=16)
        n_batch = 0
        for batch in loader:
            batch.to(device)
            n_batch += 1
        print(n_batch)
    """


@pytest.mark.parametrize("imported", [True, False])
def test_a_loader_in_the_self_test_of_an_imported_module_is_silent(tmp_path: Path, imported: bool) -> None:
    """FastSpeech2's dataset.py (fourth blind reading, 2 FP): its `__main__` block counts the batches of its own
    loaders; train.py imports the module. The same block in a script nothing imports is the training."""
    files = {"dataset.py": SELF_TESTED_DATASET}
    if imported:
        files["train.py"] = "import torch\nfrom dataset import Clips\n"
    write(tmp_path, files)
    found = codes(findings(tmp_path, "--select", "GPU101,GPU102"), "dataset.py")
    assert found == ([] if imported else ["GPU101", "GPU102"])


SELF_TESTED_CRITERION = """\
    import torch
    import torch.nn as nn

    class SplitCrossEntropyLoss(nn.Module):
        def __init__(self, hidden_size, splits):
            super().__init__()
            self.tail = nn.Linear(hidden_size, len(splits))

        def forward(self, weight, bias, hiddens, targets):
            return nn.functional.cross_entropy(self.tail(hiddens), targets)

    if __name__ == "__main__":
        torch.cuda.manual_seed(42)
        embed = nn.Embedding(8, 10)
        crit = SplitCrossEntropyLoss(10, splits=[3])
        optimizer = torch.optim.SGD(list(embed.parameters()) + list(crit.parameters()), lr=1)
        for _ in range(5):
            x = torch.randint(0, 8, (4,))
            c = crit(None, None, embed(x), x)
            print(c.exp().mean())
            c.backward()
            optimizer.step()
    """


@pytest.mark.parametrize("imported", [True, False])
def test_a_host_read_in_the_self_test_of_an_imported_module_is_silent(tmp_path: Path, imported: bool) -> None:
    """awd-lstm-lm's splitcross.py (twelfth blind reading, GPU501 FP): its `__main__` block trains a toy criterion
    and prints the loss every step; main.py imports the module. The same block in a script nothing imports is
    its training."""
    files = {"splitcross.py": SELF_TESTED_CRITERION}
    if imported:
        files["main.py"] = "import torch\nfrom splitcross import SplitCrossEntropyLoss\n"
    write(tmp_path, files)
    found = codes(findings(tmp_path, "--select", "GPU501"), "splitcross.py")
    assert found == ([] if imported else ["GPU501"])


def test_sparse_tensors_made_in_an_imported_module_keep_gpu001_away(tmp_path: Path) -> None:
    """GCNII (fourth blind reading, 3 NP): model.py aggregates with torch.spmm over an adjacency that utils.py
    makes sparse; train.py, which holds the step, does neither itself."""
    write(tmp_path, {
        "utils.py": "import torch\n\ndef adjacency(i, v, n):\n    return torch.sparse_coo_tensor(i, v, (n, n))\n",
        "model.py": "import torch\nimport torch.nn as nn\n\nclass GCN(nn.Module):\n"
                    "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(2048, 2048)\n\n"
                    "    def forward(self, x, adj):\n        return torch.spmm(adj, self.fc(x))\n",
        "train.py": "import torch\nfrom model import GCN\nfrom utils import adjacency\n\n" + TRAIN_STEP
                    + "\ntrain(GCN().cuda(), loader, opt)\n",
    })
    assert codes(findings(tmp_path, "--select", "GPU001"), "train.py") == []
    (tmp_path / "model.py").write_text("import torch\nimport torch.nn as nn\n\nclass GCN(nn.Module):\n"
                                       "    def __init__(self):\n        super().__init__()\n"
                                       "        self.fc = nn.Linear(2048, 2048)\n", encoding="utf-8")
    (tmp_path / "utils.py").write_text("import torch\n", encoding="utf-8")
    assert codes(findings(tmp_path, "--select", "GPU001"), "train.py") == ["GPU001"]


PACKAGE_ROOT_NETWORK = """\
    import torch
    import torch.nn as nn
    import graphnet.torch_impl.propagate as propagate


    class Network(nn.Module):
        def __init__(self):
            super().__init__()
            self.hop = propagate.Hop(2048)
            self.optimizer = torch.optim.Adam(self.parameters())

        def step(self, x, adj, y):
            self.optimizer.zero_grad()
            loss = self.hop(x, adj).sub(y).pow(2).mean()
            loss.backward()
            self.optimizer.step()
            return loss


    if __name__ == "__main__":
        Network().cuda().step(x, adj, y)
    """


@pytest.mark.parametrize("sparse", [True, False])
def test_import_spelling_the_root_package_reaches_its_modules(tmp_path: Path, sparse: bool) -> None:
    """GraphSAINT (blind21, 1 FP): the project root is itself a package (a setup.py beside its __init__.py;
    the code runs from the folder above), and the model file imports its layers as
    `import graphsaint.pytorch_version.layers as layers` from a folder without __init__.py. The import spells
    the root's own name: it reaches the root's module, whose torch.sparse.mm keeps GPU001 away; the same
    layout whose layers use no sparse op still reports."""
    root = tmp_path / "graphnet"
    hop = "torch.sparse.mm(adj, self.fc(x))" if sparse else "adj @ self.fc(x)"
    write(root, {
        "__init__.py": "",
        "setup.py": "from setuptools import setup\n\nsetup(name='graphnet')\n",
        "torch_impl/propagate.py": "import torch\nimport torch.nn as nn\n\n\nclass Hop(nn.Module):\n"
                                   "    def __init__(self, width):\n        super().__init__()\n"
                                   "        self.fc = nn.Linear(width, width)\n\n"
                                   f"    def forward(self, x, adj):\n        return {hop}\n",
        "torch_impl/network.py": PACKAGE_ROOT_NETWORK,
    })
    found = codes(findings(root, "--select", "GPU001"), "torch_impl/network.py")
    assert found == ([] if sparse else ["GPU001"])


STYLEGAN_MODEL = """\
    import torch
    import torch.nn as nn
    from op import fused_leaky_relu


    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2048, 2048)

        def forward(self, x):
            return fused_leaky_relu(self.fc(x))
    """
STYLEGAN_TRAIN = ("import torch\nfrom model import Generator\n\n" + TRAIN_STEP
                  + "\ntrain(Generator().cuda(), loader, opt)\n")


@pytest.mark.parametrize("load", ["from torch.utils.cpp_extension import load\n\nfused = load(",
                                  "import torch.utils.cpp_extension as ext\n\nfused = ext.load_inline("])
def test_native_kernels_built_in_an_imported_op_module_keep_gpu001_silent(tmp_path: Path, load: str) -> None:
    """rosinality/stylegan2-pytorch (fifth blind reading, 2 FP): train.py trains model.py's Generator, whose
    layers call op/fused_act.py's CUDA kernels, JIT-built with cpp_extension.load; they take fp32/fp16 only and
    read an fp32 bias as the input's dtype, so autocast breaks them. The same project without the build is
    reported."""
    op = load + "\"fused\", sources=[\"fused_bias_act.cpp\", \"fused_bias_act_kernel.cu\"])\n\n" \
        "def fused_leaky_relu(x):\n    return fused.fused_bias_act(x)\n"
    write(tmp_path, {"op/__init__.py": "from .fused_act import fused_leaky_relu\n", "op/fused_act.py": op,
                     "model.py": STYLEGAN_MODEL, "train.py": STYLEGAN_TRAIN})
    assert codes(findings(tmp_path, "--select", "GPU001"), "train.py") == []
    (tmp_path / "op" / "fused_act.py").write_text(
        "import torch\n\ndef fused_leaky_relu(x):\n    return torch.nn.functional.leaky_relu(x, 0.2)\n",
        encoding="utf-8")
    assert codes(findings(tmp_path, "--select", "GPU001"), "train.py") == ["GPU001"]


def test_torch_load_is_no_native_build(tmp_path: Path) -> None:
    """`torch.load` and another module's `load` share the JIT builder's last name: neither builds kernels."""
    write(tmp_path, {"op/__init__.py": "from .fused_act import fused_leaky_relu\n",
                     "op/fused_act.py": "import torch\nfrom json import load\n\nstate = torch.load('w.pt')\n"
                                        "cfg = load(open('c.json'))\n\ndef fused_leaky_relu(x):\n    return x\n",
                     "model.py": STYLEGAN_MODEL, "train.py": STYLEGAN_TRAIN})
    assert codes(findings(tmp_path, "--select", "GPU001"), "train.py") == ["GPU001"]


@pytest.mark.parametrize("imported_by_model", [True, False])
def test_an_extension_the_setup_compiles_keeps_gpu001_silent_where_the_model_imports_it(
        tmp_path: Path, imported_by_model: bool) -> None:
    """A compiled extension named by setup.py's CUDAExtension, imported by the model module: silent. Imported
    only by an unrelated tool the training script does not import: the step is still reported."""
    setup = """\
        from setuptools import setup
        from torch.utils.cpp_extension import BuildExtension, CUDAExtension

        setup(name="demo", ext_modules=[CUDAExtension(name="ops._C", sources=["ops/kernel.cu"])],
              cmdclass={"build_ext": BuildExtension})
        """
    user = "import torch\nfrom ops import _C\n"
    model = STYLEGAN_MODEL.replace("from op import fused_leaky_relu", "from ops.act import fused_leaky_relu")
    files = {"setup.py": setup, "ops/__init__.py": "", "model.py": model, "train.py": STYLEGAN_TRAIN,
             "ops/act.py": ("from . import _C\n" if imported_by_model else "import torch\n")
             + "\ndef fused_leaky_relu(x):\n    return x\n"}
    if not imported_by_model:
        files["tools/bench_kernel.py"] = user
    write(tmp_path, files)
    found = codes(findings(tmp_path, "--select", "GPU001"), "train.py")
    assert found == ([] if imported_by_model else ["GPU001"])


# a segmentation project's layout (semseg's PSANet, twentieth blind reading): the training script imports its
# model in a function, for one architecture only; the model imports an ops package's functional module, which
# imports the package's functions (an `__init__` star-importing the autograd Function), whose module imports
# the sibling package that JIT-builds the kernels: five modules from the step, with relative imports and a cycle
NATIVE_CHAIN = {
    "train.py": """\
        import torch


        def build(arch):
            if arch == "attn":
                from nets.attn_net import AttnNet
                return AttnNet()
            from nets.plain_net import PlainNet
            return PlainNet()


        def train(model, loader, optimizer):
            for x, y in loader:
                loss = model(x).sub(y).pow(2).mean()
                loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            train(build("attn").cuda(), loader, opt)
        """,
    "nets/__init__.py": "",
    "nets/plain_net.py": """\
        import torch.nn as nn


        class PlainNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2048, 2048)

            def forward(self, x):
                return self.fc(x)
        """,
    "nets/attn_net.py": """\
        import torch.nn as nn

        import kernels.mask.functional as MF


        class AttnNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2048, 2048)

            def forward(self, x):
                return MF.gather_mask(self.fc(x))
        """,
    "kernels/mask/functional.py": "from . import functions\n\n\ndef gather_mask(x):\n"
                                  "    return functions.gather_mask(x)\n",
    "kernels/mask/functions/__init__.py": "from .gather import *\n",
    "kernels/mask/functions/gather.py": """\
        from torch.autograd import Function

        from .. import ext
        from .. import functional  # a cycle back to the functional module


        class GatherMask(Function):
            @staticmethod
            def forward(ctx, x):
                out = x.new_zeros(x.shape)
                ext.gpu.gather_mask_forward(x, out)
                return out


        gather_mask = GatherMask.apply
        """,
}
NATIVE_BUILD = ("import os\nfrom torch.utils.cpp_extension import load\n\nhere = os.path.dirname(__file__)\n"
                "gpu = load('gather_mask_gpu', [os.path.join(here, 'gather_mask.cu')])\n")


@pytest.mark.parametrize("builds", [True, False])
def test_native_kernels_five_modules_down_a_lazy_import_keep_gpu001_silent(tmp_path: Path, builds: bool) -> None:
    """semseg (twentieth blind reading, FP): the kernels are built five modules below the training script, which
    imports the model in a function and only for one architecture; the chain runs through a relative
    `from . import`, a package `__init__`'s star import, `from .. import` and an import cycle. Without the
    build, the same project is reported."""
    write(tmp_path, {**NATIVE_CHAIN, "kernels/mask/ext/__init__.py":
                     NATIVE_BUILD if builds else "import torch\n\ngpu = None\n"})
    assert codes(findings(tmp_path, "--select", "GPU001"), "train.py") == ([] if builds else ["GPU001"])
    part = findings(tmp_path, "--select", "GPU001", str(tmp_path / "train.py"))
    assert codes(part, "train.py") == ([] if builds else ["GPU001"])


def test_an_extension_the_training_closure_never_imports_keeps_gpu001(tmp_path: Path) -> None:
    """setup.py compiles an extension, and a module of the project imports it, but nothing the training script
    imports (at any depth, its own functions included) reaches that module: the step is still reported."""
    setup = """\
        from setuptools import setup
        from torch.utils.cpp_extension import BuildExtension, CUDAExtension

        setup(name="demo", ext_modules=[CUDAExtension(name="kernels.mask._C", sources=["kernels/mask/g.cu"])],
              cmdclass={"build_ext": BuildExtension})
        """
    write(tmp_path, {**NATIVE_CHAIN, "setup.py": setup, "kernels/mask/ext/__init__.py": "gpu = None\n",
                     "kernels/mask/bench.py": "import torch\n\nfrom . import _C\n\n\ndef bench():\n"
                                              "    from .functions import gather_mask\n    return gather_mask\n",
                     "tools/profile_mask.py": "def main():\n    from kernels.mask import bench\n"
                                              "    bench.bench()\n"})
    assert codes(findings(tmp_path, "--select", "GPU001"), "train.py") == ["GPU001"]
    # a function of a module below the script imports it (an inference-only option of the model's constructor,
    # BigVGAN's `use_cuda_kernel`): it runs only when called so, which the script does not show
    gather = tmp_path / "kernels" / "mask" / "functions" / "gather.py"
    gather.write_text("from torch.autograd import Function\n\nfrom .. import ext, functional\n\n\n"
                      "def warm():\n    from .. import bench\n    return bench\n", encoding="utf-8")
    assert codes(findings(tmp_path, "--select", "GPU001"), "train.py") == ["GPU001"]
    gather.write_text("from torch.autograd import Function\n\nfrom .. import bench, ext, functional\n",
                      encoding="utf-8")
    assert codes(findings(tmp_path, "--select", "GPU001"), "train.py") == []  # now it does, at module level


# a detection project's layout (Deformable DETR; blind15 and blind22's MOTRv2, FP): engine.py steps the model it is
# handed and imports none of it; main.py builds it from models/, whose attention module hands a linear layer's
# output to an autograd Function that calls the extension ops/setup.py compiles, named through a variable
DETR_SETUP = """\
    import torch
    from setuptools import setup
    from torch.utils.cpp_extension import CppExtension, CUDAExtension

    extension = CppExtension
    if torch.cuda.is_available():
        extension = CUDAExtension
    setup(name="SampledAttention", ext_modules=[extension("SampledAttention", ["src/sample.cu"])])
    """
DETR_FUNCTION = """\
    from torch.autograd import Function

    import SampledAttention as SA


    class SampleFunction(Function):
        @staticmethod
        def forward(ctx, value, points):
            return SA.sample_forward(value, points)
    """
DETR_MODULE = """\
    import torch.nn as nn

    from ops.functions import SampleFunction


    class SampledAttention(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.value_proj = nn.Linear(dim, dim)
            self.offsets = nn.Linear(dim, 2)

        def forward(self, query, memory):
            value = self.value_proj(memory)
            value = value.view(memory.shape[0], -1, 8, 32)
            points = self.offsets(query).sigmoid()
            return SampleFunction.apply(VALUE, points)
    """
DETR_ENGINE = """\
    import torch


    def train_one_epoch(model, criterion, loader, optimizer, device):
        model.train()
        for samples, targets in loader:
            samples = samples.to(device)
            loss = criterion(model(samples), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
DETR_MAIN = """\
    import torch

    from engine import train_one_epoch
    from models.detector import Detector

    model = Detector().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    for epoch in range(50):
        train_one_epoch(model, torch.nn.L1Loss(), loader, optimizer, "cuda")
    """
DETR_DETECTOR = """\
    import torch.nn as nn

    from ops.modules import SampledAttention


    class Detector(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = SampledAttention(256)

        def forward(self, x):
            return self.attn(x, x)
    """


@pytest.mark.parametrize(("value", "silent"), [("value", True), ("torch.exp(value)", False), ("value * 2", False)])
def test_a_caller_whose_model_feeds_a_layer_output_to_a_native_op_keeps_gpu001_silent(
        tmp_path: Path, value: str, silent: bool) -> None:
    """Deformable DETR / MOTRv2 (blind15, blind22, FP): engine.py's step trains the model main.py builds; its
    attention hands a linear layer's output (16-bit under autocast) to the Function of a float-only compiled op.
    Handed a value autocast computes in fp32 (`exp`) or one made by arithmetic (RWKV's `k * v`), it is reported."""
    module = DETR_MODULE.replace("VALUE", value)
    if value.startswith("torch."):
        module = "import torch\n" + textwrap.dedent(module)
    write(tmp_path, {"ops/setup.py": DETR_SETUP, "ops/__init__.py": "", "ops/functions/__init__.py":
                     "from .sample_func import SampleFunction\n", "ops/functions/sample_func.py": DETR_FUNCTION,
                     "ops/modules/__init__.py": "from .sampled_attention import SampledAttention\n",
                     "ops/modules/sampled_attention.py": module, "models/__init__.py": "",
                     "models/detector.py": DETR_DETECTOR, "engine.py": DETR_ENGINE, "main.py": DETR_MAIN})
    assert codes(findings(tmp_path, "--select", "GPU001"), "engine.py") == ([] if silent else ["GPU001"])


def test_a_caller_without_the_native_op_keeps_gpu001(tmp_path: Path) -> None:
    """The same layout with no compiled extension (the Function runs torch code): the step is reported."""
    function = DETR_FUNCTION.replace("import SampledAttention as SA", "import torch").replace(
        "SA.sample_forward(value, points)", "value * points.sum()")
    write(tmp_path, {"ops/__init__.py": "", "ops/functions/__init__.py": "from .sample_func import SampleFunction\n",
                     "ops/functions/sample_func.py": function,
                     "ops/modules/__init__.py": "from .sampled_attention import SampledAttention\n",
                     "ops/modules/sampled_attention.py": DETR_MODULE.replace("VALUE", "value"),
                     "models/__init__.py": "", "models/detector.py": DETR_DETECTOR, "engine.py": DETR_ENGINE,
                     "main.py": DETR_MAIN})
    assert codes(findings(tmp_path, "--select", "GPU001"), "engine.py") == ["GPU001"]


RETINA_LOSSES = """\
    import torch
    import torch.nn as nn


    class FocalLoss(nn.Module):
        def forward(self, classifications, targets):
            classification = torch.clamp(classifications, 1e-4, 1.0 - 1e-4)
            bce = -(targets * torch.log(classification) + (1.0 - targets) * torch.log(1.0 - classification))
            return bce.sum()
    """
RETINA_MODEL = """\
    import torch
    import torch.nn as nn
    from detector import losses


    class RetinaNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Conv2d(256, 720, 3, padding=1)
            self.focalLoss = losses.FocalLoss()

        def forward(self, inputs):
            images, targets = inputs
            return self.focalLoss(torch.sigmoid(self.head(images)), targets)
    """
RETINA_TRAIN = """\
    import torch
    from detector import model

    retinanet = model.RetinaNet().cuda()
    optimizer = torch.optim.Adam(retinanet.parameters(), lr=1e-5, fused=True)
    for images, targets in loader:
        optimizer.zero_grad()
        loss = retinanet([images.cuda(), targets.cuda()])
        loss.backward()
        optimizer.step()
    """


@pytest.mark.parametrize("eps", ["1e-4", "1e-2"])
def test_a_loss_clamp_16_bits_round_to_one_in_an_imported_module_keeps_gpu001_silent(tmp_path: Path, eps: str) -> None:
    """yhenon/pytorch-retinanet (tenth blind reading, 1 FP): train.py steps model.py's RetinaNet, whose forward
    returns losses.py's focal loss over `clamp(p, 1e-4, 1.0 - 1e-4)` and `log(1.0 - p)`; under autocast
    1.0 - 1e-4 is 1.0 in float16 and bfloat16, and confident anchors give a NaN loss. With eps = 1e-2 the bound
    stays below 1 in both: reported."""
    write(tmp_path, {"detector/__init__.py": "",
                     "detector/losses.py": RETINA_LOSSES.replace("1e-4", eps),
                     "detector/model.py": RETINA_MODEL, "train.py": RETINA_TRAIN})
    assert codes(findings(tmp_path, "--select", "GPU001"), "train.py") == ([] if eps == "1e-4" else ["GPU001"])


LINK_MODEL = """\
    import torch
    import torch.nn.functional as F
    from torch import nn


    class PairScorer(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(hidden, hidden), nn.Linear(hidden, 1)])

        def forward(self, a, b):
            x = F.relu(self.layers[0](a * b))
            return torch.sigmoid(self.layers[1](x))
    """
LINK_TRAIN = """\
    import torch
    from torch.utils.data import DataLoader

    from scorer import PairScorer


    def train(encoder, scorer, x, edges, optimizer):
        for perm in DataLoader(range(edges.size(0)), 4096, shuffle=True):
            optimizer.zero_grad()
            h = encoder(x)
            edge = edges[perm].t()
            pos_out = scorer(h[edge[0]], h[edge[1]])
            edge = torch.randint(0, x.size(0), edge.size(), device=h.device)
            neg_out = scorer(h[edge[0]], h[edge[1]])
            loss = -torch.log(pos_out + 1e-15).mean() + LOSS
            loss.backward()
            optimizer.step()


    if __name__ == "__main__":
        encoder = torch.nn.Linear(256, 256).cuda()
        scorer = PairScorer(256).cuda()
        optimizer = torch.optim.Adam(list(encoder.parameters()) + list(scorer.parameters()), fused=True)
        train(encoder, scorer, x.cuda(), edges.cuda(), optimizer)
    """


@pytest.mark.parametrize(("loss", "silent"), [
    ("-torch.log(1 - neg_out + 1e-15).mean()", True),  # ogbl_collab's spelling
    ("-torch.log(1 - neg_out).mean()", True),
    ("-torch.log1p(-neg_out.squeeze()).mean()", True),
    ("-(1 - neg_out[:, 0] + 1e-7).log().mean()", True),
    # an eps of 2**-9 or more keeps a 16-bit loss where fp32 keeps it; a value cast to float32 first; not 1 - p
    ("-torch.log(1 - neg_out + 1e-2).mean()", False),
    ("-torch.log(1 - neg_out.float() + 1e-15).mean()", False),
    ("-torch.log(neg_out + 1e-15).mean()", False),
])
def test_log_one_minus_what_an_imported_sigmoid_model_returns_keeps_gpu001_silent(
        tmp_path: Path, loss: str, silent: bool) -> None:
    """deep_gcns_torch's ogbl_collab (twentieth blind reading, FP): the step takes `log(1 - neg_out + 1e-15)` of
    what the project's link predictor returns, whose `forward` (in the example's model module) ends in
    `torch.sigmoid`; the step is handed the predictor by the one call of it. Under autocast the 16-bit sigmoid
    is 1.0 from a logit of about 6.2 (bfloat16) and the eps is below 16-bit resolution near 1."""
    write(tmp_path, {"scorer.py": LINK_MODEL, "train.py": LINK_TRAIN.replace("LOSS", loss)})
    assert codes(findings(tmp_path, "--select", "GPU001"), "train.py") == ([] if silent else ["GPU001"])


@pytest.mark.parametrize("forward", [
    "return self.layers[1](x)",  # logits: the loss is the caller's to get right
    "return torch.sigmoid(self.layers[1](x).float())",  # the sigmoid in float32
    "if self.training:\n                return self.layers[1](x)\n            return torch.sigmoid(self.layers[1](x))",
])
def test_a_model_whose_forward_does_not_always_end_in_a_16_bit_sigmoid_keeps_gpu001(
        tmp_path: Path, forward: str) -> None:
    write(tmp_path, {"scorer.py": LINK_MODEL.replace("return torch.sigmoid(self.layers[1](x))", forward),
                     "train.py": LINK_TRAIN.replace("LOSS", "-torch.log(1 - neg_out + 1e-15).mean()")})
    assert codes(findings(tmp_path, "--select", "GPU001"), "train.py") == ["GPU001"]


@pytest.mark.parametrize(("forward", "found"), [
    ("return torch.sigmoid(self.fc(x))", True),
    ("return self.fc(x).sigmoid()", True),
    ("y = F.sigmoid(self.fc(x))\n        return y", True),
    ("y = self.fc(x)\n        y = torch.sigmoid(y)\n        return y", False),  # `y` is bound to logits too
    ("return x", False),
    ("return torch.sigmoid(self.fc(x).double())", False),
    ("return torch.sigmoid(self.fc(x)), x", False),
])
def test_a_forward_that_returns_a_sigmoid(forward: str, found: bool) -> None:
    facts = facts_of_text("import torch\nimport torch.nn.functional as F\n\n\nclass M(torch.nn.Module):\n"
                          "    def __init__(self):\n        super().__init__()\n"
                          "        self.fc = torch.nn.Linear(8, 1)\n\n"
                          "    def forward(self, x):\n        " + forward + "\n")
    assert facts is not None and facts.classes["M"].sigmoid_output is found


PYRA_MODULES = """\
    import torch
    import torch.nn as nn


    class ScaledDotProductAttention(nn.Module):
        def forward(self, q, k, v, mask=None):
            attn = torch.matmul(q, k.transpose(2, 3)) / q.shape[-1] ** 0.5
            if mask is not None:
                attn = attn.masked_fill(mask, -1e9)
            return torch.matmul(torch.softmax(attn, dim=-1), v)
    """
PYRA_LAYERS = """\
    import torch.nn as nn
    from .modules import ScaledDotProductAttention


    class EncoderLayer(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.qkv = nn.Linear(width, 3 * width)
            self.attention = ScaledDotProductAttention()

        def forward(self, x, mask):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            return self.attention(q, k, v, mask)
    """
PYRA_MODEL = """\
    import torch.nn as nn
    from .layers import EncoderLayer


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([EncoderLayer(1024) for _ in range(6)])

        def forward(self, x, mask):
            for layer in self.layers:
                x = layer(x, mask)
            return x
    """
PYRA_TRAIN = """\
    import torch
    import pyraformer.model as pyraformer

    model = pyraformer.Model().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    for x, mask, y in loader:
        optimizer.zero_grad()
        loss = (model(x.cuda(), mask.cuda()) - y.cuda()).pow(2).mean()
        loss.backward()
        optimizer.step()
    """


@pytest.mark.parametrize("fill", ["-1e9", "-1e4"])
def test_a_mask_fill_past_float16_three_modules_away_silences_the_float16_only_advice(tmp_path: Path,
                                                                                     fill: str) -> None:
    """PatchTST's Pyraformer copy (fifteenth blind reading, 2 FP): torch 1.8 pinned, so GPU001 advised
    torch.cuda.amp, which is float16 only there; the attention three imports away fills masks with -1e9, and
    float16 autocast raises on it. -1e4 fits float16: still reported."""
    write(tmp_path, {"requirements.txt": "torch==1.8.0\n", "pyraformer/__init__.py": "",
                     "pyraformer/modules.py": PYRA_MODULES.replace("-1e9", fill), "pyraformer/layers.py": PYRA_LAYERS,
                     "pyraformer/model.py": PYRA_MODEL, "train.py": PYRA_TRAIN})
    assert codes(findings(tmp_path, "--select", "GPU001"), "train.py") == ([] if fill == "-1e9" else ["GPU001"])


def test_a_mask_fill_past_float16_in_an_imported_module_makes_the_fix_bfloat16(tmp_path: Path) -> None:
    """On a current torch the advice holds, but the fix must not fall back to float16 on GPUs without bfloat16:
    it writes bfloat16 autocast and no GradScaler, and says why."""
    write(tmp_path, {"pyraformer/__init__.py": "", "pyraformer/modules.py": PYRA_MODULES,
                     "pyraformer/layers.py": PYRA_LAYERS, "pyraformer/model.py": PYRA_MODEL, "train.py": PYRA_TRAIN})
    result = CliRunner().invoke(main, ["check", "--no-cache", "--select", "GPU001", "--unsafe-fixes", "--diff",
                                       str(tmp_path)])
    assert "torch.bfloat16" in result.stdout and "GradScaler" not in result.stdout, result.stdout


RENDER_BASE = """\
    import torch
    import torch.nn as nn


    class Renderer(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(150, 256), nn.ReLU(), nn.Linear(256, 3))

        def forward(self, x, weight):
            rgb = torch.zeros((x.shape[0], 3), device=x.device)
            mask = weight > 1e-4
            valid = self.mlp(x[mask])
            rgb[mask] = valid
            return rgb
    """
RENDER_TRAIN = """\
    import torch
    from render.model import Renderer

    model = Renderer().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for x, weight, y in loader:
        optimizer.zero_grad()
        loss = (model(x.cuda(), weight.cuda()) - y.cuda()).pow(2).mean()
        loss.backward()
        optimizer.step()
    """


@pytest.mark.parametrize(("put", "silent"), [
    ("rgb[mask] = valid", True),  # TensoRF's spelling: index_put of a 16-bit output into the fp32 buffer
    ("rgb[weight > 1e-4] = self.mlp(x[mask])", True),
    ("rgb[mask] = valid.to(rgb.dtype)", False),  # cast first: fine under autocast
    ("rgb[:, :] = valid", False),  # a slice assignment is a copy, which casts
])
def test_a_forward_index_putting_a_module_output_into_a_float32_buffer_keeps_gpu001_silent(
        tmp_path: Path, put: str, silent: bool) -> None:
    """apchenstu/TensoRF (fifteenth blind reading, 1 FP): the fix wrapped the renderer in autocast, and
    tensorBase.py's forward writes the render MLP's 16-bit output into an fp32 buffer with `rgb[app_mask] =
    valid_rgbs`: index_put raises on mismatched dtypes at the first step (checked under CPU bf16 autocast)."""
    write(tmp_path, {"render/__init__.py": "", "render/model.py": RENDER_BASE.replace("rgb[mask] = valid", put),
                     "train.py": RENDER_TRAIN})
    assert codes(findings(tmp_path, "--select", "GPU001"), "train.py") == ([] if silent else ["GPU001"])


METRICS = """\
    import torch


    def iou_score(output, target):
        if torch.is_tensor(output):
            output = torch.sigmoid(output).data.cpu().numpy()
        return ((output > 0.5) & (target.cpu().numpy() > 0.5)).sum()
    """
UNET_TRAIN = """\
    import torch
    from metrics import iou_score

    model = UNet().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        if deep:
            outputs = model(x)
            loss = sum(criterion(o, y) for o in outputs) / len(outputs)
            iou = iou_score(outputs[-1], y)
        else:
            output = model(x)
            loss = criterion(output, y)
            iou = iou_score(output, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """


@pytest.mark.parametrize("read", [".data.cpu().numpy()", ".float().cpu().numpy()"])
def test_an_imported_metric_reading_the_output_as_numpy_makes_the_fix_float16(tmp_path: Path, read: str) -> None:
    """4uiiurz1/pytorch-nested-unet (fifteenth blind reading, 1 FP): the fix put `iou_score(output, target)` under
    autocast, and metrics.py reads the output with `.numpy()`: numpy has no bfloat16, so the "auto" fix raised
    TypeError on Ampere and newer at the first step. The fix writes float16 (which converts) and an always-on
    GradScaler; a metric that casts to float32 first keeps the run-time choice."""
    write(tmp_path, {"metrics.py": METRICS.replace(".data.cpu().numpy()", read), "train.py": UNET_TRAIN})
    result = CliRunner().invoke(main, ["check", "--no-cache", "--select", "GPU001", "--unsafe-fixes", "--diff",
                                       str(tmp_path)])
    float16 = read.startswith(".data")
    assert ("dtype=torch.float16" in result.stdout) is float16, result.stdout
    assert ("is_bf16_supported" in result.stdout) is not float16, result.stdout


@pytest.mark.parametrize(("text", "found"), [
    ("rgb = torch.zeros(n, 3)\n        m = w > 0\n        rgb[m] = self.head(x)\n", True),
    ("rgb = torch.empty(n, 3, dtype=torch.float32)\n        out = self.head(x)\n        rgb[~m] = out\n", True),
    # a 16-bit or inherited dtype; an index that is not a mask; a value that is not a submodule's output
    ("rgb = torch.zeros(n, 3, dtype=torch.half)\n        m = w > 0\n        rgb[m] = self.head(x)\n", False),
    ("rgb = torch.zeros_like(x)\n        m = w > 0\n        rgb[m] = self.head(x)\n", False),
    ("rgb = torch.zeros(n, 3)\n        rgb[i] = self.head(x)\n", False),
    ("rgb = torch.zeros(n, 3)\n        m = w > 0\n        rgb[m] = x[m]\n", False),
])
def test_a_forward_that_index_puts_into_a_float32_buffer(text: str, found: bool) -> None:
    facts = facts_of_text("import torch\n\n\nclass M(torch.nn.Module):\n    def forward(self, x, w, n, m, i):\n"
                          "        " + text + "        return rgb\n")
    assert facts is not None and facts.forward_index_puts_float32 is found


@pytest.mark.parametrize(("text", "found"), [
    # retinanet's spelling; a module constant; a local; an in-place clamp; log1p(-p); a tensor's log method
    ("def f(p, y):\n    p = torch.clamp(p, 1e-4, 1.0 - 1e-4)\n    return torch.log(1.0 - p)\n", True),
    ("EPS = 1e-7\n\ndef f(p):\n    p = p.clamp(min=EPS, max=1 - EPS)\n    return torch.log(1 - p[0])\n", True),
    ("def f(p):\n    eps = 1e-6\n    p.clamp_(eps, 1 - eps)\n    return torch.log1p(-p)\n", True),
    ("def f(p):\n    q = torch.clip(p, max=0.9999)\n    return (1 - q).log()\n", True),
    ("def f(p):\n    return torch.log(1 - torch.clamp(p, 1e-8, 1 - 1e-8))\n", True),
    # 2**-9 is a tie that rounds to 1.0 in bfloat16; 0.002 rounds to 1 - 2**-8 (finite log)
    ("def f(p):\n    p = p.clamp(0.001953125, 1 - 0.001953125)\n    return torch.log(1 - p)\n", True),
    ("def f(p):\n    p = p.clamp(0.002, 1 - 0.002)\n    return torch.log(1 - p)\n", False),
    # an eps a caller passes; a name bound twice; fp32 before the clamp; numpy; no log of 1 - p; another function
    ("def f(p, eps=1e-7):\n    p = p.clamp(eps, 1 - eps)\n    return torch.log(1 - p)\n", False),
    ("EPS = 1e-7\nEPS = 1e-1\n\ndef f(p):\n    p = p.clamp(EPS, 1 - EPS)\n    return torch.log(1 - p)\n", False),
    ("def f(p):\n    p = p.float().clamp(1e-4, 1 - 1e-4)\n    return torch.log(1 - p)\n", False),
    ("def f(p):\n    p = np.clip(p, 1e-4, 1 - 1e-4)\n    return np.log(1 - p)\n", False),
    ("def f(p):\n    p = p.clamp(1e-4, 1 - 1e-4)\n    return torch.log(p) * (1 - p)\n", False),
    ("def f(p):\n    p = p.clamp(1e-4, 1 - 1e-4)\n    return p\n\ndef g(p):\n    return torch.log(1 - p)\n", False),
])
def test_a_clamp_that_16_bits_round_to_one_before_a_log(text: str, found: bool) -> None:
    facts = facts_of_text("import numpy as np\nimport torch\n\n" + text)
    assert facts is not None and facts.log_clamp_rounds_to_one is found


@pytest.mark.parametrize(("text", "flags"), [
    ('p.add_argument("--cuda", action="store_true")\n', ("cuda",)),
    ('p.add_argument("--no-cuda", action="store_false", dest="use_cuda")\n', ("use_cuda",)),
    ('p.add_argument("--cuda", action="store_true", default=True)\n', ("cuda",)),
    ('p.add_argument("--cuda", action="store_true", default=None)\n', ()),  # None unless asked
    ('p.add_argument("--cuda", type=int, default=1)\n', ()),
    ('p.add_argument("--cuda", action="store_true")\nq.add_argument("--cuda", type=int)\n', ()),  # two parsers
    # options set by computed name may be anything
    ('p.add_argument("--cuda", action="store_true")\nargs = p.parse_args()\nargs.__dict__.update(cfg)\n', ()),
    ('p.add_argument("--cuda", action="store_true")\nargs = p.parse_args()\nvars(args)[key] = value\n', ()),
    ('p.add_argument("--cuda", action="store_true")\nargs = p.parse_args()\nsetattr(args, key, value)\n', ()),
    ('p.add_argument("--cuda", action="store_true")\np.set_defaults(**cfg)\n', ()),
    # read only (blind10: transformer-xl logs `args.__dict__.items()`)
    ('p.add_argument("--cuda", action="store_true")\nargs = p.parse_args()\n'
     'for k, v in args.__dict__.items():\n    print(k, v)\nprint(vars(args))\n', ("cuda",)),
])
def test_argparse_options_parsed_as_bools(text: str, flags: tuple[str, ...]) -> None:
    assert facts_of_text("import argparse\np = argparse.ArgumentParser()\n" + text).bool_flags == flags



@pytest.mark.parametrize(("text", "rl"), [
    ("import gymnasium as gym\n", True),
    ("try:\n    import gym\nexcept ImportError:\n    gym = None\n", True),
    # blind11: Curt-Park/rainbow-is-all-you-need, marimo notebooks whose every import sits in a cell function
    ("@app.cell\ndef _():\n    import gymnasium as gym\n    return (gym,)\n", True),
    ("class Agent:\n    def make(self):\n        from gymnasium.wrappers import RecordVideo\n", True),
    ("def make():\n    import envpool.atari\n", True),
    ("def make():\n    from .gym import make\n", False),  # the project's own module, not the package
    ("def load():\n    import torchvision\n    import matplotlib.pyplot as plt\n", False),
    ("def make():\n    gym = __import__('numpy')\n", False),
])
def test_an_environment_package_imported_anywhere_in_the_file(text: str, rl: bool) -> None:
    """`rl` counts imports inside functions too; `imports` (names to resolve) stays module-level."""
    facts = facts_of_text("import torch\n\n" + text)
    assert facts is not None and facts.rl is rl
    if text.startswith(("def ", "class ", "@")):
        assert [ref.local for ref in facts.imports] == ["torch"]


def test_an_environment_imported_in_a_function_of_the_caller_keeps_gpu201_away(tmp_path: Path) -> None:
    """The caller builds its environment in a function (`import gymnasium` there): the agent module it imports
    steps between simulator steps, and its optimizer step is not reported."""
    write(tmp_path, {
        "agent.py": "import torch\n\n" + TRAIN_STEP.replace(
            "    train(model, loader, optimizer)",
            "    model = torch.nn.Linear(512, 512).cuda()\n"
            "    train(model, loader, torch.optim.Adam(model.parameters()))"),
        "main.py": "import agent\n\n\ndef make_env():\n    import gymnasium as gym\n\n"
                   "    return gym.make('CartPole-v1')\n\n\nagent.train(make_env(), None, None)\n",
    })
    assert codes(findings(tmp_path, "--select", "GPU201"), "agent.py") == []
    (tmp_path / "main.py").write_text("import agent\n\n\ndef make_env():\n    import numpy\n\n\n"
                                      "agent.train(make_env(), None, None)\n", encoding="utf-8")
    assert codes(findings(tmp_path, "--select", "GPU201"), "agent.py") == ["GPU201"]

def test_encoders_frozen_in_an_imported_module_keep_gpu201_away(tmp_path: Path) -> None:
    """OpenAI-CLIP's shape: modules.py freezes the encoders it wraps with a config flag (False in config.py),
    CLIP.py builds them, main.py steps an AdamW over the model: only small heads train, so a fused step cannot
    pay off. The same project whose encoder module freezes nothing is reported."""
    files = {
        "config.py": "trainable = False\nlr = 1e-3\n",
        "modules.py": """\
            import timm
            from torch import nn
            import config as CFG


            class ImageEncoder(nn.Module):
                def __init__(self, trainable=CFG.trainable):
                    super().__init__()
                    self.model = timm.create_model("resnet50", pretrained=True, num_classes=0)
                    for p in self.model.parameters():
                        p.requires_grad = trainable

                def forward(self, x):
                    return self.model(x)
            """,
        "CLIP.py": """\
            from torch import nn
            from modules import ImageEncoder


            class CLIPModel(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.image_encoder = ImageEncoder()
                    self.head = nn.Linear(2048, 256)
            """,
        "main.py": """\
            import torch
            import config as CFG
            from CLIP import CLIPModel

            model = CLIPModel().to("cuda")
            optimizer = torch.optim.AdamW(model.parameters(), lr=CFG.lr)
            """,
    }
    write(tmp_path, files)
    assert findings(tmp_path, "--select", "GPU201") == []
    files["modules.py"] = files["modules.py"].replace("p.requires_grad = trainable", "p.data.mul_(1.0)")
    write(tmp_path, files)
    assert findings(tmp_path, "--select", "GPU201") == [("main.py", 6, "GPU201")]


@pytest.mark.parametrize(("text", "frozen"), [
    # the linear probe: every parameter but a literal few
    ("for n, p in model.named_parameters():\n    if n not in ('fc.weight', 'fc.bias'):\n"
     "        p.requires_grad_(False)\n", True),
    # DETR's backbone: a condition on the name that keeps most of the network trainable
    ("for n, p in backbone.named_parameters():\n    if 'layer2' not in n and 'layer3' not in n:\n"
     "        p.requires_grad_(False)\n", False),
    # a whole model frozen: counts only with an optimizer over what still requires grad (LoRA, a new head)
    ("model.requires_grad_(False)\n", False),
    ("for p in model.parameters():\n    p.requires_grad = False\n"
     "opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])\n", True),
    # a GAN's toggling helper: a value that may be True, no filter
    ("def set_requires_grad(nets, flag=False):\n    for net in nets:\n        for p in net.parameters():\n"
     "            p.requires_grad = flag\n", False),
    # an encoder wrapped and frozen; a teacher beside the student; a part of the model; a flag set True
    ("class E:\n    def __init__(self, trainable=False):\n        for p in self.backbone.parameters():\n"
     "            p.requires_grad = trainable\n", True),
    ("class E:\n    def __init__(self):\n        self.teacher_encoder.requires_grad_(False)\n", False),
    ("for p in model.bert.embeddings.parameters():\n    p.requires_grad = False\n"
     "opt = torch.optim.AdamW(filter(lambda p: p.requires_grad, model.parameters()))\n", False),
    ("class E:\n    def __init__(self, trainable=True):\n        for p in self.model.parameters():\n"
     "            p.requires_grad = trainable\n", False),
    # LoRA: every parameter whose name lacks an adapter word frozen (either branch of the name test)
    ("for n, p in model.named_parameters():\n    if 'lora' in n:\n        p.requires_grad = True\n"
     "    else:\n        p.requires_grad = False\n", True),
    ("for n, p in model.named_parameters():\n    if 'adapter' not in n:\n        p.requires_grad_(False)\n", True),
    # the adapters frozen and the base trained; a name test on a layer, not an adapter word
    ("for n, p in model.named_parameters():\n    if 'lora' in n:\n        p.requires_grad = False\n", False),
    ("for n, p in model.named_parameters():\n    if 'layer.0.' in n:\n        p.requires_grad = False\n"
     "    else:\n        p.requires_grad = True\n", False),
])
def test_freezing_a_whole_network(text: str, frozen: bool) -> None:
    facts = facts_of_text("import torch\n" + text)
    assert facts is not None and facts.freezes_modules is frozen


def test_gpu_evidence_comes_from_the_caller(tmp_path: Path) -> None:
    """pytorch/examples FSDP: the step runs in utils/train_utils.py, the device is chosen in main.py."""
    write(tmp_path, {"steps.py": "import torch\n\n" + TRAIN_STEP, "lib.py": "import torch\n\n" + TRAIN_STEP})
    alone = findings(tmp_path, "--select", "GPU001")
    assert alone == []
    (tmp_path / "main.py").write_text("import torch\nfrom steps import train\n\ntrain(Net().cuda(), loader, opt)\n",
                                      encoding="utf-8")
    with_caller = findings(tmp_path, "--select", "GPU001")
    assert with_caller == [("steps.py", 6, "GPU001")]  # lib.py has no caller with a GPU


def test_mixed_precision_in_an_imported_model_silences_gpu001(tmp_path: Path) -> None:
    """nanochat: layers cast their weights to the input dtype; the script trains without autocast."""
    write(tmp_path, {
        "model.py": """\
            import torch.nn.functional as F
            from torch import nn

            class Linear(nn.Linear):
                def forward(self, x):
                    return F.linear(x, self.weight.to(dtype=x.dtype))
            """,
        "train.py": "import torch\nfrom model import Linear\n\nmodel = Linear(8, 8).cuda()\n\n" + TRAIN_STEP,
        "other.py": "import torch\n\nmodel = Net().cuda()\n\n" + TRAIN_STEP,
    })
    assert findings(tmp_path, "--select", "GPU001") == [("other.py", 8, "GPU001")]


def test_fsdp_policy_in_the_entry_script_silences_the_step_module(tmp_path: Path) -> None:
    write(tmp_path, {
        "train_utils.py": "import torch\n\n" + TRAIN_STEP,
        "main.py": """\
            import torch
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision
            from train_utils import train

            model = FSDP(Net().cuda(), mixed_precision=MixedPrecision(param_dtype=torch.bfloat16))
            train(model, loader, opt)
            """,
    })
    assert codes(findings(tmp_path, "--select", "GPU001"), "train_utils.py") == []


# ---------------------------------------------------------------------------------------------
# dataset classes defined in other files

DATASETS = """\
    import torch
    from torch.utils.data import Dataset

    class InMemory(Dataset):
        def __init__(self, n):
            self.data = torch.randn(n, 8)
        def __len__(self):
            return len(self.data)
        def __getitem__(self, i):
            return self.data[i]

    class Prompts(Dataset):
        def __init__(self, prompt, n):
            self.prompt, self.n = prompt, n
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            return {"prompt": self.prompt, "index": i}

    class Files(Dataset):
        def __init__(self, paths):
            self.paths = paths
        def __len__(self):
            return len(self.paths)
        def __getitem__(self, i):
            return torch.load(self.paths[i])
    """


@pytest.mark.parametrize("importing", [
    "from data import InMemory, Prompts, Files",
    "from data import *",
    "import data\nInMemory, Prompts, Files = data.InMemory, data.Prompts, data.Files",
])
def test_dataset_classes_are_read_where_they_are_defined(tmp_path: Path, importing: str) -> None:
    write(tmp_path, {"data.py": DATASETS, "train.py": f"""\
import torch
from torch.utils.data import DataLoader
{importing}

device = torch.device("cuda")
a = DataLoader(InMemory(64), batch_size=8)
b = DataLoader(Prompts("a dog", 4), batch_size=1)
c = DataLoader(Files(paths), batch_size=8)
for loader in (a, b, c):
    for batch in loader:
        batch = batch.to(device, non_blocking=True)
"""})
    found = [(row, code) for name, row, code in findings(tmp_path, "--select", "GPU101,GPU102") if name == "train.py"]
    offset = importing.count("\n")
    a, b, c = 6 + offset, 7 + offset, 8 + offset
    if importing.startswith("import data"):
        # `InMemory = data.InMemory` (a tuple of attributes) is not followed: what the items are is
        # undecided, so nothing is reported by default
        assert found == []
        return
    assert found == sorted([(a, "GPU101"), (c, "GPU101"), (c, "GPU102")])
    assert not any(row == b for row, _ in found)


UTIL_MISC = """\
import torch


class NestedTensor(object):
    def __init__(self, tensors, mask):
        self.tensors, self.mask = tensors, mask

    def to(self, device):
        return NestedTensor(self.tensors.to(device), self.mask.to(device))


def collate_fn(batch):
    images, targets = zip(*batch)
    return NestedTensor(torch.stack(images), None), targets
"""


@pytest.mark.parametrize("importing, spelled", [
    ("import util.misc as utils", "utils.collate_fn"),
    ("from util.misc import collate_fn", "collate_fn"),
    ("from util import misc", "misc.collate_fn"),
])
def test_a_collate_building_an_unpinnable_container_in_another_module(tmp_path: Path, importing: str,
                                                                      spelled: str) -> None:
    """DETR: util/misc.py's collate_fn returns a NestedTensor the pin thread cannot pin."""
    write(tmp_path, {"util/__init__.py": "", "util/misc.py": UTIL_MISC, "main.py": f"""\
import torch
from torch.utils.data import DataLoader
from torchvision.datasets import CocoDetection
{importing}

device = torch.device("cuda")
a = DataLoader(CocoDetection("i", "a.json"), batch_size=2, collate_fn={spelled}, num_workers=2)
b = DataLoader(CocoDetection("i", "a.json"), batch_size=2, num_workers=2)
for images, targets in a:
    images = images.to(device)
for images, targets in b:
    images = images.to(device)
"""})
    assert findings(tmp_path, "--select", "GPU101") == [("main.py", 8, "GPU101")]
    # the container gains pin_memory(): the loader that uses it is reported again
    (tmp_path / "util" / "misc.py").write_text(UTIL_MISC.replace(
        "    def to(self, device):", "    def pin_memory(self):\n        return self\n\n    def to(self, device):"))
    assert findings(tmp_path, "--select", "GPU101") == [("main.py", 7, "GPU101"), ("main.py", 8, "GPU101")]


DATA_COLLATE = """\
import torch


def pad(batch):
    return torch.nn.utils.rnn.pad_sequence([torch.as_tensor(x) for x in batch], batch_first=True)


def collate_on(batch, device):
    return pad(batch).to(device)


def collate_cuda(batch):
    return collate_on(batch, "cuda")
"""


@pytest.mark.parametrize("importing, spelled", [
    ("import data.collate as collating", "collating.collate_cuda"),
    ("from data.collate import collate_cuda", "collate_cuda"),
    ("from data import collate", "collate.collate_cuda"),
    ("from data.collate import collate_on", "functools.partial(collate_on, device=device)"),
    ("from data.collate import collate_on", "lambda batch: collate_on(batch, device)"),
])
def test_a_collate_moving_batches_to_the_gpu_in_another_module(tmp_path: Path, importing: str,
                                                               spelled: str) -> None:
    """bertabs (blind11): a collate_fn that moves the batch to the GPU, here defined in another module (directly
    or through a function of its file it calls): pinning CUDA tensors raises, and forked workers cannot collate
    on CUDA. A collate of that module that only pads is still reported (its batch copied with non_blocking: the
    fix leaves the `.to()` of a batch a collate_fn built, and a blocking one leaves `pays-off` undecided)."""
    write(tmp_path, {"data/__init__.py": "", "data/collate.py": DATA_COLLATE, "main.py": f"""\
import functools
import torch
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder
import data.collate
{importing}

device = torch.device("cuda")
a = DataLoader(ImageFolder("images"), batch_size=2, collate_fn={spelled})
b = DataLoader(ImageFolder("images"), batch_size=2, collate_fn=data.collate.pad)
for images in a:
    images = images.to(device)
for images in b:
    images = images.to(device, non_blocking=True)
"""})
    assert findings(tmp_path, "--select", "GPU101,GPU102") == [("main.py", 10, "GPU101"), ("main.py", 10, "GPU102")]


def test_collates_that_move_to_a_device() -> None:
    facts = facts_of_text(DATA_COLLATE + textwrap.dedent("""
        def collate_later(batch):
            return collate_cuda(batch)

        def on_creation(batch):
            return torch.tensor(batch, device="cuda:0")

        def on_the_cpu(batch):
            return torch.tensor(batch, device="cpu").to(torch.float16)
        """))
    assert facts is not None
    # one level: `collate_later` calls `collate_cuda`, which only calls the mover `collate_on`
    assert facts.device_collates == ("collate_on", "collate_cuda", "on_creation")


def test_relative_imports_inside_a_package(tmp_path: Path) -> None:
    write(tmp_path, {"pkg/__init__.py": "", "pkg/data.py": DATASETS, "pkg/train.py": """\
        import torch
        from torch.utils.data import DataLoader
        from .data import InMemory, Files

        device = torch.device("cuda")
        a = DataLoader(InMemory(64), batch_size=8, pin_memory=True)
        c = DataLoader(Files(paths), batch_size=8, pin_memory=True)
        """})
    assert findings(tmp_path, "--select", "GPU102") == [("pkg/train.py", 7, "GPU102")]


def test_dataset_kinds() -> None:
    facts = facts_of_text(textwrap.dedent(DATASETS) + textwrap.dedent("""
        class Windows(Dataset):
            def __getitem__(self, index):
                start = index * self.block
                return self.data[start:start + self.block], self.data[start + 1:start + self.block + 1]

        class RandomTokens(Dataset):
            def __getitem__(self, index):
                return {"input_ids": torch.randint(0, 100, (64,))}

        class Configured(Dataset):
            def __getitem__(self, index):
                return {"size": self.config["size"], "index": index}
        """))
    assert facts is not None
    assert {name: c.dataset for name, c in facts.classes.items()} == {
        "InMemory": IN_MEMORY, "Prompts": NOTHING, "Files": WORK, "Windows": IN_MEMORY,
        "RandomTokens": IN_MEMORY, "Configured": NOTHING}


def test_dataset_items_that_hold_constructor_arguments() -> None:
    """GPU101's fix is safe only when the items hold nothing the caller handed over as is, beyond
    constants (its device is the caller's): DreamBooth's prompt embeddings, precomputed on the GPU,
    cannot be pinned."""
    facts = facts_of_text(textwrap.dedent("""
        from torch.utils.data import Dataset

        class Stored(Dataset):  # the argument itself goes into the item
            def __init__(self, paths, embeddings):
                self.paths, self.embeddings = paths, embeddings
                self.emb = embeddings
            def __getitem__(self, index):
                example = {"path": self.paths[index]}
                example["prompt"] = self.emb
                return example

        class Indexed(Dataset):  # rows of the argument, through a local
            def __init__(self, data):
                self.data = data
            def __getitem__(self, index):
                row = self.data[index]
                return row, index

        class ThroughHelper(Dataset):
            def __init__(self, labels):
                self.labels = labels
            def __getitem__(self, index):
                return self._label(index)
            def _label(self, index):
                return self.labels[index]

        class OnlyUsed(Dataset):  # called, measured, opened: new values go out; only `size` goes in as is
            def __init__(self, paths, transform, size):
                self.paths = paths
                self.transform = transform
                self.size = size
            def __len__(self):
                return len(self.paths)
            def __getitem__(self, index):
                image = self.transform(open(self.paths[index % len(self.paths)]).read())
                return {"image": image, "shape": (self.size, self.size)}

        class Copied(Dataset):  # a derived value, not the argument
            def __init__(self, data):
                self.data = [d * 2 for d in data]
            def __getitem__(self, index):
                return self.data[index]
        """))
    assert facts is not None
    assert {name: c.passed_arguments for name, c in facts.classes.items()} == {
        "Stored": ("1:embeddings",), "Indexed": ("0:data",), "ThroughHelper": ("0:labels",),
        "OnlyUsed": ("2:size",), "Copied": ()}
    again = type(facts).from_json(facts.to_json())  # the fact survives the facts cache
    assert again.classes == facts.classes


def test_dataset_items_that_are_only_token_ids() -> None:
    """GPU101's pays-off: items a tokenizer made (lit-gpt's SFTDataset, blind18) are a few KB a batch; only
    items every value of which is traced to a tokenizer (or is a literal, a length, the index) count."""
    facts = facts_of_text(textwrap.dedent("""
        import torch
        from PIL import Image
        from torch.utils.data import Dataset

        class Encoded(Dataset):  # lit-gpt: cut, cast and masked from tokenizer.encode
            def __getitem__(self, idx):
                prompt = self.tokenizer.encode(self.data[idx]["instruction"])
                ids = self.tokenizer.encode(self.data[idx]["text"], eos=True)
                labels = ids.clone()
                labels[: len(prompt)] = self.ignore_index
                return {"input_ids": ids.type(torch.int64), "labels": labels.type(torch.int64)}

        class Pretokenized(Dataset):  # tokenized up front, in __init__
            def __init__(self, texts, tokenizer):
                self.examples = []
                for text in texts:
                    self.examples.append(tokenizer(text, truncation=True)["input_ids"])
            def __getitem__(self, i):
                return torch.tensor(self.examples[i], dtype=torch.long)

        class ThroughHelper(Dataset):  # a method of the class, lists built around the ids
            def __getitem__(self, i):
                ids = self._encode(self.rows[i])
                ids = [self.tokenizer.bos_token_id] + ids[: self.max_len]
                return dict(input_ids=ids, attention_mask=[1] * len(ids), index=i)
            def _encode(self, row):
                return self.tokenizer(row["text"]).input_ids

        class WithImage(Dataset):  # a key stored into the tokenizer's output: an image
            def __getitem__(self, i):
                enc = self.tokenizer(self.captions[i], return_tensors="pt")
                enc["pixel_values"] = self.transform(Image.open(self.paths[i]))
                return enc

        class WithFeatures(Dataset):  # stored data beside the ids: of unknown size
            def __getitem__(self, i):
                return self.tokenizer(self.texts[i]).input_ids, self.features[i]

        class Embedded(Dataset):  # the ids go through a model
            def __getitem__(self, i):
                return self.encoder(self.tokenizer(self.texts[i], return_tensors="pt").input_ids)

        class NoTokenizer(Dataset):  # token ids, maybe, but nothing shows a tokenizer made them
            def __init__(self, path):
                self.tokens = torch.load(path)
            def __getitem__(self, i):
                return self.tokens[i : i + 512]
        """))
    assert facts is not None
    assert {name for name, c in facts.classes.items() if c.token_ids} == {"Encoded", "Pretokenized", "ThroughHelper"}
    assert facts.classes["NoTokenizer"].dataset is not None
    again = type(facts).from_json(facts.to_json())  # the fact survives the facts cache
    assert again.classes == facts.classes


# ---------------------------------------------------------------------------------------------
# test files, GPU301's trained models, and the cache

def test_test_files_are_silent_for_training_rules_unless_asked(tmp_path: Path) -> None:
    step = ("import torch\n\nLEGACY = torch.cuda.amp.GradScaler\nmodel = Net().cuda()\n"
            "opt = torch.optim.Adam(model.parameters())\n\n" + TRAIN_STEP)
    write(tmp_path, {"tests/test_train.py": step, "conftest.py": step, "train_test.py": step})
    # only the name-based rule (the deprecated name at module level) reports in test code
    assert {code for _, _, code in findings(tmp_path)} == {"GPU003"}
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\nlint-tests = true\n", encoding="utf-8")
    assert {"GPU001", "GPU201"} <= {code for _, _, code in findings(tmp_path)}


def test_the_deprecated_api_in_a_test_function_that_compares_is_silent_unless_asked(tmp_path: Path) -> None:
    """Vim's vendored detectron2 (fifteenth blind reading, 3 FP): `test_autocast` runs a model under
    torch.cuda.amp.autocast to check output dtypes; a test may exercise the old API on purpose. Module-level
    code of a file named like a test (LeViT's speed_test.py) is still read."""
    test = ("import torch\n\n\ndef test_autocast(model, x):\n    from torch.cuda.amp import autocast\n"
            "    with autocast():\n        assert model(x).dtype == torch.float16\n")
    speed = "import torch\n\nwith torch.cuda.amp.autocast():\n    y = model(x)\n"
    write(tmp_path, {"tests/test_model.py": test, "helpers.py": test, "speed_test.py": speed})
    assert findings(tmp_path) == [("speed_test.py", 3, "GPU003")]
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\nlint-tests = true\n", encoding="utf-8")
    assert sorted(path for path, _, code in findings(tmp_path) if code == "GPU003") == [
        "helpers.py", "speed_test.py", "tests/test_model.py"]


def test_checkpoint_in_test_files_is_silent_unless_asked(tmp_path: Path) -> None:
    """OLMo's modeling_olmo_test.py turns Hugging Face checkpointing on to compare outputs: nothing trains there."""
    test = ("from torch.utils.checkpoint import checkpoint\n\n"
            "def test_same_outputs(model, block, x):\n"
            "    model.gradient_checkpointing_enable()\n"
            "    model.add_adapter(config)\n"
            "    assert checkpoint(block, x).shape == block(x).shape\n")
    write(tmp_path, {"tests/hf/modeling_test.py": test, "test_blocks.py": test,
                     "blocks.py": test.replace("def test_same_outputs", "def train_part")})
    assert sorted((path, code) for path, _, code in findings(tmp_path)) == [("blocks.py", "GPU302")] * 2
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\nlint-tests = true\n", encoding="utf-8")
    assert [code for _, _, code in findings(tmp_path)] == ["GPU302"] * 6


def test_a_module_only_an_inference_notebook_imports_is_evaluated_not_trained(tmp_path: Path) -> None:
    """A notebook's cells run top to bottom like a `__main__` block: one that runs a model under inference_mode and
    trains nothing is an inference program, so a checkpoint in the module only it imports never runs with grad
    (dinov2's semantic_segmentation.ipynb). A training notebook leaves the finding standing."""
    model = """\
        import torch.utils.checkpoint as cp
        from torch import nn

        class Block(nn.Module):
            def __init__(self, with_cp=False):
                super().__init__()
                self.with_cp = with_cp
                self.fc = nn.Linear(8, 8)

            def forward(self, x):
                if self.with_cp and x.requires_grad:
                    return cp.checkpoint(self.fc, x)
                return self.fc(x)
        """

    def notebook(*cells: str) -> str:
        return json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                                      "source": cell} for cell in cells],
                           "metadata": {}, "nbformat": 4, "nbformat_minor": 5})

    demo = notebook("import torch\nfrom pkg.backbone import Block\n",
                    "@torch.inference_mode()\ndef run(model, x):\n    return model(x)\n",
                    "print(run(Block().eval(), torch.randn(2, 8)))\n")
    write(tmp_path, {"pkg/__init__.py": "", "pkg/backbone.py": model, "demo.ipynb": demo})
    assert codes(findings(tmp_path), "pkg/backbone.py") == []
    train = notebook("import torch\nfrom pkg.backbone import Block\n",
                     "model = Block(with_cp=True)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n",
                     "loss = model(torch.randn(2, 8, requires_grad=True)).sum()\nloss.backward()\nopt.step()\n")
    write(tmp_path, {"train.ipynb": train})
    assert codes(findings(tmp_path), "pkg/backbone.py") == ["GPU302"]


def test_gpu301_reports_models_a_training_script_uses_through_a_registry(tmp_path: Path) -> None:
    """DiT: train.py picks `DiT_models[args.model]`, a registry of factories that build `DiT`."""
    write(tmp_path, {
        "models.py": """\
            from torch import nn

            class DiT(nn.Module):
                def __init__(self, depth=28):
                    super().__init__()
                    self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(depth)])
                def forward(self, x):
                    for block in self.blocks:
                        x = block(x)
                    return x

            class Unused(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.Sequential(*[nn.Linear(8, 8) for _ in range(16)])
                def forward(self, x):
                    return self.blocks(x)

            def DiT_XL_2(**kwargs):
                return DiT(depth=28, **kwargs)

            DiT_models = {"DiT-XL/2": DiT_XL_2}
            """,
        "train.py": "import torch\nfrom models import DiT_models\n\nmodel = DiT_models[name]().cuda()\n\n"
                    + TRAIN_STEP,
    })
    assert codes(findings(tmp_path, "--select", "GPU301"), "models.py") == ["GPU301"]


def test_gpu301_reports_models_of_a_module_used_as_a_registry(tmp_path: Path) -> None:
    """MAE and DINO: `models_mae.__dict__[args.model]()` picks the model by name from the module."""
    write(tmp_path, {
        "models_mae.py": """            from torch import nn

            class MaskedAutoencoder(nn.Module):
                def __init__(self, depth=24):
                    super().__init__()
                    self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(depth)])
                def forward(self, x):
                    for block in self.blocks:
                        x = block(x)
                    return x
            """,
        "main_pretrain.py": "import torch\nimport models_mae\n\nmodel = models_mae.__dict__[name]().cuda()\n\n"
                            + TRAIN_STEP,
    })
    assert codes(findings(tmp_path, "--select", "GPU301"), "models_mae.py") == ["GPU301"]


def test_a_changed_fact_elsewhere_invalidates_the_cached_result(tmp_path: Path) -> None:
    project = tmp_path / "project"
    cache = tmp_path / "cache"
    write(project, {
        "opt.py": ("import torch\n\ndef make(model):\n"
                   "    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"),
        "train.py": ("import torch\nfrom opt import make\n\n"
                     "scaler = torch.amp.GradScaler('cuda')\nopt = make(Net().cuda())\n"),
    })
    assert findings(project, "--select", "GPU201", cache=cache) == []
    assert findings(project, "--select", "GPU201", cache=cache) == []  # from the cache
    (project / "train.py").write_text("import torch\nfrom opt import make\n\nopt = make(Net().cuda())\n",
                                      encoding="utf-8")
    assert findings(project, "--select", "GPU201", cache=cache) == [("opt.py", 4, "GPU201")]


def test_the_fingerprint_covers_facts_from_other_files_and_not_the_files_own() -> None:
    """The cache key holds the file's bytes already; its own facts come from them. The facts from other
    files must change the key, however the sets holding them happen to be ordered."""
    own = facts_of_text("import torch\nx = torch.zeros(1).cuda()\n")
    other = facts_of_text("y = 1\n")
    assert own is not None and other is not None
    view = ProjectView(own=own, gpu_callers=True, trained_by_callers=frozenset({"Net", "Head"}),
                       imported_classes={"data.Images": ClassFacts(("torch.utils.data.Dataset",), WORK)})
    assert view.fingerprint() == view.with_own(other).fingerprint()
    reordered = ProjectView(own=own, gpu_callers=True, trained_by_callers=frozenset({"Head", "Net"}),
                            imported_classes={"data.Images": ClassFacts(("torch.utils.data.Dataset",), WORK)})
    assert reordered.fingerprint() == view.fingerprint()
    cheaper = ProjectView(own=own, gpu_callers=True, trained_by_callers=frozenset({"Net", "Head"}),
                          imported_classes={"data.Images": ClassFacts(("torch.utils.data.Dataset",), IN_MEMORY)})
    assert cheaper.fingerprint() != view.fingerprint()
    assert ProjectView(own=own).fingerprint() != view.fingerprint()


def test_callers_are_transitive_and_cycles_terminate() -> None:
    sources = {
        "a.py": "import b\n",
        "b.py": "import c\n",
        "c.py": "import b\nimport torch\n",  # b <-> c form a cycle
        "d.py": "x = 1\n",
    }
    facts = {name: facts_of_text(text) for name, text in sources.items()}
    project = Project(Path("/"), {k: v for k, v in facts.items() if v is not None})
    assert project.callers("c.py") == {"a.py", "b.py"}
    assert project.callers("b.py") == {"a.py", "c.py"}
    assert project.callers("d.py") == frozenset()


UNREACHED = """\
import torch
import torch.nn as nn

model = nn.Linear(1024, 1024).cuda()
opt = torch.optim.AdamW(model.parameters())


def train_v1():
    for _ in range(10):
        loss = model(torch.randn(64, 1024).cuda()).sum()
        loss.backward()
        opt.step()


def train():
    for _ in range(10):
        loss = model(torch.randn(64, 1024).cuda()).sum()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    train()
"""


def test_a_training_function_nothing_reaches(tmp_path: Path) -> None:
    """A step in a top-level function that nothing in its script reaches never runs (issue 21's family (c)):
    silent in a script no project file imports; reported where another file imports it, inside a package
    (public API), or where the script dispatches by name."""
    write(tmp_path, {
        "scripts/experiment.py": UNREACHED,
        "lib/train.py": UNREACHED, "lib/run.py": "from train import train_v1\n\ntrain_v1()\n",
        "unresolved/train_old.py": UNREACHED, "other/run.py": "from src.train_old import train_v1\n",
        "pkg/__init__.py": "", "pkg/train.py": UNREACHED,
        "cli/train.py": UNREACHED.replace('if __name__ == "__main__":\n    train()', "import fire\n\nfire.Fire()"),
        "registered/train.py": UNREACHED.replace("def train_v1():", "@register\ndef train_v1():"),
        "named/train.py": UNREACHED + "\nSTEPS = {'v1': 'train_v1'}\n",
    })
    found = findings(tmp_path, "--select", "GPU001")
    assert [row for name, row, _ in found if name == "scripts/experiment.py"] == [18]
    for path in ("lib/train.py", "pkg/train.py", "cli/train.py", "registered/train.py", "named/train.py",
                 "unresolved/train_old.py"):  # the last: an import names its module, unresolved or not
        assert len([row for name, row, _ in found if name == path]) == 2, path


def test_a_float16_step_nothing_reaches(tmp_path: Path) -> None:
    """GPU002 shares the premise: a float16 step that never runs loses no gradients."""
    fp16 = UNREACHED.replace("        loss = model(", "        with torch.autocast('cuda', dtype=torch.float16):\n"
                                                    "            loss = model(")
    write(tmp_path, {"experiment.py": fp16, "lib/steps.py": fp16, "lib/run.py": "import steps\n"})
    found = findings(tmp_path, "--select", "GPU002")
    assert len([row for name, row, _ in found if name == "experiment.py"]) == 1
    assert len([row for name, row, _ in found if name == "lib/steps.py"]) == 2


def test_unreached_functions_of_a_file() -> None:
    from gpulint.project.facts import unreached_functions

    def unreached(text: str) -> tuple[str, ...]:
        return unreached_functions(ast.parse(textwrap.dedent(text)))

    assert unreached("def a(): b()\ndef b(): pass\ndef c(): d()\ndef d(): pass\na()\n") == ("c", "d")
    assert unreached("def a(): pass\nclass T:\n    run = staticmethod(a)\n") == ()  # a class body reaches
    assert unreached("def a(): pass\ndef b(x=a): pass\n") == ("b",)  # a default reaches `a`
    assert unreached("import sys\ndef a(): pass\ngetattr(sys.modules[__name__], 'x')()\n") == ()
    assert unreached("def a(): pass\nglobals()['a']()\n") == ()
    assert unreached("def a(): pass\nmp.spawn(a, nprocs=2)\n") == ()
    # `model.eval()` is torch's method, not the builtin that runs code by a computed name
    assert unreached("def a(): pass\ndef b(m): m.eval()\nb(None)\n") == ("a",)
    assert unreached("def a(): pass\neval('a()')\n") == ()


def test_private_methods_nothing_in_the_file_calls() -> None:
    """project/methods.py: a private method of a class over `object` that nothing in its module names (blind10:
    Time-Series-Library's zero-shot `_select_optimizer`); any mention of the name keeps it."""
    from gpulint.project.facts import facts_of_text

    def uncalled(text: str) -> tuple[str, ...]:
        return facts_of_text(textwrap.dedent(text) + "\nimport torch\nopt = torch.optim.Adam(m.parameters())\n"
                             ).uncalled_methods

    cls = "class E(object):\n    def _opt(self): pass\n    def _used(self): pass\n    def run(self): self._used()\n"
    assert uncalled(cls) == ("E._opt",)
    assert uncalled(cls + "x = E()\nx.other._opt\n") == ()  # an attribute of that name, on any receiver
    assert uncalled(cls + "getattr(E(), '_opt')()\n") == ()  # its name as a string
    assert uncalled(cls + "getattr(E(), '_o' + k)()\n") == ()  # a computed name: anything may be called
    assert uncalled(cls + "STEPS = ['opt']\n") == ()  # its name without the underscore, as a string
    assert uncalled(cls + "k = '_op'\n") == ()  # a string that begins it (completed at run time)
    assert uncalled(cls + "for n in dir(E): pass\n") == ()  # methods listed by name
    assert uncalled(cls + "class F(E): pass\n") == ()  # a subclass of the module may call it
    assert uncalled(cls.replace("E(object)", "E(nn.Module)")) == ()  # a library base may call hooks by name
    assert uncalled(cls.replace("E(object)", "E(Base)") + "from base import Base\n") == ("E._opt",)  # followed
    assert uncalled(cls.replace("def _opt", "@hook\n    def _opt")) == ()  # decorated: registered somewhere
    assert uncalled(cls.replace("def _opt", "def _repr_html_")) == ()  # a `_hook_` libraries call by name
    assert uncalled(cls.replace("def _opt", "def __opt")) == ()  # not one leading underscore
    assert uncalled(cls.replace("def _opt", "def opt")) == ()  # public: frameworks call those
    facts = facts_of_text(cls.replace("E(object)", "E(Base)") + "from base import Base\nfrom abc import ABC\n"
                          "class G(ABC): pass\nclass H(G, Base): pass\nclass M(nn.Module): pass\n")
    assert facts.plain_classes == {"E": ("Base",), "G": (), "H": ("Base",)}
    assert "_used" in facts.private_attributes and facts.private_strings == ()


_HELPERS = """import torch


def train_model_simple(model, loader, optimizer):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        model.eval()


class GPTModel(torch.nn.Module):
    pass
"""


@pytest.mark.parametrize(("importer", "reported"), [
    # every import of the helper module names other things: its training loop never runs (blind9: the DPO
    # folder of LLMs-from-scratch imports GPTModel from previous_chapters.py and trains with its own loop)
    ("from previous_chapters import GPTModel\n", False),
    ("from previous_chapters import GPTModel, train_model_simple\n", True),
    ("from previous_chapters import train_model_simple as fit\n", True),
    ("import previous_chapters\n", True),  # the module itself: any of its functions may be called
    ("from previous_chapters import *\n", True),
])
def test_a_helper_modules_training_loop_its_importers_do_not_name_never_runs(
        tmp_path: Path, importer: str, reported: bool) -> None:
    write(tmp_path, {"previous_chapters.py": _HELPERS, "dpo.py": importer})
    found = findings(tmp_path, "--select", "GPU001")
    assert (("previous_chapters.py", 7, "GPU001") in found) is reported


def test_a_grad_scaler_in_an_imported_step_is_seen_by_the_optimizer_file() -> None:
    """main.py builds SGD with momentum and hands it, with a scaler, to engine.train_one_epoch, which calls
    scaler.step(optimizer): the scaler drives the optimizer although main.py never imports the GradScaler
    (issue 21's family (b): fused=True there is the skipped-first-step momentum bug)."""
    engine = facts_of_text("def train_one_epoch(model, loader, optimizer, scaler):\n"
                           "    for x in loader:\n        scaler.scale(model(x).sum()).backward()\n"
                           "        scaler.step(optimizer)\n        scaler.update()\n")
    main_py = facts_of_text("import torch\nfrom engine import train_one_epoch\n\n"
                            "opt = torch.optim.SGD([], lr=0.1, momentum=0.9)\n")
    timm = facts_of_text("from timm.utils import NativeScaler\n\nloss_scaler = NativeScaler()\n")
    assert engine is not None and main_py is not None and timm is not None
    assert engine.scaler and timm.scaler and not main_py.scaler
    project = Project(Path("/p"), {"engine.py": engine, "main.py": main_py})
    view = project.view(Path("/p/main.py"))
    assert view is not None and view.scaler_importees and not view.scaler


def test_a_module_that_imports_a_removed_torch_module_caps_the_torch_it_runs_on(tmp_path: Path) -> None:
    """MAE-style util/misc.py imports `torch._six` (gone in torch 2.0): the scripts that import it run only on
    an older torch, where torch.cuda.amp is not deprecated; GPU003 stays silent there."""
    write(tmp_path, {
        "util/misc.py": "import torch\nfrom torch._six import inf\n\nscaler = torch.cuda.amp.GradScaler()\n",
        "main.py": "import torch\nimport util.misc as misc\n\nscaler = torch.cuda.amp.GradScaler()\n",
        "other.py": "import torch\n\nscaler = torch.cuda.amp.GradScaler()\n",
    })
    assert findings(tmp_path, "--select", "GPU003") == [("other.py", 3, "GPU003")]


@pytest.mark.parametrize(("build", "reported"), [
    # the project builds its DCNv2 layer with torch.utils.ffi (gone in 1.0): its model imports the built `_ext`,
    # which no project file is, and the training script never imports the build script (blind9: CenterNet)
    ("import torch\nfrom torch.utils.ffi import create_extension\n\nffi = create_extension('_ext.dcn', "
     "headers=[], sources=[])\nffi.build()\n", False),
    ("import torch.utils.ffi as ffi\n\nffi.create_extension('_ext.dcn', headers=[], sources=[]).build()\n",
     False),
    # a build script of torch 1.0 and later: no ceiling
    ("from torch.utils.cpp_extension import CUDAExtension\n\next = CUDAExtension('dcn', ['dcn.cu'])\n", True),
])
def test_a_project_that_builds_its_extension_with_ffi_runs_on_torch_before_1_0(
        tmp_path: Path, build: str, reported: bool) -> None:
    write(tmp_path, {
        "lib/dcn/build.py": build,
        "lib/dcn/dcn_func.py": "from ._ext import dcn as backend\n",
        "trainer.py": "import torch\n\nmodel = torch.nn.Linear(512, 512).cuda()\n"
                      "optimizer = torch.optim.Adam(model.parameters())\n",
    })
    found = findings(tmp_path, "--select", "GPU201")
    assert (("trainer.py", 4, "GPU201") in found) is reported


@pytest.mark.parametrize(("source", "ceiling"), [
    ("from torch._six import inf\n", (2, 0)),
    # container_abcs left torch._six in 1.9 (fast-autoaugment's vendored condconv.py: sixteenth blind reading)
    ("from torch._six import container_abcs\n", (1, 9)),
    ("from torch._six import inf, container_abcs\n", (1, 9)),
    # torchtext.legacy: torchtext 0.9 to 0.11 only; 0.12 (released with torch 1.11) removed it
    ("from torchtext.legacy.data import Field, BucketIterator\n", (1, 11)),
    ("from torchtext.legacy import data\n", (1, 11)),
    ("from torchtext import legacy\n", (1, 11)),
    ("import torchtext.legacy.datasets as datasets\n", (1, 11)),
    # torchtext's first data API: torchtext 0.9 (torch 1.8) moved these names to torchtext.legacy
    ("from torchtext.data import Field, BucketIterator\n", (1, 8)),
    ("from torchtext.data.field import Field\n", (1, 8)),
    ("from torchtext.datasets import TranslationDataset\n", (1, 8)),
    ("from torchtext.data import Field\nfrom torchtext.legacy import data\n", (1, 8)),  # the lowest one
    # what torchtext still has (torchtext.data itself, its utilities, the new datasets) exists only up to
    # torchtext 0.18, its last release, which pairs with torch 2.3: any torchtext import caps torch at 2.3
    ("import torchtext\n", (2, 4)),
    ("import torchtext.data\nfrom torchtext import data\n", (2, 4)),
    ("from torchtext.data import get_tokenizer\nfrom torchtext.data.utils import get_tokenizer\n", (2, 4)),
    ("from torchtext.data.metrics import bleu_score\n", (2, 4)),
    ("from torchtext.datasets import Multi30k, IMDB, SST2\n", (2, 4)),
    ("from torchtext.vocab import GloVe, build_vocab_from_iterator\n", (2, 4)),
    ("from torchtext.data import Fields\n", (2, 4)),
    ("import torchtext\nfrom torchtext.legacy import data\n", (1, 11)),  # the lowest one
    # not unconditional: a fallback, a branch, a function
    ("try:\n    from torchtext.legacy.data import Field\nexcept ImportError:\n    from torchtext.data import Field\n",
     None),
    ("try:\n    import torchtext\nexcept ImportError:\n    torchtext = None\n", None),
    ("if OLD:\n    from torchtext.data import Field\n", None),
    ("def load():\n    from torchtext.legacy.data import Field\n", None),
])
def test_the_torch_ceiling_of_an_import(source: str, ceiling: Optional[tuple[int, int]]) -> None:
    facts = facts_of_text(source)
    assert facts is not None and facts.torch_ceiling == ceiling


@pytest.mark.parametrize(("source", "ceiling"), [
    # an assertion that admits torch 1.x only: the script stops on torch 2.0 (blind10: pytorch-retinanet)
    ("import torch\nassert torch.__version__.split('.')[0] == '1'\n", (2, 0)),
    ("import torch\nassert int(torch.__version__.split('.')[0]) == 1\n", (2, 0)),
    ("import torch\nassert int(torch.__version__.split('.')[0]) < 2, 'torch 1 only'\n", (2, 0)),
    ("import torch\nassert torch.__version__.startswith('1.')\n", (2, 0)),
    ("import torch\nassert torch.__version__[0] == '1'\n", (2, 0)),
    ("import torch\nassert torch.__version__ < '2'\n", (2, 0)),
    ("import torch as th\nassert '1' == th.__version__.split('.')[0]\n", (2, 0)),
    ("from torch import __version__\nassert not __version__.split('.')[0] != '1'\n", (2, 0)),
    ("import torch\nassert torch.__version__.split('.')[0] == '0'\n", (1, 0)),
    # a guard that stops the program: `if not <test>: raise`, or the negated test
    ("import sys\nimport torch\nif not torch.__version__.startswith('1.'):\n    print('torch 1 only')\n"
     "    sys.exit(1)\n", (2, 0)),
    ("import torch\nif int(torch.__version__.split('.')[0]) >= 2:\n    raise RuntimeError('torch 1 only')\n", (2, 0)),
    # an `if` that branches on the version tests it and refuses nothing
    ("import torch\nif torch.__version__.split('.')[0] == '1':\n    OLD = True\nelse:\n    OLD = False\n", None),
    ("import torch\nif torch.__version__.split('.')[0] == '1':\n    raise RuntimeError('torch 2 only')\n", None),
    # a floor, a minor version, a string comparison of a minor version, a function, other forms: nothing
    ("import torch\nassert torch.__version__ >= '1.4'\n", None),
    ("import torch\nassert torch.__version__ < '1.8'\n", None),
    ("import torch\nassert torch.__version__.split('.')[1] == '4'\n", None),
    ("import torch\nassert torch.__version__.split('.')[0] >= '1'\n", None),
    ("import torch\ndef check():\n    assert torch.__version__.split('.')[0] == '1'\n", None),
    ("from packaging import version\nimport torch\nassert version.parse(torch.__version__) < version.parse('2')\n",
     None),
    ("import numpy\nassert numpy.__version__.split('.')[0] == '1'\n", None),
])
def test_the_torch_ceiling_of_a_version_assertion(source: str, ceiling: Optional[tuple[int, int]]) -> None:
    facts = facts_of_text(source)
    assert facts is not None and facts.torch_ceiling == ceiling and facts.script_ceiling is None


def test_a_version_assertion_in_the_main_block_caps_the_script_not_its_importers(tmp_path: Path) -> None:
    """Run as a script, the `__main__` block's assertion stops it on torch 2: no fused SGD (2.3). Imported, its
    functions run under the importer's torch."""
    facts = facts_of_text("import torch\nif __name__ == '__main__':\n"
                          "    assert torch.__version__.split('.')[0] == '1'\n    main()\n")
    assert facts is not None and facts.torch_ceiling is None and facts.script_ceiling == (2, 0)
    train = ("import torch\n\n\ndef main():\n    model = torch.nn.Linear(512, 512).cuda()\n"
             "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n    for x in loader:\n"
             "        model(x.cuda()).sum().backward()\n        optimizer.step()\n\n\n"
             "if __name__ == '__main__':\n    assert torch.__version__.split('.')[0] == '1'\n    main()\n")
    write(tmp_path / "alone", {"train.py": train})
    assert findings(tmp_path / "alone", "--select", "GPU201") == []
    write(tmp_path / "imported", {"train.py": train, "run.py": "from train import main\n\nmain()\n"})
    assert findings(tmp_path / "imported", "--select", "GPU201") == [("train.py", 6, "GPU201")]


MEMORY_MODEL = """\
import torch
from torch import nn


class Attention(nn.Module):
    def forward(self, h, attn_mask=None):
        score = torch.einsum('ibd,jbd->ijb', h, h)
        if attn_mask is not None:
            score = score.float().masked_fill(attn_mask[:, :, None], -float('inf'))
        return score.softmax(1)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()

    def forward(self, h, dec_attn_mask=None):
        return self.attn(h, attn_mask=dec_attn_mask)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = Layer()
        self.out = nn.Linear(512, 512)  # six tensors: more than GPU201's few-tensor models
        self.gate = nn.Linear(512, 512)
        self.proj = nn.Linear(512, 512)

    def forward(self, h):
        dec_attn_mask = torch.triu(h.new_ones(h.size(0), h.size(0)), diagonal=1).byte()[:, :, None]
        return self.layer(h, dec_attn_mask=dec_attn_mask)
"""


@pytest.mark.parametrize(("source", "ceiling"), [
    # a uint8 mask handed down by keyword, two levels, to masked_fill (blind10: transformer-xl)
    (MEMORY_MODEL, (2, 1)),
    # converted on the way, or made boolean: torch 2.1 takes it
    (MEMORY_MODEL.replace(".byte()", ".bool()"), None),
    (MEMORY_MODEL.replace("        return self.attn(h, attn_mask=dec_attn_mask)",
                          "        dec_attn_mask = dec_attn_mask.bool()\n"
                          "        return self.attn(h, attn_mask=dec_attn_mask)"), None),
    (MEMORY_MODEL.replace("masked_fill(attn_mask[:, :, None]", "masked_fill(attn_mask[:, :, None].bool()"), None),
    # the mask made and used in one function, handed by position, or kept as an attribute
    ("def fill(x):\n    mask = (x > 0).byte()\n    return x.masked_fill_(mask, 0)\n", (2, 1)),
    ("def fill(x, m):\n    return x.masked_fill(m, 0)\n\n\ndef run(x):\n    mask = (x > 0).byte()\n"
     "    return fill(x, mask)\n", (2, 1)),
    ("class A:\n    def __init__(self):\n        self.mask = torch.ones(3, 3).byte()\n\n"
     "    def forward(self, x):\n        return x.masked_fill(self.mask, 0)\n", (2, 1)),
    # a uint8 tensor that is not the mask, or a mask named like one in another function: nothing
    ("def fill(x, m):\n    image = x.byte()\n    return image.masked_fill(m, 0)\n", None),
    ("def fill(x, m):\n    image = x.byte()\n    return torch.masked_fill(image, m, 0)\n", None),
    ("def make(x):\n    mask = (x > 0).byte()\n    return mask\n\n\ndef fill(x, mask):\n"
     "    return x.masked_fill(mask, 0)\n", None),
])
def test_the_torch_ceiling_of_a_uint8_mask(source: str, ceiling: Optional[tuple[int, int]]) -> None:
    """torch 2.1 raises on a uint8 mask in masked_fill (pytorch#96594): a module filling with one runs on 2.0."""
    facts = facts_of_text(source)
    assert facts is not None and facts.torch_ceiling == ceiling


@pytest.mark.parametrize(("convert", "reported"), [(".byte()", False), (".bool()", True)])
def test_a_model_that_fills_with_uint8_masks_caps_the_torch_of_its_trainer(
        tmp_path: Path, convert: str, reported: bool) -> None:
    """The trainer builds the model module's network, whose forward fills with uint8 masks: it runs on torch 2.0
    at most, where fused SGD (2.3) does not exist (blind10: transformer-xl's train.py)."""
    write(tmp_path, {
        "mem_transformer.py": MEMORY_MODEL.replace(".byte()", convert),
        "train.py": "import torch\nfrom mem_transformer import Model\n\nmodel = Model().cuda()\n"
                    "optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\nfor x in loader:\n"
                    "    model(x.cuda()).sum().backward()\n    optimizer.step()\n",
    })
    assert (("train.py", 5, "GPU201") in findings(tmp_path, "--select", "GPU201")) is reported


def test_a_module_that_imports_torchtext_legacy_caps_the_torch_of_its_importers(tmp_path: Path) -> None:
    """A data module built on torchtext.legacy runs only on torch 1.8 to 1.10, and so does the script that
    imports it: no fused Adam (1.13) there."""
    train = ("import torch\nimport data\n\nmodel = torch.nn.Linear(512, 512).cuda()\n"
             "optimizer = torch.optim.Adam(model.parameters())\nfor x in loader:\n"
             "    model(x.cuda()).sum().backward()\n    optimizer.step()\n")
    write(tmp_path, {"data.py": "from torchtext.legacy.data import Field\n\nSRC = Field()\n",
                     "train.py": train, "other.py": train.replace("import data\n", "")})
    assert findings(tmp_path, "--select", "GPU201") == [("other.py", 4, "GPU201")]


def test_a_module_that_reads_its_loss_by_index_caps_the_torch_of_its_importers(tmp_path: Path) -> None:
    """A training helper that reads the loss it calls `.backward()` on as `loss.data[0]` raises from torch 1.0
    on (blind11: LSTNet), and so does the script that imports and runs it: no fused Adam (1.13) there."""
    train = ("import torch\nimport engine\n\nmodel = torch.nn.Linear(512, 512).cuda()\n"
             "optimizer = torch.optim.Adam(model.parameters())\nengine.train(model, optimizer, loader)\n")
    engine = ("import torch.nn as nn\n\ncriterion = nn.MSELoss(size_average=False)\n\n\n"
              "def train(model, optimizer, loader):\n    for x, y in loader:\n"
              "        loss = criterion(model(x.cuda()), y.cuda())\n        loss.backward()\n"
              "        optimizer.step()\n        print(loss.data[0])\n")
    write(tmp_path, {"engine.py": engine, "train.py": train, "other.py": train.replace("import engine\n", "")})
    assert findings(tmp_path, "--select", "GPU201") == [("other.py", 4, "GPU201")]
    write(tmp_path, {"engine.py": engine.replace("loss.data[0]", "loss.item()")})
    assert sorted(findings(tmp_path, "--select", "GPU201")) == [("other.py", 4, "GPU201"), ("train.py", 5, "GPU201")]


# LSTNet's layout (blind11): a helper that builds the optimizer, and the one script that imports it and reads
# its loss as `loss.data[0]` (torch 1.0)
OPTIM_HELPER = """\
import torch.optim as optim


class Optim(object):
    def __init__(self, params, lr):
        self.optimizer = optim.Adam(params, lr=lr)

    def step(self):
        self.optimizer.step()
"""
LEGACY_MAIN = ("import torch\nimport torch.nn as nn\nimport Optim\n\nmodel = nn.Linear(512, 512).cuda()\n"
               "criterion = nn.MSELoss(size_average=False)\noptim = Optim.Optim(model.parameters(), 1e-3)\n"
               "for x, y in loader:\n    loss = criterion(model(x.cuda()), y.cuda())\n    loss.backward()\n"
               "    optim.step()\n    print(loss.data[0])\n")


@pytest.mark.parametrize(("files", "reported"), [
    ({"Optim.py": OPTIM_HELPER, "main.py": LEGACY_MAIN}, False),
    # the script reads its loss the torch 0.4 way: nothing caps the helper
    ({"Optim.py": OPTIM_HELPER, "main.py": LEGACY_MAIN.replace("loss.data[0]", "loss.item()")}, True),
    # another file imports the helper too and carries no ceiling: the helper may run there
    ({"Optim.py": OPTIM_HELPER, "main.py": LEGACY_MAIN, "new.py": "import Optim\n"}, True),
    # the helper runs something itself, or lies in a package others may install
    ({"Optim.py": OPTIM_HELPER + "\nif __name__ == '__main__':\n    Optim([], 1e-3)\n", "main.py": LEGACY_MAIN},
     True),
    ({"lib/__init__.py": "", "lib/Optim.py": OPTIM_HELPER,
      "main.py": LEGACY_MAIN.replace("import Optim", "from lib import Optim")}, True),
])
def test_a_helper_only_legacy_scripts_import_takes_their_torch_ceiling(
        tmp_path: Path, files: dict[str, str], reported: bool) -> None:
    """A module that only defines, beside the scripts, runs only under the files that import it: where each
    of them runs only on a torch older than 1.0, so does the helper, and no fused Adam (1.13) exists there
    (blind11: LSTNet's Optim.py)."""
    write(tmp_path, files)
    helper = "lib/Optim.py" if "lib/Optim.py" in files else "Optim.py"
    assert ((helper, 6, "GPU201") in findings(tmp_path, "--select", "GPU201")) is reported


# ibot's layout (blind22): a fine-tuning package folder (an `__init__.py`, nothing in the repository packages it)
# whose script imports a sibling optimizer factory and a utils.py that imports `torch._six` (gone in 2.0)
TUNE_UTILS = "import torch\nfrom torch._six import inf\n\n\ndef grad_norm(parameters):\n    return inf\n"
TUNE_OPTIM = """\
import torch


def make_optimizer(model, lr):
    return torch.optim.AdamW(model.parameters(), lr=lr)
"""
TUNE_MAIN = ("import torch\nimport tune.utils as utils\nfrom optim_factory import make_optimizer\n\n"
             "model = torch.nn.Linear(512, 512).cuda()\noptimizer = make_optimizer(model, 1e-3)\n"
             "for x, y in loader:\n    loss = (model(x.cuda()) - y.cuda()).pow(2).mean()\n    loss.backward()\n"
             "    print(utils.grad_norm(model.parameters()))\n    optimizer.step()\n")
TUNE = {".git/HEAD": "ref: refs/heads/main\n", "tune/__init__.py": "", "tune/utils.py": TUNE_UTILS,
        "tune/optim_factory.py": TUNE_OPTIM, "tune/finetune.py": TUNE_MAIN}


@pytest.mark.parametrize(("files", "reported"), [
    (TUNE, False),
    # a pyproject.toml of tool settings alone builds nothing
    ({**TUNE, "pyproject.toml": "[tool.ruff]\nline-length = 120\n"}, False),
    # the project ships a distribution: the package may be installed and imported elsewhere, on any torch
    ({**TUNE, "setup.py": "from setuptools import setup, find_packages\nsetup(packages=find_packages())\n"}, True),
    ({**TUNE, "tune/setup.cfg": "[metadata]\nname = tune\n"}, True),
    ({**TUNE, "pyproject.toml": "[project]\nname = 'tune'\n"}, True),
    ({**TUNE, "pyproject.toml": "[tool.poetry]\nname = 'tune'\n"}, True),
    # the script runs on any torch: nothing caps the factory
    ({**TUNE, "tune/utils.py": TUNE_UTILS.replace("from torch._six import inf", "from math import inf")}, True),
    # another file of the package imports the factory and carries no ceiling: it may run there
    ({**TUNE, "tune/sweep.py": "from tune.optim_factory import make_optimizer\n"}, True),
])
def test_a_helper_in_a_package_nothing_ships_takes_its_importers_torch_ceiling(
        tmp_path: Path, files: dict[str, str], reported: bool) -> None:
    """An `__init__.py` alone does not make a library others install: where the project ships no distribution
    (no setup.py, setup.cfg or pyproject.toml that builds one at or above the folder), a module of the package
    that only defines runs only under the project files that import it. ibot's optim_factory.py, imported only by
    a fine-tuning script that imports a utils.py importing `torch._six`, runs on torch < 2.0: no fused AdamW."""
    root = tmp_path / "repo"
    write(root, files)
    if "pyproject.toml" not in files:
        (root / "pyproject.toml").unlink()
    assert (("tune/optim_factory.py", 5, "GPU201") in findings(root, "--select", "GPU201")) is reported


def test_a_model_file_only_a_sampling_script_uses_is_not_trained(tmp_path: Path) -> None:
    """GPU302: the checkpointed model of a release that only samples runs under no_grad; no backward reaches it.
    Once a training script imports it too, the reentrant trap can drop gradients again."""
    model = """\
        from torch import nn
        from torch.utils.checkpoint import checkpoint


        class Decoder(nn.Module):
            def forward(self, x):
                return checkpoint(self.block, x)
        """
    sample = """\
        import torch
        from model import Decoder


        @torch.no_grad()
        def main():
            print(Decoder().cuda().eval()(torch.randn(2, 8).cuda()))


        if __name__ == "__main__":
            main()
        """
    write(tmp_path, {"model.py": model, "sample.py": sample, "lib/model.py": model})
    assert findings(tmp_path, "--select", "GPU302") == [("lib/model.py", 7, "GPU302")]  # no importer: unknown
    write(tmp_path, {"train.py": "import torch\nfrom model import Decoder\n\nmodel = Decoder().cuda()\n"
                                 "opt = torch.optim.Adam(model.parameters())\nmodel(x).sum().backward()\nopt.step()\n"})
    assert [name for name, _, _ in findings(tmp_path, "--select", "GPU302")] == ["lib/model.py", "model.py"]


def test_version_flags_in_every_shape() -> None:
    text = textwrap.dedent("""\
        import torch
        from packaging import version

        major, minor = (int(v) for v in torch.__version__.split(".")[:2])
        PT2 = hasattr(torch, "compile")
        NEW = PT2 and major >= 2


        def new_amp():
            return version.parse(torch.__version__) >= version.parse("2.3")


        def uses_flag(cuda):
            if cuda:
                return NEW
            return False


        def amp_enabled(args):
            return args.amp
        """)
    facts = facts_of_text(text)
    assert facts is not None
    assert facts.version_flags == ("NEW", "PT2", "major", "minor", "new_amp")
    method = facts_of_text("import torch\n\nclass T:\n    def __init__(self):\n"
                           "        self.pt2 = torch.__version__ >= '2'\n")
    assert method is not None and method.version_flags == ("pt2",)


def test_a_model_file_a_framework_trains_is_not_evaluated_only(tmp_path: Path) -> None:
    """A Hugging Face / Lightning script trains without a backward() of its own: its model file stays trained."""
    write(tmp_path, {
        "model.py": "from torch import nn\nfrom torch.utils.checkpoint import checkpoint\n\n\n"
                    "class Decoder(nn.Module):\n    def forward(self, x):\n        return checkpoint(self.block, x)\n",
        "sample.py": "import torch\nfrom model import Decoder\n\nif __name__ == '__main__':\n"
                     "    with torch.no_grad():\n        Decoder()(torch.randn(2, 8))\n",
        "train.py": "from transformers import Trainer\nfrom model import Decoder\n\n"
                    "Trainer(model=Decoder()).train()\n",
    })
    assert findings(tmp_path, "--select", "GPU302") == [("model.py", 7, "GPU302")]


CHECKPOINTED_MODEL = ("from torch import nn\nfrom torch.utils.checkpoint import checkpoint\n\n\n"
                      "class Decoder(nn.Module):\n    def forward(self, x):\n"
                      "        return checkpoint(self.block, x)\n")
# a script that checks the model under no_grad, then fine-tunes it with a trainer class it builds (`TRAINER`)
TRAINER_SCRIPT = """\
import torch
from model import Decoder
IMPORT


if __name__ == "__main__":
    model = Decoder()
    with torch.no_grad():
        model(torch.randn(2, 8))
    TRAINER(model=model).train()
"""


@pytest.mark.parametrize(("files", "trains"), [
    # the project's own subclass of transformers' Trainer, imported from another module (MeZO's OurTrainer, blind17)
    ({"tuner.py": "from transformers import Trainer\n\n\nclass FineTuner(Trainer):\n    pass\n",
      "IMPORT": "from tuner import FineTuner", "TRAINER": "FineTuner"}, True),
    ({"tuner.py": "import transformers\n\n\nclass FineTuner(transformers.Seq2SeqTrainer):\n    pass\n",
      "IMPORT": "import tuner as t", "TRAINER": "t.FineTuner"}, True),
    # through a chain of the project's subclasses, across its modules
    ({"base.py": "from transformers import Trainer\n\n\nclass BaseTuner(Trainer):\n    pass\n",
      "tuner.py": "from base import BaseTuner\n\n\nclass FineTuner(BaseTuner):\n    pass\n",
      "IMPORT": "from tuner import FineTuner as Tuner", "TRAINER": "Tuner"}, True),
    # defined in the script itself, over a trainer the file does not call Trainer
    ({"IMPORT": "import transformers\n\n\nclass FineTuner(transformers.Seq2SeqTrainer):\n    pass\n",
      "TRAINER": "FineTuner"}, True),
    # a class the project calls Trainer itself, not Hugging Face's: nothing says the script trains
    ({"tuner.py": "class Trainer:\n    def train(self):\n        pass\n\n\nclass FineTuner(Trainer):\n    pass\n",
      "IMPORT": "from tuner import FineTuner", "TRAINER": "FineTuner"}, False),
    ({"trainers/__init__.py": "", "trainers/core.py": "class Trainer:\n    pass\n",
      "tuner.py": "from trainers.core import Trainer\n\n\nclass FineTuner(Trainer):\n    pass\n",
      "IMPORT": "from tuner import FineTuner", "TRAINER": "FineTuner"}, False),
])
def test_a_project_subclass_of_hf_trainer_trains(tmp_path: Path, files: dict[str, str], trains: bool) -> None:
    """A script that builds the project's own subclass of transformers' Trainer fine-tunes as Trainer does: it may
    train, so it is no inference script and the model it builds is not evaluated only (GPU302 stays). A subclass
    of a class merely named Trainer says nothing of the kind."""
    files = dict(files)
    script = TRAINER_SCRIPT.replace("IMPORT", files.pop("IMPORT")).replace("TRAINER", files.pop("TRAINER"))
    write(tmp_path, {"model.py": CHECKPOINTED_MODEL, "run.py": script, **files})
    assert findings(tmp_path, "--select", "GPU302") == ([("model.py", 7, "GPU302")] if trains else [])
    facts = {p.relative_to(tmp_path).as_posix(): facts_of_text(p.read_text(encoding="utf-8"))
             for p in tmp_path.rglob("*.py")}
    view = Project(tmp_path, {k: v for k, v in facts.items() if v is not None}).view(tmp_path / "run.py")
    assert view is not None and view.may_train == trains and view.inference_script == (not trains)


def test_hf_trainer_classes_of_a_file() -> None:
    """Subclasses of Hugging Face's trainers, through the imports and the file's own subclasses of them; a class
    the file calls Trainer itself is none, nor are its subclasses. Building one makes the file one that may train."""
    facts = facts_of_text(textwrap.dedent("""\
        import transformers as hf
        from trl import SFTTrainer


        class Trainer:
            pass


        class Mine(Trainer):
            pass


        class Tuner(hf.Seq2SeqTrainer):
            pass


        class Deeper(Tuner):
            pass


        class Chat(SFTTrainer):
            pass
        """))
    assert facts is not None and facts.hf_trainers == ("Chat", "Deeper", "Tuner")
    own = facts_of_text("class Trainer:\n    pass\n\n\nclass Mine(Trainer):\n    pass\n\n\nMine().run()\n")
    built = facts_of_text("import torch\nimport transformers\n\n\nclass Tuner(transformers.Seq2SeqTrainer):\n"
                          "    pass\n\n\nwith torch.no_grad():\n    Tuner(model=m).evaluate()\n")
    assert own is not None and own.hf_trainers == ()
    assert built is not None and built.may_train


# ---------------------------------------------------------------------------------------------
# a fused-attention option off by default (GPU403): the values the project gives it

FLASH_MODEL = """\
import math

import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim=64, flash=False):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.flash = flash

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if self.flash:
            return F.scaled_dot_product_attention(q, k, v)
        att = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
        return att @ v
"""
FLASH_TRAIN = """\
import torch
from model import Attention

model = Attention({arguments}).cuda()
optimizer = torch.optim.AdamW(model.parameters())
for x in loader:
    model(x.cuda()).sum().backward()
    optimizer.step()
"""


def test_a_fused_attention_option_no_caller_turns_on(tmp_path: Path) -> None:
    write(tmp_path, {"model.py": FLASH_MODEL, "train.py": FLASH_TRAIN.format(arguments="dim=64")})
    assert findings(tmp_path, "--select", "GPU403") == [("model.py", 8, "GPU403")]
    # another script turns it on: the fused branch is what that one trains
    (tmp_path / "train_fast.py").write_text(FLASH_TRAIN.format(arguments="flash=True"), encoding="utf-8")
    assert findings(tmp_path, "--select", "GPU403") == []
    (tmp_path / "train_fast.py").write_text(FLASH_TRAIN.format(arguments="flash=args.flash"), encoding="utf-8")
    assert findings(tmp_path, "--select", "GPU403") == []  # unknown: silent


def test_a_fused_attention_option_nothing_constructs_where_gpulint_sees_it(tmp_path: Path) -> None:
    """A model built by a registry or a config system (Hydra's `instantiate`): its options are unknown."""
    write(tmp_path, {"model.py": FLASH_MODEL, "train.py": FLASH_TRAIN.replace(
        "Attention({arguments})", "REGISTRY[name](**cfg)").replace("from model import Attention",
                                                                    "from model import Attention\n"
                                                                    "REGISTRY = {'attn': Attention}")})
    assert findings(tmp_path, "--select", "GPU403") == []


def test_a_config_field_set_in_a_module_the_training_script_imports(tmp_path: Path) -> None:
    model = FLASH_MODEL.replace("def __init__(self, dim=64, flash=False):", "def __init__(self, cfg, dim=64):") \
        .replace("self.flash = flash", "self.flash = cfg.use_flash_attn")
    config = "from dataclasses import dataclass\n\n\n@dataclass\nclass Cfg:\n    use_flash_attn: bool = False\n"
    write(tmp_path, {"model.py": model, "config.py": config,
                     "train.py": FLASH_TRAIN.format(arguments="Cfg()").replace(
                         "from model import Attention", "from model import Attention\nfrom config import Cfg")})
    assert findings(tmp_path, "--select", "GPU403") == [("model.py", 11, "GPU403")]
    (tmp_path / "presets.py").write_text("from config import Cfg\n\nFAST = Cfg(use_flash_attn=True)\n",
                                         encoding="utf-8")
    (tmp_path / "train.py").write_text(FLASH_TRAIN.format(arguments="presets.FAST").replace(
        "from model import Attention", "from model import Attention\nimport presets"), encoding="utf-8")
    assert findings(tmp_path, "--select", "GPU403") == []  # presets.py, which the training script imports


def test_a_fused_attention_option_in_test_code_is_silent(tmp_path: Path) -> None:
    write(tmp_path, {"tests/test_model.py": FLASH_MODEL + "\n\n" + FLASH_TRAIN.format(arguments="").replace(
        "from model import Attention\n", "")})
    assert findings(tmp_path, "--select", "GPU403") == []
    assert findings(tmp_path, "--select", "GPU403", "--config", str(_lint_tests(tmp_path))) == [
        ("tests/test_model.py", 8, "GPU403")]


def _lint_tests(root: Path) -> Path:
    path = root.parent / "lint-tests.toml"
    path.write_text("lint-tests = true\n", encoding="utf-8")
    return path


CKPT_MODEL = """\
import torch.utils.checkpoint
from torch import nn


class Encoder(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = layers
        self.gradient_checkpointing = False

    def forward(self, x):
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                x = torch.utils.checkpoint.checkpoint(layer, x)
            else:
                x = layer(x)
        return x
"""
CKPT_TRAIN = """\
import torch
from model import Encoder

model = Encoder(build_layers()).cuda()
{switch}
optimizer = torch.optim.AdamW(model.parameters(), fused=True)
for x in loader:
    model(x.cuda()).sum().backward()
    optimizer.step()
"""


@pytest.mark.parametrize("switch, reported", [
    ("", False),  # nothing turns the flag on: the checkpoint branch cannot run
    ("model.gradient_checkpointing = False", False),
    ("model.gradient_checkpointing = True", True),
    ("model.gradient_checkpointing = args.ckpt", True),  # unknown: it may run
    ("setattr(model, 'gradient_checkpointing', True)", True),
    ("model.gradient_checkpointing_enable()", True),  # Hugging Face's switch turns every module's flag on
    # a subclass elsewhere turns its base's flag on
    ("class Big(Encoder):\n    def __init__(self, layers):\n        super().__init__(layers)\n"
     "        self.gradient_checkpointing = True\n", True),
    ("class Big(Encoder):\n    gradient_checkpointing = True\n", True),
])
def test_a_checkpointing_flag_set_by_the_training_script(tmp_path: Path, switch: str, reported: bool) -> None:
    write(tmp_path, {"model.py": CKPT_MODEL, "train.py": CKPT_TRAIN.format(switch=switch)})
    found = [f for f in findings(tmp_path, "--select", "GPU302") if f[0] == "model.py"]
    assert found == ([("model.py", 14, "GPU302")] if reported else [])


HEAD_MODULE = """\
from torch import nn


class RegLog(nn.Module):
    def __init__(self, num_labels):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.linear = nn.Linear(2048, num_labels)

    def forward(self, x):
        return self.linear(self.pool(x).flatten(1))
"""


def test_an_imported_head_module_is_a_handful_of_tensors(tmp_path: Path) -> None:
    train = ("import torch\nfrom heads import RegLog\n\n\ndef main(trunk, loader):\n"
             "    head = RegLog(1000).cuda()\n"
             "    optimizer = torch.optim.SGD(head.parameters(), lr=0.1, momentum=0.9)\n"
             "    for x, y in loader:\n"
             "        with torch.no_grad():\n"
             "            features = trunk(x.cuda())\n"
             "        head(features).sum().backward()\n"
             "        optimizer.step()\n\n\nmain(trunk, loader)\n")  # a function nothing calls never runs
    write(tmp_path, {"heads.py": HEAD_MODULE, "train.py": train})
    assert findings(tmp_path, "--select", "GPU201") == []
    deeper = HEAD_MODULE.replace("        self.linear = nn.Linear(2048, num_labels)\n",
                                 "        self.hidden = nn.Linear(2048, 2048)\n"
                                 "        self.mid = nn.Linear(2048, 2048)\n"
                                 "        self.linear = nn.Linear(2048, num_labels)\n")
    (tmp_path / "heads.py").write_text(deeper, encoding="utf-8")  # three Linear layers: an MLP that trains
    assert findings(tmp_path, "--select", "GPU201") == [("train.py", 7, "GPU201")]


_SEGMENTATION_LOADER = """from PIL import Image
from torch.utils import data
from torchvision import transforms as T


class ImageFolder(data.Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __getitem__(self, index):
        return T.ToTensor()(Image.open(self.paths[index]))

    def __len__(self):
        return len(self.paths)


def get_loader(paths, batch_size, num_workers=2):
    dataset = ImageFolder(paths)
    return data.DataLoader(dataset=dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers)
"""

_SOLVER = """import torch


class Solver(object):
    def __init__(self, config, train_loader, valid_loader):
        self.train_loader = train_loader
        self.valid_loader = valid_loader
        self.device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')

    def train(self, model, optimizer):
        for i, (images, masks) in enumerate(self.train_loader):
            images = images.{move}
            loss = model(images).mean()
            loss.backward()
            optimizer.step()
"""


@pytest.mark.parametrize(("move", "reported"), [("to(self.device)", True), ("float()", False)])
def test_a_loader_handed_to_an_imported_class_is_followed_into_its_methods(
        tmp_path: Path, move: str, reported: bool) -> None:
    """main.py hands the loader `get_loader()` returns to `Solver(...)`, whose constructor keeps it and whose
    `train()` copies its batches to `self.device`, a CUDA device (blind9: LeeJunHyun/Image_Segmentation)."""
    write(tmp_path, {
        "data_loader.py": _SEGMENTATION_LOADER,
        "solver.py": _SOLVER.replace("{move}", move),
        "main.py": "from data_loader import get_loader\nfrom solver import Solver\n\n\ndef main(config):\n"
                   "    train_loader = get_loader(config.train, 4)\n    valid_loader = get_loader(config.valid, 4)\n"
                   "    solver = Solver(config, train_loader, valid_loader)\n    solver.train(None, None)\n",
    })
    found = findings(tmp_path, "--select", "GPU101")
    assert (("data_loader.py", 19, "GPU101") in found) is reported


_FEATURE_DATASET = """import h5py
import numpy as np
import torch
from torch.utils.data import Dataset


class RegionFeatures(Dataset):
    def __init__(self, path, labels):
        with h5py.File(path, "r") as hf:
            self.features = np.array(hf.get("region_features"))
        self.features = torch.from_numpy(self.features)
        self.labels = labels

    def __getitem__(self, index):
        return self.features[index], self.labels[index]

    def __len__(self):
        return len(self.labels)
"""

_FEATURE_TRAINER = """import torch


def evaluate(model, loader):
    for v, a in loader:
        model(v.{move})


def {name}(model, train_loader, eval_loader, optimizer):
    for i, (v, a) in enumerate(train_loader):
        loss = torch.nn.functional.mse_loss(model(v.{move}), a.{move})
        loss.backward()
        optimizer.step()
    evaluate(model, eval_loader)
"""

_FEATURE_MAIN = """import torch
from torch.utils.data import DataLoader

from data import RegionFeatures

if __name__ == "__main__":
    if torch.cuda.device_count() > 1:
        from train import train
    else:
        from train_small import train
    train_loader = DataLoader(RegionFeatures("train.h5", []), 256, shuffle=True, num_workers=2)
    eval_loader = DataLoader(RegionFeatures("val.h5", []), 256, num_workers=2)
    train(torch.nn.Linear(2048, 10), train_loader, eval_loader, None)
"""


@pytest.mark.parametrize(("small", "reported"), [
    ("cuda()", True),  # both imported functions copy the batches to CUDA
    ("float()", False),  # one of them does not: which one runs is unknown
    ("missing", False),  # one import binds a name the module does not define as such a function
])
def test_a_loader_handed_to_an_imported_function_is_followed_into_its_loops(
        tmp_path: Path, small: str, reported: bool) -> None:
    """main.py builds the loaders of an HDF5 feature dataset and hands them to `train(...)`, imported from one of two
    project modules on two branches, whose loop (and `evaluate()` it hands the second loader to) copies the
    batches with `.cuda()` (blind24: jnhwkim/ban-vqa). Every import binding the name must lead to such a copy."""
    small_trainer = _FEATURE_TRAINER.replace("{name}", "train").replace("{move}", small)
    if small == "missing":
        small_trainer = _FEATURE_TRAINER.replace("{name}", "fit").replace("{move}", "cuda()") + "\ntrain = fit\n"
    write(tmp_path, {
        "data.py": _FEATURE_DATASET,
        "train.py": _FEATURE_TRAINER.replace("{name}", "train").replace("{move}", "cuda()"),
        "train_small.py": small_trainer,
        "main.py": _FEATURE_MAIN,
    })
    found = findings(tmp_path, "--select", "GPU101")
    assert (("main.py", 11, "GPU101") in found) is reported
    assert (("main.py", 12, "GPU101") in found) is reported


def test_items_of_an_array_read_up_front_with_numpy_are_not_judged_bulk(tmp_path: Path) -> None:
    """Only HDF5 reads up front count as decoded arrays: a tensor `np.load` reads may be token ids (undecided)."""
    write(tmp_path, {
        "data.py": _FEATURE_DATASET.replace("import h5py\n", "").replace(
            'with h5py.File(path, "r") as hf:\n            self.features = np.array(hf.get("region_features"))',
            "self.features = np.load(path)"),
        "train.py": _FEATURE_TRAINER.replace("{name}", "train").replace("{move}", "cuda()"),
        "train_small.py": _FEATURE_TRAINER.replace("{name}", "train").replace("{move}", "cuda()"),
        "main.py": _FEATURE_MAIN,
    })
    assert not [f for f in findings(tmp_path, "--select", "GPU101") if f[0] == "main.py"]


@pytest.mark.parametrize(("engine_step", "expected"), [
    ("loss.backward()\n        optimizer.step()", ["no fix"]),  # GPU001's fix adds a GradScaler around this step
    ("scaler.scale(loss).backward()\n        scaler.step(optimizer)", []),  # a scaler already: not reported
])
def test_fused_sgd_is_not_offered_when_the_step_it_feeds_may_gain_a_scaler_in_an_imported_module(
        tmp_path: Path, engine_step: str, expected: list[str]) -> None:
    """main.py builds SGD with momentum and hands it to engine.train(), whose step GPU001's float16 fix scales in
    the same fix run: fused SGD with momentum under a GradScaler mistrains, so GPU201 reports without a fix
    (blind9's HRNet reader saw the two fixes combine across files)."""
    write(tmp_path, {
        "engine.py": "import torch\n\n\ndef train(model, loader, optimizer, scaler=None):\n    for x, y in loader:\n"
                     "        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())\n"
                     f"        {engine_step}\n",
        "main.py": "import torch\nfrom engine import train\n\nmodel = torch.nn.Linear(512, 512).cuda()\n"
                   "optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
                   "train(model, [], optimizer)\n",
    })
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "json", "--select", "GPU001,GPU201",
                                       str(tmp_path)])
    found = [f for f in json.loads(result.stdout) if f["filename"].endswith("main.py") and f["code"] == "GPU201"]
    assert ["no fix" if f["fix"] is None else "fix" for f in found] == expected


def test_a_sibling_trainers_autocast_says_nothing_about_this_step(tmp_path: Path) -> None:
    """Time-Series-Library's shape (blind10): run.py imports two experiment classes; the long-term one autocasts
    its step, the short-term one never does. The caller importing the first is no evidence that the second runs
    in 16 bits; an autocast helper module the caller imports still is."""
    step = """\
        import torch

        class {name}:
            def train(self, model, loader, optimizer):
                for x, y in loader:
                    {scope}loss = model(x.cuda()).sub(y.cuda()).pow(2).mean()
                    loss.backward()
                    optimizer.step()
        """
    write(tmp_path, {
        "exp_long.py": step.format(name="Long", scope="with torch.autocast('cuda'):\n                        "),
        "exp_short.py": step.format(name="Short", scope=""),
        "run.py": """\
            from exp_long import Long
            from exp_short import Short

            Short().train(None, [], None)
            Long().train(None, [], None)
            """,
    })
    found = findings(tmp_path, "--select", "GPU001")
    assert [(name, row) for name, row, _ in found] == [("exp_short.py", 7)]
    write(tmp_path, {
        "amp_helper.py": """\
            import torch

            def context():
                return torch.autocast("cuda", dtype=torch.bfloat16)
            """,
        "run.py": """\
            from amp_helper import context
            from exp_short import Short

            with context():
                Short().train(None, [], None)
            """,
    })
    (tmp_path / "exp_long.py").unlink()
    assert findings(tmp_path, "--select", "GPU001") == []


# ---------------------------------------------------------------------------------------------
# blind11 (KAIR): the device a project base class binds, and a network a factory imports inside a function

BASE_MODEL = """\
import torch


class ModelBase:
    def __init__(self, opt):
        self.opt = opt
        self.device = {device}
"""

PLAIN_MODEL = """\
import torch
from torch.optim import Adam

from models.model_base import ModelBase


class ModelPlain(ModelBase):
    def __init__(self, opt, net):
        super().__init__(opt)
        self.net = net.to(self.device)
        self.lossfn = torch.nn.L1Loss()
        self.optimizer = Adam(self.net.parameters(), lr=1e-4)

    def feed_data(self, data):
        self.L = data["L"].to(self.device)
        self.H = data["H"].to(self.device)

    def optimize_parameters(self):
        self.optimizer.zero_grad()
        loss = self.lossfn(self.net(self.L), self.H)
        loss.backward()
        self.optimizer.step()
"""

DERIVED_MODEL = """\
import torch

from models.model_plain import ModelPlain


class ModelVRT(ModelPlain):
    def __init__(self, opt, net):
        super().__init__(opt, net)
{rebind}
    def feed_data(self, data):
        self.L = data["L"].to(self.device)
        self.H = data["H"].to(self.device)

    def optimize_parameters(self):
        self.optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(self.net(self.L), self.H)
        loss.backward()
        self.optimizer.step()
"""

CUDA_DEVICE = "torch.device('cuda' if opt['gpu_ids'] is not None else 'cpu')"


@pytest.mark.parametrize("device, rebind, reported", [
    (CUDA_DEVICE, "", [("models/model_plain.py", 21, "GPU001"), ("models/model_vrt.py", 17, "GPU001")]),
    # the middle class binds the device itself, to something gpulint cannot read: only the first step is shown
    (CUDA_DEVICE, "        self.device = torch.device(opt['device'])\n", [("models/model_plain.py", 21, "GPU001")]),
    ("torch.device(opt['device'])", "", []),  # the base names no CUDA: the device stays unknown
])
def test_gpu001_counts_the_cuda_device_of_a_project_base_class(tmp_path: Path, device: str, rebind: str,
                                                               reported: list[tuple[str, int, str]]) -> None:
    """KAIR models/model_plain.py:167 (blind11, missed): the step copies to `self.device`, which ModelBase (another
    module, imported with `from models.model_base import ModelBase`) binds to CUDA; ModelVRT, one module further
    down, inherits it through ModelPlain."""
    write(tmp_path, {"models/model_base.py": BASE_MODEL.format(device=device), "models/model_plain.py": PLAIN_MODEL,
                     "models/model_vrt.py": DERIVED_MODEL.format(rebind=rebind)})
    assert findings(tmp_path, "--select", "GPU001") == reported


def test_self_device_facts() -> None:
    base = facts_of_text(BASE_MODEL.format(device=CUDA_DEVICE) + "\n\nclass Other:\n    def __init__(self, d):\n"
                         "        self.device = d\n        self.name = 'cuda'\n")
    assert base is not None and base.self_devices == {"ModelBase": {"device": True}, "Other": {"device": False}}
    mixed = facts_of_text(BASE_MODEL.format(device=CUDA_DEVICE) + "\n\nclass Cpu:\n    def __init__(self):\n"
                          "        self.device = 'cpu'\n\n\nclass Both(ModelBase, Cpu):\n    pass\n\n\n"
                          "class Mid(ModelBase):\n    pass\n")
    assert mixed is not None and mixed.self_devices == {"Both": {"device": False}, "Cpu": {"device": False},
                                                        "Mid": {"device": True}, "ModelBase": {"device": True}}
    plain = facts_of_text(PLAIN_MODEL)
    assert plain is not None and plain.self_device_copies == {"ModelPlain": ("device",)}
    bound_here = facts_of_text(PLAIN_MODEL + "\n\nclass Local:\n    def __init__(self):\n        self.device = 'cpu'\n")
    assert bound_here is not None and bound_here.self_device_copies == {}  # a class of the file binds it


# blind20 (BasicSR): the device bound by a base class several modules up, the step's copies made by a base

ENGINE_CORE = """\
import torch


class Engine:
    def __init__(self, cfg):
        self.cfg = cfg
        self.device = {device}
"""

ENGINE_PAIRED = """\
import torch

from .core import Engine


class Paired(Engine):
    def __init__(self, cfg, net):
        super().__init__(cfg)
        self.net = net.to(self.device)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=2e-4)

    def feed(self, batch):
        self.low = batch["low"].to(self.device)
        self.high = batch["high"].to(self.device)

    def step(self):
        self.opt.zero_grad()
        loss = torch.nn.functional.l1_loss(self.net(self.low), self.high)
        loss.backward()
        self.opt.step()
"""

ENGINE_ADVERSARIAL = """\
import torch

from .{parent_module} import {parent}


class {name}({parent}{extra}):
    def step(self):
        self.opt.zero_grad()
        loss = torch.nn.functional.mse_loss(self.net(self.low), self.high)
        loss.backward()
        self.opt.step()
"""


def _engine(device: str = CUDA_DEVICE, extra: str = "") -> dict[str, str]:
    """core.Engine <- paired.Paired <- adversarial.Adversarial <- relativistic.Relativistic <- video.Video: the
    last three copy nothing themselves, relative imports throughout."""
    files = {"engine/__init__.py": "", "engine/core.py": ENGINE_CORE.format(device=device),
             "engine/paired.py": ENGINE_PAIRED}
    chain = [("paired", "Paired", "adversarial", "Adversarial"), ("adversarial", "Adversarial", "relativistic",
                                                                   "Relativistic"),
             ("relativistic", "Relativistic", "video", "Video")]
    for parent_module, parent, module, name in chain:
        files[f"engine/{module}.py"] = ENGINE_ADVERSARIAL.format(
            parent_module=parent_module, parent=parent, name=name, extra=extra if module == "adversarial" else "")
    return files


def test_gpu001_follows_a_project_base_chain_to_any_depth(tmp_path: Path) -> None:
    """BasicSR's esrgan_model.py:47 and video_recurrent_gan_model.py:145 (blind20, missed): the step's class
    reaches the class binding `self.device` to CUDA three and four modules up, through relative imports, and the
    copies to it are made by a base's methods (`feed_data`), none in the file of the step."""
    write(tmp_path, _engine())
    assert findings(tmp_path, "--select", "GPU001") == [
        ("engine/adversarial.py", 10, "GPU001"), ("engine/paired.py", 19, "GPU001"),
        ("engine/relativistic.py", 10, "GPU001"), ("engine/video.py", 10, "GPU001")]


@pytest.mark.parametrize("device, extra", [
    ("torch.device(cfg['device'])", ""),  # the base names no CUDA
    (CUDA_DEVICE, ", Mixin"),  # a base of unknown origin (imported by module) on the way up: it may bind the device
    (CUDA_DEVICE, ", nn.Module"),  # a library base
])
def test_gpu001_base_chain_stays_silent_without_a_cuda_binding_of_known_origin(tmp_path: Path, device: str,
                                                                               extra: str) -> None:
    files = _engine(device, extra)
    files["engine/adversarial.py"] = files["engine/adversarial.py"].replace(
        "import torch\n", "import torch\nfrom torch import nn\n\nfrom .mixins import Mixin\n" if "Mixin" in extra
        else "import torch\nfrom torch import nn\n")
    files["engine/mixins.py"] = "import settings\n\n\nclass Mixin(settings.Base):\n    pass\n"
    write(tmp_path, files)
    found = findings(tmp_path, "--select", "GPU001")
    assert [f for f in found if f[0] != "engine/paired.py"] == []


@pytest.mark.parametrize("core, reported", [
    # the device is bound by a base defined beside the imported class (`class Engine(Root)` in core.py)
    (ENGINE_CORE.format(device=CUDA_DEVICE).replace("class Engine:", "class Root:") + "\n\nclass Engine(Root):\n"
     "    pass\n", True),
    # a base beside it binds the device to the CPU, another, imported, to CUDA: the CPU binding is seen
    ("import torch\n\nfrom .root import Root\n\n\nclass Local:\n    def __init__(self):\n"
     "        self.device = torch.device('cpu')\n\n\nclass Engine(Local, Root):\n    pass\n", False),
])
def test_gpu001_base_chain_reads_the_bases_defined_beside_a_class(tmp_path: Path, core: str, reported: bool) -> None:
    files = _engine()
    files["engine/core.py"] = core
    files["engine/root.py"] = ENGINE_CORE.format(device=CUDA_DEVICE).replace("class Engine:", "class Root:")
    write(tmp_path, files)
    found = findings(tmp_path, "--select", "GPU001")
    assert found == ([("engine/adversarial.py", 10, "GPU001"), ("engine/paired.py", 19, "GPU001"),
                      ("engine/relativistic.py", 10, "GPU001"), ("engine/video.py", 10, "GPU001")] if reported else [])


def test_base_chain_through_an_import_cycle_ends(tmp_path: Path) -> None:
    """Two modules whose classes name each other as bases (code that would not import): no answer, no loop."""
    write(tmp_path, {
        "a.py": "import torch\nfrom b import B\n\n\nclass A(B):\n    def feed(self, x):\n"
                "        return x.to(self.device)\n",
        "b.py": "import torch\nfrom a import A\n\n\nclass B(A):\n    def step(self, x, opt):\n"
                "        opt.zero_grad()\n        self.net(x.to(self.device)).sum().backward()\n        opt.step()\n",
    })
    assert findings(tmp_path, "--select", "GPU001") == []


# blind20 (deep_gcns_torch): `data.to(opt.device)` for `opt = OptInit().get_args()`, the options a project
# module builds and returns with their device bound to CUDA

OPTIONS_CLASS = """\
import argparse

import torch


class Options:
    def __init__(self):
        parser = argparse.ArgumentParser()
        parser.add_argument("--cpu", action="store_true")
        parser.add_argument("--lr", type=float, default=1e-3)
        args = parser.parse_args()
{device_lines}
        self.args = args

    def get_args(self):
        return self.args
"""

OPTIONS_FUNCTION = """\
import argparse

import torch


def parse_options():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=1e-3)
{option}    opts = parser.parse_args()
{device_lines}
    return opts
"""

POINT_TRAIN = """\
import torch
from torch import nn

{import_line}
from network import PointNet


def main():
    opt = {call}
    model = PointNet(opt).to(opt.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=opt.lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for points, label in loader_of(opt):
        points, label = points.to(opt.device), label.to(opt.device)
        optimizer.zero_grad()
        loss = criterion(model(points), label)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""

POINT_NET = """\
from torch import nn


class PointNet(nn.Module):
    def __init__(self, opt):
        super().__init__()
        self.head = nn.Linear(1024, 1024)

    def forward(self, x):
        return self.head(x)
"""

CUDA_OPT = "torch.device('cuda' if not args.cpu and torch.cuda.is_available() else 'cpu')"


@pytest.mark.parametrize("files, reported", [
    # a method returning `self.args`, the device bound on the local it keeps (deep_gcns' OptInit)
    ({"options.py": OPTIONS_CLASS.format(device_lines=f"        args.device = {CUDA_OPT}"),
      "train.py": POINT_TRAIN.format(import_line="from options import Options", call="Options().get_args()")}, True),
    # bound on `self.args` itself, the module imported whole
    ({"options.py": OPTIONS_CLASS.format(device_lines=f"        self.args = args\n"
                                                     f"        self.args.device = {CUDA_OPT}"),
      "train.py": POINT_TRAIN.format(import_line="import options as O", call="O.Options().get_args()")}, True),
    # a module-level function returning the parsed options
    ({"config.py": OPTIONS_FUNCTION.format(option="", device_lines="    opts.device = 'cuda:0' if torch.cuda."
                                                                   "is_available() else 'cpu'"),
      "train.py": POINT_TRAIN.format(import_line="from config import parse_options", call="parse_options()")},
     True),
    # the options' device is the CPU only
    ({"options.py": OPTIONS_CLASS.format(device_lines="        args.device = torch.device('cpu')"),
      "train.py": POINT_TRAIN.format(import_line="from options import Options", call="Options().get_args()")}, False),
    # one branch binds it to the CPU
    ({"options.py": OPTIONS_CLASS.format(device_lines="        if args.cpu:\n            args.device = torch.device("
                                                     "'cpu')\n        else:\n            args.device = "
                                                     "torch.device('cuda')"),
      "train.py": POINT_TRAIN.format(import_line="from options import Options", call="Options().get_args()")}, False),
    # an option `--device` whose default is the CPU, overridden only sometimes
    ({"config.py": OPTIONS_FUNCTION.format(option="    parser.add_argument('--device', default='cpu')\n",
                                           device_lines="    if torch.cuda.is_available():\n"
                                                        "        opts.device = 'cuda'"),
      "train.py": POINT_TRAIN.format(import_line="from config import parse_options", call="parse_options()")},
     False),
    # the script rebinds the device itself
    ({"options.py": OPTIONS_CLASS.format(device_lines=f"        args.device = {CUDA_OPT}"),
      "train.py": POINT_TRAIN.format(import_line="from options import Options", call="Options().get_args()")
      .replace("    model = PointNet", "    opt.device = torch.device(opt.device_name)\n    model = PointNet")},
     False),
    # a callee gpulint cannot resolve (a library's)
    ({"train.py": POINT_TRAIN.format(import_line="from hydra_zen import parse_options", call="parse_options()")},
     False),
])
def test_gpu001_counts_the_cuda_device_of_options_a_project_function_returns(
        tmp_path: Path, files: dict[str, str], reported: bool) -> None:
    """deep_gcns_torch's examples (blind20, missed): the loop copies to `opt.device`, and `opt` is what
    `OptInit().get_args()` of the config module it imports returns, whose device that module binds to CUDA."""
    files = {"network.py": POINT_NET, **files}
    write(tmp_path, files)
    step = ("train.py", 17, "GPU001")
    assert findings(tmp_path, "--select", "GPU001") == ([step] if reported else [])


def test_gpu001_options_through_a_relative_import(tmp_path: Path) -> None:
    """The same options, the training module of a package importing them with `from .options import Options`."""
    write(tmp_path, {"pkg/__init__.py": "", "pkg/network.py": POINT_NET,
                     "pkg/options.py": OPTIONS_CLASS.format(device_lines=f"        args.device = {CUDA_OPT}"),
                     "pkg/train.py": POINT_TRAIN.format(import_line="from .options import Options",
                                                        call="Options().get_args()")
                     .replace("from network import", "from .network import")})
    assert findings(tmp_path, "--select", "GPU001") == [("pkg/train.py", 17, "GPU001")]


def test_returned_device_facts() -> None:
    options = facts_of_text(OPTIONS_CLASS.format(device_lines=f"        args.device = {CUDA_OPT}"))
    assert options is not None and options.cuda_returns == ("Options.get_args:device",)
    config = facts_of_text(OPTIONS_FUNCTION.format(option="", device_lines="    opts.device = 'cuda'"))
    assert config is not None and config.cuda_returns == ("parse_options:device",)
    train = facts_of_text(POINT_TRAIN.format(import_line="from options import Options", call="Options().get_args()"))
    assert train is not None and train.returned_device_targets == {"opt.device": ("Options.get_args",)}
    rebound = facts_of_text(POINT_TRAIN.format(import_line="from options import Options", call="Options().get_args()")
                            + "\n\nfor opt in range(3):\n    pass\n")
    assert rebound is not None and rebound.returned_device_targets == {}


FACTORY = """\
def define_G(opt):
    if opt["net"] == "swinir":
        from models.network_swinir import SwinIR as net
    else:
        from models.network_other import Other as net
    return net()
"""

SWINIR = """\
from torch import nn
import torch.utils.checkpoint as checkpoint


class SwinIR(nn.Module):
    def __init__(self, blocks, use_checkpoint=False):
        super().__init__()
        self.blocks = blocks
        self.use_checkpoint = use_checkpoint

    def forward(self, x):
        for blk in self.blocks:
            x = checkpoint.checkpoint(blk, x) if self.use_checkpoint else blk(x)
        return x
"""

TEST_SCRIPT = """\
import torch
from models.network_swinir import SwinIR as net

if __name__ == "__main__":
    with torch.no_grad():
        print(net([])(torch.randn(1, 3)))
"""

TRAIN_SCRIPT = """\
from models.select_network import define_G

net = define_G({"net": "swinir"})
optimizer = torch.optim.Adam(net.parameters())
for x, y in loader:
    net(x).sub(y).pow(2).mean().backward()
    optimizer.step()
"""


@pytest.mark.parametrize("train, reported", [(True, [("models/network_swinir.py", 13, "GPU302")]), (False, [])])
def test_a_network_a_factory_imports_inside_a_function_is_trained(tmp_path: Path, train: bool,
                                                                   reported: list[tuple[str, int, str]]) -> None:
    """KAIR models/network_swinir.py:400 (blind11, missed): the only module-level importer of the network is an
    inference script, but the factory `define_G` imports it inside the function and the training script builds
    it through the factory: the network is trained. Without a training importer of the factory it stays
    evaluated only."""
    files = {"models/select_network.py": FACTORY, "models/network_swinir.py": SWINIR,
             "main_test_swinir.py": TEST_SCRIPT}
    if train:
        files["main_train.py"] = TRAIN_SCRIPT
    write(tmp_path, files)
    assert findings(tmp_path, "--select", "GPU302") == reported
    # one file linted alone reads the same project (dispatch/project_scan.py's partial project)
    assert findings(tmp_path, "--select", "GPU302", str(tmp_path / "models/network_swinir.py")) == reported
    facts = facts_of_text(FACTORY)
    assert facts is not None and not facts.imports and [r.name for r in facts.lazy_imports] == ["SwinIR", "Other"]


LOAD_MODEL = """\
    import torch
    from torch import nn


    def load_model(folder, param_dtype):
        model = nn.Sequential(nn.Linear(4096, 4096), nn.Linear(4096, 4096))
        model.load_state_dict(torch.load(folder), assign=True)
        assert all(p.dtype == param_dtype for p in model.parameters())
        return model
    """


def test_a_model_an_imported_function_casts_to_a_16_bit_dtype_silences_gpu001(tmp_path: Path) -> None:
    """mistral-finetune (blind13): `load_model(..., param_dtype=torch.bfloat16)` casts and asserts every parameter."""
    write(tmp_path, {
        "wrapped.py": LOAD_MODEL,
        "train.py": "import torch\nfrom wrapped import load_model\n\nparam_dtype = torch.bfloat16\n"
                    "model = load_model('m', param_dtype=param_dtype).cuda()\n\n" + TRAIN_STEP,
        "other.py": "import torch\nfrom wrapped import load_model\n\n"
                    "model = load_model('m', torch.float32).cuda()\n\n" + TRAIN_STEP,
    })
    assert codes(findings(tmp_path, "--select", "GPU001,GPU401"), "train.py") == []
    assert codes(findings(tmp_path, "--select", "GPU001"), "other.py") == ["GPU001"]


@pytest.mark.parametrize("text, casts", [
    (LOAD_MODEL, {"load_model": ("param_dtype", 1)}),
    ("def build(net, *, dtype):\n    for p in net.parameters():\n        p.data = p.data.to(dtype)\n",
     {"build": ("dtype", -1)}),
    ("def build(device, dtype):\n    net = Net()\n    return net.to(device, dtype)\n", {"build": ("dtype", 1)}),
    # a batch cast, a state dict's tensors: not the model's parameters
    ("def batch(x, dtype):\n    y = x.to(dtype)\n    return x\n", {}),
    ("def load(sd, dtype):\n    return {k: v.to(dtype) for k, v in sd.items()}\n", {}),
])
def test_functions_that_cast_their_models_parameters_to_a_dtype_they_are_handed(
        text: str, casts: dict[str, tuple[str, int]]) -> None:
    facts = facts_of_text(textwrap.dedent(text))
    assert facts is not None and facts.dtype_casts == casts


PAIR_LOSS = """\
    import torch.nn as nn


    class PairLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.bce = nn.BCELoss()

        def forward(self, a, b):
            return self.bce(a.softmax(1), b.softmax(1))
    """
CRITERIA = """\
    def get_criterion(name):
        if name == "pair":
            from losses.pair import PairLoss
            return PairLoss()
        raise ValueError(name)
    """
HANDED_STEP = """\
    def train(loader, model, criterion, optimizer):
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            out = model(x)
            loss = criterion(out, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
HANDED_MAIN = """\
    import torch
    import torchvision
    from utils.common import get_criterion
    from utils.train_utils import train

    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(loader, model, get_criterion("pair"), optimizer)
    """


def gpu001(root: Path, *args: str) -> list[dict]:
    result = CliRunner().invoke(main, ["check", "--output-format", "json", "--no-cache", "--select", "GPU001",
                                       *args])
    assert result.exit_code in (0, 1), result.output
    return [f for f in json.loads(result.stdout) if f["code"] == "GPU001"]


@pytest.mark.parametrize("one_file", [False, True])
def test_a_step_handed_a_loss_the_project_computes_with_bce_gets_no_fix(tmp_path: Path, one_file: bool) -> None:
    """wvangansbeke/Unsupervised-Classification (sixteenth blind reading, 1 FP): scan_train(..., criterion, ...)
    is handed SCANLoss, which a factory imports inside a function and whose `nn.BCELoss()` CUDA autocast refuses:
    the fix wrapping `criterion(...)` raised at the first step. The finding stays, with no fix and why; checking
    the one file (the project read only as far as its view needs) says the same."""
    write(tmp_path, {"pyproject.toml": "", "losses/__init__.py": "", "losses/pair.py": PAIR_LOSS,
                     "utils/__init__.py": "", "utils/common.py": CRITERIA, "utils/train_utils.py": HANDED_STEP,
                     "main.py": HANDED_MAIN})
    target = tmp_path / "utils/train_utils.py" if one_file else tmp_path
    [finding] = gpu001(tmp_path, str(target))
    assert finding["fix"] is None
    assert finding["note"].startswith("no fix: criterion() is handed in, and PairLoss (losses/pair.py) computes "
                                      "binary_cross_entropy"), finding["note"]


@pytest.mark.parametrize("change", [
    ("self.bce = nn.BCELoss()", "self.bce = nn.BCEWithLogitsLoss()"),  # autocast runs it in float32
    ("from utils.common import get_criterion\n", ""),  # no file around the step computes BCE
])
def test_a_step_handed_a_loss_keeps_its_fix_without_a_bce_loss_around(tmp_path: Path,
                                                                       change: tuple[str, str]) -> None:
    main_text = HANDED_MAIN.replace('get_criterion("pair")', "torch.nn.CrossEntropyLoss()")
    write(tmp_path, {"pyproject.toml": "", "losses/__init__.py": "",
                     "losses/pair.py": PAIR_LOSS.replace(*change), "utils/__init__.py": "",
                     "utils/common.py": CRITERIA, "utils/train_utils.py": HANDED_STEP,
                     "main.py": main_text.replace(*change)})
    [finding] = gpu001(tmp_path, str(tmp_path))
    assert finding["fix"] is not None and finding["note"] is None, finding


BCE_HELPERS = """\
    import torch.nn as nn

    bce_loss = nn.BCELoss(size_average=True)


    def side(pred, mask):
        return bce_loss(pred, mask)


    def fused(preds, mask):
        return sum(side(p, mask) for p in preds)


    def shadowed(bce_loss, pred, mask):
        return bce_loss(pred, mask)


    def unrelated(pred, mask):
        return (pred - mask).abs().mean()


    class Deep(nn.Module):
        def forward(self, preds, mask):
            return fused(preds, mask)
    """


def test_bce_losses_follow_a_module_level_bceloss_instance() -> None:
    """xuebinqin/U-2-Net (blind22, 1 FP): `bce_loss = nn.BCELoss()` at module level, called in
    `muti_bce_loss_fusion`, which the step calls: the function computes binary_cross_entropy, and so does a
    function or class of the file calling it; a parameter of the same name is not the module's instance."""
    facts = facts_of_text(textwrap.dedent(BCE_HELPERS))
    assert facts is not None and facts.bce_losses == ("side", "fused", "Deep")
    rebound = facts_of_text(textwrap.dedent(BCE_HELPERS) + "bce_loss = nn.BCEWithLogitsLoss()\n")
    assert rebound is not None and rebound.bce_losses == ()  # bound twice: not known to be the BCELoss


@pytest.mark.parametrize(("text", "other"), [
    ("import paddle\nimport paddle.nn as nn\n", "paddle"),
    ("import numpy as np\n\n\ndef main():\n    import oneflow as flow\n", "oneflow"),
    ("import tensorflow as tf\nimport jax\n", "jax"),  # the first by name
    ("import paddle\n\n\ndef main():\n    import torch\n", ""),  # torch imported, in a function too
    ("import tensorflow as tf\nfrom torch.utils.data import DataLoader\n", ""),
    ("from .model import Net\nimport numpy as np\n", ""),  # neither: torch's by default
])
def test_other_framework_is_read_from_the_imports_anywhere(text: str, other: str) -> None:
    """RT-DETR's PaddlePaddle trainer (blind22, 1 FP): the premise torch-code is refuted where the file imports
    another deep-learning framework and torch nowhere."""
    facts = facts_of_text(text)
    assert facts is not None and facts.other_framework == other


def test_a_paddle_trainer_called_by_a_gpu_script_is_not_torch_code(tmp_path: Path) -> None:
    """The trainer module has no GPU evidence of its own; its caller does (RT-DETR's tools/train.py): GPU001 stays
    silent because the module imports paddle and torch nowhere, as it reports on the same step written in torch."""
    trainer = """\
        import paddle


        class Trainer:
            def __init__(self, model, loader):
                self.model, self.loader = model, loader
                self.optimizer = paddle.optimizer.Adam(parameters=model.parameters())

            def train(self):
                for data in self.loader:
                    loss = self.model(data)["loss"]
                    loss.backward()
                    self.optimizer.step()
                    self.optimizer.clear_grad()
        """
    caller = """\
        import os

        from engine.trainer import Trainer

        os.environ.setdefault("LOCAL_RANK", "0")
        Trainer(build_model(), build_loader()).train()
        """
    write(tmp_path, {"pyproject.toml": "", "engine/__init__.py": "", "engine/trainer.py": trainer,
                     "tools/train.py": caller})
    assert gpu001(tmp_path, str(tmp_path)) == []
    write(tmp_path, {"engine/trainer.py": trainer.replace("import paddle", "import torch").replace(
        "paddle.optimizer.Adam(parameters=model.parameters())", "torch.optim.Adam(model.parameters())")})
    assert [f["filename"].endswith("trainer.py") for f in gpu001(tmp_path, str(tmp_path))] == [True]


# ---------------------------------------------------------------------------------------------
# a caller replicates the model with nn.DataParallel (blind18: MPRNet)

DATA_PARALLEL_STEP = """\
    import torch


    def train(model, loader, opt):
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    """


def fix_messages(root: Path) -> dict[str, Optional[str]]:
    """GPU001's fix message per file, as `check --output-format json` predicts it."""
    result = CliRunner().invoke(main, ["check", "--output-format", "json", "--no-cache", "--select", "GPU001",
                                       str(root)])
    return {Path(f["filename"]).name: (f.get("fix") or {}).get("message") for f in json.loads(result.stdout)}


def test_a_caller_wrapping_the_model_in_data_parallel_gets_float16(tmp_path: Path) -> None:
    """The step's module trains a model its caller wraps in nn.DataParallel, whose replica threads run autocast's
    default float16: the fix writes float16 and a GradScaler, not the run-time bfloat16 choice."""
    caller = "import torch\nfrom train_utils import train\n\nmodel = {}\nopt = torch.optim.Adam(model.parameters(), " \
             "fused=True)\ntrain(model, loader, opt)\n"
    write(tmp_path, {"train_utils.py": DATA_PARALLEL_STEP,
                     "main.py": caller.format("torch.nn.DataParallel(Net().cuda())")})
    message = fix_messages(tmp_path)["train_utils.py"]
    assert message is not None and "(float16)" in message and "nn.DataParallel" in message
    write(tmp_path, {"train_utils.py": DATA_PARALLEL_STEP, "main.py": caller.format("Net().cuda()")})
    message = fix_messages(tmp_path)["train_utils.py"]
    assert message is not None and "bfloat16 on GPUs that compute in it natively" in message


METRICS_TOOL = """\
    import torch
    from PIL import Image
    from torchvision import transforms
    from tqdm import tqdm


    class PngFolder(torch.utils.data.Dataset):
        def __init__(self, paths):
            self.paths = paths

        def __len__(self):
            return len(self.paths)

        def __getitem__(self, index):
            return transforms.ToTensor()(Image.open(self.paths[index]).convert("RGB"))


    def embed_folder(paths, network, device="cuda"):
        loader = torch.utils.data.DataLoader(PngFolder(paths), batch_size=64, num_workers=4)
        rows = []
        for images in tqdm(loader):
            images = images.to(device)
            with torch.no_grad():
                codes = network(images)
            rows.append(codes.cpu())
        return torch.cat(rows)
    """


@pytest.mark.parametrize("grad_off", [True, False])
def test_evaluation_function_of_an_imported_tool_feeds_no_training(tmp_path: Path, grad_off: bool) -> None:
    """U-ViT (blind21, 1 FP): tools/fid_score.py, which the training scripts import and call at their save
    interval, trains nothing; its loader is iterated only where it is built, every batch going to the feature
    network under no_grad: GPU101's feeds-training is refuted although the file is imported by training code.
    The same function calling the network with autograd on is reported."""
    tool = METRICS_TOOL if grad_off else METRICS_TOOL.replace(
        "            with torch.no_grad():\n                codes = network(images)\n",
        "            codes = network(images)\n")
    write(tmp_path, {
        "metrics.py": tool,
        "train.py": "import torch\nfrom metrics import embed_folder\n\n" + TRAIN_STEP
                    + "\ntrain(model.cuda(), loader, opt)\nembed_folder(paths, model)\n",
    })
    found = codes(findings(tmp_path, "--select", "GPU101"), "metrics.py")
    assert found == ([] if grad_off else ["GPU101"])


SYNTHESIS_SCRIPT = """\
    import sys

    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset


    class Lines(Dataset):
        def __init__(self, lines, folder):
            self.lines, self.folder = lines, folder

        def __len__(self):
            return len(self.lines)

        def __getitem__(self, index):
            speaker, text = self.lines[index].split("|")
            return torch.tensor([ord(c) for c in text]), np.load(f"{self.folder}/{speaker}.npy")


    def synthesize(model, batches, device):
        for ids, embedding in batches:
            ids = ids.to(device)
            with torch.no_grad():
                model(ids, torch.from_numpy(embedding).to(device))


    if __name__ == "__main__":
        device = torch.device("cuda")
        model = torch.jit.load(sys.argv[1]).to(device).eval()
        batches = DataLoader(Lines(open(sys.argv[2]).read().splitlines(), sys.argv[3]), batch_size=8)
        synthesize(model, batches, device)
    """


@pytest.mark.parametrize("trains", [False, True])
def test_loader_of_an_inference_script_feeds_no_training(tmp_path: Path, trains: bool) -> None:
    """Comprehensive-Transformer-TTS (blind25, GPU102 FP): synthesize.py, which no project file imports and which
    trains nothing, builds its loader in the `__main__` block and hands it to a function that runs the model under
    no_grad: GPU102 (like GPU101) refutes feeds-training although its items read a file. The same script whose
    function steps an optimizer on the batches is reported."""
    script = SYNTHESIS_SCRIPT if not trains else SYNTHESIS_SCRIPT.replace(
        "            with torch.no_grad():\n                model(ids, torch.from_numpy(embedding).to(device))\n",
        "            model(ids, torch.from_numpy(embedding).to(device)).sum().backward()\n")
    write(tmp_path, {"synthesize.py": script, "train.py": "import torch\n\n" + TRAIN_STEP})
    found = codes(findings(tmp_path, "--select", "GPU102"), "synthesize.py")
    assert found == (["GPU102"] if trains else [])


_FRAMES_DATASET = """from PIL import Image
import numpy as np
import torch
from torch.utils.data import Dataset


class Frames(Dataset):
    def __init__(self, paths, skip):
        self.paths = paths
        self.skip = skip

    def __getitem__(self, index):
        image = np.asarray(Image.open(self.paths[index]).convert("RGB"), dtype=np.float32)
        return {"rgb": torch.from_numpy(image), "index": index}

    def __len__(self):
        return len(self.paths)
"""

_FRAMES_TRAINER = """import torch


class Trainer:
    def __init__(self, net):
        self.net = net.cuda()

    def train(self):
        self.net.train()
        return self

    def do_pass(self, data, it=0):
        for k, v in data.items():
            if type(v) != int:
                data[k] = v.cuda(non_blocking=True)
        self.net(data["rgb"]).mean().backward()

    def log(self, data, it=0):
        print(it, len(data))


class Logger:
    def __init__(self, net):
        self.net = net

    def do_pass(self, data, it=0):
        print(it, len(data))
"""

_FRAMES_MAIN = """import torch
from torch.utils.data import ConcatDataset, DataLoader

from data import Frames
from trainer import {cls}


def main(paths):
    model = {cls}(torch.nn.Linear(3, 3)){chain}

    def construct_loader(dataset):
        return DataLoader(dataset, 8, shuffle=True, num_workers=4, drop_last=True)

    def renew_loader(skip):
        dataset = ConcatDataset([Frames(paths, skip)] * 5 + [Frames(paths, 1)])
        return construct_loader(dataset)

    if len(paths) < 9:
        loader = construct_loader(Frames(paths, 3))
    else:
        loader = renew_loader(5){extra}
    for it, data in enumerate(loader):
        model.{method}(data, it)
"""


@pytest.mark.parametrize(("cls", "chain", "method", "extra", "reported"), [
    ("Trainer", ".train()", "do_pass", "", True),  # the method copies the batch's items, asynchronously
    ("Trainer", "", "do_pass", "", True),
    ("Trainer", ".train()", "log", "", False),  # a method that copies nothing
    ("Logger", "", "do_pass", "", False),  # an instance of another class, whose method of that name copies nothing
    ("Trainer", ".cuda()", "do_pass", "", False),  # `.cuda()` is no method of Trainer that returns `self`
    ("Trainer", ".train()", "do_pass", "\n    hooks = [construct_loader]", False),  # the function handed on too
])
def test_a_batch_handed_to_a_method_of_an_imported_class_is_followed_into_it(
        tmp_path: Path, cls: str, chain: str, method: str, extra: str, reported: bool) -> None:
    """XMem's train.py (blind25): a nested `construct_loader(dataset)` builds the DataLoader of the dataset each
    of its calls passes (decoded frames), and the loop hands each batch to `model.do_pass(data, it)`, a method of
    the imported `XMemTrainer` whose instance `model` is; the method copies the batch's items with
    `.cuda(non_blocking=True)`. Only the method of the class the instance is built from counts, and only when
    it copies the parameter the batch is handed as; the dataset only when every use of the function calls it."""
    write(tmp_path, {
        "data.py": _FRAMES_DATASET,
        "trainer.py": _FRAMES_TRAINER,
        "train.py": _FRAMES_MAIN.format(cls=cls, chain=chain, method=method, extra=extra),
    })
    found = findings(tmp_path, "--select", "GPU101")
    assert (("train.py", 12, "GPU101") in found) is reported


# blind25 (iTransformer): the model moved to `self.device` by the `__init__` of a base class in another module

EXP_BASE = """\
import os

import torch


class ExpBase(object):
    def __init__(self, args):
        self.args = args
        self.device = self._device()
        self.model = self._build_model().to(self.device)

    def _build_model(self):
        raise NotImplementedError

    def _device(self):
        if self.args.use_gpu:
            os.environ["CUDA_VISIBLE_DEVICES"] = str(self.args.gpu)
            device = {device}
        else:
            device = torch.device("cpu")
        return device
"""

EXP_FORECAST = """\
import torch
from torch import nn, optim

from experiments.exp_base import ExpBase


class ExpForecast(ExpBase):
    def __init__(self, args):
        super(ExpForecast, self).__init__(args)

    def _build_model(self):
        d = self.args.d_model
        return nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.LayerNorm(d), nn.Linear(d, 1))

    def _select_optimizer(self):
        model_optim = optim.Adam(self.model.parameters(), lr=self.args.learning_rate)
        return model_optim

    def train(self, loader):
        model_optim = self._select_optimizer()
        for x, y in loader:
            model_optim.zero_grad()
            loss = nn.functional.mse_loss(self.model(x.float().to(self.device)), y.float().to(self.device))
            loss.backward()
            model_optim.step()
"""


@pytest.mark.parametrize("device, fix", [
    ("torch.device('cuda:{}'.format(self.args.gpu))", 'fused=self.device.type == "cuda"'),
    ("'cuda:{}'.format(self.args.gpu)", None),  # a string: no `.type`, and not shown to be a torch.device
])
def test_gpu201_model_moved_by_a_base_class_init_in_another_module(tmp_path: Path, device: str,
                                                                  fix: Optional[str]) -> None:
    """iTransformer's exp_long_term_forecasting.py:32 (blind25, missed): Exp_Basic's `__init__`, imported from
    another module, moves `self.model` to `self.device`, a torch.device its `_acquire_device` returns (CUDA or the
    CPU by a flag); the subclass builds Adam over it in `_select_optimizer`. On torch 2.0 the fix must ask the
    device: fused=True raises for CPU parameters there."""
    write(tmp_path, {"requirements.txt": "torch==2.0.0\n", "experiments/__init__.py": "",
                     "experiments/exp_base.py": EXP_BASE.format(device=device),
                     "experiments/exp_forecast.py": EXP_FORECAST,
                     "run.py": "from experiments.exp_forecast import ExpForecast\n\nExpForecast(None).train([])\n"})
    found = findings(tmp_path, "--select", "GPU201")
    assert found == ([("experiments/exp_forecast.py", 16, "GPU201")] if fix else [])
    if fix:
        result = CliRunner().invoke(main, ["check", "--no-cache", "--select", "GPU201", "--diff", str(tmp_path)])
        assert fix in result.stdout, result.stdout


def test_init_moves_facts() -> None:
    """FileFacts.init_moves: a move at the top of `__init__` to a `self.device` bound only to torch.device values
    (directly or through a method returning them), or `.cuda()`; not to a string, under a condition, nor where the
    class binds the attribute again."""
    text = EXP_BASE.format(device="torch.device('cuda')") + (
        "\n\nclass Direct:\n    def __init__(self, net, gpu):\n        self.device = torch.device(gpu)\n"
        "        self.net = net.to(self.device)\n        self.head = net.cuda()\n\n\n"
        "class Str:\n    def __init__(self, net):\n        self.device = 'cuda'\n"
        "        self.net = net.to(self.device)\n\n\n"
        "class Cond:\n    def __init__(self, net, gpu):\n        self.device = torch.device('cuda')\n"
        "        if gpu:\n            self.net = net.to(self.device)\n\n\n"
        "class Again:\n    def __init__(self, net):\n        self.device = torch.device('cuda')\n"
        "        self.net = net.to(self.device)\n\n    def reset(self, net):\n        self.net = net\n")
    facts = facts_of_text(text)
    assert facts is not None and facts.init_moves == {
        "Direct": ("head::", "net:device:"), "ExpBase": ("model:device:_device",)}
