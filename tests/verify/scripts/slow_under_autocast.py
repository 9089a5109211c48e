"""A fp32 training loop (GPU001 adds autocast) that stalls after 6 steps once autocast is on.

It stands for a CNN whose bfloat16 run is 6-12x slower on a CPU without native bfloat16: the
rewritten run times out, and the steps it did finish must still be compared, not thrown away.
"""

import time

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
low_precision = False


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        global low_precision
        out = self.body(x)
        low_precision = low_precision or out.dtype != torch.float32  # the rewrite's mixed precision is on
        return out


model = Net().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
x = torch.randn(256, 16, device=device)
y = x[:, :4].sum(dim=1, keepdim=True)
for step in range(1000):
    loss = nn.functional.mse_loss(model(x).float(), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if low_precision and step >= 5:
        time.sleep(3600)  # after 6 steps
