"""Builds its optimizer, then waits forever (a stuck data source, a deadlock)."""

import time

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 1).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
time.sleep(3600)
