"""GPU202's figure: fused SGD with momentum after a GradScaler skips the first step.

    python bench/fused_sgd_scaler.py

Trains a Linear(64, 64) four steps with SGD(momentum=0.9) under `GradScaler("cpu")`, the first loss
made inf so that the scaler skips that step, and prints the largest weight after each step: unfused,
then fused with three seeds (the fused momentum buffer is `torch.empty_like` memory, so the blow-up
varies). torch 2.13.0+cpu, 2026-12-03: unfused 0.125 throughout; fused 3.2e29, 2.3e29 and inf one
step after the skip.
"""

from __future__ import annotations

import torch


def run(fused: bool, seed: int = 0) -> list[float]:
    torch.manual_seed(seed)
    model = torch.nn.Linear(64, 64)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, fused=fused)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    x = torch.randn(32, 64)
    largest = []
    for step in range(4):
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        if step == 0:
            loss = loss * float("inf")  # the first scaled step overflows: the scaler skips it
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        largest.append(model.weight.abs().max().item())
    return largest


if __name__ == "__main__":
    print("unfused", run(False))
    for seed in range(3):
        print("fused  ", run(True, seed))
