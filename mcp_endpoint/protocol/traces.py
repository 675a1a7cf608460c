"""The span of one MCP request, opened and closed by the protocol core (`core.execute`), so
every transport (Streamable HTTP in both eras, legacy SSE, stdio, REST) has one.

The span continues the caller's trace from the `traceparent` of the request's `_meta` (2026-07-28),
else from its HTTP `traceparent` header. It carries the method, the tool, the era and protocol
version, who called (`key:<prefix>`, never the key) and the outcome. A reply that goes on after
`execute` returns (a workflow call's run, followed by `workflow_calls.follow`) keeps its span open
until its last message, and the blocking work it hands to threads (the direct run, the queued run's
sending) runs with the span current, so the run's spans are its children
(`graphs/execution/tracing.py`).

With tracing off (`graphs.execution.tracing.enabled()` false) `core.execute` does not come here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextvars import Token
from functools import partial
from typing import Any

from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind

from graphs.execution import tracing
from graphs.execution.follow import Threads

Message = dict[str, Any]
# The messages of a reply that goes on, from the threads that do its blocking work.
Later = Callable[[Threads], AsyncIterator[Message]]


def request_span(
    method: str,
    params: Any,
    *,
    version: str,
    caller: str,
    request_id: Any,
    session_id: str,
    headers: Mapping[str, str] | None,
) -> Span:
    """Start (not make current) the span of a request, child of the caller's trace."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    tool = params.get("name") if isinstance(params, dict) and method == "tools/call" else None
    attributes: dict[str, Any] = {
        "mcp.method.name": method,
        "mcp.protocol.version": version,
        "switchyard.era": "2026-07-28" if version in MODERN_PROTOCOL_VERSIONS else "2025",
        # The key's id (`key:<prefix>`), else `anonymous:<address>`, `stdio` or `internal`.
        "switchyard.caller": caller,
    }
    if isinstance(tool, str):
        attributes["gen_ai.tool.name"] = tool
    if request_id is not None:
        attributes["jsonrpc.request.id"] = str(request_id)
    if session_id:
        attributes["mcp.session.id"] = session_id
    parent = tracing.parent_from(meta if isinstance(meta, dict) else None, headers)
    name = f"MCP {method} {tool}" if isinstance(tool, str) else f"MCP {method}"
    return tracing.TRACER.start_span(
        name, context=parent, kind=SpanKind.SERVER, attributes=attributes
    )


class RestTrace:
    """The span of a REST request (`/api/...`), current while it is answered, continuing the
    caller's `traceparent` header. Opened and ended by `telemetry.RestTelemetryMiddleware`; a
    tool invoked over REST is the child of it that `core.execute` opens."""

    def __init__(self, method: str, headers: Mapping[str, str]) -> None:
        self.span = tracing.TRACER.start_span(
            f"REST {method}",
            context=tracing.parent_from(headers),
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method},
        )
        self.trace_id = tracing.trace_id_of(self.span)
        self._token = attached(self.span)

    def end(self, route: str, status: int, outcome: str, caller: str | None) -> None:
        """End the span, named by its route (`GET /api/v1/runs/<int:run_id>`), saying how the
        request was answered and who called (`key:<prefix>`, never the key)."""
        detached(self._token)
        self.span.update_name(f"REST {route}")
        attributes: dict[str, Any] = {
            "http.route": route,
            "http.response.status_code": status,
            "switchyard.outcome": outcome,
        }
        if caller:
            attributes["switchyard.caller"] = caller
        self.span.set_attributes(attributes)
        if status >= 500:
            tracing.failed(self.span, f"HTTP {status}")
        self.span.end()


def attached(span: Span) -> Token[Context]:
    """Make `span` current on this thread; give the token to `detached`."""
    return otel_context.attach(trace.set_span_in_context(span))


def detached(token: Token[Context]) -> None:
    """Make current again what was before `attached`."""
    otel_context.detach(token)


def refused(span: Span, exc: BaseException) -> None:
    """End the span of a request refused outright (an `RpcError`, or a failure)."""
    code = getattr(exc, "code", None)
    error_type = str(code) if code is not None else type(exc).__name__
    span.set_attributes({"switchyard.outcome": "error", "error.type": error_type})
    tracing.failed(span, getattr(exc, "message", None) or str(exc) or type(exc).__name__)
    span.end()


def answered(span: Span, message: Message | None) -> None:
    """End the span of a request with its final message (None: abandoned before it)."""
    if message is None:
        span.set_attribute("switchyard.outcome", "abandoned")
    elif "error" in message:
        error = message["error"] if isinstance(message["error"], dict) else {}
        span.set_attributes(
            {"switchyard.outcome": "error", "error.type": str(error.get("code", ""))}
        )
        tracing.failed(span, str(error.get("message", "")))
    else:
        result = message.get("result")
        is_error = isinstance(result, dict) and result.get("isError") is True
        span.set_attribute("switchyard.outcome", "tool_error" if is_error else "ok")
    span.end()


def result_answered(span: Span, result: dict[str, Any] | None) -> None:
    """End the span of a request answered at once with `result`."""
    answered(span, {"result": result})


def _carrying(blocking: Callable[[Callable[[], Any]], Awaitable[Any]], context: Context) -> Any:
    """`blocking` (a `Threads` member), its functions run with `context` current."""

    async def run(function: Callable[[], Any]) -> Any:
        return await blocking(partial(tracing.within, context, function))

    return run


async def followed(span: Span, later: Later, threads: Threads) -> AsyncIterator[Message]:
    """`later`'s messages, with the request's span current in the threads it uses, and the
    span ended with the last message (or when the reader stops early)."""
    context = trace.set_span_in_context(span)
    carried = dataclasses.replace(
        threads, short=_carrying(threads.short, context), run=_carrying(threads.run, context)
    )
    messages = later(carried)
    last: Message | None = None
    failure: BaseException | None = None
    try:
        async for message in messages:
            last = message
            yield message
    except Exception as exc:
        failure = exc
        raise
    finally:
        close = getattr(messages, "aclose", None)
        if close is not None:
            await close()
        if failure is not None:
            refused(span, failure)
        else:
            answered(span, last if last is not None and _is_response(last) else None)


def _is_response(message: Message) -> bool:
    return "method" not in message and ("result" in message or "error" in message)
