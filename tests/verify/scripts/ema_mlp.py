"""Train the head of a deep MLP with an exponential moving average of the whole model (gpulint GPU507).

The backbone (60 pre-norm residual blocks) is frozen and only a linear head trains, as in linear
probing or head fine-tuning; the EMA, as timm's ModelEma does, follows every parameter of the model
after each optimizer step, in a Python loop over the two models' parameters: one `lerp_` for each
of 244 parameters at the "tiny" size, then most of the step. `gpulint verify --select
GPU507 --preview` runs it against its rewrite to one `torch._foreach_lerp_` call: the same losses
(the EMA model is not in the loss), a shorter step.

    python ema_mlp.py --size tiny
"""

from __future__ import annotations

import argparse
import copy

import torch
from torch import nn

SIZES = {"tiny": dict(width=32, depth=60, batch=8), "gpu": dict(width=1024, depth=60, batch=256)}


class Backbone(nn.Module):
    """Pre-norm residual blocks: four parameter tensors per block (norm scale and shift, weight, bias)."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(depth))
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for norm, layer in zip(self.norms, self.layers):
            x = x + torch.relu(layer(norm(x)))
        return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--decay", type=float, default=0.999)
    args = parser.parse_args()
    cfg = SIZES[args.size]
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    width = cfg["width"]
    model = nn.Sequential(Backbone(width, cfg["depth"]), nn.LayerNorm(width), nn.Linear(width, 1)).to(device)
    model[0].requires_grad_(False)
    ema = copy.deepcopy(model).requires_grad_(False)
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)
    direction = torch.randn(width, 1, device=device) / width ** 0.5  # the head learns this linear read-out
    inputs = torch.randn(16, cfg["batch"], width, device=device)
    with torch.no_grad():
        targets = nn.functional.layer_norm(model[0](inputs), (width,)) @ direction
    decay = args.decay
    for step in range(args.steps):
        x, y = inputs[step % len(inputs)], targets[step % len(inputs)]
        loss = (model(x) - y).pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for ema_p, p in zip(ema.parameters(), model.parameters()):
                ema_p.lerp_(p, 1 - decay)
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
