"""`/mcp` as a lean ASGI app, mounted in front of Django by `config.asgi`.

Django's ASGI handler runs every middleware through a thread hop and starts threads per
request; for the endpoint agents call thousands of times a minute that was most of the cost
(docs/benchmarks.md). This app does only what `/mcp` needs: read the body, hand the request
to `transport.handle_request` (in the event loop when it needs no database, else on a small
pool of worker threads), and write the answer or the event stream.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import close_old_connections

from graphs.toolset import refresh_workflow_tools
from mcp_endpoint import protocol, transport
from nodespecs.registry import refresh_registry

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# Each thread keeps its own database connection between requests; Django's request cycle,
# which would recycle it, does not run here, so the threads do it every so often.
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mcp")
_RECYCLE_SECONDS = 30.0
_local = threading.local()


def _work(arguments: dict[str, Any]) -> protocol.Outbound:
    now = time.monotonic()
    if now - getattr(_local, "recycled_at", 0.0) > _RECYCLE_SECONDS:
        close_old_connections()
        _local.recycled_at = now
    # Bring the catalog and workflow snapshots up to date while on a thread that may query: a
    # request sent here because one was due for its check then leaves the next second's
    # requests to the event loop, even when it does not read that snapshot itself.
    refresh_registry()
    refresh_workflow_tools()
    return transport.handle_request(**arguments)


async def _read_body(receive: Receive, declared: str | None) -> bytes | None:
    """The request body, or None when it is over the limit (then not read further)."""
    if transport.body_too_large(declared):
        return None
    limit = settings.MCP_MAX_BODY_BYTES
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _encode(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [
        (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()
    ]


async def mcp_app(scope: Scope, receive: Receive, send: Send) -> None:
    """Serve one HTTP request to `/mcp`."""
    raw_headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in scope["headers"]]
    headers = {name.lower(): value for name, value in raw_headers}
    body = await _read_body(receive, headers.get("content-length"))
    client = scope.get("client") or ("", 0)
    arguments = {
        "method": scope["method"],
        "headers": headers,
        "raw_headers": raw_headers,
        "body": body,
        "client_address": client[0],
    }
    if transport.answers_without_database(headers, body):
        # The common case (a known key, a fresh catalog) is pure computation: a thread hop
        # would cost more than the work.
        outbound = transport.handle_request(**arguments)
    else:
        outbound = await asyncio.get_running_loop().run_in_executor(_POOL, _work, arguments)
    stream = transport.stream_of(outbound)
    if stream is None:
        response_headers = dict(outbound.headers)
        response_headers["Content-Length"] = str(len(outbound.body))
        await send(
            {
                "type": "http.response.start",
                "status": outbound.status,
                "headers": _encode(response_headers),
            }
        )
        await send({"type": "http.response.body", "body": outbound.body})
        return
    await send(
        {
            "type": "http.response.start",
            "status": outbound.status,
            "headers": _encode({**outbound.headers, **transport.SSE_HEADERS}),
        }
    )
    await _send_stream(stream, receive, send)


async def _send_stream(stream: Any, receive: Receive, send: Send) -> None:
    """Send an event stream until it ends or the client goes away (which cancels it)."""

    async def pump() -> None:
        async for chunk in stream:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    pumping, watching = asyncio.create_task(pump()), asyncio.create_task(watch())
    done, pending = await asyncio.wait({pumping, watching}, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    if pumping in done:
        pumping.result()
