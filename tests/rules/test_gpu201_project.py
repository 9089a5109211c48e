"""GPU201 across files: a recommender's optimizer over a model of a few embedding tables built in another
module (SELFRec: DirectAU and SelfCF build LightGCN's LGCN_Encoder) steps a handful of tensors."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gpulint.cli import main
from tests.analysis.test_project import findings, write

ENCODER = """\
import torch
import torch.nn as nn


class LGCN_Encoder(nn.Module):
    def __init__(self, data, emb_size, n_layers):
        super(LGCN_Encoder, self).__init__()
        self.data = data
        self.latent_size = emb_size
        self.layers = n_layers
        self.embedding_dict = self._init_model()
        self.sparse_norm_adj = data.sparse_adjacency().cuda()

    def _init_model(self):
        initializer = nn.init.xavier_uniform_
        embedding_dict = nn.ParameterDict({
            'user_emb': nn.Parameter(initializer(torch.empty(self.data.user_num, self.latent_size))),
            'item_emb': nn.Parameter(initializer(torch.empty(self.data.item_num, self.latent_size))),
        })
        return embedding_dict

    def forward(self):
        ego = torch.cat([self.embedding_dict['user_emb'], self.embedding_dict['item_emb']], 0)
        for _ in range(self.layers):
            ego = torch.sparse.mm(self.sparse_norm_adj, ego)
        return ego
"""

RECOMMENDER = """\
import torch
import torch.nn as nn
from base.recommender import Recommender
from model.graph.LightGCN import LGCN_Encoder


class SelfCF_HE(nn.Module):
    def __init__(self, data, emb_size, n_layers):
        super(SelfCF_HE, self).__init__()
        self.online_encoder = LGCN_Encoder(data, emb_size, n_layers)
        self.predictor = nn.Linear(emb_size, emb_size)

    def forward(self):
        return self.predictor(self.online_encoder())


class Model(Recommender):
    def __init__(self, conf, data):
        super(Model, self).__init__(conf, data)
        self.model = {model}(data, 64, 2)

    def train(self):
        model = self.model.cuda()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        for epoch in range(self.max_epoch):
            for batch in self.batches():
                loss = model().sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
"""

BASE = """\
class Recommender:
    def __init__(self, conf, data):
        self.conf = conf
        self.data = data
"""


def _project(root: Path, model: str, encoder: str = ENCODER) -> None:
    write(root, {"base/recommender.py": BASE, "model/graph/LightGCN.py": encoder,
                 "model/graph/Ours.py": RECOMMENDER.format(model=model)})


def test_an_encoder_of_two_tables_imported_is_not_reported(tmp_path: Path) -> None:
    """DirectAU: `self.model = LGCN_Encoder(...)` from LightGCN.py, two tensors."""
    _project(tmp_path, "LGCN_Encoder")
    assert findings(tmp_path, "--select", "GPU201") == []


def test_an_imported_encoder_with_a_linear_predictor_is_not_reported(tmp_path: Path) -> None:
    """SelfCF: the imported encoder's two tables and a Linear's weight and bias, four tensors."""
    _project(tmp_path, "SelfCF_HE")
    assert findings(tmp_path, "--select", "GPU201") == []


def test_an_encoder_built_in_a_loop_stays_reported(tmp_path: Path) -> None:
    """Tables built in a loop (one per layer) are not counted: the optimizer is still reported, for both."""
    looped = ENCODER.replace(
        "        self.embedding_dict = self._init_model()\n",
        "        self.embedding_dict = self._init_model()\n"
        "        self.per_layer = nn.ParameterList([nn.Parameter(torch.ones(emb_size)) for _ in range(n_layers)])\n")
    _project(tmp_path, "LGCN_Encoder", looped)
    assert findings(tmp_path, "--select", "GPU201") == [("model/graph/Ours.py", 24, "GPU201")]
    _project(tmp_path, "SelfCF_HE", looped)
    assert findings(tmp_path, "--select", "GPU201") == [("model/graph/Ours.py", 24, "GPU201")]


def test_a_model_over_four_tensors_stays_reported(tmp_path: Path) -> None:
    """A second Linear over the imported encoder's tables makes six tensors."""
    six = RECOMMENDER.replace("        self.predictor = nn.Linear(emb_size, emb_size)\n",
                              "        self.predictor = nn.Linear(emb_size, emb_size)\n"
                              "        self.projector = nn.Linear(emb_size, emb_size)\n")
    write(tmp_path, {"base/recommender.py": BASE, "model/graph/LightGCN.py": ENCODER,
                     "model/graph/Ours.py": six.format(model="SelfCF_HE")})
    assert findings(tmp_path, "--select", "GPU201") == [("model/graph/Ours.py", 25, "GPU201")]


def test_an_attribute_bound_elsewhere_to_something_unread_stays_reported(tmp_path: Path) -> None:
    """`self.model` rebound in another method to a model handed in: which model trains is not known."""
    rebound = RECOMMENDER.replace("    def train(self):\n",
                                  "    def use(self, other):\n        self.model = other\n\n    def train(self):\n")
    write(tmp_path, {"base/recommender.py": BASE, "model/graph/LightGCN.py": ENCODER,
                     "model/graph/Ours.py": rebound.format(model="LGCN_Encoder")})
    assert findings(tmp_path, "--select", "GPU201") == [("model/graph/Ours.py", 27, "GPU201")]


def test_a_subclass_that_may_rebind_the_model_stays_reported(tmp_path: Path) -> None:
    """A class of the file derives from the recommender: it may bind `self.model` to a model of its own."""
    derived = RECOMMENDER + "\n\nclass Bigger(Model):\n    pass\n"
    write(tmp_path, {"base/recommender.py": BASE, "model/graph/LightGCN.py": ENCODER,
                     "model/graph/Ours.py": derived.format(model="LGCN_Encoder")})
    assert findings(tmp_path, "--select", "GPU201") == [("model/graph/Ours.py", 24, "GPU201")]


PERCEPTUAL = """\
import torch.nn as nn
import torchvision


class {name}(nn.Module):
    def __init__(self):
        super().__init__()
        self.feature_extractor = torchvision.models.vgg19(weights="IMAGENET1K_V1").features[:36]
        for parameters in self.feature_extractor.parameters():
            parameters.requires_grad = False
        self.feature_extractor.eval()

    def forward(self, sr, hr):
        return nn.functional.mse_loss(self.feature_extractor(sr), self.feature_extractor(hr))
"""

GAN_TRAIN = """\
import torch
from torch import optim

from model import Generator, {name}

g_model = Generator().cuda()
content_criterion = {name}().cuda()
g_optimizer = optim.Adam(g_model.parameters(), lr=1e-4)
for lr_images, gt_images in loader:
    g_optimizer.zero_grad()
    loss = content_criterion(g_model(lr_images.cuda()), gt_images.cuda())
    loss.backward()
    g_optimizer.step()
"""


def test_a_loss_that_freezes_its_feature_extractor_freezes_nothing_trained(tmp_path: Path) -> None:
    """blind8 (SRGAN-PyTorch): a perceptual `ContentLoss` freezes its VGG; the generator's Adam still steps every
    generator tensor, so it is reported. A module of the same shape that is not a loss stays a frozen encoder
    (a probe over it trains a small part: undecided, silent by default)."""
    generator = "import torch.nn as nn\n\n\nclass Generator(nn.Module):\n    pass\n"
    write(tmp_path, {"model.py": generator + "\n\n" + PERCEPTUAL.format(name="ContentLoss"),
                     "train.py": GAN_TRAIN.format(name="ContentLoss")})
    assert findings(tmp_path, "--select", "GPU201") == [("train.py", 8, "GPU201")]
    write(tmp_path, {"model.py": generator + "\n\n" + PERCEPTUAL.format(name="FeatureEncoder"),
                     "train.py": GAN_TRAIN.format(name="FeatureEncoder")})
    assert findings(tmp_path, "--select", "GPU201") == []


STAR_MODEL = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 256, 3), nn.ReLU(), nn.Conv2d(256, 21, 1))
"""

STAR_TRAIN = """\
{extra}from modeling import *

model = Net().cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for images, target in loader:
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(images.cuda()), target.cuda())
    loss.backward()
    optimizer.step()
"""


def test_torch_reached_through_a_star_import_of_a_project_module(tmp_path: Path) -> None:
    """blind8 (pytorch-deeplab-xception): train.py never imports torch; `from modeling.deeplab import *` hands
    on the module's own `import torch`, so `torch.optim.SGD` there is torch's. A star import of a library
    beside it may bind `torch` to anything: then the name is not resolved."""
    write(tmp_path, {"modeling.py": STAR_MODEL, "train.py": STAR_TRAIN.format(extra="")})
    assert findings(tmp_path, "--select", "GPU201") == [("train.py", 4, "GPU201")]
    write(tmp_path, {"modeling.py": STAR_MODEL, "train.py": STAR_TRAIN.format(extra="from somelib import *\n")})
    assert findings(tmp_path, "--select", "GPU201") == []


# blind10 (Time-Series-Library): experiment classes over a base that builds their model through a hook; the
# zero-shot one keeps a `_select_optimizer` it never calls (it only tests)
EXP_BASIC = """\
class Exp_Basic(object):
    def __init__(self, args):
        self.args = args
        self.model = self._build_model().cuda()

    def _build_model(self):
        raise NotImplementedError
"""

EXP_TRAIN = """\
import torch
from exp.exp_basic import Exp_Basic


class Exp_Long_Term_Forecast(Exp_Basic):
    def _build_model(self):
        return self.args.model

    def _select_optimizer(self):
        return torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def train(self, loader):
        optimizer = self._select_optimizer()
        for x, y in loader:
            loss = (self.model(x.cuda()) - y.cuda()).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""

EXP_ZERO_SHOT = """\
import torch
from exp.exp_basic import Exp_Basic


class Exp_Zero_Shot_Forecast(Exp_Basic):
    def _build_model(self):
        return self.args.model

    def _select_optimizer(self):
        return torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def test(self, loader):
        self.model.eval()
        with torch.no_grad():
            return [self.model(x.cuda()) for x, _ in loader]
"""

EXP_RUN = """\
from exp.exp_long_term_forecasting import Exp_Long_Term_Forecast
from exp.exp_zero_shot_forecasting import Exp_Zero_Shot_Forecast

if __name__ == "__main__":
    Exp = Exp_Zero_Shot_Forecast if args.task_name == "zero_shot_forecast" else Exp_Long_Term_Forecast
    Exp(args).train(loader)
"""


def _experiments(root: Path, **extra: str) -> None:
    write(root, {"exp/exp_basic.py": EXP_BASIC, "exp/exp_long_term_forecasting.py": EXP_TRAIN,
                 "exp/exp_zero_shot_forecasting.py": EXP_ZERO_SHOT, "run.py": EXP_RUN, **extra})


def test_a_private_optimizer_method_nothing_calls_is_not_reported(tmp_path: Path) -> None:
    """The zero-shot class's `_select_optimizer`: no module importing it or imported by it names the method
    (the training class's own call is in a module that imports neither), its base is the project's own class
    over `object`: its Adam is never built. The training class's Adam is reported."""
    _experiments(tmp_path)
    assert findings(tmp_path, "--select", "GPU201") == [("exp/exp_long_term_forecasting.py", 10, "GPU201")]
    # linted alone, the file's view is built from the files it reads (dispatch/project_scan.py): the same
    assert findings(tmp_path / "exp" / "exp_zero_shot_forecasting.py", "--select", "GPU201") == []


def test_a_subclass_in_another_module_that_calls_the_method_keeps_the_finding(tmp_path: Path) -> None:
    """A fine-tuning class derives from the zero-shot one in another module and calls `self._select_optimizer()`:
    the method runs, and its Adam is reported."""
    finetune = ("from exp.exp_zero_shot_forecasting import Exp_Zero_Shot_Forecast\n\n\n"
                "class Exp_Finetune(Exp_Zero_Shot_Forecast):\n"
                "    def train(self, loader):\n"
                "        optimizer = self._select_optimizer()\n")
    _experiments(tmp_path, **{"exp/exp_finetune.py": finetune})
    assert ("exp/exp_zero_shot_forecasting.py", 10, "GPU201") in findings(tmp_path, "--select", "GPU201")


def test_a_base_class_or_helper_that_calls_the_method_keeps_the_finding(tmp_path: Path) -> None:
    """The hook is called by the project's base class (`self._select_optimizer()` in Exp_Basic), or by a module
    the file imports that is handed the experiment (`exp._select_optimizer()`): it runs, reported."""
    base = EXP_BASIC + "\n    def fit(self):\n        return self._select_optimizer()\n"
    _experiments(tmp_path, **{"exp/exp_basic.py": base})
    assert ("exp/exp_zero_shot_forecasting.py", 10, "GPU201") in findings(tmp_path, "--select", "GPU201")
    helper = "def prepare(exp):\n    return exp._select_optimizer()\n"
    zero = EXP_ZERO_SHOT.replace("import torch\n", "import torch\nfrom utils.tools import prepare\n", 1)
    _experiments(tmp_path, **{"exp/exp_basic.py": EXP_BASIC, "utils/tools.py": helper,
                              "exp/exp_zero_shot_forecasting.py": zero})
    assert ("exp/exp_zero_shot_forecasting.py", 11, "GPU201") in findings(tmp_path, "--select", "GPU201")


def test_a_class_over_a_library_base_keeps_the_finding(tmp_path: Path) -> None:
    """Exp_Basic derives from a library's class (here nn.Module): the library may call a hook by name, so a
    private method nothing in the project names may still run: reported."""
    base = EXP_BASIC.replace("class Exp_Basic(object):", "import torch.nn as nn\n\n\nclass Exp_Basic(nn.Module):")
    _experiments(tmp_path, **{"exp/exp_basic.py": base})
    assert ("exp/exp_zero_shot_forecasting.py", 10, "GPU201") in findings(tmp_path, "--select", "GPU201")


EXTRACTOR_LOSSES = """\
import torch.nn as nn
import torchvision


class VGGFeatureExtractor(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torchvision.models.vgg19(weights=None).features[:35]
        for _, v in self.features.named_parameters():
            v.requires_grad = False

    def forward(self, x):
        return self.features(x)


class PerceptualLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.vgg = VGGFeatureExtractor()

    def forward(self, x, y):
        return nn.functional.l1_loss(self.vgg(x), self.vgg(y))


class CharbonnierLoss(nn.Module):
    def forward(self, x, y):
        return ((x - y) ** 2 + 1e-6).sqrt().mean()
{extra}"""

EXTRACTOR_TRAIN = """\
import torch
from torch.optim import Adam

from losses import CharbonnierLoss

net = build_restorer().cuda()
criterion = CharbonnierLoss()
optimizer = Adam(net.parameters(), lr=1e-4)
for low, high in loader:
    optimizer.zero_grad()
    criterion(net(low.cuda()), high.cuda()).backward()
    optimizer.step()
"""


def test_a_feature_extractor_only_a_loss_builds_freezes_nothing_trained(tmp_path: Path) -> None:
    """blind11 (KAIR, models/loss.py): `VGGFeatureExtractor` freezes its VGG and only `PerceptualLoss` builds it;
    the restorer's Adam in a module that imports the losses steps every tensor, so it is reported. Where the
    file also builds the extractor into a model of its own (a backbone a probe may train a head on), the freeze
    counts again (undecided: silent by default)."""
    write(tmp_path, {"losses.py": EXTRACTOR_LOSSES.format(extra=""), "train.py": EXTRACTOR_TRAIN})
    assert findings(tmp_path, "--select", "GPU201") == [("train.py", 8, "GPU201")]
    probe = ("\n\nclass Probe(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
             "        self.backbone = VGGFeatureExtractor()\n        self.head = nn.Linear(512, 10)\n")
    write(tmp_path, {"losses.py": EXTRACTOR_LOSSES.format(extra=probe), "train.py": EXTRACTOR_TRAIN})
    assert findings(tmp_path, "--select", "GPU201") == []


META_ARCH = """\
import torch
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler


class SSLMetaArch(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.student = torch.nn.Linear(1024, 1024)
        self.fp16_scaler = ShardedGradScaler() if cfg.grad_scaler else None
"""

TRAIN = """\
import torch
from ssl_meta_arch import SSLMetaArch


def build_optimizer(cfg, params_groups):
    return torch.optim.AdamW(params_groups, betas=(0.9, 0.999))


def do_train(cfg, model):
    optimizer = build_optimizer(cfg, model.parameters())
    for data in loader:
        optimizer.zero_grad(set_to_none=True)
        loss = model(data.cuda(non_blocking=True)).mean()
        model.fp16_scaler.scale(loss).backward()
        model.fp16_scaler.step(optimizer)
        model.fp16_scaler.update()


do_train(cfg, SSLMetaArch(cfg).cuda())
"""


def test_no_fused_advice_where_an_imported_module_makes_a_sharded_grad_scaler(tmp_path: Path) -> None:
    """dinov2: train.py builds the AdamW that ssl_meta_arch.py's ShardedGradScaler steps; a fused step there skips
    the cross-rank inf check. A plain GradScaler in the same place leaves the advice standing."""
    write(tmp_path, {"ssl_meta_arch.py": META_ARCH, "train.py": TRAIN})
    assert [code for path, _, code in findings(tmp_path) if path == "train.py" and code == "GPU201"] == []
    write(tmp_path, {"ssl_meta_arch.py": META_ARCH.replace(
        "from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler",
        "from torch.amp import GradScaler as ShardedGradScaler")})
    assert [code for path, _, code in findings(tmp_path) if path == "train.py" and code == "GPU201"] == ["GPU201"]


def test_a_sharded_grad_scaler_re_exported_by_a_project_package_counts(tmp_path: Path) -> None:
    """dinov2's ssl_meta_arch.py takes ShardedGradScaler from the project's own dinov2/fsdp package, which imports
    it from torch and which train.py imports as well."""
    write(tmp_path, {
        "fsdp/__init__.py": "from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler\n",
        "ssl_meta_arch.py": META_ARCH.replace(
            "from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler",
            "from fsdp import ShardedGradScaler"),
        "train.py": TRAIN.replace("from ssl_meta_arch import SSLMetaArch",
                                  "from ssl_meta_arch import SSLMetaArch\nimport fsdp")})
    assert [code for path, _, code in findings(tmp_path) if path == "train.py" and code == "GPU201"] == []


def _alone(path: Path) -> list[int]:
    """The rows of GPU201's findings with only `path` named on the command line."""
    result = CliRunner().invoke(main, ["check", "--output-format", "json", "--preview", "--no-cache",
                                       "--select", "GPU201", str(path)])
    assert result.exit_code in (0, 1), result.output
    return [f["location"]["row"] for f in json.loads(result.stdout)]


CPU_TRAINER = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 2))

    def forward(self, x):
        return self.layers(x)


def fit(batches):
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for x, y in batches:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
"""


def test_a_project_that_never_names_an_accelerator_is_not_reported(tmp_path: Path) -> None:
    """blind25's CapsGNN, blind24's Graph-Bert: no `.cuda()`, no `.to(device)`, no framework anywhere; the model
    trains on the CPU, where fused=True saves nothing measurable (FUSED_DEVICE undecided)."""
    write(tmp_path, {"src/trainer.py": CPU_TRAINER, "src/main.py": "from trainer import fit\nfit([])\n"})
    assert findings(tmp_path, "--select", "GPU201") == []
    assert _alone(tmp_path / "src" / "trainer.py") == []  # the file alone (a partial scan): the same


def test_an_accelerator_anywhere_in_the_project_keeps_the_finding(tmp_path: Path) -> None:
    """A script elsewhere in the project moves a model to a device (a `__main__` demo of a library module beside
    GPU training scripts, dev's vit-pytorch lejepa.py): the code may run there. Linted alone (a partial scan of
    the project), the file gets the same answer."""
    gpu_script = "import torch\n\ndef run(model, device):\n    return model.to(device)\n"
    write(tmp_path, {"src/trainer.py": CPU_TRAINER, "src/main.py": "from trainer import fit\nfit([])\n",
                     "scripts/other.py": gpu_script})
    assert findings(tmp_path, "--select", "GPU201") == [("src/trainer.py", 16, "GPU201")]
    assert _alone(tmp_path / "src" / "trainer.py") == [16]
