"""A training loader and a validation loader; validation runs after the epoch, past the steps verify runs.

GPU101 pins both loaders. Only the training loader's rewrite runs in the checked steps, so the
rule is exercised in one of its two edits.
"""

import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(2048, 8)
y = x.sum(dim=1, keepdim=True)
train_loader = DataLoader(TensorDataset(x[:1792], y[:1792]), batch_size=32, shuffle=True)
val_loader = DataLoader(TensorDataset(x[1792:], y[1792:]), batch_size=64)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
for epoch in range(2):
    for xb, yb in train_loader:
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        val = sum(torch.nn.functional.mse_loss(model(xb), yb) for xb, yb in val_loader)
    print(f"epoch {epoch}: validation loss {val.item() / len(val_loader):.4f}")
