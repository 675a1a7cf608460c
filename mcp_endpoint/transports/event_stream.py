"""Writing the core's reply as a `text/event-stream` body, or following it to its response.

Shared by the `/mcp` view (views.py), the ASGI app (asgi.py) and the legacy SSE transport
(sse.py): `stream_of` turns an outbound answer that streams (the core's reply as events, a
`subscriptions/listen` stream) into the body of an event-stream response, and `settle`
follows a reply that does not stream to its one response.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from django.conf import settings

from graphs.execution.follow import Threads
from mcp_endpoint.jsonrpc.encoding import encode_json_ascii
from mcp_endpoint.observability.request_metrics import Written
from mcp_endpoint.protocol import core, list_changes
from mcp_endpoint.protocol.core import Reply
from mcp_endpoint.transports import http_messages

KEEPALIVE_SECONDS = 15


SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",
}


def sse_event(message: dict[str, Any]) -> bytes:
    """One JSON-RPC message as a `message` event (in ASCII: mcp_endpoint/jsonrpc/encoding.py)."""
    return b"event: message\ndata: " + encode_json_ascii(message) + b"\n\n"


async def _listen(listen: http_messages.Listen, threads: Threads) -> AsyncIterator[bytes]:
    """A stream of list-change notifications, for MCP_LISTEN_SECONDS: a 2026-07-28
    `subscriptions/listen` is acknowledged first and answered last; a 2025 session's GET
    stream carries the notifications alone (its client opens another when it ends). One that
    watches nothing is answered once acknowledged. Its lease is renewed at every poll and
    released at the end."""
    try:
        meta = {}
        if listen.request_id is not None:
            meta = {"io.modelcontextprotocol/subscriptionId": listen.request_id}
            yield sse_event(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/subscriptions/acknowledged",
                    "params": {"notifications": listen.granted, "_meta": meta},
                }
            )
        watcher = list_changes.ListWatcher(listen.watch, threads)
        await watcher.start()
        deadline = time.monotonic() + settings.MCP_LISTEN_SECONDS
        last_sent = time.monotonic()
        while listen.lease is not None and time.monotonic() < deadline:
            await asyncio.sleep(list_changes.LISTEN_POLL_SECONDS)
            listen.lease.renew()
            for method in await watcher.poll():
                last_sent = time.monotonic()
                params = {"_meta": meta} if meta else {}
                yield sse_event({"jsonrpc": "2.0", "method": method, "params": params})
            if time.monotonic() - last_sent >= KEEPALIVE_SECONDS:
                last_sent = time.monotonic()
                yield b": keep-alive\n\n"
        if listen.request_id is not None:
            result = {"_meta": meta, "resultType": "complete"}
            yield sse_event({"jsonrpc": "2.0", "id": listen.request_id, "result": result})
    finally:
        if listen.lease is not None:
            listen.lease.release()


def written_record(
    answer: http_messages.Outbound | http_messages.Streamed | http_messages.Listening,
) -> Written:
    """The telemetry record of `answer`, about to be written: a plain one's outcome is known;
    a stream's is noted as it goes (`stream_of`)."""
    if isinstance(answer, http_messages.Outbound):
        return Written(answer.status, answer.error_code, answer.tool_error)
    return Written(answer.status)


async def _events(reply: Reply, threads: Threads, written: Written | None) -> AsyncIterator[bytes]:
    async for message in core.messages(reply, threads):
        if written is not None and "method" not in message:  # the response, last
            written.note_response(message)
        yield sse_event(message)


async def settle(answer: http_messages.Answer, threads: Threads) -> http_messages.Answer:
    """A reply that goes on without events, followed to its response (one JSON body); any
    other answer as it is."""
    if not isinstance(answer, http_messages.Streamed) or answer.events:
        return answer
    message = await core.final(answer.reply, threads)
    return http_messages.message_outbound(message, answer.headers)


def stream_of(
    answer: http_messages.Answer, threads: Threads, written: Written | None = None
) -> AsyncIterator[bytes] | None:
    """The event-stream body of an answer that streams (the core's reply as events, a
    `subscriptions/listen` stream), or None for a plain one (`threads` takes the blocking work
    of a reply that goes on). A reply's response, when the stream sends it, is noted on
    `written`, for its telemetry."""
    if isinstance(answer, http_messages.Streamed):
        if written is not None:
            written.responded = False
        return _events(answer.reply, threads, written)
    if isinstance(answer, http_messages.Listening):
        return _listen(answer.listen, threads)
    return None
