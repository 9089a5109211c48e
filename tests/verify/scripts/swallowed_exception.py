"""A per-class logit summary that breaks under autocast, hidden by a bare `except`.

GPU001 puts the forward pass under autocast, so `logits` become 16-bit; `index_add_` into the
float32 summary then raises on every step, and the script's `except: pass` swallows it. The loss
is unchanged: only the count of exceptions inside the steps shows the broken feature.
"""

import torch

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
features = torch.randn(512, 16)
labels = (features[:, :3].sum(dim=1) > 0).long()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2)).to(device)
optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
logit_sums = torch.zeros(2, 2, device=device)
for step in range(200):
    index = torch.randint(0, 512, (64,))
    x, y = features[index].to(device), labels[index].to(device)
    logits = model(x)
    loss = torch.nn.functional.cross_entropy(logits, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    try:
        logit_sums.index_add_(0, y, logits.detach())  # per-class mean logits, for a dashboard
    except:  # noqa: E722 - the habit this script shows
        pass
