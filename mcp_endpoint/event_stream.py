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
from django.core.cache import cache

from graphs import toolset
from graphs.follow import Threads
from mcp_endpoint import http_messages
from mcp_endpoint.core import Reply
from mcp_endpoint.encoding import encode_json_ascii
from nodespecs.registry import GENERATION_KEY

KEEPALIVE_SECONDS = 15
LISTENABLE = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")
LISTEN_POLL_SECONDS = 2


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


def _sse(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + encode_json_ascii(message) + b"\n\n"


# What a `subscriptions/listen` kind watches: the cache generation that changes with it, and
# the notification sent when it does. Prompts never change at run time, so that kind stays quiet.
_WATCHED = {
    "resourcesListChanged": (GENERATION_KEY, "notifications/resources/list_changed"),
    "toolsListChanged": (toolset.GENERATION_KEY, "notifications/tools/list_changed"),
}


async def _listen(listen: dict[str, Any]) -> AsyncIterator[bytes]:
    """`subscriptions/listen`: acknowledge, then report catalog (resources) and workflow
    (tools) changes until the time is up."""
    request_id = listen["id"]
    asked = (listen["params"] or {}).get("notifications") or {}
    granted = {kind: True for kind in LISTENABLE if asked.get(kind) is True}
    meta = {"io.modelcontextprotocol/subscriptionId": request_id}
    yield _sse(
        {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": granted, "_meta": meta},
        }
    )
    watched = {kind: _WATCHED[kind] for kind in granted if kind in _WATCHED}
    seen = {kind: await cache.aget(key) for kind, (key, _) in watched.items()}
    deadline = time.monotonic() + settings.MCP_LISTEN_SECONDS
    last_sent = time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(LISTEN_POLL_SECONDS)
        for kind, (key, method) in watched.items():
            current = await cache.aget(key)
            if current != seen[kind]:
                seen[kind] = current
                last_sent = time.monotonic()
                yield _sse({"jsonrpc": "2.0", "method": method, "params": {"_meta": meta}})
        if time.monotonic() - last_sent >= KEEPALIVE_SECONDS:
            last_sent = time.monotonic()
            yield b": keep-alive\n\n"
    yield _sse(
        {"jsonrpc": "2.0", "id": request_id, "result": {"_meta": meta, "resultType": "complete"}}
    )


async def _messages(reply: Reply, threads: Threads) -> AsyncIterator[bytes]:
    async for message in reply.messages(threads):
        yield _sse(message)


async def settle(outbound: http_messages.Outbound, threads: Threads) -> http_messages.Outbound:
    """The plain answer to an outcome: a reply that goes on without streaming is followed
    to its response here; anything else is already its answer."""
    if outbound.reply is None or outbound.stream:
        return outbound
    message = await outbound.reply.final(threads)
    return http_messages.message_reply(message, outbound.headers)


def stream_of(
    outbound: http_messages.Outbound, threads: Threads | None = None
) -> AsyncIterator[bytes] | None:
    """The event-stream body of an outcome that streams, or None for a plain response
    (`threads` takes the blocking work of a reply that goes on)."""
    if outbound.reply is not None and outbound.stream and threads is not None:
        return _messages(outbound.reply, threads)
    if outbound.listen is not None:
        return _listen(outbound.listen)
    return None
