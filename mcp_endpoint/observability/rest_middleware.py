"""Times each REST request (`/api/...`) and records it (request_metrics.py), in a span of its own
when tracing is on."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase

from graphs.execution import tracing
from mcp_endpoint.observability.request_metrics import REST_PREFIX, rest_request_done
from mcp_endpoint.protocol import traces


class RestTelemetryMiddleware:
    """Times each request to the REST API (`/api/...`) and records it, in a span of its own
    when tracing is on; other paths pass untouched. Sync and async, so it never adds a thread
    hop."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._async_call(request)
        if not request.path.startswith(REST_PREFIX):
            return self.get_response(request)
        started = time.perf_counter()
        trace = _rest_trace(request)
        response = self.get_response(request)
        rest_request_done(request, response, started, trace)
        return response

    async def _async_call(self, request: HttpRequest) -> HttpResponseBase:
        answer: Awaitable[HttpResponseBase] = self.get_response(request)
        if not request.path.startswith(REST_PREFIX):
            return await answer
        started = time.perf_counter()
        trace = _rest_trace(request)
        response = await answer
        rest_request_done(request, response, started, trace)
        return response


def _rest_trace(request: HttpRequest) -> traces.RestTrace | None:
    if not tracing.enabled():
        return None
    return traces.RestTrace(str(request.method), request.headers)
