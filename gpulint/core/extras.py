"""What an optional feature needs, and a command that installs it.

gpulint is on no package index, so a hint never names an extra by the package's name: it names the
requirement itself, as the installed package's metadata states it (`pip install 'matplotlib>=3.5'`),
and, when gpulint runs from a checkout (an editable install), the extra from that checkout.
Imported only when a message is printed or `gpulint verify` starts.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

# The oldest torch `gpulint verify` works with. Its harness wraps torch.amp.grad_scaler.GradScaler
# (torch 2.3) and torch.optim's global step hooks (2.0); the rewrites it runs add fused=True to
# optimizers over CPU parameters and torch.amp.custom_fwd (both 2.4), and verify runs on the CPU
# when there is no GPU. The `verify` extra states no floor, so that installing it never upgrades the
# torch of a training environment; this is checked when verify starts instead.
VERIFY_TORCH_FLOOR = (2, 4)


def checkout() -> Optional[Path]:
    """The checkout gpulint runs from (the folder with its pyproject.toml), or None for a wheel."""
    root = Path(__file__).resolve().parent.parent.parent
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return root if re.search(r'^name\s*=\s*"gpulint"\s*$', text, re.M) else None


def requirement(extra: str, name: str) -> str:
    """`name`'s requirement in gpulint's `extra` ("matplotlib>=3.5"), or just `name` without metadata."""
    import importlib.metadata

    try:
        declared = importlib.metadata.requires("gpulint") or []
    except importlib.metadata.PackageNotFoundError:
        return name
    for line in declared:
        spec, _, marker = line.partition(";")
        if re.match(rf"{re.escape(name)}\b", spec.strip()) and re.search(rf"extra\s*==\s*['\"]{extra}['\"]", marker):
            return spec.strip().replace(" ", "")
    return name


def install_hint(extra: str, name: str) -> str:
    """`pip install '<requirement>'`, and the checkout's extra when gpulint runs from one."""
    hint = f"pip install '{requirement(extra, name)}'"
    root = checkout()
    if root is not None:
        hint += f" (or, from your gpulint checkout: pip install -e '{root}[{extra}]')"
    return hint


def version_tuple(text: str) -> Optional[tuple[int, int]]:
    """(major, minor) of a version string such as "2.13.0+cpu" or "2.4.0a0+git1234"."""
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def installed_torch() -> Optional[str]:
    """The installed torch's version, read without importing torch; "" when torch is importable
    but has no metadata (a source build); None when there is no torch."""
    import importlib.metadata
    import importlib.util

    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "" if importlib.util.find_spec("torch") is not None else None


def torch_problem() -> Optional[str]:
    """Why `gpulint verify` cannot run with this environment's torch, or None when it can."""
    return problem_with_torch(installed_torch())


def problem_with_torch(version: Optional[str]) -> Optional[str]:
    """What is wrong with torch `version` for verify (None: no torch; "": a version nobody knows)."""
    import sys

    floor = ".".join(map(str, VERIFY_TORCH_FLOOR))
    if version is None:
        return (f"gpulint verify runs the training scripts and needs torch {floor} or newer, which this Python "
                f"({sys.executable}) cannot import: install the torch build for your machine "
                "(pip install torch; the CPU build: pip install torch --index-url https://download.pytorch.org/whl/cpu)"
                ", or run gpulint from your training environment")
    parsed = version_tuple(version)
    if parsed is not None and parsed < VERIFY_TORCH_FLOOR:
        return (f"gpulint verify needs torch {floor} or newer; this environment has torch {version} (verify's "
                "harness wraps torch.amp.GradScaler, new in 2.3, and the rewrites it runs use fused optimizers on "
                f"the CPU and torch.amp.custom_fwd, new in 2.4): upgrade torch here (pip install 'torch>={floor}'), "
                "or run verify where a newer torch is installed")
    return None
