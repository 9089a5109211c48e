"""Deep regression: a 24-block residual MLP that saves memory with activation checkpointing.

The model checkpoints its blocks with `torch.utils.checkpoint.checkpoint(block, x)` and no
`use_reentrant`: the reentrant default silently drops the gradients of parameters used inside
a block when the block's inputs do not require grad (GPU302). It trains with SGD and momentum
without `fused=True` (GPU201) and in fp32 (GPU001). The targets are a known function of the
inputs, so the loss shows whether it learns.

    python examples/deep_residual_mlp.py --steps 200
    gpulint verify examples/deep_residual_mlp.py
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class ResidualBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 2 * width)
        self.fc2 = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


class DeepMLP(nn.Module):
    def __init__(self, features: int, width: int = 64, depth: int = 24) -> None:
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.blocks = nn.ModuleList(ResidualBlock(width) for _ in range(depth))
        self.out = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        for block in self.blocks:
            x = checkpoint(block, x) if self.training else block(x)
        return self.out(x)


def target(x: torch.Tensor) -> torch.Tensor:
    return (torch.sin(3 * x[:, :1]) + x[:, 1:2] * x[:, 2:3] - 0.5 * x[:, 3:4] ** 2).contiguous()


def main() -> None:
    parser = argparse.ArgumentParser(description="Train a deep residual MLP with activation checkpointing.")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.005)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = DeepMLP(args.features).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for step in range(args.steps):
        x = torch.randn(args.batch_size, args.features, device=device)
        loss = nn.functional.mse_loss(model(x), target(x))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
