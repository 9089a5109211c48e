"""Activation checkpointing applied from the very first block, on an input that does not require grad.

With the reentrant default, a checkpointed block whose inputs do not require grad gives its
parameters no gradients, and its output none either: here only the head trains (2 of 10
parameter tensors). GPU302's `use_reentrant=False` makes all 10 train: a bug fixed, not damage.
"""

import torch
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
blocks = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh()) for _ in range(4))
head = torch.nn.Linear(16, 1)
parameters = [p for block in blocks for p in block.parameters()] + list(head.parameters())
optimizer = torch.optim.RMSprop(parameters, lr=1e-3)
x_all = torch.randn(1024, 16)
y_all = torch.sin(x_all[:, :3]).sum(dim=1, keepdim=True)
for step in range(200):
    index = torch.randint(0, 1024, (32,))
    x = x_all[index]
    for block in blocks:
        x = checkpoint(block, x)
    loss = torch.nn.functional.mse_loss(head(x), y_all[index])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
