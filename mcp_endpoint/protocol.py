"""Streamable HTTP for MCP, both protocol eras on one endpoint. No Django here.

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

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp import types
from mcp.shared import inbound as envelope
from mcp.types import methods
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_endpoint import dispatch, sessions
from mcp_endpoint.dispatch import LOG_LEVELS, CallContext, RpcError

MODERN_VERSION = MODERN_PROTOCOL_VERSIONS[-1]
LATEST_HANDSHAKE_VERSION = HANDSHAKE_PROTOCOL_VERSIONS[-1]
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = envelope.MCP_PROTOCOL_VERSION_HEADER
JSON = "application/json"
SSE = "text/event-stream"

# How long a client may cache each list or read result (2026-07-28 `ttlMs`), and whether the
# answer is the same for every caller (`public`): the catalog is.
CACHE_HINTS: dict[str, int] = {
    "server/discover": 300_000,
    "tools/list": 300_000,
    "prompts/list": 300_000,
    "resources/templates/list": 300_000,
    "resources/list": 60_000,
    "resources/read": 60_000,
}

# JSON-RPC error code → HTTP status in the 2026-07-28 era (the SDK's table).
MODERN_ERROR_STATUS: Mapping[int, int] = envelope.ERROR_CODE_HTTP_STATUS


@dataclass(frozen=True)
class Caller:
    """Who is calling: a stable identity (for sessions and rate limits) and their scopes."""

    identity: str
    scopes: frozenset[str]
    # Requests per minute for this caller; None uses the configured default.
    rate_limit: int | None = None


@dataclass
class Inbound:
    method: str
    headers: Mapping[str, str]  # lower-cased names
    body: bytes
    caller: Caller
    raw_headers: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Outbound:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    # Server-sent events: each a JSON-RPC message, sent in order, the response last.
    events: list[dict[str, Any]] | None = None
    # A `subscriptions/listen` stream: the request id, and what the client asked to hear.
    listen: dict[str, Any] | None = None


def _json(status: int, message: Any, headers: dict[str, str] | None = None) -> Outbound:
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
    return Outbound(status, {"Content-Type": JSON, **(headers or {})}, body)


def error_reply(
    status: int, code: int, message: str, *, request_id: Any = None, data: Any = None, headers=None
) -> Outbound:
    """A JSON-RPC error body with an HTTP status."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return _json(status, {"jsonrpc": "2.0", "id": request_id, "error": error}, headers)


def _accepts(headers: Mapping[str, str], media_type: str) -> bool:
    accept = headers.get("accept", "")
    if not accept:
        return True
    major = media_type.split("/")[0]
    for part in accept.split(","):
        candidate = part.split(";")[0].strip().lower()
        if candidate in (media_type, f"{major}/*", "*/*"):
            return True
    return False


def _reply(
    request_id: Any,
    result: dict[str, Any],
    context: CallContext,
    headers: Mapping[str, str],
    extra_headers: dict[str, str],
) -> Outbound:
    response = {"jsonrpc": "2.0", "id": request_id, "result": result}
    if context.notifications and _accepts(headers, SSE):
        events = [{"jsonrpc": "2.0", **note} for note in context.notifications]
        return Outbound(200, dict(extra_headers), events=[*events, response])
    return _json(200, response, extra_headers)


def _missing_scope(caller: Caller, method: str) -> Outbound | None:
    """A 403 when the caller lacks the scope `method` needs, else None."""
    scope = dispatch.REQUIRED_SCOPES.get(method)
    if scope is None or scope in caller.scopes:
        return None
    return error_reply(
        403,
        types.INVALID_REQUEST,
        f"Forbidden: {method} needs the scope {scope}, which this API key does not have. "
        "Ask an administrator for a key with that scope.",
    )


def _decode(body: bytes) -> tuple[Any, Outbound | None]:
    try:
        return json.loads(body), None
    except (ValueError, UnicodeDecodeError) as exc:
        return None, error_reply(
            400, types.PARSE_ERROR, f"Parse error: the body is not JSON ({exc})."
        )


def _is_modern(inbound: Inbound, message: Any) -> bool:
    version = inbound.headers.get(VERSION_HEADER)
    if version is not None:
        return version not in HANDSHAKE_PROTOCOL_VERSIONS
    if isinstance(message, dict) and message.get("method") != "initialize":
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        return isinstance(meta, dict) and types.PROTOCOL_VERSION_META_KEY in meta
    return False


def handle(inbound: Inbound) -> Outbound:
    """Answer one HTTP request to the MCP endpoint."""
    if inbound.method == "POST":
        content_type = inbound.headers.get("content-type", "")
        if not content_type.lower().startswith(JSON):
            return error_reply(
                415 if content_type else 400,
                types.INVALID_REQUEST,
                "POST bodies must be JSON-RPC with Content-Type: application/json.",
            )
        message, problem = _decode(inbound.body)
        if problem:
            return problem
    else:
        message = None
    version = inbound.headers.get(VERSION_HEADER)
    if (
        version is not None
        and version not in HANDSHAKE_PROTOCOL_VERSIONS + MODERN_PROTOCOL_VERSIONS
    ):
        supported = [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS]
        return error_reply(
            400,
            types.UNSUPPORTED_PROTOCOL_VERSION,
            f"Unsupported MCP-Protocol-Version {version!r}; this server speaks "
            f"{', '.join(supported)}.",
            data={"supported": supported, "requested": version},
        )
    if _is_modern(inbound, message):
        return _handle_modern(inbound, message)
    return _handle_legacy(inbound, message)


# The 2026-07-28 era.


def _modern_error(request_id: Any, code: int, message: str, data: Any = None) -> Outbound:
    return error_reply(
        MODERN_ERROR_STATUS.get(code, 200), code, message, request_id=request_id, data=data
    )


def _stamp(method: str, result: types.Result) -> dict[str, Any]:
    dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    if method in CACHE_HINTS:
        dumped["ttlMs"] = CACHE_HINTS[method]
        dumped["cacheScope"] = "public"
    dumped.setdefault("resultType", "complete")
    meta = dumped.setdefault("_meta", {})
    meta[types.SERVER_INFO_META_KEY] = dispatch.server_info().model_dump(
        by_alias=True, exclude_none=True
    )
    return methods.serialize_server_result(method, MODERN_VERSION, dumped)


def _handle_modern(inbound: Inbound, message: Any) -> Outbound:
    if inbound.method != "POST":
        return Outbound(405, {"Allow": "POST"})
    if not _accepts(inbound.headers, JSON):
        return error_reply(406, types.INVALID_REQUEST, "Not Acceptable: accept application/json.")
    if not isinstance(message, dict):
        return _modern_error(
            None,
            types.INVALID_REQUEST,
            "Invalid Request: the body must be one JSON-RPC request or notification object.",
        )
    if "id" not in message:
        return _notification(message)
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
    method = message["method"]
    try:
        request = methods.parse_client_request(method, MODERN_VERSION, message.get("params"))
    except KeyError:
        return _modern_error(
            request_id, types.METHOD_NOT_FOUND, f"Method not found: {method}", method
        )
    except ValidationError as exc:
        return _modern_error(request_id, types.INVALID_PARAMS, _params_problem(method, exc))
    forbidden = _missing_scope(inbound.caller, method)
    if forbidden:
        return forbidden
    meta = message["params"]["_meta"]
    level = meta.get(types.LOG_LEVEL_META_KEY)
    context = CallContext(
        protocol_version=MODERN_VERSION,
        progress_token=meta.get("progressToken"),
        log_level=level if level in LOG_LEVELS else None,
    )
    if method == "subscriptions/listen":
        if not _accepts(inbound.headers, SSE):
            return error_reply(
                406, types.INVALID_REQUEST, "subscriptions/listen answers as text/event-stream."
            )
        return Outbound(200, listen={"id": request_id, "params": message["params"]})
    try:
        if method == "server/discover":
            result: types.Result = types.DiscoverResult(
                supported_versions=list(MODERN_PROTOCOL_VERSIONS),
                capabilities=dispatch.server_capabilities(),
                instructions=dispatch.INSTRUCTIONS,
                ttl_ms=0,
                cache_scope="public",
            )
        else:
            result = dispatch.call_method(request, context)
    except RpcError as exc:
        return _modern_error(request_id, exc.code, exc.message, exc.data)
    return _reply(request_id, _stamp(method, result), context, inbound.headers, {})


def _notification(message: dict[str, Any]) -> Outbound:
    if not isinstance(message.get("method"), str):
        return error_reply(
            400, types.INVALID_REQUEST, "Invalid Request: a notification needs a method."
        )
    # notifications/cancelled needs no action: every request here is answered at once.
    return Outbound(202)


def _params_problem(method: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        location = [str(part) for part in error["loc"] if part not in ("params",)]
        # The SDK validates the whole request body; drop the wrapper's own positions.
        path = ".".join(p for p in location if p not in ("method", "jsonrpc", "id")) or "params"
        problems.append(f"{path}: {error['msg']}")
    return f"Invalid params for {method}: " + "; ".join(dict.fromkeys(problems))


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
    if not session_id:
        return error_reply(
            400,
            types.INVALID_REQUEST,
            "Bad Request: missing Mcp-Session-Id header. Send initialize first, then the "
            "session id it returns with every request (or use MCP-Protocol-Version: "
            f"{MODERN_VERSION}, which needs no session).",
        )
    session = sessions.session_get(session_id, owner=inbound.caller.identity)
    if session is None:
        return error_reply(
            404,
            types.INVALID_REQUEST,
            "Session not found: it ended or expired. Start a new one with initialize.",
        )
    session_headers = {"Mcp-Session-Id": session.id}
    version = inbound.headers.get(VERSION_HEADER)
    if version is not None and version != session.protocol_version:
        return error_reply(
            400,
            types.INVALID_REQUEST,
            f"MCP-Protocol-Version {version} does not match the version negotiated for this "
            f"session ({session.protocol_version}).",
            headers=session_headers,
        )
    if inbound.method == "DELETE":
        sessions.session_end(session.id)
        return Outbound(200)
    if inbound.method == "GET":
        # No server-initiated messages exist here, so there is no stream to offer.
        return Outbound(405, {"Allow": "POST, DELETE"})
    if not (_accepts(inbound.headers, JSON) or _accepts(inbound.headers, SSE)):
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
        # Notifications (initialized, cancelled, progress) and responses need no answer.
        if message.get("method") == "notifications/initialized" and not session.initialized:
            session.initialized = True
            sessions.session_save(session)
        return Outbound(202, session_headers)
    return _legacy_request(inbound, message, session, session_headers)


def _legacy_request(
    inbound: Inbound, message: dict[str, Any], session: sessions.Session, headers: dict[str, str]
) -> Outbound:
    request_id, method = message.get("id"), message.get("method")
    if (
        not isinstance(request_id, (str, int))
        or isinstance(request_id, bool)
        or not isinstance(method, str)
    ):
        return error_reply(
            400,
            types.INVALID_REQUEST,
            "Invalid Request: needs a string or number id and a method.",
            headers=headers,
        )
    try:
        request = methods.parse_client_request(
            method, session.protocol_version, message.get("params")
        )
    except KeyError:
        return error_reply(
            200,
            types.METHOD_NOT_FOUND,
            f"Method not found: {method}",
            request_id=request_id,
            data=method,
            headers=headers,
        )
    except ValidationError as exc:
        return error_reply(
            200,
            types.INVALID_PARAMS,
            _params_problem(method, exc),
            request_id=request_id,
            headers=headers,
        )
    forbidden = _missing_scope(inbound.caller, method)
    if forbidden:
        forbidden.headers.update(headers)
        return forbidden
    meta = (message.get("params") or {}).get("_meta") or {}
    context = CallContext(
        protocol_version=session.protocol_version,
        progress_token=meta.get("progressToken"),
        log_level=session.log_level,
    )
    try:
        if method == "logging/setLevel":
            session.log_level = request.params.level
            sessions.session_save(session)
            result: types.Result = types.EmptyResult()
        else:
            result = dispatch.call_method(request, context)
    except RpcError as exc:
        return error_reply(
            200, exc.code, exc.message, request_id=request_id, data=exc.data, headers=headers
        )
    dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    serialized = methods.serialize_server_result(method, session.protocol_version, dumped)
    return _reply(request_id, serialized, context, inbound.headers, headers)


def _initialize(inbound: Inbound, message: dict[str, Any]) -> Outbound:
    request_id = message.get("id")
    try:
        request = types.InitializeRequest.model_validate(
            {"method": "initialize", "params": message.get("params")}, by_name=False
        )
    except ValidationError as exc:
        return error_reply(
            400, types.INVALID_PARAMS, _params_problem("initialize", exc), request_id=request_id
        )
    requested = request.params.protocol_version
    version = requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
    session = sessions.session_open(
        protocol_version=version,
        owner=inbound.caller.identity,
        client_info=request.params.client_info.model_dump(mode="json", exclude_none=True),
        client_capabilities=request.params.capabilities.model_dump(mode="json", exclude_none=True),
    )
    result = types.InitializeResult(
        protocol_version=version,
        capabilities=dispatch.server_capabilities(),
        server_info=dispatch.server_info(),
        instructions=dispatch.INSTRUCTIONS,
    )
    dumped = methods.serialize_server_result(
        "initialize", version, result.model_dump(by_alias=True, exclude_none=True, mode="json")
    )
    return _json(
        200,
        {"jsonrpc": "2.0", "id": request_id, "result": dumped},
        {"Mcp-Session-Id": session.id},
    )
