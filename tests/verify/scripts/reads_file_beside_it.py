"""Reads its settings from a file next to it, through __file__, as many training scripts do."""

import json
from pathlib import Path

import torch

settings = json.loads((Path(__file__).parent / "reads_file_beside_it.json").read_text())
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 1).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=settings["lr"])
for step in range(100):
    loss = model(torch.randn(8, 4, device=device)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
