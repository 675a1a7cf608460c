"""The `/mcp` view: transport and authentication only; the protocol lives in `protocol.py`.

The view is async so that long-lived streams (`subscriptions/listen`) hold no worker thread;
the request's own work (key lookup, rate limit, protocol) runs in one hop to Django's sync
thread, since it may touch the database.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from mcp import types

from mcp_endpoint import protocol, sessions
from mcp_endpoint.auth import Refusal, authenticate, rate_limit
from mcp_endpoint.rpc import Caller
from nodespecs.registry import GENERATION_KEY

LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}
KEEPALIVE_SECONDS = 15
REPLY_WAIT_SECONDS = 120
LISTENABLE = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")
REPLY_POLL_SECONDS = 0.05
LISTEN_POLL_SECONDS = 2


def _headers(request: HttpRequest) -> tuple[dict[str, str], list[tuple[str, str]]]:
    headers = {name.lower(): value for name, value in request.headers.items()}
    scope = getattr(request, "scope", None)
    raw = (
        [(name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]]
        if scope
        else list(headers.items())
    )
    return headers, raw


def origin_allowed(origin: str, host: str) -> bool:
    """Browsers send Origin; a page from another site must not reach this endpoint
    (DNS rebinding). Same-origin, configured origins and local pages for a local server pass."""
    if origin in settings.MCP_ALLOWED_ORIGINS:
        return True
    parts = urlsplit(origin)
    if parts.netloc == host:
        return True
    request_host = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return parts.hostname in LOCAL_HOSTS and request_host in LOCAL_HOSTS


def _sync_handle(inbound: protocol.Inbound, client_address: str) -> protocol.Outbound:
    caller = authenticate(inbound.headers, client_address)
    if isinstance(caller, Refusal):
        return protocol.error_reply(
            caller.status, types.INVALID_REQUEST, caller.message, headers=caller.headers
        )
    decision = rate_limit(caller)
    if not decision.allowed:
        return protocol.error_reply(
            429,
            types.INVALID_REQUEST,
            f"Too many requests: the limit is {decision.limit} per minute for this key; "
            f"retry in {decision.retry_after} s.",
            headers={"Retry-After": str(decision.retry_after)},
        )
    inbound.caller = caller
    return protocol.handle(inbound)


def _sse(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + json.dumps(message, separators=(",", ":")).encode() + b"\n\n"


async def _events(events: list[dict[str, Any]]) -> AsyncIterator[bytes]:
    for event in events:
        yield _sse(event)


async def _listen(listen: dict[str, Any]) -> AsyncIterator[bytes]:
    """`subscriptions/listen`: acknowledge, then report catalog changes until the time is up."""
    request_id = listen["id"]
    asked = (listen["params"] or {}).get("notifications") or {}
    # Tools and prompts never change at run time, so those subscriptions stay quiet; the
    # catalog (resources) does change.
    granted = {kind: True for kind in LISTENABLE if asked.get(kind) is True}
    meta = {"io.modelcontextprotocol/subscriptionId": request_id}
    yield _sse(
        {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": granted, "_meta": meta},
        }
    )
    generation = await cache.aget(GENERATION_KEY)
    deadline = time.monotonic() + settings.MCP_LISTEN_SECONDS
    last_sent = time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(LISTEN_POLL_SECONDS)
        current = await cache.aget(GENERATION_KEY)
        if granted.get("resourcesListChanged") and current != generation:
            generation = current
            last_sent = time.monotonic()
            yield _sse(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/resources/list_changed",
                    "params": {"_meta": meta},
                }
            )
        elif time.monotonic() - last_sent >= KEEPALIVE_SECONDS:
            last_sent = time.monotonic()
            yield b": keep-alive\n\n"
    yield _sse(
        {"jsonrpc": "2.0", "id": request_id, "result": {"_meta": meta, "resultType": "complete"}}
    )


async def _await_reply(session_id: str, request_id: str) -> dict[str, Any] | None:
    deadline = time.monotonic() + REPLY_WAIT_SECONDS
    while time.monotonic() < deadline:
        reply = await sync_to_async(sessions.reply_take)(session_id, request_id)
        if reply is not None:
            return reply
        await asyncio.sleep(REPLY_POLL_SECONDS)
    return None


async def _interact(events: list[dict[str, Any]], plan: dict[str, Any]) -> AsyncIterator[bytes]:
    """Drive a 2025 call that asks the client for input: send each request on this stream,
    wait for the answer the client posts back, and finish with the call's response."""
    for event in events:
        yield _sse(event)
    run, call_id, session_id = plan["run"], plan["id"], plan["session"]
    try:
        requests = next(run.handler)
        while True:
            answers = {}
            for request in requests:
                server_id = f"{call_id}:{request.key}:{uuid.uuid4().hex[:8]}"
                yield _sse(
                    {
                        "jsonrpc": "2.0",
                        "id": server_id,
                        "method": request.method,
                        "params": request.params,
                    }
                )
                reply = await _await_reply(session_id, server_id)
                if reply is None or "result" not in reply:
                    problem = (
                        f"no answer to {request.method} within {REPLY_WAIT_SECONDS} s"
                        if reply is None
                        else f"the client refused {request.method}: {reply.get('error')}"
                    )
                    run.handler.close()
                    yield _sse(
                        {
                            "jsonrpc": "2.0",
                            "id": call_id,
                            "error": {
                                "code": types.INTERNAL_ERROR,
                                "message": f"Stopped: {problem}.",
                            },
                        }
                    )
                    return
                answers[request.key] = reply["result"]
            requests = run.handler.send(answers)
    except StopIteration as finished:
        yield _sse({"jsonrpc": "2.0", "id": call_id, "result": run.finish(finished.value)})


def _stream(body: AsyncIterator[bytes], headers: dict[str, str]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream", headers=headers)
    response["Cache-Control"] = "no-cache, no-transform"
    response["X-Accel-Buffering"] = "no"
    return response


@csrf_exempt
async def mcp(request: HttpRequest) -> HttpResponse:
    """Streamable HTTP endpoint of the MCP server (both protocol eras)."""
    headers, raw_headers = _headers(request)
    origin = headers.get("origin")
    if origin and not origin_allowed(origin, request.get_host()):
        return HttpResponse(
            f"Forbidden: requests from the origin {origin} are not allowed "
            "(add it to MCP_ALLOWED_ORIGINS if it is yours).",
            status=403,
            content_type="text/plain",
        )
    limit = settings.MCP_MAX_BODY_BYTES
    declared = request.headers.get("Content-Length", "0")
    try:
        if declared.isascii() and declared.isdecimal() and int(declared) > limit:
            raise RequestDataTooBig
        body = request.body
        if len(body) > limit:
            raise RequestDataTooBig
    except RequestDataTooBig:
        outbound = protocol.error_reply(
            413,
            types.INVALID_REQUEST,
            f"Request body too large: the limit is {limit} bytes (MCP_MAX_BODY_BYTES).",
        )
    else:
        inbound = protocol.Inbound(
            method=request.method or "GET",
            headers=headers,
            body=body,
            caller=Caller("", frozenset()),
            raw_headers=raw_headers,
        )
        address = request.META.get("REMOTE_ADDR", "")
        # thread_sensitive: the work runs in the one thread that holds Django's database
        # connections (as a sync view would), so connections are opened, reused and closed
        # by Django's request cycle rather than left behind in pool threads.
        outbound = await sync_to_async(_sync_handle, thread_sensitive=True)(inbound, address)
    if outbound.interaction is not None:
        return _stream(_interact(outbound.events or [], outbound.interaction), outbound.headers)
    if outbound.listen is not None:
        return _stream(_listen(outbound.listen), outbound.headers)
    if outbound.events is not None:
        return _stream(_events(outbound.events), outbound.headers)
    response = HttpResponse(outbound.body, status=outbound.status)
    if not outbound.body:
        del response["Content-Type"]
    for name, value in outbound.headers.items():
        response[name] = value
    return response
