"""Trains one pass over its data (10 steps) inside main() and returns: it ends by itself before --steps.

The model is local to main(), so it is gone when the script ends; the parameters must still be
measured (at exit), and the verdict must agree with the training lines above it. 10 steps, fewer than
the 12 a mixed-precision check runs on a CPU without native bfloat16 (NUMERICS_ONLY_STEPS), so that it
ends by itself on every CPU; the learning rate makes 10 steps a significant decrease.
"""

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(320, 8)
    y = x.sum(dim=1, keepdim=True)
    loader = DataLoader(TensorDataset(x, y), batch_size=32)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-2)
    for xb, yb in loader:
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
