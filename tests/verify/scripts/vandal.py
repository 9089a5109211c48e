"""Does its worst to the files in its working directory and in its own folder, then trains.

A verify run must let it see the user's files, let every change it makes land in a sandbox,
and refuse changes to the user's folders by absolute path (argv: the real working directory
and the real script folder). It checks each effect and crashes when one is wrong, so a
passing verification proves the operations happened and were contained.
"""

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch

real_cwd, real_here = Path(sys.argv[1]), Path(sys.argv[2])
here = Path(__file__).resolve().parent
bases = [Path.cwd(), here]
assert Path.cwd().resolve() != real_cwd.resolve(), "the run's working directory is the user's"
assert here != real_here.resolve(), "the script runs from the user's folder"


def vandalise(base: Path) -> None:
    assert (base / "data.csv").read_text() == "a,b\n1,2\n", "user files must be readable"
    assert (base / "big.bin").read_bytes()[:4] == b"BIG0", "large files must be readable"
    for path in glob.glob(str(base / "*.csv")):
        os.remove(path)
    with open(base / "notes.txt", "w") as handle:
        handle.write("vandalised")
    os.rename(base / "keep.bin", base / "moved.bin")
    (base / "new_file.txt").write_text("new")
    os.truncate(base / "trunc.txt", 0)
    with open(base / "log.txt", "a") as handle:
        handle.write("appended")
    with open(base / "big.bin", "r+b") as handle:
        handle.write(b"XX")
    shutil.rmtree(base / "sub")
    (base / "deep" / "inner").mkdir(parents=True, exist_ok=True)
    (base / "deep" / "inner" / "data.txt").write_text("overwritten")
    os.chmod(base / "notes.txt", 0o600)
    torch.save({"weights": torch.zeros(2)}, base / "checkpoint.pt")
    torch.save({"weights": torch.zeros(2)}, str(base / "deep" / "ckpt.pt"))
    assert not (base / "data.csv").exists() and not (base / "sub").exists()
    assert (base / "notes.txt").read_text() == "vandalised"
    assert (base / "moved.bin").exists() and not (base / "keep.bin").exists()
    assert (base / "trunc.txt").read_bytes() == b""
    assert (base / "log.txt").read_text() == "log\nappended"
    assert (base / "big.bin").read_bytes()[:4] == b"XXG0"
    assert (base / "deep" / "inner" / "data.txt").read_text() == "overwritten"
    assert torch.load(base / "checkpoint.pt")["weights"].shape == (2,)
    os.chdir(base / "deep")
    Path("written_after_chdir.txt").write_text("x")
    os.chdir(base)


def must_be_blocked(action, what: str) -> None:
    try:
        action()
    except PermissionError:
        return
    raise AssertionError(f"{what} was not blocked")


start = Path.cwd()
for base in bases:
    vandalise(base)
    os.chdir(start)
for real in (real_cwd, real_here):
    must_be_blocked(lambda: open(real / "notes.txt", "w"), "an absolute write")
    must_be_blocked(lambda: os.remove(real / "notes.txt"), "an absolute delete")
    must_be_blocked(lambda: os.rename(real / "notes.txt", real / "x.txt"), "an absolute rename")
    must_be_blocked(lambda: torch.save({}, real / "checkpoint.pt"), "an absolute torch.save")
    must_be_blocked(lambda: shutil.rmtree(real / "deep"), "an absolute rmtree")
    child = subprocess.run([sys.executable, "-c", "import sys; open(sys.argv[1], 'w').write('x')",
                            str(real / "notes.txt")], capture_output=True, text=True)
    assert child.returncode != 0 and "PermissionError" in child.stderr, "a child process was not guarded"
subprocess.run([sys.executable, "-c", "import os; os.remove('notes.txt')"], check=True)  # relative: the sandbox

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
