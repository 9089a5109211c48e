"""The rewritten constructs never run in the timed steps: Adam only on an argv branch, an eval loader only at step 1."""

import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(device)
if "--adam" in sys.argv:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
else:
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-2)
eval_data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
eval_loader = DataLoader(eval_data, batch_size=16)
x = torch.randn(256, 8)
y = x.sum(dim=1, keepdim=True)
for step in range(100):
    if step == 0:
        with torch.no_grad():
            for xb, yb in eval_loader:
                model(xb.to(device))
    idx = torch.randint(0, 256, (32,))
    loss = torch.nn.functional.mse_loss(model(x[idx].to(device)), y[idx].to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
