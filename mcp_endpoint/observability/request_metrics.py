"""What operators see of requests: a metric and, with `LOG_FORMAT=json`, a log line per MCP or
REST request, recorded as it ends; the REST middleware (rest_middleware.py) and the `/metrics` page
(metrics_page.py) are beside it.

The transports time a request and hand over what the protocol reported of it (`http_messages.Facts`:
method, tool, era, caller); this module turns that into bounded labels, the counter and histogram,
and the `request` log line. MCP requests are recorded by the ASGI app
(`mcp_endpoint/transports/asgi.py`) and the Django view (`mcp_endpoint/transports/views.py`), REST
requests by `RestTelemetryMiddleware` (what the route learned is noted on the request by
`mcp_endpoint/rest/api.py`). Runs, nodes, downstream calls and the pool are
`graphs/execution/telemetry.py`'s and `nodespecs/telemetry.py`'s, the shared machinery the latter's.

Labels are bounded: a method is one the protocol defines (else "other"), a tool one this server
serves (else "other"; a workflow only among the METRICS_WORKFLOW_LABELS that
`graphs.execution.telemetry.labelled_workflows` names), a REST route its pattern, never the path as
sent. The key is logged by its identity (`key:<prefix>`), never the key.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponseBase
from mcp.types import methods

from graphs.execution.telemetry import labelled_workflows
from graphs.execution.toolset import workflow_tools
from mcp_endpoint.features import extensions
from mcp_endpoint.features.tools import TOOLS
from mcp_endpoint.observability.facts import Facts, response_outcome
from mcp_endpoint.protocol import traces
from nodespecs import telemetry
from nodespecs.telemetry import OTHER


@dataclass
class Written:
    """What a transport wrote of an MCP request's answer, kept by the transport as it writes: a
    plain answer's outcome is known at once; a streamed one has `responded` false until its
    response has gone out (`note_response`), so that a client that left mid-stream is told
    apart."""

    status: int
    error_code: int | None = None
    tool_error: bool = False
    responded: bool = True

    def note_response(self, message: dict[str, Any]) -> None:
        """The response that ends the answer went out: its error code, or whether its result
        is a tool's own error."""
        self.error_code, self.tool_error = response_outcome(message)
        self.responded = True


REQUESTS = telemetry.counter(
    "switchyard_requests_total",
    "MCP and REST requests answered, by transport, method, tool and outcome (ok, tool_error: "
    "a tool's own isError result, error: a JSON-RPC or HTTP error, refused: 401, 403 or 429, "
    "disconnected: the client left first).",
    ["transport", "method", "tool", "outcome"],
)
REQUEST_SECONDS = telemetry.histogram(
    "switchyard_request_seconds",
    "Time from a request's arrival to the end of its answer (its stream included), by "
    "transport, method, tool and outcome.",
    ["transport", "method", "tool", "outcome"],
)

KNOWN_METHODS = frozenset(
    {name for name, _ in methods.CLIENT_REQUESTS}
    | {name for name, _ in methods.CLIENT_NOTIFICATIONS}
    | set(methods.SPEC_CLIENT_METHODS)
    | {"tasks/get", "tasks/cancel", "tasks/update", "tasks/list", "tasks/result"}
)
# A request without a JSON-RPC method (a 2025 session's GET stream, its DELETE) is labelled
# by its HTTP method.
HTTP_METHODS = frozenset({"GET", "POST", "DELETE"})
REFUSED = frozenset({401, 403, 429})
# Of what callers send, the most a log line keeps.
_LOGGED_CHARACTERS = 200
_EMPTY = Facts()


def known_tool(name: str, group: str | None = None) -> bool:
    """Whether `name` is a metric label: a tool this server serves (at `/mcp`, or the group
    `group`'s), a workflow only among `labelled_workflows`. May query like the call itself
    (the workflow snapshot)."""
    if name in TOOLS or name in extensions.installed().tools:
        return True
    return name in workflow_tools(group) and name in labelled_workflows()


def _method_label(facts: Facts, http_method: str) -> str:
    if facts.method:
        return facts.method if facts.method in KNOWN_METHODS else OTHER
    return http_method if http_method in HTTP_METHODS else OTHER


def _outcome(status: int, error_code: int | None, tool_error: bool) -> str:
    if status in REFUSED:
        return "refused"
    if error_code is not None or status >= 400:
        return "error"
    return "tool_error" if tool_error else "ok"


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _LOGGED_CHARACTERS:
        return value[:_LOGGED_CHARACTERS] + "..."
    return value


def _record(
    transport: str,
    method: str,
    tool: str,
    outcome: str,
    seconds: float,
    fields: Callable[[], dict[str, Any]],
) -> None:
    if telemetry.metrics_enabled():
        REQUESTS.child(transport, method, tool, outcome).inc()
        REQUEST_SECONDS.child(transport, method, tool, outcome).observe(seconds)
    if telemetry.json_logs():
        line = {
            "transport": transport,
            **fields(),
            "outcome": outcome,
            "duration_ms": round(seconds * 1000, 2),
        }
        telemetry.emit("request", line)


def mcp_request_done(
    written: Written | None,
    started: float,
    *,
    http_method: str,
    facts: Facts | None,
    transport: str = "mcp",
) -> None:
    """An MCP request's answer was written (or the client left first: `written` None, or a
    streamed answer that never sent its response). `facts` are what the protocol learned of
    the request (None when it got no further than admission); `started` is its
    `time.perf_counter()` on arrival."""
    facts = facts or _EMPTY
    if written is None or not written.responded:
        status, outcome = 499, "disconnected"
    else:
        status = written.status
        outcome = _outcome(status, written.error_code, written.tool_error)
    _request_done(transport, facts, started, http_method, status, outcome)


def stdio_request_done(response: dict[str, Any] | None, facts: Facts, started: float) -> None:
    """A request over stdio was answered with `response` (None: the client went away
    first). Its line has no HTTP status."""
    outcome = "disconnected" if response is None else _outcome(200, *response_outcome(response))
    _request_done("stdio", facts, started, "", None, outcome)


def _request_done(
    transport: str,
    facts: Facts,
    started: float,
    http_method: str,
    status: int | None,
    outcome: str,
) -> None:
    seconds = time.perf_counter() - started
    tool = ""
    if facts.tool:
        tool = facts.tool if facts.tool_known else OTHER

    def fields() -> dict[str, Any]:
        return {
            "request_id": _clip(facts.request_id),
            "method": _clip(facts.method) or http_method or None,
            "tool": _clip(facts.tool) or None,
            "key_id": facts.key or None,
            "status": status,
            "era": facts.era or None,
            "trace_id": facts.trace_id or None,
        }

    _record(transport, _method_label(facts, http_method), tool, outcome, seconds, fields)


# REST (django-ninja, mcp_endpoint/rest/api.py).

REST_PREFIX = "/api/"
_NOTES = "_switchyard_telemetry"


def rest_note(request: HttpRequest, **facts: Any) -> None:
    """Note what a REST route learned of its request (`key`, `tool`, `request_id`) for its
    log line and span. A tool is labelled by name only when `known_tool`
    (checked here, in the route's thread, where a query is allowed)."""
    notes: dict[str, Any] = getattr(request, _NOTES, None) or {}
    if "tool" in facts:
        facts["tool_label"] = facts["tool"] if known_tool(facts["tool"]) else OTHER
    notes.update(facts)
    setattr(request, _NOTES, notes)


def _route(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    route = getattr(match, "route", None)
    method = (
        request.method if request.method in ("GET", "POST", "PUT", "PATCH", "DELETE") else OTHER
    )
    return f"{method} /{route}" if route else OTHER


def rest_request_done(
    request: HttpRequest,
    response: HttpResponseBase,
    started: float,
    trace: traces.RestTrace | None = None,
) -> None:
    """A REST request was answered; its `trace` (tracing on) ends with it."""
    seconds = time.perf_counter() - started
    notes: dict[str, Any] = getattr(request, _NOTES, None) or {}
    status = response.status_code
    outcome = _outcome(status, None, False)
    if trace is not None:
        trace.end(_route(request), status, outcome, notes.get("key"))

    def fields() -> dict[str, Any]:
        return {
            "request_id": notes.get("request_id"),
            "method": _route(request),
            "tool": _clip(notes.get("tool")),
            "key_id": notes.get("key"),
            "status": status,
            "era": None,
            "trace_id": trace.trace_id if trace is not None else None,
        }

    _record("rest", _route(request), notes.get("tool_label", ""), outcome, seconds, fields)
