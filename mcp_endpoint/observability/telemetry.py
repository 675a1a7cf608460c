"""What operators see of requests: a metric and, with `LOG_FORMAT=json`, a log line per MCP or
REST request, and the `/metrics` page that Prometheus scrapes.

The transports time a request and hand over what the protocol reported of it (`http_messages.Facts`:
method, tool, era, caller); this module turns that into bounded labels, the counter and histogram,
and the `request` log line. MCP requests are recorded by the ASGI app
(`mcp_endpoint/transports/asgi.py`) and the Django view (`views.py`), REST requests by
`RestTelemetryMiddleware` (what the route learned is noted on the request by `api.py`). Runs, nodes,
downstream calls and the pool are `graphs/execution/telemetry.py`'s and `nodespecs/telemetry.py`'s,
the shared machinery the latter's.

Labels are bounded: a method is one the protocol defines (else "other"), a tool one this server
serves (else "other"; a workflow only among the METRICS_WORKFLOW_LABELS that
`graphs.execution.telemetry.labelled_workflows` names), a REST route its pattern, never the path as
sent. The key is logged by its identity (`key:<prefix>`), never the key.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from mcp.types import methods
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from graphs.execution import tracing
from graphs.execution.telemetry import RunQueueCollector, labelled_workflows
from graphs.execution.toolset import workflow_tools
from mcp_endpoint.access.auth import REALM, Refusal, admit, presented_key
from mcp_endpoint.access.client_addresses import allow_listed
from mcp_endpoint.features.tools import TOOLS
from mcp_endpoint.models import Scope
from mcp_endpoint.observability import traces
from mcp_endpoint.protocol import dispatch
from mcp_endpoint.transports.http_messages import Facts, Outbound, response_outcome
from nodespecs import telemetry
from nodespecs.telemetry import OTHER

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


def known_tool(name: str, server: str | None = None) -> bool:
    """Whether `name` is a metric label: a tool this server serves (at `/mcp`, or the group
    `server`'s), a workflow only among `labelled_workflows`. May query like the call itself
    (the workflow snapshot)."""
    if name in TOOLS or name in dispatch.EXTRA_TOOLS:
        return True
    return name in workflow_tools(server) and name in labelled_workflows()


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
    outbound: Outbound | None,
    started: float,
    *,
    http_method: str,
    facts: Facts | None = None,
    transport: str = "mcp",
) -> None:
    """An MCP request's answer was written (or the client left first: `outbound` None, or a
    streamed answer that never sent its response). `facts` are the protocol's, when the
    answer written is not the one that carried them (a reply followed to its response);
    `started` is its `time.perf_counter()` on arrival."""
    facts = facts or (outbound.facts if outbound is not None else None) or _EMPTY
    if outbound is None or not outbound.responded:
        status, outcome = 499, "disconnected"
    else:
        status = outbound.status
        outcome = _outcome(status, outbound.error_code, outbound.tool_error)
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


# The /metrics page.


def metrics_refusal(headers: Mapping[str, str], address: str) -> Refusal | None:
    """Why a scrape is refused (401 without a key or with a bad one, 403 without the scope
    metrics:read, 429 over the key's limit), or None when it may read the metrics: a client
    in `METRICS_ALLOWED_ADDRESSES` needs no key (its address read as
    `client_addresses.allow_listed` reads it, never from a header anyone may write)."""
    if allow_listed(address, headers, settings.METRICS_ALLOWED_ADDRESSES):
        return None
    if presented_key(headers) is None and not settings.MCP_ANONYMOUS_SCOPES:
        return Refusal(
            401,
            "Unauthorized: /metrics needs an API key with the scope metrics:read "
            "('Authorization: Bearer KEY'), or a client address in METRICS_ALLOWED_ADDRESSES "
            "(read from X-Forwarded-For only when FORWARDED_ALLOW_IPS names the proxy).",
            {"WWW-Authenticate": REALM},
        )
    caller = admit(headers, address)
    if isinstance(caller, Refusal):
        return caller
    if Scope.METRICS_READ not in caller.scopes:
        return Refusal(
            403,
            "Forbidden: /metrics needs the scope metrics:read, which this key does not have "
            "(or a client address in METRICS_ALLOWED_ADDRESSES).",
            {},
        )
    return None


class _Forward(Collector):
    """Another registry's metrics, within the registry of one scrape."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Any:
        return self.registry.collect()


def exposition() -> HttpResponse:
    """The metrics in Prometheus's text format: every process's on this host in multiprocess
    mode (else this process's), with the waiting runs and the Celery queue read now."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Forward(telemetry.scrape_registry()))
    registry.register(RunQueueCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
