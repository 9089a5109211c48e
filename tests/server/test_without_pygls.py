"""The server needs neither pygls nor lsprotocol (issue 25), though the test extra installs both for pytest-lsp:
here they cannot be imported at all, in the server or in its lint worker, and a whole session still works."""

from __future__ import annotations

import os
from pathlib import Path

from tests.server.wire import Wire

TRAIN = """import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda")
loader = DataLoader(TensorDataset(torch.randn(64, 8)), batch_size=8)
for (x,) in loader:
    x = x.to(device, non_blocking=True)
"""


def test_a_session_runs_with_pygls_and_lsprotocol_unimportable(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    for name in ("pygls", "lsprotocol"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(f"raise ImportError('{name} is blocked by this test')\n")
    project = tmp_path / "project"
    project.mkdir()
    path = os.pathsep.join(p for p in (str(blocked), os.environ.get("PYTHONPATH", "")) if p)
    server = Wire(project, ("--no-cache",), env={"PYTHONPATH": path})
    try:
        result = server.initialize(project)
        assert result["capabilities"]["textDocumentSync"]
        uri = server.open(project / "train.py", TRAIN)
        codes = [d["code"] for d in server.diagnostics(uri)["diagnostics"]]
        assert codes == ["GPU101"]
        assert server.call("shutdown") is None
        server.notify("exit")
        assert server.exit_code() == 0
        assert b"is blocked by this test" not in server.stderr
    finally:
        server.close()
