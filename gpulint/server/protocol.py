"""pygls' protocol, with the answers the LSP specification asks for where pygls gives none.

- A request whose params do not match its method's type gets an InvalidParams error (pygls
  logged it and never answered, so the editor waited forever).
- After `shutdown`, a request gets an InvalidRequest error and a notification is dropped;
  before `initialize`, a request gets ServerNotInitialized (pygls answered neither).
- `exit` ends the process with status 0 after `shutdown` and 1 without it (pygls' own exit
  status was swallowed by its event loop runner, so it was always 0); see GpulintServer.
"""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger("gpulint.server")


class _Answered:
    """A message already answered with an error while it was read: nothing more to do."""


ANSWERED = _Answered()


def _request_id(data: Any) -> Any:
    """The id of a request message, or None (a notification, a response, or no valid id)."""
    if isinstance(data, dict) and "method" in data and isinstance(data.get("id"), (int, str)) \
            and not isinstance(data.get("id"), bool):
        return data["id"]
    return None


class SpecProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException:
            request_id = _request_id(data)
            if request_id is None or "jsonrpc" not in data:
                raise  # a notification with bad params: nobody waits for an answer; pygls logs it
            method = data.get("method")
            self._send_response(request_id, error=JsonRpcInvalidParams(
                f"invalid params for {method!r}: they do not match the LSP type of its params").to_response_error())
            return ANSWERED

    def handle_message(self, message: Any) -> None:
        if message is ANSWERED:
            return
        method = getattr(message, "method", None)
        is_request = method is not None and getattr(message, "id", None) is not None
        if method == types.EXIT:
            return super().handle_message(message)
        if self._shutdown:
            if is_request:
                self._send_response(message.id, error=JsonRpcInvalidRequest(
                    f"{method}: the server is shut down; only `exit` is accepted").to_response_error())
            return
        if self._workspace is None and method != types.INITIALIZE:
            if is_request:
                self._send_response(message.id, error=JsonRpcServerNotInitialized(
                    f"{method}: the server is not initialized yet").to_response_error())
            else:
                log.warning("dropped %s: the server is not initialized yet", method)
            return
        super().handle_message(message)
