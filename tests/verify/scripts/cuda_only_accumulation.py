"""A CUDA-only script (pinned memory, CUDA events, streams, device queries, a CUDA checkpoint) with
gradient accumulation that divides the loss, and a bare `except:` around each step that must not
swallow verify's step limit. argv[1]: a JSON file for the losses it reports.
"""

import json
import sys

import torch

accumulation = 4
torch.cuda.manual_seed_all(0)
torch.cuda.set_device(0)
name = torch.cuda.get_device_name(0)
free, total = torch.cuda.mem_get_info()
bf16 = torch.cuda.is_bf16_supported()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).cuda()
torch.save(model.state_dict(), "init.pt")
model.load_state_dict(torch.load("init.pt"))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
stream = torch.cuda.current_stream()
data = torch.randn(512, 16).pin_memory()
target = data[:, :1].clone().pin_memory() * 3
reported = []


def train_step(step: int) -> None:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    step_loss = 0.0
    for micro in range(accumulation):
        rows = slice((step * accumulation + micro) % 32 * 16, (step * accumulation + micro) % 32 * 16 + 16)
        x = data[rows].to("cuda:0", non_blocking=True)
        y = target[rows].to(0, non_blocking=True)
        loss = torch.nn.functional.mse_loss(model(x), y) / accumulation
        loss.backward()
        step_loss += loss.item() * accumulation
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    end.record()
    torch.cuda.synchronize()
    elapsed = start.elapsed_time(end)
    stream.synchronize()
    reported.append(step_loss / accumulation)  # what the script prints: the mean micro-batch loss
    with open(sys.argv[1], "w") as handle:
        json.dump({"losses": reported, "elapsed_ms": elapsed, "peak": torch.cuda.max_memory_allocated()}, handle)


done = 0
for step in range(64):
    try:
        train_step(step)
        done += 1
    except:  # noqa: E722 - the point: a script that swallows everything
        pass
print(f"finished all {done} steps")
