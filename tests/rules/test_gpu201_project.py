"""GPU201 across files: a recommender's optimizer over a model of a few embedding tables built in another
module (SELFRec: DirectAU and SelfCF build LightGCN's LGCN_Encoder) steps a handful of tensors."""

from __future__ import annotations

from pathlib import Path

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
