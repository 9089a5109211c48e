"""Regression on raw features (counts up to 200,000), normalised by a LayerNorm after the first layer.

In float32 it trains. GPU001 wraps the forward in float16 autocast: the first layer's outputs
exceed float16's largest value (65504), so on a GPU the loss is inf/NaN from the first step and
the GradScaler's scale collapses. A CPU that runs the region in bfloat16 (fp32's range) would
train normally and hide it.
"""

import torch

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
counts = torch.randint(50_000, 200_000, (512, 8)).float()
target = (counts[:, :4].sum(dim=1, keepdim=True) - counts[:, 4:].sum(dim=1, keepdim=True)) / 100_000
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.LayerNorm(32), torch.nn.GELU(),
                            torch.nn.Linear(32, 1)).to(device)
optimizer = torch.optim.RMSprop(model.parameters(), lr=3e-3)
for step in range(200):
    index = torch.randint(0, 512, (32,))
    x, y = counts[index].to(device), target[index].to(device)
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
