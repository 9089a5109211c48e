"""A learning-rate warm-up that climbs without a ceiling: the loss turns NaN, in the original and the rewrite alike.

GPU101 pins the loader (numerics-neutral), so both runs diverge at the same step; the steps
before it are what verify can judge.
"""

import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(2048, 8)
y = x.sum(dim=1, keepdim=True)
loader = DataLoader(TensorDataset(x, y), batch_size=32)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
for step, (xb, yb) in enumerate(loader):
    for group in optimizer.param_groups:
        group["lr"] = 1e-3 * 2 ** step  # warm-up: doubles every step, and nothing stops it
    loss = torch.nn.functional.mse_loss(model(xb), yb)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
