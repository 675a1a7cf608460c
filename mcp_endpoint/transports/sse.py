"""The legacy HTTP+SSE transport of MCP (protocol revision 2024-11-05), beside Streamable HTTP.

`GET /sse` opens an event stream whose first event, `endpoint`, names where to POST:
`/messages?channel=ID`. Each POST is answered 202 Accepted once admitted; its JSON-RPC answer
comes back as a `message` event on the stream. The messages mean what they mean on `/mcp`, answered
by `streamable_http.handle`, so both transports serve the same tools, scopes and errors:
`initialize` on the stream starts a session (`mcp_endpoint/protocol/sessions.py`) within which each
later message of the 2025 revisions is answered; a message carrying the 2026-07-28 envelope in its
`_meta` is answered statelessly, session or not, as the SDK's own SSE server does (the official
Python client's default mode opens with such a `server/discover`). A request of the 2025 revisions
sent before `initialize` is answered on the stream with an error saying to send it.

The stream and its session are kept in the cache (`sessions.channel_*`), so a POST may land on
any instance; the answer reaches the instance holding the stream through `relay`. Each step
runs behind `admission.admit_request` (Host, Origin, body size, API key, rate limit); the
key that POSTs must be the one that opened the stream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

from mcp import types
from mcp.shared import inbound as envelope

from graphs.execution.follow import Threads
from mcp_endpoint.jsonrpc.encoding import decode_json, encode_json_ascii
from mcp_endpoint.models import Scope
from mcp_endpoint.protocol import dispatch, list_changes, sessions
from mcp_endpoint.transports import event_stream, http_messages, relay, streamable_http
from mcp_endpoint.transports.admission import answers_unavailable

logger = logging.getLogger(__name__)

STREAM_PATH = "/sse"
MESSAGES_PATH = "/messages"
KEEPALIVE_SECONDS = event_stream.KEEPALIVE_SECONDS


@answers_unavailable
def open_stream(
    inbound: http_messages.Inbound,
) -> http_messages.Outbound | http_messages.ChannelOpened:
    """`GET /sse` from an admitted caller: register the stream (the ASGI app then sends it)."""
    if inbound.method != "GET":
        return http_messages.Outbound(405, {"Allow": "GET"})
    lease = list_changes.lease_stream(inbound.caller.actor)
    if isinstance(lease, str):
        return http_messages.error_outbound(429, types.INVALID_REQUEST, lease)
    channel = sessions.channel_open(inbound.caller.actor)
    # Tool-list changes only for a key that may list tools, as on a 2025 session's GET stream.
    may_list = inbound.caller.has_scope(Scope.TOOLS_READ)
    watch = list_changes.Watch(None) if may_list else None
    return http_messages.ChannelOpened(channel, lease, watch)


async def stream(
    channel_id: str,
    lease: list_changes.StreamLease,
    watch: list_changes.Watch | None,
    threads: Threads,
) -> AsyncIterator[bytes]:
    """The stream's events: `endpoint` first, then every message relayed to it and the list
    changes `watch` covers (if any), with keep-alive comments between; when it ends (the
    client left), its session ends too, and `lease`, renewed meanwhile, is released."""
    watching = None
    try:
        async with relay.subscribe(channel_id) as inbox:
            endpoint = f"{MESSAGES_PATH}?channel={channel_id}"
            yield f"event: endpoint\ndata: {endpoint}\n\n".encode()

            async def announce(watch: list_changes.Watch) -> None:
                async for method in list_changes.ListWatcher(watch, threads).changes():
                    event = event_stream.sse_event({"jsonrpc": "2.0", "method": method})
                    await relay.publish(channel_id, event)

            if watch is not None:
                watching = asyncio.create_task(announce(watch))
            while True:
                yield await inbox(KEEPALIVE_SECONDS) or b": keep-alive\n\n"
                lease.renew()
    finally:
        lease.release()
        if watching is not None:
            watching.cancel()
        # On the app's threads, whose database connections are looked after (ending the
        # session cancels its runs, a query).
        await threads.short(partial(sessions.channel_end, channel_id))


@answers_unavailable
def accept_message(
    inbound: http_messages.Inbound, *, channel_id: str
) -> http_messages.Outbound | http_messages.Inbound:
    """`POST /messages?channel=ID` from an admitted caller: a refusal, or the request to
    answer on the stream (as `streamable_http.handle` would on `/mcp`, within the stream's session).

    What is wrong with the POST itself is answered on the POST; what the answer to a message
    says (including JSON-RPC errors for a request) goes to the stream, where the client waits.
    """
    if inbound.method != "POST":
        return http_messages.Outbound(405, {"Allow": "POST"})
    channel = sessions.channel_get(channel_id, owner=inbound.caller.actor)
    if channel is None:
        return http_messages.error_outbound(
            404,
            types.INVALID_REQUEST,
            f"Unknown channel {channel_id[:128]!r}: the stream ended, or it was opened with "
            f"another API key. Open a new stream with GET {STREAM_PATH} (same key) and POST "
            "to the endpoint its first event names.",
        )
    message, problem = http_messages.json_body(inbound)
    if problem:
        return problem
    if not isinstance(message, dict):
        return http_messages.error_outbound(
            400,
            types.INVALID_REQUEST,
            "Invalid Request: send one JSON-RPC message object per POST (no batches).",
        )
    session_id = channel["session"]
    headers = {
        name: value for name, value in inbound.headers.items() if name not in _ROUTING_HEADERS
    }
    headers["accept"] = f"{http_messages.JSON}, {http_messages.SSE}"
    if session_id is not None:
        headers[http_messages.SESSION_HEADER] = session_id
    headers.update(_routing_headers(message))
    return http_messages.Inbound(
        method="POST",
        headers=headers,
        body=inbound.body,
        caller=inbound.caller,
        raw_headers=list(headers.items()),
    )


# Headers of a POST to /mcp that say what its message is: on this transport the message
# alone says it, so they are made from it (`_routing_headers`), never taken from the POST.
_ROUTING_HEADERS = frozenset(
    {
        http_messages.VERSION_HEADER.lower(),
        http_messages.SESSION_HEADER,
        envelope.MCP_METHOD_HEADER,
        envelope.MCP_NAME_HEADER,
    }
)


def _envelope_version(message: dict[str, Any]) -> str | None:
    """The protocol version a 2026-07-28 message names in its `_meta`, else None."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(types.PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
    if message.get("method") == "initialize" or not isinstance(version, str):
        return None
    return version


def _routing_headers(message: dict[str, Any]) -> dict[str, str]:
    """For a 2026-07-28 message, the routing headers its POST to /mcp would carry, as the
    official client makes them (its version, method and name, and the arguments a tool
    mirrors): an SSE client sends none, and the message is all there is to go on."""
    version = _envelope_version(message)
    method, params = message.get("method"), message.get("params")
    if version is None or not isinstance(method, str) or not isinstance(params, dict):
        return {}
    headers = {http_messages.VERSION_HEADER.lower(): version, envelope.MCP_METHOD_HEADER: method}
    name_key = envelope.NAME_BEARING_METHODS.get(method)
    name = params.get(name_key) if name_key is not None else None
    if isinstance(name, str):
        headers[envelope.MCP_NAME_HEADER] = envelope.encode_header_value(name)
    schema = dispatch.extra_tool_schema(name) if method == "tools/call" else None
    arguments = params.get("arguments")
    if schema is not None and isinstance(arguments, dict):
        headers.update(envelope.mcp_param_headers(envelope.x_mcp_header_map(schema), arguments))
    return headers


def _before_initialize(inbound: http_messages.Inbound) -> http_messages.Outbound | None:
    """The answer to a message of the 2025 revisions sent before the stream has a session: a
    request is told, on the stream, to send `initialize` first; a notification is dropped.
    None for a message that needs no session (`initialize`, a 2026-07-28 message)."""
    if http_messages.SESSION_HEADER in inbound.headers:
        return None
    message = decode_json(inbound.body)
    if message.get("method") == "initialize" or _envelope_version(message) is not None:
        return None
    if "id" not in message or "method" not in message:
        return http_messages.Outbound(202)
    return http_messages.error_outbound(
        200,
        types.INVALID_REQUEST,
        f"This stream has no session yet, so {str(message['method'])[:80]} cannot be answered: "
        "POST initialize first, then notifications/initialized, then other requests (or send "
        "each request with the 2026-07-28 envelope in its _meta, which needs no session).",
        request_id=message.get("id"),
    )


@answers_unavailable
def answer(inbound: http_messages.Inbound, channel_id: str) -> http_messages.Answer:
    """Answer an accepted message; an `initialize` binds its new session to the stream."""
    early = _before_initialize(inbound)
    if early is not None:
        return early
    outbound = streamable_http.handle(inbound)
    started = outbound.headers.get("Mcp-Session-Id")
    if started and started != inbound.headers.get(http_messages.SESSION_HEADER):
        sessions.channel_bind(channel_id, started)
    return outbound


async def deliver(channel_id: str, answer: http_messages.Answer, threads: Threads) -> None:
    """Send an answer's messages (or its one JSON-RPC message) to the stream's holder, each
    as it is made (`threads` takes the blocking work of a reply that goes on): on this
    transport every reply goes out as events."""
    if isinstance(answer, http_messages.Streamed):
        answer = answer._replace(events=True)
    chunks = event_stream.stream_of(answer, threads)
    if chunks is None:
        chunks = _single(answer.body if isinstance(answer, http_messages.Outbound) else b"")
    async for chunk in chunks:
        if not await relay.publish(channel_id, chunk):
            logger.info("SSE stream %s is gone; dropped the rest of an answer", channel_id[:8])
            return


async def _single(body: bytes) -> AsyncIterator[bytes]:
    """A plain JSON answer as one event (in ASCII, as every event:
    mcp_endpoint/jsonrpc/encoding.py)."""
    if body:
        data = body if body.isascii() else encode_json_ascii(decode_json(body))
        yield b"event: message\ndata: " + data + b"\n\n"
