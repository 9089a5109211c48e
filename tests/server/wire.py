"""A raw LSP client for hostile tests: bytes on the server's stdin, every read bounded in time.

pytest-lsp speaks only well-formed LSP; these tests also need malformed params, requests after
`shutdown`, `exit` without it, and the server's exit status. Messages are read by a thread into a
queue, so a server that hangs fails a test after a bounded wait instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60.0  # the longest any one answer may take (a loaded 2-core machine, a cold import)
Message = dict[str, Any]


class Wire:
    """`gpulint server` in a child process, spoken to over its stdin and stdout."""

    def __init__(self, cwd: Path, args: Sequence[str] = (), env: Optional[dict[str, Optional[str]]] = None) -> None:
        """`env` changes the server's environment: a value of None removes the variable."""
        environment = {**os.environ, **(env or {})}
        self.process = subprocess.Popen([sys.executable, "-m", "gpulint", "server", *args], cwd=cwd,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        env={k: v for k, v in environment.items() if v is not None})
        self.messages: queue.Queue[Optional[Message]] = queue.Queue()
        self.seen: list[Message] = []  # every message read so far, in order
        self.next_id = 0
        self.stderr = b""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    # --- bytes ----------------------------------------------------------------------------------
    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    self.messages.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            body = stream.read(length or 0)
            self.messages.put(json.loads(body))

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr += line

    def send_raw(self, body: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def send(self, message: Message) -> None:
        self.send_raw(json.dumps({"jsonrpc": "2.0", **message}).encode())

    # --- messages -------------------------------------------------------------------------------
    def notify(self, method: str, params: Any = None) -> None:
        self.send({"method": method, **({"params": params} if params is not None else {})})

    def request(self, method: str, params: Any = None) -> int:
        """Send a request; returns its id (answered later: `response`)."""
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, **({"params": params} if params is not None else {})})
        return self.next_id

    def wait_for(self, accept: Callable[[Message], bool], timeout: float = WAIT_S, what: str = "") -> Message:
        """The first message not yet returned that `accept`s; requests from the server are answered
        with null meanwhile. AssertionError after `timeout` seconds or when the server closes stdout."""
        deadline = time.monotonic() + timeout
        for message in self.seen:
            if not message.get("_taken") and accept(message):
                message["_taken"] = True
                return message
        while True:
            left = deadline - time.monotonic()
            try:
                message = self.messages.get(timeout=max(left, 0.01))
            except queue.Empty:
                raise AssertionError(f"no {what or 'such message'} within {timeout:.0f} s") from None
            if message is None:
                self.messages.put(None)  # the next wait sees the end too
                raise AssertionError(f"the server closed its output before {what or 'the message'}")
            self.seen.append(message)
            if "id" in message and "method" in message:  # a request from the server
                self.send({"id": message["id"], "result": None})
            if accept(message):
                message["_taken"] = True
                return message
            if left <= 0:
                raise AssertionError(f"no {what or 'such message'} within {timeout:.0f} s")

    def response(self, request_id: int, timeout: float = WAIT_S) -> Message:
        return self.wait_for(lambda m: m.get("id") == request_id and "method" not in m, timeout,
                             f"response to request {request_id}")

    def call(self, method: str, params: Any = None, timeout: float = WAIT_S) -> Any:
        """A request's result; AssertionError when it is an error."""
        answer = self.response(self.request(method, params), timeout)
        assert "error" not in answer, answer
        return answer.get("result")

    def diagnostics(self, uri: str, accept: Callable[[Message], bool] = lambda params: True,
                    timeout: float = WAIT_S) -> Message:
        """The params of the next publishDiagnostics for `uri` that `accept`s."""
        message = self.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                                and m["params"]["uri"] == uri and accept(m["params"]), timeout,
                                f"diagnostics for {uri}")
        return message["params"]

    def published(self, uri: str) -> list[Message]:
        """Every publishDiagnostics for `uri` seen so far (taken or not)."""
        return [m["params"] for m in self.seen
                if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri]

    def shown(self) -> list[str]:
        """The messages the server asked the editor to show (window/showMessage), in order."""
        return [m["params"]["message"] for m in self.seen if m.get("method") == "window/showMessage"]

    def settle(self, seconds: float) -> None:
        """Read whatever arrives for `seconds` (to prove that nothing more comes)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = self.messages.get(timeout=left)
            except queue.Empty:
                return
            if message is None:
                self.messages.put(None)
                return
            self.seen.append(message)
            if "id" in message and "method" in message:
                self.send({"id": message["id"], "result": None})

    # --- a session ------------------------------------------------------------------------------
    def initialize(self, root: Path, options: Any = None, capabilities: Optional[Message] = None) -> Message:
        result = self.call("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(),
                                          "capabilities": capabilities or {},
                                          **({"initializationOptions": options} if options is not None else {})})
        self.notify("initialized", {})
        return result

    def open(self, path: Path, text: str, version: int = 1, language: str = "python") -> str:
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": language,
                                                              "version": version, "text": text}})
        return uri

    def change(self, uri: str, version: int, text: str) -> None:
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                               "contentChanges": [{"text": text}]})

    def exit_code(self, timeout: float = WAIT_S) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the server did not exit within {timeout:.0f} s") from None

    def close(self) -> None:
        """End the server whatever state it is in (a test's cleanup)."""
        if self.process.poll() is None:
            try:
                self.process.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def codes(params: Message) -> list[str]:
    return sorted(str(d["code"]) for d in params["diagnostics"])


# A training script with one finding per rule the tests look for: GPU101 (the DataLoader) and GPU201 (SGD).
TRAIN = '''\
import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda")
ds = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
loader = DataLoader(ds, batch_size=8)
model = torch.nn.Linear(8, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for x, y in loader:
    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
'''
ADAM = "adam = torch.optim.Adam(model.parameters())\n"  # one more GPU201


def large_module(functions: int) -> str:
    """The benchmark's generated module (bench/lsp_latency.py) of `functions` training loops, 3 findings
    each: seconds of linting, not milliseconds."""
    import importlib.util
    import tempfile

    spec = importlib.util.spec_from_file_location("lsp_latency", ROOT / "bench" / "lsp_latency.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    with tempfile.TemporaryDirectory() as folder:
        return bench.generated_module(Path(folder), functions).read_text(encoding="utf-8")
