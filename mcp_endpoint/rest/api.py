"""The REST API of the node knowledge server (seed 001), served with django-ninja.

`/api/v1/mcp/tools`, `/invoke`, `/tools/{name}`, `/health` need an API key with the scope
each names, as does `/api/v1/runs/{id}/cancel` (tools:execute, the key's own runs);
`/api/v1/public/health` is open; the `internal` endpoints accept only the service token
(`MCP_INTERNAL_TOKEN`) or a client in `MCP_INTERNAL_NETWORKS`. OpenAPI docs are at
`/api/v1/docs`; the schema documents every status a route can answer, each refusal as one
`ErrorOut` (tests/mcp_endpoint/test_rest_schema.py holds the API to it).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import RequestDataTooBig
from django.db import connection
from django.http import HttpRequest, HttpResponse
from mcp import types
from ninja import NinjaAPI, Schema
from ninja.errors import HttpError
from ninja.errors import ValidationError as NinjaValidationError
from pydantic import Field

from mcp_endpoint.access.challenges import scope_refusal
from mcp_endpoint.access.client_addresses import allow_listed
from mcp_endpoint.calls.workflow_answers import RUN_ID_META
from mcp_endpoint.features.tools import TOOLS
from mcp_endpoint.jsonrpc.context import SERVER_VERSION
from mcp_endpoint.jsonrpc.errors import (
    RETRY_AFTER_SECONDS,
    Forbidden,
    unavailable_errors,
    unavailable_message,
)
from mcp_endpoint.models import Scope
from mcp_endpoint.observability import request_metrics
from mcp_endpoint.protocol import dispatch
from mcp_endpoint.protocol.core import (
    LATEST_HANDSHAKE_VERSION,
    REQUEST_THREADS,
    Refused,
    Request,
    execute,
    final,
)
from mcp_endpoint.rest.common import (
    INVALID_BODY,
    KEYED,
    ApiRefusal,
    responses,
    rest_caller,
)
from mcp_endpoint.rest.examples import router as examples_router
from mcp_endpoint.rest.run_annotations import router as run_annotations_router
from mcp_endpoint.rest.run_comparison import router as run_comparison_router
from mcp_endpoint.rest.run_steps import router as run_steps_router
from mcp_endpoint.rest.runs import router as runs_router
from nodespecs.callers import Caller
from nodespecs.downstream import call_lineage

api = NinjaAPI(
    title="Switchyard REST API",
    version="1.0.0",
    urls_namespace="api",
    docs_url="/docs",
    description=(
        "REST access to the node knowledge tools, the workflows and their runs. Send "
        "`Authorization: Bearer KEY` or "
        "`X-API-Key: KEY`; keys carry scopes (tools:read, tools:execute, runs:read, runs:decide, "
        "health:check)."
    ),
)

WORKFLOW_GUIDANCE = (
    "Anti-pattern: HUMAN_IN_THE_LOOP → AI_AGENT → IF to classify a reply. Instead use one "
    "HUMAN_IN_THE_LOOP node and route on its confirmed / rejected / unrelated / timeout ports."
)
USAGE_EXAMPLES: dict[str, list[dict[str, Any]]] = {
    "get_node_types": [{}, {"type_filter": "ACTION"}],
    "get_node_details": [{"nodes": [{"node_type": "ACTION", "subtype": "HTTP_REQUEST"}]}],
    "search_nodes": [{"query": "send an email", "max_results": 5}],
}


class HealthOut(Schema):
    """The seed's health answer: healthy or not, and why not."""

    healthy: bool
    version: str
    available_tools: list[str]
    timestamp: int
    error: str | None = Field(description="Why the service is unhealthy; null when healthy.")
    request_id: str
    processing_time_ms: float


class PublicHealthOut(Schema):
    """The keyless liveness answer for load balancers."""

    status: str = Field(description="ok, or unavailable (with HTTP 503).")


@api.exception_handler(ApiRefusal)
def _refusal(request: HttpRequest, exc: ApiRefusal) -> HttpResponse:
    response = api.create_response(request, {"error": exc.message}, status=exc.status)
    for name, value in exc.headers.items():
        response[name] = value
    return response


@api.exception_handler(NinjaValidationError)
def _invalid(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    problems = [
        f"{'.'.join(str(p) for p in error['loc'][1:]) or 'body'}: {error['msg']}"
        for error in exc.errors
    ]
    return api.create_response(
        request, {"error": "Invalid request: " + "; ".join(problems)}, status=422
    )


@api.exception_handler(RequestDataTooBig)
def _too_large(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    """Django refuses to read a body over DATA_UPLOAD_MAX_MEMORY_SIZE; say so, as a 413."""
    message = (
        f"Request body too large: the limit is {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes "
        "(DATA_UPLOAD_MAX_MEMORY_SIZE: MCP_MAX_BODY_BYTES or 2.5 MB, whichever is larger). "
        "Send smaller arguments."
    )
    return api.create_response(request, {"error": message}, status=413)


@api.exception_handler(HttpError)
def _unparsable(request: HttpRequest, exc: HttpError) -> HttpResponse:
    """django-ninja's own refusals in the shared `ErrorOut` shape. Its only one here is a 400
    for a body that is not JSON, which it words as 'Cannot parse request body'."""
    message = str(exc)
    if exc.status_code == 400:
        message = (
            "Invalid request: the body is not valid JSON. Send a JSON object with "
            'Content-Type: application/json, e.g. {"name": "get_node_types", "arguments": {}}.'
        )
    return api.create_response(request, {"error": message}, status=exc.status_code)


@api.exception_handler(Exception)
def _unavailable(request: HttpRequest, exc: Exception) -> HttpResponse:
    """The database or cache did not answer: a 503 the client may retry
    (mcp_endpoint/jsonrpc/errors.py). Any other exception goes on to Django, a 500. (Registered for
    every exception: Redis's classes may not be loaded yet when this module is.)"""
    if not isinstance(exc, unavailable_errors()):
        raise exc
    response = api.create_response(request, {"error": unavailable_message(exc)}, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def _internal_only(request: HttpRequest) -> None:
    token = settings.MCP_INTERNAL_TOKEN
    if token and request.headers.get("X-Internal-Token") == token:
        return
    address = request.META.get("REMOTE_ADDR", "")
    if allow_listed(address, request.headers, settings.MCP_INTERNAL_NETWORKS):
        return
    raise ApiRefusal(
        403,
        "Forbidden: internal endpoints need the X-Internal-Token header (MCP_INTERNAL_TOKEN) "
        "or a client address in MCP_INTERNAL_NETWORKS (read from X-Forwarded-For only when "
        "FORWARDED_ALLOW_IPS names the proxy).",
    )


def _tool_summaries(caller: Caller) -> list[dict[str, Any]]:
    """Every tool `caller` may call, in tools/list order: the knowledge tools, then the
    workflows (category "graph")."""
    return [_tool_summary(tool) for tool in dispatch.tool_list(scopes=caller.scopes)]


def _tool_summary(tool: types.Tool) -> dict[str, Any]:
    knowledge = tool.name in TOOLS
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.input_schema,
        "category": "workflow" if knowledge else "graph",
        "tags": ["nodes", "workflow", tool.name.split("_")[0]] if knowledge else ["graph"],
    }


# Internal services are trusted with every scope; their runs are recorded as theirs.
INTERNAL_CALLER = Caller(actor="internal", scopes=frozenset(Scope.values))


class InvokeRequest(Schema):
    name: str = Field(description="Tool name, e.g. get_node_details.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments.")


def _invoke(
    body: InvokeRequest, caller: Caller, request_id: str, lineage_header: str | None
) -> tuple[dict[str, Any], float]:
    """Call a tool through the protocol core, as a 2025 client would, and wait for its
    response: the result (a workflow's run id as `_run_id`) and the milliseconds it took. With
    tracing on, the call's span is a child of the REST request's
    (`rest_middleware.RestTelemetryMiddleware`). `lineage_header` is the request's
    `Switchyard-Lineage`, sent by a workflow run calling back (graphs/execution/lineage.py)."""
    start = time.perf_counter()
    params = {"name": body.name, "arguments": body.arguments}
    headers = {call_lineage.HEADER.lower(): lineage_header} if lineage_header else None
    # A REST client is answered as a 2025 client without a session would be.
    request = Request(
        "tools/call",
        params,
        LATEST_HANDSHAKE_VERSION,
        caller,
        request_id,
        headers=headers,
        streams=False,
    )
    reply = execute(request)
    if isinstance(reply, Refused):
        # A tool that needs a scope beyond tools:execute names it: 403 with the challenge that
        # names it; anything else 422.
        error = reply.error
        if isinstance(error, Forbidden):
            refusal = scope_refusal(error.scope, error.message)
            raise ApiRefusal(refusal.status, refusal.message, refusal.headers)
        raise ApiRefusal(422, error.message)
    message = async_to_sync(final)(reply, REQUEST_THREADS)
    if "error" in message:
        raise ApiRefusal(422, message["error"]["message"])
    result = message["result"]
    run_id = (result.get("_meta") or {}).get(RUN_ID_META)
    if run_id is not None:
        result["_run_id"] = run_id
    return result, round((time.perf_counter() - start) * 1000, 2)


@api.get(
    "/mcp/tools/internal",
    tags=["internal"],
    summary="List tools (internal services)",
    response=responses(dict[str, Any], 403),
)
def tools_internal(request: HttpRequest) -> dict[str, Any]:
    _internal_only(request)
    return {"tools": _tool_summaries(INTERNAL_CALLER)}


@api.post(
    "/mcp/invoke/internal",
    tags=["internal"],
    summary="Invoke a tool (internal services)",
    response=responses(dict[str, Any], 403, *INVALID_BODY),
)
def invoke_internal(request: HttpRequest, body: InvokeRequest) -> dict[str, Any]:
    _internal_only(request)
    request_id = str(uuid.uuid4())
    request_metrics.rest_note(
        request, key=INTERNAL_CALLER.actor, tool=body.name, request_id=request_id
    )
    result, _ = _invoke(body, INTERNAL_CALLER, request_id, request.headers.get(call_lineage.HEADER))
    return result


@api.get(
    "/mcp/tools",
    tags=["mcp"],
    summary="List the MCP tools (scope tools:read)",
    response=responses(dict[str, Any], *KEYED),
)
def list_tools(request: HttpRequest) -> dict[str, Any]:
    caller = rest_caller(request, "tools:read")
    tools = _tool_summaries(caller)
    return {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "result": {"tools": tools}}


@api.post(
    "/mcp/invoke",
    tags=["mcp"],
    summary="Invoke a tool (scope tools:execute)",
    description=(
        "Calls a tool as MCP's tools/call does. A tool that needs a scope beyond "
        "tools:execute (the builder's need workflows:write or workflows:publish, the run "
        "history's runs:read) is refused with 403, its error naming the scope."
    ),
    response=responses(dict[str, Any], *KEYED, *INVALID_BODY),
)
def invoke(request: HttpRequest, body: InvokeRequest) -> dict[str, Any]:
    caller = rest_caller(request, "tools:execute")
    request_id = str(uuid.uuid4())
    request_metrics.rest_note(request, tool=body.name, request_id=request_id)
    result, elapsed = _invoke(body, caller, request_id, request.headers.get(call_lineage.HEADER))
    result.update(
        {"_tool_name": body.name, "_execution_time_ms": elapsed, "_request_id": request_id}
    )
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


@api.get(
    "/mcp/tools/{tool_name}",
    tags=["mcp"],
    summary="Describe one tool (scope tools:read)",
    response=responses(dict[str, Any], *KEYED, 404),
)
def tool_detail(request: HttpRequest, tool_name: str) -> dict[str, Any]:
    start = time.perf_counter()
    rest_caller(request, "tools:read")
    request_metrics.rest_note(request, tool=tool_name)
    tools = {tool.name: tool for tool in dispatch.tool_list()}
    if tool_name not in tools:
        raise ApiRefusal(404, f"No tool {tool_name!r}; available: {', '.join(tools)}.")
    return {
        **_tool_summary(tools[tool_name]),
        "version": SERVER_VERSION,
        "available": True,
        "workflow_guidance": WORKFLOW_GUIDANCE,
        "usage_examples": USAGE_EXAMPLES.get(tool_name, []),
        "processing_time_ms": round((time.perf_counter() - start) * 1000, 2),
        "request_id": str(uuid.uuid4()),
    }


def _backing_services_ok() -> str | None:
    """Why the service cannot serve requests now (its database or cache does not answer),
    or None. The cache is Redis with REDIS_URL set: every request counts its rate limit
    there, so a server that cannot reach it is not healthy either."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any failure means unhealthy; say which
        return f"database unavailable: {exc.__class__.__name__}"
    try:
        cache.get("health:probe")
    except Exception as exc:
        return f"cache unavailable: {exc.__class__.__name__}"
    return None


@api.get(
    "/mcp/health",
    tags=["mcp"],
    summary="Service health (scope health:check)",
    response=responses(HealthOut, *KEYED),
)
def health(request: HttpRequest) -> dict[str, Any]:
    start = time.perf_counter()
    rest_caller(request, "health:check")
    error = _backing_services_ok()
    return {
        "healthy": error is None,
        "version": SERVER_VERSION,
        "available_tools": list(TOOLS),
        "timestamp": int(time.time()),
        "error": error,
        "request_id": str(uuid.uuid4()),
        "processing_time_ms": round((time.perf_counter() - start) * 1000, 2),
    }


@api.get(
    "/public/health",
    tags=["public"],
    summary="Liveness for load balancers (no key)",
    response={200: PublicHealthOut, 503: PublicHealthOut},
)
def public_health(request: HttpRequest) -> HttpResponse:
    error = _backing_services_ok()
    return api.create_response(
        request,
        {"status": "ok" if error is None else "unavailable"},
        status=200 if error is None else 503,
    )


api.add_router("", runs_router)
api.add_router("", run_steps_router)
api.add_router("", examples_router)
api.add_router("", run_comparison_router)
api.add_router("", run_annotations_router)
