"""Starts processes that outlive it and prints a lot, then trains (or hangs, with --hang).

argv[1]: a file to write the pids of the processes it started. A `sleep` in a new session,
a double-forked daemon, and a `sleep` started by the daemon: none of them may survive the run.
"""

import os
import subprocess
import sys
import time

import torch

pid_file = sys.argv[1]
pids = [subprocess.Popen(["sleep", "300"], start_new_session=True).pid]
read_end, write_end = os.pipe()
child = os.fork()
if child == 0:
    os.setsid()
    if os.fork() == 0:  # the daemon: its parent exits at once, so it is re-parented
        os.close(read_end)
        grandchild = subprocess.Popen(["sleep", "300"]).pid
        os.write(write_end, f"{os.getpid()} {grandchild}\n".encode())
        os.close(write_end)
        time.sleep(300)
    os._exit(0)
os.close(write_end)
os.waitpid(child, 0)
pids += [int(p) for p in os.read(read_end, 100).split()]
with open(pid_file, "w") as handle:
    handle.write(" ".join(map(str, pids)))
print("x" * 1023 + "\n", end="", flush=True)
for line in range(int(os.environ.get("LEAVES_CHILDREN_LINES", "0"))):
    print(f"line {line:07d} " + "y" * 1010, flush=False)
print("LAST LINE OF OUTPUT", flush=True)
if "--hang" in sys.argv:
    time.sleep(3600)

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 1).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 4, device=device)
for step in range(1000):
    loss = (model(x) - 1).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
