"""Trains two steps, then fails the way a real script does."""

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 1).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(10):
    loss = model(torch.randn(8, 4, device=device)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step == 1:
        raise ValueError("bad batch shape")
