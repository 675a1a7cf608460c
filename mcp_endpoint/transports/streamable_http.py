"""Streamable HTTP for MCP, both protocol eras on one endpoint.

Transport-neutral (http_messages.py), so the rules can be tested without a server.

`handle(inbound)` takes a transport-neutral request (HTTP method, headers, body, caller) and
returns an `Outbound` (status, headers, and a JSON body or server-sent events).

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
from mcp_endpoint.calls import task_extension, workflow_answers
from mcp_endpoint.models import Scope
from mcp_endpoint.observability import telemetry
from mcp_endpoint.protocol import dispatch, list_changes, sessions
from mcp_endpoint.protocol.core import (
    LEGACY_ERA,
    MODERN_VERSION,
    Caller,
    Reply,
    context_for,
    execute,
    initialize_result,
    negotiate,
)
from mcp_endpoint.protocol.errors import Forbidden, RpcError
from mcp_endpoint.transports.http_messages import (
    JSON,
    SESSION_HEADER,
    SSE,
    VERSION_HEADER,
    Inbound,
    Listen,
    Outbound,
    accepts,
    encoded_reply,
    error_reply,
    json_body,
    json_reply,
)

# JSON-RPC error code → HTTP status in the 2026-07-28 era (the SDK's table).
MODERN_ERROR_STATUS: Mapping[int, int] = envelope.ERROR_CODE_HTTP_STATUS


def _reply(reply: Reply, headers: Mapping[str, str], extra_headers: dict[str, str]) -> Outbound:
    """The core's answer as the client takes it: an event stream when it sends messages
    before its response and the client accepts one, else the response alone."""
    if reply.streams and accepts(headers, SSE):
        return Outbound(200, dict(extra_headers), reply=reply, stream=True)
    if reply.complete:
        outbound = encoded_reply(200, reply.response_body(), extra_headers)
        outbound.note_response({"result": reply.result})
        return outbound
    return Outbound(200, dict(extra_headers), reply=reply)


def _has_meta_version(message: Any) -> bool:
    """Whether a body carries the 2026-07-28 envelope (a protocol version in `_meta`)."""
    if not isinstance(message, dict) or message.get("method") == "initialize":
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and types.PROTOCOL_VERSION_META_KEY in meta


def _is_modern(inbound: Inbound, message: Any) -> bool:
    version = inbound.headers.get(VERSION_HEADER)
    if version is not None:
        return version not in HANDSHAKE_PROTOCOL_VERSIONS
    return _has_meta_version(message)


def handle(inbound: Inbound) -> Outbound:
    """Answer one HTTP request to `/mcp`, or to a workflow group's endpoint `/mcp/<slug>`
    (`inbound.server`). The answer carries what was learned of the request on the way
    (`Outbound.facts`: method, tool, era, caller), for the transport's telemetry."""
    facts = inbound.facts
    facts.key = inbound.caller.identity
    outbound = _answer(inbound)
    if facts.tool:
        facts.tool_known = telemetry.known_tool(facts.tool, inbound.server)
    outbound.facts = facts
    return outbound


def _answer(inbound: Inbound) -> Outbound:
    if inbound.server is not None and workflow_server(inbound.server) is None:
        return error_reply(
            404,
            types.INVALID_REQUEST,
            f"No MCP server at /mcp/{inbound.server[:80]}: no workflow group has that slug. "
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
    if not known and not _has_meta_version(message):
        supported = [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS]
        return error_reply(
            400,
            types.UNSUPPORTED_PROTOCOL_VERSION,
            f"Unsupported MCP-Protocol-Version {version!r}; this server speaks "
            f"{', '.join(supported)}.",
            request_id=message.get("id") if isinstance(message, dict) else None,
            data={"supported": supported, "requested": version},
        )
    if _is_modern(inbound, message):
        inbound.facts.era = MODERN_VERSION
        return _handle_modern(inbound, message)
    inbound.facts.era = LEGACY_ERA
    return _handle_legacy(inbound, message)


# The 2026-07-28 era.


def _modern_error(request_id: Any, code: int, message: str, data: Any = None) -> Outbound:
    return error_reply(
        MODERN_ERROR_STATUS.get(code, 200), code, message, request_id=request_id, data=data
    )


def _handle_modern(inbound: Inbound, message: Any) -> Outbound:
    if inbound.method != "POST":
        return Outbound(405, {"Allow": "POST"})
    if not accepts(inbound.headers, JSON):
        return error_reply(406, types.INVALID_REQUEST, "Not Acceptable: accept application/json.")
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
            return error_reply(
                406,
                types.INVALID_REQUEST,
                "subscriptions/listen answers as text/event-stream: accept it.",
                request_id=request_id,
            )
        return _listen(inbound, request_id, params)
    context = context_for(MODERN_VERSION, params, request_id=request_id, server=inbound.server)
    try:
        reply = execute(
            method,
            params,
            version=MODERN_VERSION,
            caller=inbound.caller,
            context=context,
            trace_headers=inbound.headers,
        )
    except RpcError as exc:
        status = 403 if isinstance(exc, Forbidden) else MODERN_ERROR_STATUS.get(exc.code, 200)
        return error_reply(status, exc.code, exc.message, request_id=request_id, data=exc.data)
    finally:
        inbound.facts.trace_id = context.trace_id
    return _reply(reply, inbound.headers, {})


# What `subscriptions/listen` may ask to hear, at `/mcp`, and the scope that lists each; a
# group's endpoint has tools alone.
LISTENABLE = {
    "toolsListChanged": Scope.TOOLS_READ,
    "promptsListChanged": Scope.TOOLS_READ,
    "resourcesListChanged": Scope.RESOURCES_READ,
}


def _listen(inbound: Inbound, request_id: Any, params: Any) -> Outbound:
    """`subscriptions/listen`: grant what the client asked to hear that this endpoint has and
    its key may list (prompts never change here, so that kind stays quiet)."""
    asked = (params.get("notifications") if isinstance(params, dict) else None) or {}
    listenable = ["toolsListChanged"] if inbound.server is not None else list(LISTENABLE)
    granted = {
        kind: True
        for kind in listenable
        if asked.get(kind) is True and LISTENABLE[kind] in inbound.caller.scopes
    }
    watch = list_changes.Watch(
        inbound.server,
        tools="toolsListChanged" in granted,
        resources="resourcesListChanged" in granted,
    )
    lease: list_changes.StreamLease | None = None
    if watch.tools or watch.resources:
        leased = list_changes.lease_stream(inbound.caller.identity)
        if isinstance(leased, str):
            return error_reply(429, types.INVALID_REQUEST, leased, request_id=request_id)
        lease = leased
    return Outbound(200, listen=Listen(watch, lease, request_id=request_id, granted=granted))


def _notification(message: dict[str, Any], caller: Caller) -> Outbound:
    if not isinstance(message.get("method"), str):
        return error_reply(
            400, types.INVALID_REQUEST, "Invalid Request: a notification needs a method."
        )
    if message["method"] == "notifications/cancelled":
        workflow_answers.cancel_notification(message.get("params"), caller=caller.identity)
    return Outbound(202)


# The 2025 revisions (sessions).


def _handle_legacy(inbound: Inbound, message: Any) -> Outbound:
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
        return error_reply(
            400,
            types.INVALID_REQUEST,
            "Invalid Request: the body must be a JSON-RPC request object "
            '(e.g. {"jsonrpc": "2.0", "id": 1, "method": "initialize", ...}).',
        )
    if not session_id:
        return error_reply(
            400,
            types.INVALID_REQUEST,
            "Bad Request: missing Mcp-Session-Id header. Send initialize first, then the "
            "session id it returns with every request (or use MCP-Protocol-Version: "
            f"{MODERN_VERSION}, which needs no session).",
        )
    session = sessions.session_get(session_id, owner=inbound.caller.identity, server=inbound.server)
    if session is None:
        return error_reply(
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
        return error_reply(
            406,
            types.INVALID_REQUEST,
            "Not Acceptable: accept application/json or text/event-stream.",
        )
    if isinstance(message, list):
        return error_reply(
            400,
            types.INVALID_REQUEST,
            "Invalid Request: JSON-RPC batches are not supported; send one message per request.",
            headers=session_headers,
        )
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return error_reply(
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
                message.get("params"), caller=inbound.caller.identity, session_id=session.id
            )
        if message.get("method") == "notifications/initialized" and not session.initialized:
            session.initialized = True
            sessions.session_save(session)
        return Outbound(202, session_headers)
    return _legacy_request(inbound, message, session, session_headers)


def _legacy_request(
    inbound: Inbound, message: dict[str, Any], session: sessions.Session, headers: dict[str, str]
) -> Outbound:
    request_id, method, params = message.get("id"), message.get("method"), message.get("params")
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        return error_reply(
            400,
            types.INVALID_REQUEST,
            "Invalid Request: id must be a string or number.",
            headers=headers,
        )
    if not isinstance(method, str):
        return error_reply(
            400, types.INVALID_REQUEST, "Invalid Request: method must be a string.", headers=headers
        )

    def set_level(level: str) -> None:
        session.log_level = level
        sessions.session_save(session)

    context = context_for(
        session.protocol_version,
        params,
        request_id=request_id,
        session_id=session.id,
        session_log_level=session.log_level,
        session_capabilities=session.client_capabilities,
        server=inbound.server,
    )
    try:
        reply = execute(
            method,
            params,
            version=session.protocol_version,
            caller=inbound.caller,
            context=context,
            on_set_level=set_level,
            trace_headers=inbound.headers,
        )
    except RpcError as exc:
        # In the 2025 revisions JSON-RPC errors travel with HTTP 200; refusals are HTTP's.
        status = 403 if isinstance(exc, Forbidden) else 200
        return error_reply(
            status, exc.code, exc.message, request_id=request_id, data=exc.data, headers=headers
        )
    finally:
        inbound.facts.trace_id = context.trace_id
    if reply.asks_client and not accepts(inbound.headers, SSE):
        return error_reply(
            406,
            types.INVALID_REQUEST,
            f"{method} needs to ask the client for input midway, on an event stream: "
            "accept text/event-stream.",
            headers=headers,
        )
    return _reply(reply, inbound.headers, headers)


def _initialize(inbound: Inbound, message: dict[str, Any]) -> Outbound:
    request_id = message.get("id")
    try:
        version, params = negotiate(message.get("params"))
    except RpcError as exc:
        return error_reply(400, exc.code, exc.message, request_id=request_id)
    try:
        result = initialize_result(version, inbound.server)
    except RpcError as exc:  # the group went away since `handle` looked
        return error_reply(404, exc.code, exc.message, request_id=request_id)
    session = sessions.session_open(
        protocol_version=version,
        owner=inbound.caller.identity,
        client_info=params.client_info.model_dump(mode="json", exclude_none=True),
        client_capabilities=params.capabilities.model_dump(mode="json", exclude_none=True),
        server=inbound.server,
    )
    return json_reply(
        200, {"jsonrpc": "2.0", "id": request_id, "result": result}, {"Mcp-Session-Id": session.id}
    )


def _session_stream(inbound: Inbound, headers: dict[str, str]) -> Outbound:
    """A 2025 session's GET stream: the server's own messages, which here are
    `notifications/tools/list_changed` when the endpoint's tool list changes."""
    if not accepts(inbound.headers, SSE):
        return error_reply(
            406,
            types.INVALID_REQUEST,
            "Not Acceptable: a session's GET stream is text/event-stream; accept it.",
            headers=headers,
        )
    if Scope.TOOLS_READ not in inbound.caller.scopes:
        return error_reply(
            403,
            types.INVALID_REQUEST,
            "Forbidden: a session's GET stream carries tool-list changes, which need the scope "
            "tools:read; this key does not have it.",
            headers=headers,
        )
    lease = list_changes.lease_stream(inbound.caller.identity)
    if isinstance(lease, str):
        return error_reply(429, types.INVALID_REQUEST, lease, headers=headers)
    return Outbound(200, dict(headers), listen=Listen(list_changes.Watch(inbound.server), lease))
