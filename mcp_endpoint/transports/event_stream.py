"""Writing the core's reply as a `text/event-stream` body, or following it to its response.

Shared by the `/mcp` view (views.py), the ASGI app (asgi.py) and the legacy SSE transport
(sse.py): `stream_of` turns an outbound answer that streams (the core's reply as events, a
`subscriptions/listen` stream) into the body of an event-stream response, and `settle`
follows a reply that does not stream to its one response.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from graphs.execution.follow import Threads
from mcp_endpoint.protocol import list_changes
from mcp_endpoint.protocol.core import Reply
from mcp_endpoint.protocol.encoding import encode_json_ascii
from mcp_endpoint.transports import http_messages

KEEPALIVE_SECONDS = 15


SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",
}


def _in_request_thread(work: Callable[[], Any]) -> Awaitable[Any]:
    return sync_to_async(work, thread_sensitive=True)()


# Where a request served by Django (the /mcp view, the REST API) does the blocking work of a
# reply that goes on: the request's own sync thread, where Django manages the database
# connection (and which the test client shares).
REQUEST_THREADS = Threads(short=_in_request_thread, run=_in_request_thread)


def sse_event(message: dict[str, Any]) -> bytes:
    """One JSON-RPC message as a `message` event (in ASCII: encoding.py)."""
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


async def _messages(
    reply: Reply, threads: Threads, outbound: http_messages.Outbound
) -> AsyncIterator[bytes]:
    async for message in reply.messages(threads):
        if "method" not in message:  # the response, last
            outbound.note_response(message)
        yield sse_event(message)


async def settle(outbound: http_messages.Outbound, threads: Threads) -> http_messages.Outbound:
    """The plain answer to an outcome: a reply that goes on without streaming is followed
    to its response here; anything else is already its answer."""
    if outbound.reply is None or outbound.stream:
        return outbound
    message = await outbound.reply.final(threads)
    return http_messages.message_reply(message, outbound.headers)


def stream_of(outbound: http_messages.Outbound, threads: Threads) -> AsyncIterator[bytes] | None:
    """The event-stream body of an outcome that streams, or None for a plain response
    (`threads` takes the blocking work of a reply that goes on). A reply's response, when
    the stream sends it, is noted on `outbound` (`note_response`), for its telemetry."""
    if outbound.reply is not None and outbound.stream:
        outbound.responded = False
        return _messages(outbound.reply, threads, outbound)
    if outbound.listen is not None:
        return _listen(outbound.listen, threads)
    return None
