"""Issue 22, item 7: the server follows the LSP specification where pygls did not.

Invalid params got no response (the editor waited forever); requests after `shutdown` got none;
`exit` without `shutdown` ended with status 0; editor settings of the wrong type were silently
ignored. Error codes are the specification's: -32602 InvalidParams, -32600 InvalidRequest,
-32002 ServerNotInitialized.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.server.wire import TRAIN, Wire, codes

INVALID_PARAMS, INVALID_REQUEST, NOT_INITIALIZED = -32602, -32600, -32002


INVALID = [
    ("textDocument/hover", {"textDocument": 5, "position": {"line": 0, "character": 0}}),
    ("textDocument/codeAction", {"textDocument": {"uri": "file:///x.py"}}),  # no range, no context
    ("textDocument/hover", ["not", "an", "object"]),
    ("codeAction/resolve", {"kind": "source.fixAll.gpulint"}),  # a CodeAction needs a title
]


def test_invalid_params_get_an_invalid_params_error(wire: Wire, tmp_path: Path) -> None:
    wire.initialize(tmp_path)
    for method, params in INVALID:
        answer = wire.response(wire.request(method, params))
        assert answer["error"]["code"] == INVALID_PARAMS and method in answer["error"]["message"], answer
    uri = wire.open(tmp_path / "train.py", TRAIN)  # the server carries on
    assert codes(wire.diagnostics(uri)) == ["GPU101", "GPU201"]


def test_requests_after_shutdown_get_invalid_request_and_exit_says_0(wire: Wire, tmp_path: Path) -> None:
    wire.initialize(tmp_path)
    uri = wire.open(tmp_path / "train.py", TRAIN)
    wire.diagnostics(uri)
    assert wire.call("shutdown") is None
    answer = wire.response(wire.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                               "position": {"line": 5, "character": 12}}))
    assert answer["error"]["code"] == INVALID_REQUEST
    assert wire.response(wire.request("shutdown"))["error"]["code"] == INVALID_REQUEST
    wire.change(uri, 2, TRAIN + "x = 1\n")  # a notification after shutdown is dropped
    wire.settle(1.0)
    assert [p["version"] for p in wire.published(uri)] in ([1], [1, 1])
    wire.notify("exit")
    assert wire.exit_code() == 0


def test_exit_without_shutdown_exits_1(wire: Wire, tmp_path: Path) -> None:
    wire.initialize(tmp_path)
    uri = wire.open(tmp_path / "train.py", TRAIN)
    wire.diagnostics(uri)
    wire.notify("exit")
    assert wire.exit_code() == 1


def test_the_client_going_away_without_shutdown_exits_1(wire: Wire, tmp_path: Path) -> None:
    wire.initialize(tmp_path)
    wire.process.stdin.close()  # type: ignore[union-attr]
    assert wire.exit_code() == 1


def test_requests_before_initialize_get_server_not_initialized(wire: Wire, tmp_path: Path) -> None:
    answer = wire.response(wire.request("textDocument/hover", {"textDocument": {"uri": "file:///x.py"},
                                                               "position": {"line": 0, "character": 0}}))
    assert answer["error"]["code"] == NOT_INITIALIZED
    wire.initialize(tmp_path)
    assert wire.call("shutdown") is None


def test_editor_settings_of_the_wrong_type_are_named(wire: Wire, tmp_path: Path) -> None:
    wire.initialize(tmp_path, options={"gpulint": {"ignore": ["GPU101"], "preview": "yes", "isolated": 1,
                                                   "extendSelect": "GPU3", "slect": ["GPU2"], "path": "gpulint"}})
    uri = wire.open(tmp_path / "train.py", TRAIN)
    assert codes(wire.diagnostics(uri)) == ["GPU201"]  # the valid settings apply
    message = _next_message(wire)
    assert wire.shown() == [message]
    for named in ("gpulint.preview", "gpulint.isolated", "gpulint.slect"):
        assert named in message, message
    assert "gpulint.path" not in message and "gpulint.extendSelect" not in message  # the extension's, and valid
    wire.notify("workspace/didChangeConfiguration", {"settings": {"gpulint": {"ignore": "GPU1O1"}}})
    message = _next_message(wire)
    assert "gpulint.ignore" in message and "GPU1O1" in message
    wire.notify("workspace/didChangeConfiguration", {"settings": {"gpulint": ["GPU101"]}})
    assert "must be an object" in _next_message(wire)


def _next_message(wire: Wire) -> str:
    return wire.wait_for(lambda m: m.get("method") == "window/showMessage")["params"]["message"]


def test_a_malformed_message_does_not_stop_the_server(wire: Wire, tmp_path: Path) -> None:
    wire.initialize(tmp_path)
    wire.send_raw(b"{not json")
    wire.send_raw(json.dumps({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": 7}).encode())
    uri = wire.open(tmp_path / "train.py", TRAIN)
    assert codes(wire.diagnostics(uri)) == ["GPU101", "GPU201"]
