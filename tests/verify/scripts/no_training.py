"""Runs a training loop that cannot train: --lr 0, or --frozen parameters.

Random batches each step, so the loss moves but shows no trend. GPU201 rewrites the Adam.
"""

import sys

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(device)
lr = 0.0 if "--lr0" in sys.argv else 1e-2
if "--frozen" in sys.argv:
    for param in model.parameters():
        param.requires_grad_(False)
optimizer = torch.optim.Adam(model.parameters(), lr=lr)
for step in range(1000):
    x = torch.randn(32, 8, device=device, requires_grad="--frozen" in sys.argv)
    loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
