"""The `/mcp` (and `/mcp/<slug>`) view for Django's own request handling (WSGI, runserver,
the test client), `/metrics`, and the JSON 404s of the other paths MCP clients try (the OAuth
discovery URLs, `/register`, `/sse` where it is not served).

Under uvicorn, `config.asgi` sends `/mcp` to the lean ASGI app in `mcp_endpoint/transports/asgi.py`
instead; both admit the request with `admission.admit_request` and answer it with
`streamable_http.handle`. The view is async so that long-lived streams hold no worker thread; the
request's own work runs in one hop to Django's sync thread, where Django manages the database
connections.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET
from mcp import types

from mcp_endpoint.access.oauth_discovery import QUOTED_PATH_CHARACTERS, oauth_absent
from mcp_endpoint.observability import metrics_page, request_metrics
from mcp_endpoint.observability.facts import Facts
from mcp_endpoint.protocol import core
from mcp_endpoint.transports import admission, event_stream, streamable_http
from mcp_endpoint.transports.http_messages import Answer, Outbound, error_outbound

logger = logging.getLogger(__name__)


def _headers(request: HttpRequest) -> tuple[dict[str, str], list[tuple[str, str]]]:
    # A field's value excludes the whitespace around it (RFC 9110, 5.5; MCP's SEP-2243).
    headers = {name.lower(): value.strip(" \t") for name, value in request.headers.items()}
    scope = getattr(request, "scope", None)
    raw = (
        [
            (name.decode("latin-1"), value.decode("latin-1").strip(" \t"))
            for name, value in scope["headers"]
        ]
        if scope
        else list(headers.items())
    )
    return headers, raw


def _admitted_answer(**arguments: Any) -> Answer:
    """Admit the request (`admission.admit_request`) and answer it; a refusal answers it."""
    admitted = admission.admit_request(**arguments)
    if isinstance(admitted, Outbound):
        return admitted
    return streamable_http.handle(admitted)


@csrf_exempt
async def mcp(
    request: HttpRequest, group: str | None = None
) -> HttpResponse | StreamingHttpResponse:
    """Streamable HTTP endpoint of the MCP server (both protocol eras): `/mcp`, or a workflow
    group's `/mcp/<group>`."""
    started = time.perf_counter()
    headers, raw_headers = _headers(request)
    body = None
    if not admission.body_too_large(headers.get("content-length")):
        try:
            body = request.body
        except RequestDataTooBig:
            body = None
        if body is not None and len(body) > settings.MCP_MAX_BODY_BYTES:
            body = None
    facts = Facts()
    try:
        answer = await sync_to_async(_admitted_answer, thread_sensitive=True)(
            method=request.method or "GET",
            headers=headers,
            raw_headers=raw_headers,
            body=body,
            client_address=request.META.get("REMOTE_ADDR", ""),
            scheme=request.scheme,
            path=request.path,
            host=request.get_host(),  # validated by Django against ALLOWED_HOSTS
            group=group,
            facts=facts,
        )
        answer = await event_stream.settle(answer, core.REQUEST_THREADS)
    except Exception:
        # A fault of ours: logged with its trace, answered as JSON-RPC (with DEBUG on,
        # Django would answer its HTML debug page, which MCP clients print whole).
        logger.exception("Answering %s %s failed", request.method, request.path[:100])
        answer = error_outbound(
            500,
            types.INTERNAL_ERROR,
            "Internal error: the server failed while answering this request (it is logged). "
            "Try again; if it goes on, tell the server's operator.",
        )
    written = event_stream.written_record(answer)
    stream = event_stream.stream_of(answer, core.REQUEST_THREADS, written)
    done = partial(
        request_metrics.mcp_request_done, written, started, http_method=request.method or "GET",
        facts=facts,
    )  # fmt: skip
    if stream is not None:
        # Django writes a streamed answer after the view returns: it is recorded as it ends.
        return StreamingHttpResponse(
            _recorded(stream, done), headers={**answer.headers, **event_stream.SSE_HEADERS}
        )
    done()
    assert isinstance(answer, Outbound)
    response = HttpResponse(answer.body, status=answer.status)
    if not answer.body:
        del response["Content-Type"]
    for name, value in answer.headers.items():
        response[name] = value
    return response


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """`/metrics`, Prometheus's text format, for keys with the scope metrics:read or clients
    in METRICS_ALLOWED_ADDRESSES (mcp_endpoint/observability/request_metrics.py)."""
    headers = {name.lower(): value for name, value in request.headers.items()}
    refusal = metrics_page.metrics_refusal(headers, request.META.get("REMOTE_ADDR", ""))
    if refusal is not None:
        response = HttpResponse(
            refusal.message, status=refusal.status, content_type="text/plain; charset=utf-8"
        )
        for name, value in refusal.headers.items():
            response[name] = value
        return response
    return metrics_page.exposition()


@csrf_exempt
def oauth_discovery(request: HttpRequest) -> JsonResponse:
    """The OAuth discovery URLs (`/.well-known/oauth-protected-resource` and the others, with
    or without a path suffix), `/register`, `/authorize` and `/token`: a JSON 404 saying this
    server takes API keys and how to send one (`access.oauth_discovery`), whatever the method."""
    return JsonResponse(oauth_absent(request.path), status=404)


@csrf_exempt
def not_found(request: HttpRequest) -> JsonResponse:
    """Any other path under `/.well-known/`, `/sse` or `/messages` that Django sees: a JSON 404
    naming the MCP endpoints, never an HTML page (Django's debug page with DEBUG on). Under
    uvicorn the ASGI app serves `/sse` and `/messages` before Django would."""
    return JsonResponse(
        {
            "error": "not_found",
            "error_description": (
                f"Nothing at {request.path[:QUOTED_PATH_CHARACTERS]}. MCP clients connect to "
                "/mcp (Streamable HTTP) or a workflow group's /mcp/<slug>; the legacy HTTP+SSE "
                "transport (GET /sse, POST /messages) is served by uvicorn config.asgi:application "
                "only, not by manage.py runserver."
            ),
        },
        status=404,
    )


async def _recorded(stream: AsyncIterator[bytes], done: Callable[[], None]) -> AsyncIterator[bytes]:
    """`stream`, then `done()` once it has ended or the client has left (Django closes it)."""
    try:
        async for chunk in stream:
            yield chunk
    finally:
        done()
