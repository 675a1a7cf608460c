"""The HTTP side of an MCP exchange, shared by the Streamable HTTP and legacy SSE transports:
a request as it arrives (`Inbound`), an answer as it leaves (`Outbound`), and the small
rules both apply (JSON bodies, content negotiation, JSON-RPC errors with a status).

Transport-neutral: no request or response objects of Django here, so the rules can be tested
without a server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from mcp import types
from mcp.shared import inbound as envelope

from mcp_endpoint.protocol.core import Caller, Reply
from mcp_endpoint.protocol.encoding import encode_json
from mcp_endpoint.protocol.list_changes import StreamLease, Watch

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = envelope.MCP_PROTOCOL_VERSION_HEADER
JSON = "application/json"
SSE = "text/event-stream"


@dataclass(slots=True)
class Facts:
    """What the protocol learned of a request while answering it, for its log line and its
    metrics (mcp_endpoint/observability/telemetry.py). Reported, never read to decide anything."""

    # The JSON-RPC method, and a tools/call's tool name, as sent ("" when there was none).
    method: str = ""
    tool: str = ""
    # Whether that tool is one this server serves (only those name a metric's label).
    tool_known: bool = False
    # "2026-07-28" (stateless) or "2025" (sessions); "" when the request got no further.
    era: str = ""
    # The JSON-RPC id, as sent.
    request_id: Any = None
    # The caller's identity (`key:<prefix>`, never the key), once admitted.
    key: str = ""
    # The trace of the request's span, when tracing is on (`CallContext.trace_id`).
    trace_id: str = ""

    def note(self, message: dict[str, Any]) -> None:
        """Report a message's method, id and tool (a tools/call's)."""
        method = message.get("method")
        if isinstance(method, str):
            self.method = method
            if method == "tools/call":
                params = message.get("params")
                name = params.get("name") if isinstance(params, dict) else None
                self.tool = name if isinstance(name, str) else ""
        self.request_id = message.get("id")


@dataclass
class Inbound:
    method: str
    headers: Mapping[str, str]  # lower-cased names
    body: bytes
    caller: Caller
    raw_headers: list[tuple[str, str]] = field(default_factory=list)
    # The slug of the workflow group whose endpoint was called (`/mcp/<slug>`); None: `/mcp`.
    server: str | None = None
    facts: Facts = field(default_factory=Facts)


@dataclass(frozen=True)
class Listen:
    """A stream of list-change notifications to send (event_stream.py), held by `caller`
    under `lease` (None: it watches nothing, and ends once acknowledged)."""

    watch: Watch
    lease: StreamLease | None
    # A 2026-07-28 `subscriptions/listen`: its request id and the notifications granted, which
    # the stream acknowledges first and answers last. None for a 2025 session's GET stream,
    # which carries the notifications alone.
    request_id: Any = None
    granted: dict[str, bool] = field(default_factory=dict)


@dataclass
class Outbound:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    # The core's answer to a request, still to be sent: as server-sent events, one per
    # message, when `stream`; else its response alone, as the JSON body.
    reply: Reply | None = None
    stream: bool = False
    # A stream of list-change notifications (a 2026-07-28 `subscriptions/listen`, or a 2025
    # session's GET stream).
    listen: Listen | None = None
    # A legacy HTTP+SSE stream (`GET /sse`) opened under this id (`mcp_endpoint/transports/sse.py`),
    # its caller's hold on a stream's place (`list_changes.StreamLease`), and the list changes it
    # carries besides its answers (None: none, for a key that may not list tools).
    channel: str | None = None
    channel_lease: StreamLease | None = None
    channel_watch: Watch | None = None
    # The JSON-RPC error code of an error answer (`error_reply`, `note_response`), and
    # whether a result answered is a tool's own error (`isError: true`), for telemetry.
    error_code: int | None = None
    tool_error: bool = False
    # Whether the answer's response went out: false while a streamed reply has not sent it
    # (`event_stream.stream_of`), so a client that left mid-stream is told apart.
    responded: bool = True
    # What the protocol learned of the request (streamable_http.handle), for telemetry.
    facts: Facts | None = None

    def note_response(self, message: dict[str, Any]) -> None:
        """Report the response that ends the answer: its error code, or whether its result
        is a tool's own error."""
        self.error_code, self.tool_error = response_outcome(message)
        self.responded = True


def response_outcome(message: dict[str, Any]) -> tuple[int | None, bool]:
    """A JSON-RPC response's error code (None for a result), and whether its result is a
    tool's own error (`isError: true`)."""
    error, result = message.get("error"), message.get("result")
    code = error.get("code") if isinstance(error, dict) else None
    return code, isinstance(result, dict) and result.get("isError") is True


def json_reply(status: int, message: Any, headers: dict[str, str] | None = None) -> Outbound:
    return encoded_reply(status, encode_json(message), headers)


def message_reply(message: dict[str, Any], headers: dict[str, str]) -> Outbound:
    """One JSON-RPC message as a 200 JSON body (the response of a reply that went on)."""
    outbound = json_reply(200, message, headers)
    outbound.note_response(message)
    return outbound


def encoded_reply(status: int, body: bytes, headers: dict[str, str] | None = None) -> Outbound:
    return Outbound(status, {"Content-Type": JSON, **(headers or {})}, body)


def error_reply(
    status: int, code: int, message: str, *, request_id: Any = None, data: Any = None, headers=None
) -> Outbound:
    """A JSON-RPC error body with an HTTP status."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    outbound = json_reply(status, {"jsonrpc": "2.0", "id": request_id, "error": error}, headers)
    outbound.error_code = code
    return outbound


def accepts(headers: Mapping[str, str], media_type: str) -> bool:
    accept = headers.get("accept", "")
    if not accept:
        return True
    major = media_type.split("/")[0]
    for part in accept.split(","):
        candidate = part.split(";")[0].strip().lower()
        if candidate in (media_type, f"{major}/*", "*/*"):
            return True
    return False


def json_body(inbound: Inbound) -> tuple[Any, Outbound | None]:
    """A POST's JSON message, or the refusal of a body that is not JSON (shared with the
    legacy SSE transport)."""
    content_type = inbound.headers.get("content-type", "")
    if not content_type.lower().startswith(JSON):
        return None, error_reply(
            415 if content_type else 400,
            types.INVALID_REQUEST,
            "POST bodies must be JSON-RPC with Content-Type: application/json.",
        )
    try:
        return json.loads(inbound.body), None
    except RecursionError:  # nested far past MCP_MAX_JSON_DEPTH, which the core checks
        return None, error_reply(
            400,
            types.PARSE_ERROR,
            "Parse error: the body nests arrays and objects too deep to be read; params may "
            f"nest at most {settings.MCP_MAX_JSON_DEPTH} levels (MCP_MAX_JSON_DEPTH).",
        )
    except (ValueError, UnicodeDecodeError) as exc:
        return None, error_reply(
            400, types.PARSE_ERROR, f"Parse error: the body is not JSON ({exc})."
        )
