"""A CUDA-only training loop with fp16 autocast and a GradScaler; writes its own unscaled losses.

The harness must run it on a CPU (--device cpu), record the unscaled loss at every step and
stop it after --steps steps although it asks for 1000.
"""

import json
import sys

import torch
from torch import nn

out_path = sys.argv[1]
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
scaler = torch.cuda.amp.GradScaler(init_scale=1024.0)
device = torch.device("cuda")
x = torch.randn(64, 16, device="cuda")
y = x[:, :1].to(device) * 2.0
losses = []
for step in range(1000):
    optimizer.zero_grad()
    with torch.autocast("cuda"):
        loss = nn.functional.mse_loss(model(x).float(), y)
    losses.append(loss.item())
    with open(out_path, "w") as handle:
        json.dump({"losses": losses, "scale": scaler.get_scale()}, handle)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    torch.cuda.synchronize()
