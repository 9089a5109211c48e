"""How long `gpulint server` takes to answer an editor: a script, not a test (numbers depend on the machine).

Starts the server over stdio, opens a file, then times:
- open: didOpen to the diagnostics that include the project pass (facts of the files around it);
- edit: didChange to the diagnostics of the new text, less the server's 0.2 s pause after a keystroke;
- code action and hover requests at the first finding.

    python bench/lsp_latency.py [FILE ...] [--edits 20]

Default files: examples/shapes_classifier.py, fixtures/scripts/transformer_lm.py, and a generated
module of 40 training functions (about 1,000 lines).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
DEBOUNCE_S = 0.2


class Client:
    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "gpulint", "server"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=root)
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        length = 0
        while True:
            line = self.process.stdout.readline()
            if line in (b"\r\n", b""):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return json.loads(self.process.stdout.read(length))

    def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        while True:
            message = self.receive()
            if message.get("id") == self.next_id and "method" not in message:
                return message.get("result")
            if "id" in message and "method" in message:  # a request from the server: accept it
                self.send({"id": message["id"], "result": None})

    def diagnostics(self, uri: str, version: int) -> list:
        while True:
            message = self.receive()
            if "id" in message and "method" in message:
                self.send({"id": message["id"], "result": None})
            params = message.get("params") or {}
            if message.get("method") == "textDocument/publishDiagnostics" and params.get("uri") == uri \
                    and params.get("version") == version:
                return params["diagnostics"]

    def close(self) -> None:
        self.request("shutdown", {})
        self.send({"method": "exit"})
        self.process.wait(timeout=10)


def generated_module(folder: Path) -> Path:
    body = ["import torch", "from torch.utils.data import DataLoader", "", "device = torch.device('cuda')", ""]
    for i in range(40):
        body += [f"def train_{i}(model, dataset, epochs=1):",
                 "    loader = DataLoader(dataset, batch_size=32, shuffle=True)",
                 "    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)",
                 "    for epoch in range(epochs):",
                 "        for x, y in loader:",
                 "            x, y = x.to(device), y.to(device)",
                 "            loss = torch.nn.functional.cross_entropy(model(x), y)",
                 "            optimizer.zero_grad()",
                 "            loss.backward()",
                 "            optimizer.step()",
                 "    return model", "", ""]
    path = folder / "many_loops.py"
    path.write_text("\n".join(body))
    return path


def measure(path: Path, edits: int) -> dict[str, Any]:
    client = Client(path.parent)
    uri = path.resolve().as_uri()
    client.request("initialize", {"processId": None, "rootUri": path.parent.resolve().as_uri(), "capabilities": {}})
    client.send({"method": "initialized", "params": {}})
    text = path.read_text(encoding="utf-8")
    started = time.perf_counter()
    client.send({"method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": text}}})
    client.diagnostics(uri, 1)  # at once, without the project pass
    first = time.perf_counter() - started
    diagnostics = client.diagnostics(uri, 1)  # with the project pass
    opened = time.perf_counter() - started
    edit_times = []
    for version in range(2, edits + 2):
        text += f"\n# edit {version}\n"
        started = time.perf_counter()
        client.send({"method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}})
        client.diagnostics(uri, version)
        edit_times.append(time.perf_counter() - started - DEBOUNCE_S)
    action_times, hover_times = [], []
    where: Optional[dict] = diagnostics[0]["range"] if diagnostics else None
    for _ in range(10 if where else 0):
        started = time.perf_counter()
        client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": where,
                                                   "context": {"diagnostics": []}})
        action_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": where["start"]})
        hover_times.append(time.perf_counter() - started)
    client.close()
    ms = lambda values: round(1000 * statistics.median(values), 1) if values else None  # noqa: E731
    return {"file": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name,
            "lines": text.count("\n"), "findings": len(diagnostics), "first_diagnostics_ms": round(1000 * first, 1),
            "open_with_project_ms": round(1000 * opened, 1), "edit_median_ms": ms(edit_times),
            "edit_max_ms": round(1000 * max(edit_times), 1), "code_action_median_ms": ms(action_times),
            "hover_median_ms": ms(hover_times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--edits", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        files = args.files or [ROOT / "examples" / "shapes_classifier.py", ROOT / "fixtures" / "scripts" /
                               "transformer_lm.py", generated_module(Path(folder))]
        print(f"# {time.strftime('%Y-%m-%d')}, {platform.machine()}, Python {platform.python_version()}, "
              f"load average {' '.join(f'{x:.1f}' for x in __import__('os').getloadavg())}")
        for path in files:
            print(json.dumps(measure(path, args.edits)))


if __name__ == "__main__":
    main()
