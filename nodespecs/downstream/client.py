"""Calls to downstream MCP servers: the one way the graph runs and provider refreshes reach them.

`call_tool` and `list_tools` name a server by its `Connection` (`nodespecs.downstream.connection`)
and go through the process's pool of live sessions (`nodespecs.downstream.pool`: sessions shared
by every thread, dead servers restarted, a deadline on every call), whose `close_all` and
`pool_size` are here too. Failures raise `DownstreamError` (`DownstreamTimeout` past the
deadline), saying what went wrong and what to check.

A tool's own failure (`isError: true`) is a normal result, returned to the caller; a result
over `settings.MCP_CLIENT_MAX_RESULT_BYTES` of JSON is refused with a `DownstreamError`: as
soon as the message carrying it passes the limit while it arrives (`nodespecs.downstream.limits`;
a stdio server is then restarted), else once parsed. A listing of tools is read to its last
page, up to `MAX_TOOL_PAGES`.

Each tool call is an OpenTelemetry span, a child of the span current on the calling thread (a
workflow node's: graphs/execution/tracing.py), made current on the pool's loop while the call is
sent, and only then: the SDK's client puts its `traceparent` in the request's `_meta`, and over HTTP
in the `traceparent` header too (`nodespecs.downstream.transports`). With tracing off the span is
the API's no-op one.

A workflow run's calls carry its lineage (`nodespecs.downstream.call_lineage`): in the request's
`_meta`, and over HTTP in a header set for that call alone, so that this service, called back, can
refuse a chain that recurses.
"""

from __future__ import annotations

import contextvars
from typing import Any, cast

from django.conf import settings
from mcp import Client
from mcp.types import CallToolResult, RequestParamsMeta, Tool
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from nodespecs.downstream import call_lineage
from nodespecs.downstream.call_lineage import Lineage
from nodespecs.downstream.connection import TRANSPORTS, Connection
from nodespecs.downstream.errors import DownstreamError, DownstreamTimeout
from nodespecs.downstream.pool import close_all, pool_size, request

__all__ = [
    "TRANSPORTS",
    "Connection",
    "DownstreamError",
    "DownstreamTimeout",
    "all_tools",
    "call_tool",
    "close_all",
    "list_tools",
    "pool_size",
]

# A server whose tool listing goes on for more pages than this is not listing tools.
MAX_TOOL_PAGES = 100

_tracer = trace.get_tracer("switchyard.downstream")


def call_tool(
    connection: Connection,
    tool: str,
    arguments: dict[str, Any],
    *,
    timeout: float | None = None,
    lineage: Lineage = (),
) -> CallToolResult:
    """Call `tool` on the server; a tool error comes back as a result with `is_error`.
    `lineage`, the workflow runs making the call (the calling run last), goes with it.

    Raises `DownstreamError` when the server cannot be started or reached, or fails while
    handling the call, and `DownstreamTimeout` when there is no answer within `timeout`
    seconds (default: the connection's `timeout_seconds`).
    """
    attributes = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": tool,
        "switchyard.provider": connection.name,
        "switchyard.transport": connection.transport,
    }
    with _tracer.start_as_current_span(
        f"downstream tools/call {tool}", kind=SpanKind.CLIENT, attributes=attributes
    ) as span:
        # The pool's loop runs the call on its own thread: the span goes with it.
        context = otel_context.get_current()
        meta = {call_lineage.META_KEY: call_lineage.as_json(lineage)} if lineage else None

        async def send(client: Client) -> CallToolResult:
            token = otel_context.attach(context)
            try:
                # Set in the task that sends the call, whose context the SDK sends it in.
                with call_lineage.sending(lineage):
                    return await client.call_tool(
                        tool, arguments, meta=cast(RequestParamsMeta | None, meta)
                    )
            finally:
                otel_context.detach(token)

        # Sent from an empty context, so that a session this call starts (a task that lives
        # on, nodespecs.downstream.pool) does not keep this call's span for every later call.
        what = f"tools/call {tool!r}"
        span_context = span.get_span_context()
        trace_id = trace.format_trace_id(span_context.trace_id) if span_context.is_valid else ""
        result = contextvars.Context().run(
            request, connection, what, send, timeout, trace_id=trace_id
        )
        _check_size(connection, tool, result)
        if result.is_error:
            span.set_status(Status(StatusCode.ERROR, "the tool answered with isError"))
    return result


def _check_size(connection: Connection, tool: str, result: CallToolResult) -> None:
    """Refuse a result too large to pass on: it would be copied into the next nodes, the
    history and the answer to the agent."""
    limit: int = settings.MCP_CLIENT_MAX_RESULT_BYTES
    size = len(result.model_dump_json(by_alias=True, exclude_none=True))
    if size > limit:
        raise DownstreamError(
            f"{connection.describe()} returned {size:,} bytes to tools/call {tool!r}, over the "
            f"{limit:,} that MCP_CLIENT_MAX_RESULT_BYTES allows. Ask the tool for less (a "
            "page, a filter), or raise MCP_CLIENT_MAX_RESULT_BYTES."
        )


def list_tools(connection: Connection, *, timeout: float | None = None) -> list[Tool]:
    """Every tool the server offers (all pages of its listing), in its order."""

    async def send(client: Client) -> list[Tool]:
        return await all_tools(connection, client)

    return request(connection, "tools/list", send, timeout)


async def all_tools(connection: Connection, client: Client) -> list[Tool]:
    """Every tool a connected client's server offers: its listing read to the last page.

    Raises `DownstreamError` when the listing goes on for more than `MAX_TOOL_PAGES` pages."""
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
    raise DownstreamError(
        f"{connection.describe()} listed more than {MAX_TOOL_PAGES} pages of tools; "
        "its pagination does not end."
    )
