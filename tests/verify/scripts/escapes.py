"""Tries every way out of verify's sandbox the Python-level guard once missed, then trains.

argv: the user's real project folder (also the working directory), a folder outside it, and
the real folder the project's `linked` symlink points to. Each attempt prints what happened
and never stops the script: a verification must still run to the end to report on them.
"""

import os
import subprocess
import sys
from pathlib import Path

import torch

project, outside, linked_target = (Path(p) for p in sys.argv[1:4])
notes = project / "notes.txt"


def attempt(what, action):
    try:
        action()
        print(f"ESCAPE? {what}: done", flush=True)
    except OSError as exc:
        print(f"refused {what}: {exc}", flush=True)


def shell(command):
    code = os.system(command)
    if code:
        raise PermissionError(f"the shell said {code}")


def fchmod():
    fd = os.open(notes, os.O_RDONLY)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def dir_fd_open():
    folder = os.open(project, os.O_RDONLY)
    try:
        fd = os.open("notes.txt", os.O_WRONLY | os.O_APPEND, dir_fd=folder)
        os.write(fd, b"dir_fd\n")
        os.close(fd)
    finally:
        os.close(folder)


def hard_link():
    os.link(notes, "hard.txt")
    with open("hard.txt", "a") as handle:
        handle.write("through a hard link\n")


def child(*flags, env=None):
    code = f"open({str(notes)!r}, 'a').write('child {' '.join(flags) or 'env'}\\n')"
    done = subprocess.run([sys.executable, *flags, "-c", code], env=env, capture_output=True, text=True)
    if done.returncode:
        raise PermissionError(done.stderr.strip().splitlines()[-1])


class Writes(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, index):
        try:
            (project / "worker.txt").write_text("from a DataLoader worker")
        except PermissionError:
            pass
        return torch.zeros(4)


attempt("a shell appends to .git/config", lambda: shell("echo x >> .git/config"))
attempt("a shell writes through the project's own link", lambda: shell("echo x >> linked/data.txt"))
attempt("a shell writes by absolute path outside", lambda: shell(f"echo x >> {outside / 'notes.txt'}"))
attempt("os.fchmod", fchmod)
attempt("os.open with dir_fd", dir_fd_open)
attempt("os.link", hard_link)
attempt("python -I", lambda: child("-I"))
attempt("a cleared environment", lambda: child(env={}))
attempt("Python writes outside", lambda: (outside / "from_python.txt").write_text("x"))
for _ in torch.utils.data.DataLoader(Writes(), num_workers=1):
    pass

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 1).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
x = torch.randn(64, 4, device=device)
y = x.sum(dim=1, keepdim=True)
for step in range(100):
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
