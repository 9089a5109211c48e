"""Which modules hold no weights (project/layers.py `weightless_module`): the one place the mixed-precision fix
and the parameter counts ask, so the fix never writes `next(m.parameters())` for a module without any."""

from __future__ import annotations

import textwrap
from pathlib import Path

from gpulint.core.settings import Settings
from gpulint.engine.linter import fix_text
from gpulint.project.facts import facts_of_text
from gpulint.project.layers import weightless_module


def test_torch_modules_without_weights() -> None:
    for name in ("CrossEntropyLoss", "MSELoss", "ReLU", "Dropout", "Dropout2d", "MaxPool2d", "AdaptiveAvgPool2d",
                 "Identity", "Flatten", "Softmax"):
        assert weightless_module({f"torch.nn.{name}"}), name
    for name in ("Linear", "Conv2d", "LSTM", "LayerNorm", "Embedding", "AdaptiveLogSoftmaxWithLoss", "Sequential"):
        assert not weightless_module({f"torch.nn.{name}"}), name
    assert not weightless_module({"torchvision.models.resnet50"})
    assert not weightless_module(set())


def test_project_class_with_only_a_forward() -> None:
    facts = facts_of_text(textwrap.dedent("""
        import torch
        import torch.nn as nn


        class DotDecoder(nn.Module):
            def forward(self, a, b):
                return (a * b).sum(-1)


        class Wrapper(nn.Module):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def forward(self, x):
                return self.net(x)


        class Scale(nn.Module):
            def __init__(self):
                super().__init__()
                self.gain = nn.Parameter(torch.ones(1))

            def forward(self, x):
                return self.gain * x


        class Plain(nn.Module):
            def __init__(self, p):
                super().__init__()
                self.p = p

            def forward(self, x):
                return x * self.p


        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(512, 512)

            def forward(self, x):
                return self.fc(x)
    """))
    assert facts is not None
    assert weightless_module((), facts.classes["DotDecoder"])
    for name in ("Head", "Wrapper", "Scale", "Plain"):  # Plain's `p` may be a module handed in
        assert not weightless_module((), facts.classes[name]), name


def test_the_fix_takes_no_device_from_a_project_module_without_weights() -> None:
    source = textwrap.dedent('''
        import torch
        import torch.nn as nn


        class PairLoss(nn.Module):
            def forward(self, a, b):
                return (a - b).pow(2).mean()


        model = torch.load("model.pt").cuda()
        criterion = PairLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


        def train(batches):
            for data, targets in batches:
                optimizer.zero_grad()
                loss = criterion(model(data), targets)
                loss.backward()
                optimizer.step()


        train(load_batches())
    ''')
    fixed = fix_text(Path("train.py"), source, Settings(select=("GPU001",)), unsafe=True)
    assert fixed.applied == 1
    assert 'torch.autocast(device_type="cuda"' in fixed.text and "criterion.parameters()" not in fixed.text
