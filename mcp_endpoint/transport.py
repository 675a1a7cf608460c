"""The MCP endpoint's HTTP transport, shared by the Django view and the ASGI fast path.

`handle_request` does the synchronous part of a request: Host and Origin checks, body size,
authentication, rate limit, then the protocol. `stream_of` turns an outcome that streams
(the core's reply as events, `subscriptions/listen`) into the body of a `text/event-stream`
response, and `settle` follows a reply that does not stream to its response.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import lru_cache
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import cache
from django.http.request import split_domain_port, validate_host
from mcp import types

from graphs import toolset
from graphs.follow import Threads
from mcp_endpoint import http_messages, streamable_http
from mcp_endpoint.auth import Refusal, admit, presented_key
from mcp_endpoint.core import Caller, Reply
from mcp_endpoint.keys import is_remembered
from mcp_endpoint.origins import origin_allowed
from nodespecs.registry import GENERATION_KEY, needs_database

KEEPALIVE_SECONDS = 15
LISTENABLE = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")
LISTEN_POLL_SECONDS = 2


SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",
}


def _host_allowed(host: str) -> bool:
    """Django's Host rule (ALLOWED_HOSTS), for requests that do not pass through Django."""
    allowed_hosts = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed_hosts:
        allowed_hosts = [".localhost", "127.0.0.1", "[::1]"]
    return _host_matches(host, tuple(allowed_hosts))


@lru_cache(maxsize=64)
def _host_matches(host: str, allowed_hosts: tuple[str, ...]) -> bool:
    # Clients send the same few Host values on every request; matching one costs 4 us.
    domain, _ = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed_hosts)


Answer = TypeVar("Answer")


def _in_request_thread(work: Callable[[], Any]) -> Awaitable[Any]:
    return sync_to_async(work, thread_sensitive=True)()


# Where a request served by Django (the /mcp view, the REST API) does the blocking work of a
# reply that goes on: the request's own sync thread, where Django manages the database
# connection (and which the test client shares).
REQUEST_THREADS = Threads(short=_in_request_thread, run=_in_request_thread)


def _plain(status: int, message: str) -> http_messages.Outbound:
    return http_messages.Outbound(status, {"Content-Type": "text/plain"}, message.encode())


def handle_request(
    *,
    method: str,
    headers: dict[str, str],
    raw_headers: list[tuple[str, str]],
    body: bytes | None,
    client_address: str,
    host: str | None = None,
    answer: Callable[[http_messages.Inbound], Answer] = streamable_http.handle,  # type: ignore[assignment]
) -> http_messages.Outbound | Answer:
    """Answer one request; `headers` has lower-cased names; `body` None means it was larger
    than MCP_MAX_BODY_BYTES and was not read; `host` is given when already validated.

    `answer` takes the admitted request (Host, Origin, size, key and rate limit checked):
    the protocol for `/mcp`, the legacy SSE transport's steps for `/sse` and `/messages`."""
    if host is None:
        host = headers.get("host", "")
        if not _host_allowed(host):
            return _plain(
                400, f"Bad Request: the Host {host!r} is not served here (ALLOWED_HOSTS)."
            )
    origin = headers.get("origin")
    if origin and not origin_allowed(origin, host):
        return _plain(
            403,
            f"Forbidden: requests from the origin {origin} are not allowed "
            "(add it to MCP_ALLOWED_ORIGINS if it is yours).",
        )
    if body is None:
        return http_messages.error_reply(
            413,
            types.INVALID_REQUEST,
            f"Request body too large: the limit is {settings.MCP_MAX_BODY_BYTES} bytes "
            "(MCP_MAX_BODY_BYTES).",
        )
    inbound = http_messages.Inbound(
        method=method,
        headers=headers,
        body=body,
        caller=Caller("", frozenset()),
        raw_headers=raw_headers,
    )
    caller = admit(inbound.headers, client_address)
    if isinstance(caller, Refusal):
        return http_messages.error_reply(
            caller.status, types.INVALID_REQUEST, caller.message, headers=caller.headers
        )
    inbound.caller = caller
    return answer(inbound)


def answers_without_database(method: str, headers: dict[str, str], body: bytes | None) -> bool:
    """Whether `handle_request` can run in the event loop: the caller's key is remembered
    (or no key is sent), the catalog and workflow snapshots are fresh, and the request
    neither runs a workflow nor ends a session (which cancels its runs), so no query will be
    made."""
    raw = presented_key(headers)
    return (
        method != "DELETE"
        and (raw is None or is_remembered(raw))
        and not needs_database()
        and not toolset.needs_database()
        and not _touches_runs(body)
    )


_TOOL_NAME = re.compile(rb'"name"\s*:\s*"([^"]*)"')


def _touches_runs(body: bytes | None) -> bool:
    """Whether a body may start, cancel or read a workflow run (a workflow's `tools/call`,
    `notifications/cancelled`, a `tasks/*` request), all of which query the database.
    Errs towards yes: a wrong yes costs a thread hop, a wrong no would block the loop."""
    if body and (b"notifications/cancelled" in body or b"tasks/" in body):
        return True
    if not body or b"tools/call" not in body:
        return False
    names = _TOOL_NAME.findall(body)
    if len(names) != 1 or b"\\" in names[0]:
        return True
    return names[0].decode("utf-8", "replace") in toolset.workflow_tools()


def body_too_large(declared_length: str | None) -> bool:
    """Whether a declared Content-Length is over the limit (so the body is not read)."""
    value = declared_length or ""
    return value.isascii() and value.isdecimal() and int(value) > settings.MCP_MAX_BODY_BYTES


def _sse(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + json.dumps(message, separators=(",", ":")).encode() + b"\n\n"


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
