"""How long `gpulint server` takes to answer an editor: a script, not a test (numbers depend on the machine).

Starts the server over stdio, opens a file, then times:
- start: from starting the process to the answer to `initialize`, and to the first diagnostics (wall,
  and the CPU the server and its lint workers used until then);
- open: didOpen to the diagnostics that include the project pass (facts of the files around it);
- edit: didChange to the diagnostics of the new text, less the server's 0.2 s pause after a keystroke;
- code action and hover requests at the first finding;
- typing into a large buffer (`--large`, a generated module): a burst of keystrokes sent while the
  previous version is still being linted, then a pause. "after a pause" is the time from the last
  keystroke to the diagnostics of that text (the 0.2 s pause included); "request while linting" is a
  hover on a rule code written in a comment, sent 50 ms after that keystroke (it needs no lint).

    python bench/lsp_latency.py [FILE ...] [--edits 20] [--large 160] [--trials 5] [--baseline DIR]

Default files: examples/shapes_classifier.py, fixtures/scripts/transformer_lm.py, and a generated
module of 40 training functions (about 560 lines). `--baseline DIR` runs the same measurements against
the gpulint in another checkout (its `gpulint/` put first on PYTHONPATH) in the same run, and prints
the ratios baseline / this tree.

Both trees are measured from copies of their `gpulint/` with the bytecode compiled, as an installed
gpulint starts (pip compiles it): a checkout's own `__pycache__` may be missing or stale (where
PYTHONDONTWRITEBYTECODE is set, every start compiles each module it imports from source: about
0.3 s of CPU more for the lint worker's imports), and one tree's could be fresher than the other's.
`--in-place` measures the checkouts as they are.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parent.parent
DEBOUNCE_S = 0.2
Message = dict[str, Any]


class Client:
    """A bare LSP client. A thread reads the server's output all the time (a server blocked writing a
    large publish while the client writes a large edit would otherwise deadlock both); messages read
    while waiting for another are kept for later waits."""

    def __init__(self, root: Path, gpulint_tree: Optional[Path] = None) -> None:
        env = dict(os.environ)
        if gpulint_tree is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(gpulint_tree), *filter(None, [env.get("PYTHONPATH")])])
        self.process = subprocess.Popen([sys.executable, "-m", "gpulint", "server"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=root, env=env)
        self.spawned = time.perf_counter()
        self.initialize_s = 0.0  # from starting the process to the answer to `initialize`
        self.next_id = 0
        self.backlog: list[Message] = []
        self.inbox: queue.Queue[Optional[Message]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def send(self, message: Message) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            length = 0
            while True:
                line = stream.readline()
                if line == b"":
                    self.inbox.put(None)
                    return
                if line == b"\r\n":
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            self.inbox.put(json.loads(stream.read(length)))

    def receive(self) -> Message:
        message = self.inbox.get(timeout=600)
        if message is None:
            raise RuntimeError("the server closed its output")
        if "id" in message and "method" in message:  # a request from the server: accept it
            self.send({"id": message["id"], "result": None})
        return message

    def wait(self, accept: Callable[[Message], bool]) -> Message:
        for index, message in enumerate(self.backlog):
            if accept(message):
                return self.backlog.pop(index)
        while True:
            message = self.receive()
            if accept(message):
                return message
            self.backlog.append(message)

    def ask(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        return self.next_id

    def response(self, request_id: int) -> Message:
        return self.wait(lambda m: m.get("id") == request_id and "method" not in m)

    def request(self, method: str, params: dict[str, Any]) -> Any:
        return self.response(self.ask(method, params)).get("result")

    def diagnostics(self, uri: str, version: int) -> list:
        def accept(message: Message) -> bool:
            params = message.get("params") or {}
            return message.get("method") == "textDocument/publishDiagnostics" and params.get("uri") == uri \
                and params.get("version") == version
        return self.wait(accept)["params"]["diagnostics"]

    def change(self, uri: str, version: int, text: str) -> None:
        self.send({"method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}})

    def start(self, path: Path, text: str) -> str:
        """Initialize, open `path` with `text`; returns its URI once the project pass's diagnostics came."""
        uri = path.resolve().as_uri()
        self.request("initialize", {"processId": None, "rootUri": path.parent.resolve().as_uri(), "capabilities": {}})
        self.initialize_s = time.perf_counter() - self.spawned
        self.send({"method": "initialized", "params": {}})
        self.send({"method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}}})
        return uri

    def close(self) -> None:
        self.request("shutdown", {})
        self.send({"method": "exit"})
        self.process.wait(timeout=60)


def generated_module(folder: Path, functions: int = 40, name: str = "many_loops.py") -> Path:
    body = ["# a generated module (bench/lsp_latency.py); hover here: GPU101", "import torch",
            "from torch.utils.data import DataLoader", "", "device = torch.device('cuda')", ""]
    for i in range(functions):
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
    path = folder / name
    path.write_text("\n".join(body))
    return path


def tree_cpu_s(pid: int) -> Optional[float]:
    """CPU seconds (user + system) of a process and its live descendants so far, from /proc (Linux);
    None elsewhere. The server's lint workers are its descendants."""
    tick, total, stack = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100, 0.0, [pid]
    if not os.path.isdir(f"/proc/{pid}/task"):
        return None
    while stack:
        current = stack.pop()
        try:
            with open(f"/proc/{current}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    stack += [int(child) for child in handle.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def ms(values: list[float]) -> Optional[float]:
    return round(1000 * statistics.median(values), 1) if values else None


def measure(path: Path, edits: int, tree: Optional[Path]) -> dict[str, Any]:
    client = Client(path.parent, tree)
    text = path.read_text(encoding="utf-8")
    started = time.perf_counter()
    uri = client.start(path, text)
    client.diagnostics(uri, 1)  # at once, without the project pass
    first = time.perf_counter() - started
    from_start, cpu = time.perf_counter() - client.spawned, tree_cpu_s(client.process.pid)
    diagnostics = client.diagnostics(uri, 1)  # with the project pass
    opened = time.perf_counter() - started
    edit_times = []
    for version in range(2, edits + 2):
        text += f"\n# edit {version}\n"
        started = time.perf_counter()
        client.change(uri, version, text)
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
    return {"file": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name,
            "lines": text.count("\n"), "findings": len(diagnostics),
            "initialize_ms": round(1000 * client.initialize_s, 1), "first_diagnostics_ms": round(1000 * first, 1),
            "first_from_start_ms": round(1000 * from_start, 1),
            "first_from_start_cpu_ms": round(1000 * cpu, 1) if cpu is not None else None,
            "open_with_project_ms": round(1000 * opened, 1), "edit_median_ms": ms(edit_times),
            "edit_max_ms": round(1000 * max(edit_times), 1), "code_action_median_ms": ms(action_times),
            "hover_median_ms": ms(hover_times)}


def typing(path: Path, trials: int, tree: Optional[Path], keys: int = 4, interval: float = 0.1) -> dict[str, Any]:
    """Bursts of keystrokes into a large buffer while its previous version is being linted."""
    client = Client(path.parent, tree)
    text = path.read_text(encoding="utf-8") + "\n#"
    uri = client.start(path, text)
    client.diagnostics(uri, 1)
    client.diagnostics(uri, 1)
    version, after_pause, during = 1, [], []
    hover_at = {"line": 0, "character": text.index("GPU101") + 2}
    started = time.perf_counter()
    for _ in range(trials):
        version += 1
        text += "x"
        client.change(uri, version, text)
        time.sleep(DEBOUNCE_S + 0.3)  # the server is linting this version now
        for _ in range(keys):
            version += 1
            text += "x"
            client.change(uri, version, text)
            last_key = time.perf_counter()
            time.sleep(interval)
        time.sleep(max(0.0, last_key + 0.05 - time.perf_counter()))
        hover_id = client.ask("textDocument/hover", {"textDocument": {"uri": uri}, "position": hover_at})
        hover_sent = time.perf_counter()
        client.response(hover_id)
        during.append(time.perf_counter() - hover_sent)
        client.diagnostics(uri, version)
        after_pause.append(time.perf_counter() - last_key)
    total = time.perf_counter() - started
    client.close()
    return {"file": path.name, "lines": text.count("\n"), "bytes": len(text.encode()), "trials": trials,
            "after_pause_median_ms": ms(after_pause), "after_pause_max_ms": round(1000 * max(after_pause), 1),
            "request_while_linting_median_ms": ms(during), "trials_total_s": round(total, 1)}


def compiled_copy(tree: Optional[Path], folder: Path) -> Path:
    """`tree`'s gpulint/ copied into `folder`, with its bytecode compiled (see the module docstring)."""
    assert tree is not None
    shutil.copytree(tree / "gpulint", folder / "gpulint", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(folder / "gpulint")], check=True,
                   stdout=subprocess.DEVNULL)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--large", type=int, default=160, help="training functions in the large buffer (0: none)")
    parser.add_argument("--trials", type=int, default=5, help="typing bursts into the large buffer")
    parser.add_argument("--baseline", type=Path, help="another checkout to measure in the same run")
    parser.add_argument("--in-place", action="store_true",
                        help="run each checkout's gpulint/ as it is, not a copy with its bytecode compiled")
    args = parser.parse_args()
    trees: list[tuple[str, Optional[Path]]] = [("this tree", ROOT)]
    if args.baseline is not None:
        trees.append(("baseline", args.baseline.resolve()))
    print(f"# {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as folder:
        if not args.in_place:
            trees = [(name, compiled_copy(tree, Path(folder) / f"tree{index}"))
                     for index, (name, tree) in enumerate(trees)]
        files = args.files or [ROOT / "examples" / "shapes_classifier.py", ROOT / "fixtures" / "scripts" /
                               "transformer_lm.py", generated_module(Path(folder))]
        large = generated_module(Path(folder), args.large, "large_module.py") if args.large else None
        results: dict[str, list[dict[str, Any]]] = {}
        for name, tree in trees:  # one tree after the other, each file in the same order
            rows = [measure(path, args.edits, tree) for path in files]
            if large is not None:
                rows.append(typing(large, args.trials, tree))
            results[name] = rows
            for row in rows:
                print(json.dumps({"tree": name, **row}), flush=True)
        if args.baseline is not None:
            for ours, theirs in zip(results["this tree"], results["baseline"]):
                ratios = {key: round(theirs[key] / ours[key], 2) for key in ours
                          if key.endswith("_ms") and ours[key] and theirs.get(key)}
                print(json.dumps({"file": ours["file"], "baseline / this tree": ratios}))
        print(f"# load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
