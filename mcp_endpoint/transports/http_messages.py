"""The HTTP side of an MCP exchange, shared by the Streamable HTTP and legacy SSE transports:
a request as it arrives (`Inbound`), an answer as it leaves (`Outbound`), and the small
rules both apply (JSON bodies, content negotiation, JSON-RPC errors with a status).

Transport-neutral: no request or response objects of Django here, so the rules can be tested
without a server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any, NamedTuple

from django.conf import settings
from mcp import types
from mcp.shared import inbound as envelope

from mcp_endpoint.jsonrpc.encoding import decode_json, encode_json
from mcp_endpoint.observability.facts import Facts, response_outcome
from mcp_endpoint.protocol.core import Reply
from mcp_endpoint.protocol.list_changes import StreamLease, Watch
from nodespecs.callers import Caller

# The headers of an answer that adds none (read-only: answers are never changed).
NO_HEADERS: Mapping[str, str] = MappingProxyType({})
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = envelope.MCP_PROTOCOL_VERSION_HEADER
JSON = "application/json"
SSE = "text/event-stream"


@dataclass
class Inbound:
    method: str
    headers: Mapping[str, str]  # lower-cased names
    body: bytes
    caller: Caller
    raw_headers: list[tuple[str, str]] = field(default_factory=list)
    # The workflow group whose endpoint was called (`/mcp/<slug>`), by its slug; None: `/mcp`.
    group: str | None = None
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


class Outbound(NamedTuple):
    """A plain answer: status, headers and body. `error_code` is the JSON-RPC error code of an
    error answer and `tool_error` whether a result is a tool's own error (`isError: true`), for
    telemetry."""

    status: int
    headers: Mapping[str, str] = NO_HEADERS
    body: bytes = b""
    error_code: int | None = None
    tool_error: bool = False


class Streamed(NamedTuple):
    """The core's reply, still to be sent: as server-sent events, one per message, when
    `events`; else followed to its response, sent alone as the JSON body."""

    reply: Reply
    events: bool
    headers: Mapping[str, str] = NO_HEADERS
    status: int = 200


class Listening(NamedTuple):
    """A stream of list-change notifications to send (a 2026-07-28 `subscriptions/listen`, or
    a 2025 session's GET stream)."""

    listen: Listen
    headers: Mapping[str, str] = NO_HEADERS
    status: int = 200


class ChannelOpened(NamedTuple):
    """A legacy HTTP+SSE stream (`GET /sse`) opened under `channel`
    (mcp_endpoint/transports/sse.py), its caller's hold on a stream's place, and the list
    changes it carries besides its answers (None: none, for a key that may not list tools)."""

    channel: str
    lease: StreamLease
    watch: Watch | None
    headers: Mapping[str, str] = NO_HEADERS
    status: int = 200


# What Streamable HTTP answers a request with, one type per kind (the legacy SSE transport's
# `GET /sse` answers with a `ChannelOpened`).
Answer = Outbound | Streamed | Listening


def json_outbound(status: int, message: Any, headers: dict[str, str] | None = None) -> Outbound:
    return encoded_outbound(status, encode_json(message), headers)


def message_outbound(message: dict[str, Any], headers: Mapping[str, str]) -> Outbound:
    """One JSON-RPC message as a 200 JSON body (the response of a reply that went on)."""
    error_code, tool_error = response_outcome(message)
    return Outbound(
        200,
        {"Content-Type": JSON, **headers},
        encode_json(message),
        error_code=error_code,
        tool_error=tool_error,
    )


def encoded_outbound(status: int, body: bytes, headers: dict[str, str] | None = None) -> Outbound:
    return Outbound(status, {"Content-Type": JSON, **(headers or {})}, body)


def error_outbound(
    status: int, code: int, message: str, *, request_id: Any = None, data: Any = None, headers=None
) -> Outbound:
    """A JSON-RPC error body with an HTTP status."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = encode_json({"jsonrpc": "2.0", "id": request_id, "error": error})
    return Outbound(status, {"Content-Type": JSON, **(headers or {})}, body, error_code=code)


def accepts(headers: Mapping[str, str], media_type: str) -> bool:
    """Whether the request's Accept (none: anything) takes `media_type`."""
    accept = headers.get("accept", "")
    if not accept:
        return True
    # A client sends the same Accept on every request, and each request asks twice (JSON,
    # SSE): the usual short values are parsed once; a long one, which a caller could make
    # anything, is parsed each time rather than kept.
    if len(accept) <= KEPT_ACCEPT_CHARACTERS:
        accepted = _kept_accepted_types(accept)
    else:
        accepted = _accepted_types(accept)
    return (
        media_type in accepted
        or "*/*" in accepted
        or media_type.partition("/")[0] + "/*" in accepted
    )


KEPT_ACCEPT_CHARACTERS = 256


def _accepted_types(accept: str) -> frozenset[str]:
    return frozenset(part.split(";")[0].strip().lower() for part in accept.split(","))


_kept_accepted_types = lru_cache(maxsize=64)(_accepted_types)


def json_body(inbound: Inbound) -> tuple[Any, Outbound | None]:
    """A POST's JSON message, or the refusal of a body that is not JSON (shared with the
    legacy SSE transport)."""
    content_type = inbound.headers.get("content-type", "")
    if not content_type.lower().startswith(JSON):
        return None, error_outbound(
            415 if content_type else 400,
            types.INVALID_REQUEST,
            "POST bodies must be JSON-RPC with Content-Type: application/json.",
        )
    try:
        return decode_json(inbound.body), None
    except RecursionError:  # nested far past MCP_MAX_JSON_DEPTH, which the core checks
        return None, error_outbound(
            400,
            types.PARSE_ERROR,
            "Parse error: the body nests arrays and objects too deep to be read; params may "
            f"nest at most {settings.MCP_MAX_JSON_DEPTH} levels (MCP_MAX_JSON_DEPTH).",
        )
    except (ValueError, UnicodeDecodeError) as exc:
        return None, error_outbound(
            400, types.PARSE_ERROR, f"Parse error: the body is not JSON ({exc})."
        )
