"""JSON-RPC 2.0 over stdio with the LSP base protocol: framing, dispatch, lifecycle, error codes.

gpulint's own, in place of pygls and lsprotocol: importing lsprotocol's types alone took half a
second, most of what an editor waited for `initialize` (issue 25). Messages are plain dicts. What
the LSP specification asks of a server, and pygls did not always do (issue 22, item 7):

- a request whose params do not have the shape its method needs gets InvalidParams (-32602);
- before `initialize` a request gets ServerNotInitialized (-32002) and a notification is dropped;
  after `shutdown` a request gets InvalidRequest (-32600) and a notification is dropped;
- `exit` ends the process with status 0 after `shutdown` and 1 without it, and so does the client
  closing stdin (see LanguageServer.serve);
- `$/cancelRequest` cancels the request's task, which answers RequestCancelled (-32800).

Stdin is read by a thread; everything else (handlers, writes) runs on one asyncio event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import sys
import threading
from typing import Any, BinaryIO, Callable, Optional, Union

log = logging.getLogger("gpulint.server")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002
REQUEST_CANCELLED = -32800
CONTENT_MODIFIED = -32801

Message = dict[str, Any]
RequestId = Union[int, str]
Handler = Callable[[Any], Any]  # params -> a result, or an awaitable of one


class ResponseError(Exception):
    """An error a request is answered with (its code and message are the client's to read)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_dict(self) -> Message:
        return {"code": self.code, "message": self.message}


class ContentModified(ResponseError):
    """The document changed while the request was being answered: the editor asks again."""

    def __init__(self, message: str) -> None:
        super().__init__(CONTENT_MODIFIED, message)


# --- the shape of params -----------------------------------------------------------------------
# A shape is a Python type (int excludes bool; `object` is anything), a tuple of alternative shapes,
# a one-item list (a list whose items have that shape), or a dict of keys to shapes (an object that
# has those keys; a key ending in "?" may be missing; other keys are allowed). Enough to refuse what
# a handler could not read, as lsprotocol's structuring did, without its types.
Shape = Any
_JSON_NAMES = {str: "a string", int: "an integer", bool: "a boolean", dict: "an object", list: "an array",
               float: "a number", type(None): "null"}


def shape_problem(value: Any, shape: Shape, where: str = "params") -> Optional[str]:
    """What makes `value` not of `shape` (the first thing found), or None when it is."""
    if shape is object:
        return None
    if isinstance(shape, tuple):
        problems = [shape_problem(value, alternative, where) for alternative in shape]
        return None if None in problems else problems[0]
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{where} must be an array"
        for index, item in enumerate(value):
            problem = shape_problem(item, shape[0], f"{where}[{index}]")
            if problem is not None:
                return problem
        return None
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return f"{where} must be an object"
        for key, inner in shape.items():
            name = key.rstrip("?")
            if name not in value:
                if key.endswith("?"):
                    continue
                return f"{where}.{name} is missing"
            problem = shape_problem(value[name], inner, f"{where}.{name}")
            if problem is not None:
                return problem
        return None
    if shape is int and isinstance(value, bool) or not isinstance(value, shape):
        return f"{where} must be {_JSON_NAMES.get(shape, shape.__name__)}"
    if shape is float and isinstance(value, bool):
        return f"{where} must be a number"
    return None


# --- framing ------------------------------------------------------------------------------------
def read_body(stream: BinaryIO) -> Optional[bytes]:
    """The body of the next message on `stream`; None at the end of the stream. A header block
    without a Content-Length is skipped (there is no telling where its body would end)."""
    while True:
        length: Optional[int] = None
        while True:
            line = stream.readline()
            if not line:
                return None
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    length = None
        if length is None or length < 0:
            log.warning("skipped a message without a valid Content-Length header")
            continue
        body = stream.read(length)
        if len(body) < length:
            return None
        return body


def frame(message: Message) -> bytes:
    """`message` as the base protocol sends it: a Content-Length header, then UTF-8 JSON."""
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _request_id(message: Message) -> Optional[RequestId]:
    """The id of a request or response: an integer or a string (JSON-RPC's), else None."""
    value = message.get("id")
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


_END = object()  # the end of the client's input


class _ParseFailure:
    """A body that is not JSON: answered with a parse error."""

    def __init__(self, error: str) -> None:
        self.error = error


class LanguageServer:
    """A JSON-RPC endpoint on stdin/stdout with the LSP lifecycle: handlers by method, requests to
    the client, and the answers the specification requires (see the module docstring)."""

    def __init__(self) -> None:
        self.requests: dict[str, tuple[Handler, Shape]] = {}
        self.notifications: dict[str, tuple[Handler, Shape]] = {}
        self.initialized = False  # `initialize` answered
        self.shutdown_requested = False  # `shutdown` answered: only `exit` is accepted now
        self._running: dict[RequestId, asyncio.Future[Any]] = {}  # the client's requests being answered
        self._awaiting: dict[RequestId, asyncio.Future[Any]] = {}  # our requests to the client
        self._tasks: set[asyncio.Future[Any]] = set()  # notification handlers still running
        self._next_id = 0
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._inbox: Optional[asyncio.Queue[Any]] = None  # messages read, in order; _END after the last
        self._done: Optional[asyncio.Future[None]] = None
        self._output: BinaryIO = sys.stdout.buffer
        self._write_lock = threading.Lock()

    # --- registering handlers -----------------------------------------------------------------
    def request(self, method: str, shape: Shape = object) -> Callable[[Handler], Handler]:
        """Register the handler of request `method`, whose params must have `shape`."""
        def register(handler: Handler) -> Handler:
            self.requests[method] = (handler, shape)
            return handler
        return register

    def notification(self, method: str, shape: Shape = object) -> Callable[[Handler], Handler]:
        """Register the handler of notification `method`, whose params must have `shape`."""
        def register(handler: Handler) -> Handler:
            self.notifications[method] = (handler, shape)
            return handler
        return register

    # --- hooks ----------------------------------------------------------------------------------
    def stop_work(self) -> None:
        """Stop what runs besides the protocol (subclasses: the lint worker) before the process ends."""

    def report_server_error(self, error: BaseException, in_request: bool) -> None:
        """A handler raised: subclasses tell the user. `in_request`: the request was answered with it."""
        log.error("internal error: %s: %s", type(error).__name__, error)

    # --- sending --------------------------------------------------------------------------------
    def _send(self, message: Message) -> None:
        data = frame({"jsonrpc": "2.0", **message})
        with self._write_lock:
            try:
                self._output.write(data)
                self._output.flush()
            except (OSError, ValueError):  # the client is gone: nobody to answer
                log.warning("could not write to the client; stopping")
                self._finish()

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification to the client."""
        self._send({"method": method, **({"params": params} if params is not None else {})})

    def send_request(self, method: str, params: Any = None) -> "asyncio.Future[Any]":
        """Send a request to the client; the future gets its result, or the ResponseError it answered."""
        assert self._loop is not None
        self._next_id += 1
        request_id = f"gpulint-{self._next_id}"
        future: asyncio.Future[Any] = self._loop.create_future()
        self._awaiting[request_id] = future
        self._send({"id": request_id, "method": method, **({"params": params} if params is not None else {})})
        return future

    def _respond(self, request_id: Optional[RequestId], result: Any = None,
                 error: Optional[ResponseError] = None) -> None:
        if error is not None:
            self._send({"id": request_id, "error": error.to_dict()})
        else:
            self._send({"id": request_id, "result": result})

    # --- receiving ------------------------------------------------------------------------------
    def _receive(self, item: Union[Message, _ParseFailure, Any]) -> None:
        """One message from the client, on the event loop."""
        if isinstance(item, _ParseFailure):
            self._respond(None, error=ResponseError(PARSE_ERROR, f"the message is not JSON: {item.error}"))
            return
        if not isinstance(item, dict):
            self._respond(None, error=ResponseError(INVALID_REQUEST, "a message must be a JSON object"))
            return
        method = item.get("method")
        request_id = _request_id(item)
        if method is None:
            if "result" in item or "error" in item:
                self._answered(item)
            else:
                self._respond(request_id, error=ResponseError(INVALID_REQUEST, "a message needs a method"))
            return
        is_request = "id" in item
        if not isinstance(method, str) or item.get("jsonrpc") != "2.0" or is_request and request_id is None:
            if is_request:
                self._respond(request_id, error=ResponseError(
                    INVALID_REQUEST, "not a JSON-RPC 2.0 request (jsonrpc, id and method)"))
            else:
                log.warning("dropped a message that is not JSON-RPC 2.0: %.200r", item)
            return
        params = item.get("params")
        if is_request:
            assert request_id is not None
            self._request(request_id, method, params)
        else:
            self._notification(method, params)

    def _answered(self, item: Message) -> None:
        """A response to one of our requests."""
        future = self._awaiting.pop(_request_id(item) or "", None)
        if future is None or future.done():
            log.warning("a response to no request of ours: %.200r", item)
            return
        error = item.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            future.set_exception(ResponseError(code if isinstance(code, int) else INTERNAL_ERROR, str(message)))
        else:
            future.set_result(item.get("result"))

    def _request(self, request_id: RequestId, method: str, params: Any) -> None:
        if self.shutdown_requested:
            self._respond(request_id, error=ResponseError(
                INVALID_REQUEST, f"{method}: the server is shut down; only `exit` is accepted"))
            return
        if method == "initialize" and self.initialized:
            self._respond(request_id, error=ResponseError(INVALID_REQUEST, "initialize: already initialized"))
            return
        if not self.initialized and method != "initialize":
            self._respond(request_id, error=ResponseError(
                SERVER_NOT_INITIALIZED, f"{method}: the server is not initialized yet"))
            return
        entry = self.requests.get(method)
        if entry is None:
            self._respond(request_id, error=ResponseError(METHOD_NOT_FOUND, f"{method}: no such method"))
            return
        handler, shape = entry
        problem = shape_problem(params, shape)
        if problem is not None:
            self._respond(request_id, error=ResponseError(INVALID_PARAMS, f"invalid params for {method!r}: {problem}"))
            return
        try:
            result = handler(params)
        except Exception as exc:  # noqa: BLE001 - every failure is an answer, never a silent drop
            self._failed(request_id, exc)
            return
        if method == "initialize":
            self.initialized = True
        elif method == "shutdown":
            self._shut_down()
        if not inspect.isawaitable(result):
            self._respond(request_id, result)
            return
        task = asyncio.ensure_future(result)
        self._running[request_id] = task
        task.add_done_callback(lambda done: self._finished(request_id, done))

    def _shut_down(self) -> None:
        """`shutdown` was answered: requests still being answered are cancelled (they answer so)."""
        self.shutdown_requested = True
        for task in list(self._running.values()):
            task.cancel()

    def _finished(self, request_id: RequestId, task: "asyncio.Future[Any]") -> None:
        self._running.pop(request_id, None)
        if task.cancelled():
            self._respond(request_id, error=ResponseError(REQUEST_CANCELLED, f"request {request_id!r} was cancelled"))
            return
        error = task.exception()
        if error is None:
            self._respond(request_id, task.result())
        else:
            self._failed(request_id, error)

    def _failed(self, request_id: RequestId, error: BaseException) -> None:
        if isinstance(error, ResponseError):
            self._respond(request_id, error=error)
        else:
            log.error("request %r failed", request_id, exc_info=error)
            self._respond(request_id, error=ResponseError(INTERNAL_ERROR, f"{type(error).__name__}: {error}"))
        self.report_server_error(error, in_request=True)

    def _notification(self, method: str, params: Any) -> None:
        if method == "exit":
            self.exit()
            return
        if self.shutdown_requested:
            return
        if not self.initialized:
            log.warning("dropped %s: the server is not initialized yet", method)
            return
        if method == "$/cancelRequest":
            cancelled = _request_id(params) if isinstance(params, dict) else None
            task = self._running.get(cancelled) if cancelled is not None else None
            if task is not None:
                task.cancel()
            return
        entry = self.notifications.get(method)
        if entry is None:
            if not method.startswith("$/"):
                log.warning("ignored notification %s: no handler", method)
            return
        handler, shape = entry
        problem = shape_problem(params, shape)
        if problem is not None:
            log.warning("dropped %s: invalid params: %s", method, problem)
            return
        try:
            result = handler(params)
        except Exception as exc:
            log.error("notification %s failed", method, exc_info=exc)
            self.report_server_error(exc, in_request=False)
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            task.add_done_callback(self._notification_done)

    def _notification_done(self, task: "asyncio.Future[Any]") -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            error = task.exception()
            assert error is not None
            log.error("a notification's handler failed", exc_info=error)
            self.report_server_error(error, in_request=False)

    # --- running --------------------------------------------------------------------------------
    def exit(self) -> None:
        """End the process at once: 0 after `shutdown`, 1 without (the specification's codes).
        Nothing the server still runs (a project pass, a lint) may hold the process."""
        self.stop_work()
        with self._write_lock:
            try:
                self._output.flush()
            except (OSError, ValueError):
                pass
        os._exit(0 if self.shutdown_requested else 1)

    def _finish(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def _read(self, stream: BinaryIO) -> None:
        """The reader thread: each message is handed to the event loop; the end of input ends the loop."""
        assert self._loop is not None
        loop = self._loop
        while True:
            try:
                body = read_body(stream)
            except (OSError, ValueError):
                body = None
            if body is None:
                break
            try:
                item: Any = json.loads(body)
            except ValueError as exc:  # UnicodeDecodeError included
                item = _ParseFailure(str(exc))
            if not self._hand_over(loop, item):
                return
        self._hand_over(loop, _END)

    def _hand_over(self, loop: asyncio.AbstractEventLoop, item: Any) -> bool:
        assert self._inbox is not None
        try:
            loop.call_soon_threadsafe(self._inbox.put_nowait, item)
        except RuntimeError:  # the loop is closed: the server is ending
            return False
        return True

    async def _dispatch(self) -> None:
        """Handle the messages in order. After each, the tasks it started run their first step before
        the next message is read (a didOpen's handler sees the text it opened, not a later change's)."""
        assert self._inbox is not None
        while True:
            item = await self._inbox.get()
            if item is _END:
                self._finish()
                return
            self._receive(item)
            await asyncio.sleep(0)

    async def _main(self, stream: BinaryIO) -> None:
        self._loop = asyncio.get_running_loop()
        self._done = self._loop.create_future()
        self._inbox = asyncio.Queue()
        dispatcher = asyncio.ensure_future(self._dispatch())
        threading.Thread(target=self._read, args=(stream,), name="gpulint-lsp-reader", daemon=True).start()
        try:
            await self._done
        finally:
            dispatcher.cancel()
            self.stop_work()

    def serve(self, stream: Optional[BinaryIO] = None, output: Optional[BinaryIO] = None) -> int:
        """Answer the client until it exits or closes our input; the exit status the process should
        have: 0 only after `shutdown`."""
        if output is not None:
            self._output = output
        try:
            asyncio.run(self._main(stream if stream is not None else sys.stdin.buffer))
        finally:
            self.stop_work()
        return 0 if self.shutdown_requested else 1
