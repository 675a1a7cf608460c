"""Streamable HTTP for MCP, both protocol eras on one endpoint.

Transport-neutral (http_messages.py), so the rules can be tested without a server.

`handle(inbound)` takes a transport-neutral request (HTTP method, headers, body, caller) and
returns an `Answer` (http_messages.py: a plain answer, or one still to be sent as it goes).

Era choice, as the official SDK v2 makes it and as the specification asks:
- `MCP-Protocol-Version: 2026-07-28` (or a body whose `_meta` carries a protocol version and
  is not `initialize`) → the stateless revision: every request carries its version and
  capabilities in `_meta`, headers must match the body, results carry `resultType`.
- otherwise the 2025 revisions: `initialize` opens a session (`Mcp-Session-Id`), later
  requests must name it, `DELETE` ends it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from mcp import types
from mcp.shared import inbound as envelope
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from graphs.execution.toolset import workflow_server
from mcp_endpoint.access.challenges import scope_challenge, scope_refusal
from mcp_endpoint.calls import task_extension, workflow_answers
from mcp_endpoint.jsonrpc.errors import Forbidden, RpcError
from mcp_endpoint.models import Scope
from mcp_endpoint.observability import request_metrics
from mcp_endpoint.protocol import core, dispatch, list_changes, sessions
from mcp_endpoint.protocol.core import (
    MODERN_VERSION,
    SESSION_ERA,
    Answered,
    Asking,
    Refused,
    Reply,
    Request,
    execute,
    initialize_result,
    negotiate,
)
from mcp_endpoint.transports.admission import answers_unavailable
from mcp_endpoint.transports.http_messages import (
    JSON,
    SESSION_HEADER,
    SSE,
    VERSION_HEADER,
    Answer,
    Inbound,
    Listen,
    Listening,
    Outbound,
    Streamed,
    accepts,
    error_outbound,
    json_body,
    json_outbound,
)
from nodespecs.callers import Caller

# JSON-RPC error code → HTTP status in the 2026-07-28 era (the SDK's table).
MODERN_ERROR_STATUS: Mapping[int, int] = envelope.ERROR_CODE_HTTP_STATUS


def _answer_of(reply: Reply, headers: Mapping[str, str], extra_headers: dict[str, str]) -> Answer:
    """The core's answer as the client takes it: an event stream when it sends messages
    before its response and the client accepts one, else the response alone."""
    if core.streams(reply) and accepts(headers, SSE):
        return Streamed(reply, events=True, headers=dict(extra_headers))
    if isinstance(reply, Answered):
        tool_error = reply.result.get("isError") is True
        body = core.response_body(reply)
        return Outbound(200, {"Content-Type": JSON, **extra_headers}, body, tool_error=tool_error)
    return Streamed(reply, events=False, headers=dict(extra_headers))


def _refusal(refused: Refused, status: int, headers: dict[str, str] | None = None) -> Outbound:
    """A request the core refused, as a JSON-RPC error with `status` (403 for a missing
    scope, whatever the era, with the `insufficient_scope` challenge that names it)."""
    error = refused.error
    if isinstance(error, Forbidden):
        status = 403
        headers = {**(headers or {}), **scope_challenge(error.scope, error.message)}
    return error_outbound(
        status,
        error.code,
        error.message,
        request_id=refused.request_id,
        data=error.data,
        headers=headers,
    )


@answers_unavailable
def handle(inbound: Inbound) -> Answer:
    """Answer one HTTP request to `/mcp`, or to a workflow group's endpoint `/mcp/<slug>`
    (`inbound.group`). The answer carries what was learned of the request on the way
    (`inbound.facts`, the transport's: method, tool, era, caller), for its telemetry."""
    facts = inbound.facts
    facts.key = inbound.caller.actor
    answer = _answer(inbound)
    if facts.tool:
        facts.tool_known = request_metrics.known_tool(facts.tool, inbound.group)
    return answer


def _answer(inbound: Inbound) -> Answer:
    if inbound.group is not None and workflow_server(inbound.group) is None:
        return error_outbound(
            404,
            types.INVALID_REQUEST,
            f"No MCP server at /mcp/{inbound.group[:80]}: no workflow group has that slug. "
            "`python manage.py export_graph --list` (or the admin's workflow groups) shows "
            "each group's endpoint; /mcp serves every workflow.",
        )
    if inbound.method == "POST":
        message, problem = json_body(inbound)
        if problem:
            return problem
        if isinstance(message, dict):
            inbound.facts.note(message)
    else:
        message = None
    version = inbound.headers.get(VERSION_HEADER)
    known = version is None or version in HANDSHAKE_PROTOCOL_VERSIONS + MODERN_PROTOCOL_VERSIONS
    if not known and not core.is_modern(message):
        supported = [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS]
        return error_outbound(
            400,
            types.UNSUPPORTED_PROTOCOL_VERSION,
            f"Unsupported MCP-Protocol-Version {version!r}; this server speaks "
            f"{', '.join(supported)}.",
            request_id=message.get("id") if isinstance(message, dict) else None,
            data={"supported": supported, "requested": version},
        )
    if core.is_modern(message, inbound.headers.get(VERSION_HEADER)):
        inbound.facts.era = MODERN_VERSION
        return _handle_modern(inbound, message)
    inbound.facts.era = SESSION_ERA
    return _handle_session_era(inbound, message)


# The 2026-07-28 era.


def _modern_error(request_id: Any, code: int, message: str, data: Any = None) -> Outbound:
    return error_outbound(
        MODERN_ERROR_STATUS.get(code, 200), code, message, request_id=request_id, data=data
    )


def _handle_modern(inbound: Inbound, message: Any) -> Answer:
    if inbound.method != "POST":
        return Outbound(405, {"Allow": "POST"})
    if not accepts(inbound.headers, JSON):
        return error_outbound(
            406, types.INVALID_REQUEST, "Not Acceptable: accept application/json."
        )
    if not isinstance(message, dict):
        return _modern_error(
            None,
            types.INVALID_REQUEST,
            "Invalid Request: the body must be one JSON-RPC request or notification object.",
        )
    if message.get("jsonrpc") != "2.0":
        return _modern_error(
            message.get("id") if isinstance(message.get("id"), (str, int)) else None,
            types.INVALID_REQUEST,
            'Invalid Request: not a JSON-RPC 2.0 message (send "jsonrpc": "2.0").',
        )
    if "id" not in message:
        return _notification(message, inbound.caller)
    request_id = message.get("id")
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        return _modern_error(
            None, types.INVALID_REQUEST, "Invalid Request: id must be a string or number."
        )
    if not isinstance(message.get("method"), str):
        return _modern_error(
            request_id, types.INVALID_REQUEST, "Invalid Request: method must be a string."
        )
    duplicated = envelope.find_duplicated_routing_header(inbound.raw_headers)
    if duplicated:
        return _modern_error(
            request_id, types.HEADER_MISMATCH, f"The header {duplicated} is sent twice."
        )
    route = envelope.classify_inbound_request(message, headers=inbound.headers)
    if isinstance(route, envelope.InboundLadderRejection):
        return _modern_error(request_id, route.code, route.message, route.data)
    params = message.get("params")
    if message["method"] == "tools/call" and isinstance(params, dict):
        # Arguments a tool's schema mirrors into Mcp-Param-* headers must match them.
        schema = dispatch.extra_tool_schema(params.get("name"))
        arguments = params.get("arguments")
        if schema is not None and isinstance(arguments, dict):
            mismatch = envelope.validate_mcp_param_headers(schema, arguments, inbound.headers)
            if mismatch is not None:
                return _modern_error(request_id, mismatch.code, mismatch.message, mismatch.data)
    method, params = message["method"], message.get("params")
    if method in task_extension.METHODS:
        named = params.get("taskId") if isinstance(params, dict) else None
        sent_name = inbound.headers.get("mcp-name")
        if sent_name is not None and sent_name != named:
            return _modern_error(
                request_id,
                types.HEADER_MISMATCH,
                f"The Mcp-Name header ({sent_name[:80]!r}) must equal params.taskId for {method}.",
            )
    if method == "subscriptions/listen":
        asked = (params or {}).get("notifications") if isinstance(params, dict) else None
        if isinstance(asked, dict) and asked.get("taskIds"):
            try:
                task_extension.require(route.client_capabilities, "Task notifications")
            except RpcError as exc:
                return _modern_error(request_id, exc.code, exc.message, exc.data)
        if not accepts(inbound.headers, SSE):
            return error_outbound(
                406,
                types.INVALID_REQUEST,
                "subscriptions/listen answers as text/event-stream: accept it.",
                request_id=request_id,
            )
        return _listen(inbound, request_id, params)
    reply = execute(
        Request(
            method,
            params,
            MODERN_VERSION,
            inbound.caller,
            request_id=request_id,
            group=inbound.group,
            headers=inbound.headers,
            streams=accepts(inbound.headers, SSE),
        )
    )
    inbound.facts.trace_id = reply.trace_id
    if isinstance(reply, Refused):
        return _refusal(reply, MODERN_ERROR_STATUS.get(reply.error.code, 200))
    return _answer_of(reply, inbound.headers, {})


# What `subscriptions/listen` may ask to hear, at `/mcp`, and the scope that lists each; a
# group's endpoint has tools alone.
LISTENABLE = {
    "toolsListChanged": Scope.TOOLS_READ,
    "promptsListChanged": Scope.TOOLS_READ,
    "resourcesListChanged": Scope.RESOURCES_READ,
}


def _listen(inbound: Inbound, request_id: Any, params: Any) -> Answer:
    """`subscriptions/listen`: grant what the client asked to hear that this endpoint has and
    its key may list (prompts never change here, so that kind stays quiet)."""
    asked = (params.get("notifications") if isinstance(params, dict) else None) or {}
    listenable = ["toolsListChanged"] if inbound.group is not None else list(LISTENABLE)
    granted = {
        kind: True
        for kind in listenable
        if asked.get(kind) is True and inbound.caller.has_scope(LISTENABLE[kind])
    }
    watch = list_changes.Watch(
        inbound.group,
        tools="toolsListChanged" in granted,
        resources="resourcesListChanged" in granted,
    )
    lease: list_changes.StreamLease | None = None
    if watch.tools or watch.resources:
        leased = list_changes.lease_stream(inbound.caller.actor)
        if isinstance(leased, str):
            return error_outbound(429, types.INVALID_REQUEST, leased, request_id=request_id)
        lease = leased
    return Listening(Listen(watch, lease, request_id=request_id, granted=granted))


def _notification(message: dict[str, Any], caller: Caller) -> Outbound:
    if not isinstance(message.get("method"), str):
        return error_outbound(
            400, types.INVALID_REQUEST, "Invalid Request: a notification needs a method."
        )
    if message["method"] == "notifications/cancelled":
        workflow_answers.cancel_notification(message.get("params"), caller=caller.actor)
    return Outbound(202)


# The 2025 revisions (sessions).


def _handle_session_era(inbound: Inbound, message: Any) -> Answer:
    session_id = inbound.headers.get(SESSION_HEADER)
    if (
        inbound.method == "POST"
        and isinstance(message, dict)
        and message.get("method") == "initialize"
    ):
        return _initialize(inbound, message)
    if inbound.method not in ("POST", "GET", "DELETE"):
        return Outbound(405, {"Allow": "GET, POST, DELETE"})
    if inbound.method == "POST" and not isinstance(message, (dict, list)):
        return error_outbound(
            400,
            types.INVALID_REQUEST,
            "Invalid Request: the body must be a JSON-RPC request object "
            '(e.g. {"jsonrpc": "2.0", "id": 1, "method": "initialize", ...}).',
        )
    if not session_id:
        return error_outbound(
            400,
            types.INVALID_REQUEST,
            "Bad Request: missing Mcp-Session-Id header. Send initialize first, then the "
            "session id it returns with every request (or use MCP-Protocol-Version: "
            f"{MODERN_VERSION}, which needs no session).",
        )
    session = sessions.session_get(session_id, owner=inbound.caller.actor, group=inbound.group)
    if session is None:
        return error_outbound(
            404,
            types.INVALID_REQUEST,
            "Session not found: it ended or expired, another endpoint opened it (a session "
            "belongs to /mcp or to one /mcp/<slug>), or its key has opened more than "
            f"{settings.MCP_SESSIONS_PER_CALLER} sessions since (MCP_SESSIONS_PER_CALLER: "
            "the oldest end). Start a new one with initialize.",
        )
    session_headers = {"Mcp-Session-Id": session.id}
    # A supported MCP-Protocol-Version other than the negotiated one is accepted, as the SDK
    # does (clients send 2025-03-26 by default); the session's version shapes the answers.
    if inbound.method == "DELETE":
        sessions.session_end(session.id, reason="The client ended its session (DELETE)")
        return Outbound(200)
    if inbound.method == "GET":
        return _session_stream(inbound, session_headers)
    if not (accepts(inbound.headers, JSON) or accepts(inbound.headers, SSE)):
        return error_outbound(
            406,
            types.INVALID_REQUEST,
            "Not Acceptable: accept application/json or text/event-stream.",
        )
    if isinstance(message, list):
        return error_outbound(
            400,
            types.INVALID_REQUEST,
            "Invalid Request: JSON-RPC batches are not supported; send one message per request.",
            headers=session_headers,
        )
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return error_outbound(
            400,
            types.INVALID_REQUEST,
            "Invalid Request: not a JSON-RPC 2.0 message.",
            headers=session_headers,
        )
    if "id" not in message or "method" not in message:
        # Notifications (initialized, cancelled, progress) and responses need no answer; a
        # response is the client's answer to a request we sent on an open call's stream.
        if "id" in message and ("result" in message or "error" in message):
            sessions.reply_store(session.id, message)
        if message.get("method") == "notifications/cancelled":
            workflow_answers.cancel_notification(
                message.get("params"), caller=inbound.caller.actor, session_id=session.id
            )
        if message.get("method") == "notifications/initialized" and not session.initialized:
            session.initialized = True
            sessions.session_save(session)
        return Outbound(202, session_headers)
    return _session_request(inbound, message, session, session_headers)


def _session_request(
    inbound: Inbound, message: dict[str, Any], session: sessions.Session, headers: dict[str, str]
) -> Answer:
    request_id, method, params = message.get("id"), message.get("method"), message.get("params")
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        return error_outbound(
            400,
            types.INVALID_REQUEST,
            "Invalid Request: id must be a string or number.",
            headers=headers,
        )
    if not isinstance(method, str):
        return error_outbound(
            400, types.INVALID_REQUEST, "Invalid Request: method must be a string.", headers=headers
        )

    reply = execute(
        Request(
            method,
            params,
            session.protocol_version,
            inbound.caller,
            request_id=request_id,
            session_id=session.id,
            session_log_level=session.log_level,
            session_capabilities=session.client_capabilities,
            group=inbound.group,
            headers=inbound.headers,
            streams=accepts(inbound.headers, SSE),
        )
    )
    inbound.facts.trace_id = reply.trace_id
    if isinstance(reply, Refused):
        # In the 2025 revisions JSON-RPC errors travel with HTTP 200; refusals are HTTP's.
        return _refusal(reply, 200, headers)
    if isinstance(reply, Answered) and reply.log_level is not None:
        session.log_level = reply.log_level
        sessions.session_save(session)
    if isinstance(reply, Asking) and not accepts(inbound.headers, SSE):
        return error_outbound(
            406,
            types.INVALID_REQUEST,
            f"{method} needs to ask the client for input midway, on an event stream: "
            "accept text/event-stream.",
            headers=headers,
        )
    return _answer_of(reply, inbound.headers, headers)


def _initialize(inbound: Inbound, message: dict[str, Any]) -> Outbound:
    request_id = message.get("id")
    try:
        version, params = negotiate(message.get("params"))
    except RpcError as exc:
        return error_outbound(400, exc.code, exc.message, request_id=request_id)
    try:
        result = initialize_result(version, inbound.group)
    except RpcError as exc:  # the group went away since `handle` looked
        return error_outbound(404, exc.code, exc.message, request_id=request_id)
    session = sessions.session_open(
        protocol_version=version,
        owner=inbound.caller.actor,
        client_info=params.client_info.model_dump(mode="json", exclude_none=True),
        client_capabilities=params.capabilities.model_dump(mode="json", exclude_none=True),
        group=inbound.group,
    )
    return json_outbound(
        200, {"jsonrpc": "2.0", "id": request_id, "result": result}, {"Mcp-Session-Id": session.id}
    )


def _session_stream(inbound: Inbound, headers: dict[str, str]) -> Answer:
    """A 2025 session's GET stream: the server's own messages, which here are
    `notifications/tools/list_changed` when the endpoint's tool list changes."""
    if not accepts(inbound.headers, SSE):
        return error_outbound(
            406,
            types.INVALID_REQUEST,
            "Not Acceptable: a session's GET stream is text/event-stream; accept it.",
            headers=headers,
        )
    if not inbound.caller.has_scope(Scope.TOOLS_READ):
        refusal = scope_refusal(
            Scope.TOOLS_READ,
            "Forbidden: a session's GET stream carries tool-list changes, which need the scope "
            "tools:read; this key does not have it.",
        )
        return error_outbound(
            refusal.status,
            types.INVALID_REQUEST,
            refusal.message,
            headers={**headers, **refusal.headers},
        )
    lease = list_changes.lease_stream(inbound.caller.actor)
    if isinstance(lease, str):
        return error_outbound(429, types.INVALID_REQUEST, lease, headers=headers)
    return Listening(Listen(list_changes.Watch(inbound.group), lease), dict(headers))
