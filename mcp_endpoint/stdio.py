"""MCP over stdio: newline-delimited JSON-RPC on stdin/stdout, for desktop clients.

The client is the local user who started the process, so every scope is granted. Both eras
work: `initialize` negotiates a 2025 revision for the connection; a request whose `_meta`
carries the 2026-07-28 envelope is answered statelessly.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from typing import Any

from mcp import types
from mcp.shared import inbound as envelope

from mcp_endpoint.dispatch import RpcError
from mcp_endpoint.models import Scope
from mcp_endpoint.rpc import (
    MODERN_VERSION,
    Caller,
    context_for,
    execute,
    initialize_result,
    negotiate,
)

logger = logging.getLogger(__name__)
LOCAL_USER = Caller("stdio", frozenset(Scope.values))


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


class StdioConnection:
    """One client connection: remembers the negotiated version and log level."""

    def __init__(self) -> None:
        self.version: str | None = None
        self.log_level: str | None = None
        self.capabilities: dict[str, Any] = {}

    def answer(self, line: str) -> list[dict[str, Any]]:
        """The messages to write for one input line: notifications, then the response."""
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as exc:
            return [_error(None, types.PARSE_ERROR, f"Parse error: {exc}")]
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            if isinstance(message, dict) and ("result" in message or "error" in message):
                return []  # a response to a request we never send
            return [_error(None, types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC request.")]
        if "id" not in message:
            return []  # notifications need no answer
        request_id, method, params = message["id"], message["method"], message.get("params")
        try:
            return self._request(request_id, method, params, message)
        except RpcError as exc:
            return [_error(request_id, exc.code, exc.message, exc.data)]
        except Exception:  # never let one request end the connection
            logger.exception("stdio request %s failed", method)
            return [_error(request_id, types.INTERNAL_ERROR, "Internal error; see the server log.")]

    def _request(
        self, request_id: Any, method: str, params: Any, message: dict[str, Any]
    ) -> list[dict[str, Any]]:
        if method == "initialize":
            self.version, initialize = negotiate(params)
            self.capabilities = initialize.capabilities.model_dump(mode="json", exclude_none=True)
            return [{"jsonrpc": "2.0", "id": request_id, "result": initialize_result(self.version)}]
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and types.PROTOCOL_VERSION_META_KEY in meta:
            route = envelope.classify_inbound_request(message)
            if isinstance(route, envelope.InboundLadderRejection):
                return [_error(request_id, route.code, route.message, route.data)]
            version = MODERN_VERSION
        elif self.version is None:
            raise RpcError(
                types.INVALID_REQUEST,
                "Send initialize first (or the 2026-07-28 _meta envelope with each request).",
            )
        else:
            version = self.version
        context = context_for(
            version,
            params,
            session_log_level=self.log_level,
            session_capabilities=self.capabilities,
            transport="stdio",
        )
        result = execute(
            method,
            params,
            version=version,
            caller=LOCAL_USER,
            context=context,
            on_set_level=lambda level: setattr(self, "log_level", level),
        )
        notes = [{"jsonrpc": "2.0", **note} for note in context.notifications]
        return [*notes, {"jsonrpc": "2.0", "id": request_id, "result": result}]


def serve(lines: Iterable[str]) -> Iterator[str]:
    """Answer each input line with zero or more output lines."""
    connection = StdioConnection()
    for line in lines:
        if line.strip():
            for message in connection.answer(line):
                yield json.dumps(message, separators=(",", ":"))
