"""One JSON-RPC request, executed for a protocol version: parse, authorise, answer, serialise.

Shared by the HTTP transport (`protocol.py`) and stdio (`manage.py mcp_stdio`), so a request
means the same thing whichever way it arrives.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from mcp import types
from mcp.types import methods
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_endpoint import dispatch, tasks
from mcp_endpoint.calls import PendingCall
from mcp_endpoint.dispatch import LOG_LEVELS, CallContext, RpcError
from mcp_endpoint.interaction import LegacyInteraction

MODERN_VERSION = MODERN_PROTOCOL_VERSIONS[-1]
LATEST_HANDSHAKE_VERSION = HANDSHAKE_PROTOCOL_VERSIONS[-1]

# How long a client may cache each list or read result (2026-07-28 `ttlMs`); the answers
# are the same for every caller, so `cacheScope` is public.
CACHE_HINTS: dict[str, int] = {
    "server/discover": 300_000,
    # Workflows come and go with the admin: clients should not hold the list long.
    "tools/list": 30_000,
    "prompts/list": 300_000,
    "resources/templates/list": 300_000,
    "resources/list": 60_000,
    "resources/read": 60_000,
}


@dataclass(frozen=True)
class Caller:
    """Who is calling: a stable identity (for sessions and rate limits) and their scopes."""

    identity: str
    scopes: frozenset[str]
    # Requests per minute for this caller; None uses the configured default.
    rate_limit: int | None = None


class Forbidden(RpcError):
    """The caller lacks the scope a method needs (HTTP 403)."""


def params_problem(method: str, exc: ValidationError) -> str:
    """Name each bad field of a request's params and what is wrong with it."""
    problems = []
    for error in exc.errors():
        # The SDK validates the whole request body; drop the wrapper's own positions.
        location = [str(p) for p in error["loc"] if p not in ("params", "method", "jsonrpc", "id")]
        problems.append(f"{'.'.join(location) or 'params'}: {error['msg']}")
    return f"Invalid params for {method}: " + "; ".join(dict.fromkeys(problems))


def context_for(
    version: str,
    params: Any,
    *,
    session_log_level: str | None = None,
    session_capabilities: dict[str, Any] | None = None,
    transport: str = "http",
) -> CallContext:
    """The call context: progress token, log level and client capabilities, from `_meta`
    (2026-07-28) or from the session (2025 revisions)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    level = meta.get(types.LOG_LEVEL_META_KEY, session_log_level)
    capabilities = meta.get(types.CLIENT_CAPABILITIES_META_KEY, session_capabilities)
    return CallContext(
        protocol_version=version,
        progress_token=meta.get("progressToken"),
        log_level=level if level in LOG_LEVELS else None,
        client_capabilities=capabilities if isinstance(capabilities, dict) else {},
        transport=transport,
    )


def _modern_result(method: str, dumped: dict[str, Any]) -> dict[str, Any]:
    if method in CACHE_HINTS:
        dumped["ttlMs"] = CACHE_HINTS[method]
        dumped["cacheScope"] = "public"
    dumped.setdefault("resultType", "complete")
    meta = dumped.setdefault("_meta", {})
    meta[types.SERVER_INFO_META_KEY] = dispatch.server_info().model_dump(
        by_alias=True, exclude_none=True
    )
    return dumped


def discover_result() -> types.DiscoverResult:
    capabilities = dispatch.server_capabilities()
    # subscriptions/listen reports catalog changes in this era.
    capabilities.resources.list_changed = True
    capabilities.extensions = {tasks.EXTENSION: {}}
    return types.DiscoverResult(
        supported_versions=list(MODERN_PROTOCOL_VERSIONS),
        capabilities=capabilities,
        instructions=dispatch.INSTRUCTIONS,
        ttl_ms=CACHE_HINTS["server/discover"],
        cache_scope="public",
    )


def execute(
    method: str,
    params: Any,
    *,
    version: str,
    caller: Caller,
    context: CallContext,
    on_set_level: Any = None,
) -> dict[str, Any] | LegacyInteraction | PendingCall:
    """Answer one request and return its result serialised for `version`.

    Raises `RpcError` (unknown method, bad params, a failing method) or `Forbidden`. A call
    that must ask the client for input on a 2025 session returns a `LegacyInteraction`; a
    workflow call over HTTP, a `PendingCall` for the transport to drive.
    `on_set_level(level)` stores a `logging/setLevel` for the session, where there is one.
    """
    if version in MODERN_PROTOCOL_VERSIONS and method in tasks.METHODS:
        _check_scope(method, caller)
        answer = tasks.METHODS[method](params, context.client_capabilities, caller.identity)
        return _modern_result(method, answer)
    try:
        request = methods.parse_client_request(method, version, params)
    except KeyError:
        raise RpcError(types.METHOD_NOT_FOUND, f"Method not found: {method}", method) from None
    except ValidationError as exc:
        raise RpcError(types.INVALID_PARAMS, params_problem(method, exc)) from None
    _check_scope(method, caller)
    memo_key = _static_key(method, version, params)
    # Read before the list is built: a change meanwhile leaves an older stamp, not a stale list.
    stamp = _static_stamp(method)
    memo = _STATIC_RESULTS.get(memo_key) if memo_key is not None else None
    if memo is not None and memo[0] == stamp:
        return memo[1]
    if method == "server/discover":
        result: types.Result = discover_result()
    elif method == "logging/setLevel" and on_set_level is not None:
        on_set_level(request.params.level)
        result = types.EmptyResult()
    else:
        context.caller = caller.identity
        result = dispatch.call_method(request, context)

    def serialize(final: types.Result) -> dict[str, Any]:
        dumped = final.model_dump(by_alias=True, exclude_none=True, mode="json")
        if version in MODERN_PROTOCOL_VERSIONS:
            dumped = _modern_result(method, dumped)
        return methods.serialize_server_result(method, version, dumped)

    if isinstance(result, (LegacyInteraction, PendingCall)):
        result.finish = serialize
        return result
    serialized = serialize(result)
    if memo_key is not None:
        serialized = EncodedResult(serialized)
        _STATIC_RESULTS[memo_key] = (stamp, serialized)
    return serialized


# Lists that change only with a stamp (tools: `dispatch.tools_generation()`) or never (prompts,
# templates), kept per version and page with their JSON: tools/list is among the most frequent
# calls an agent makes, and encoding its 4 KB answer cost more than the rest of the request.
_STATIC_METHODS = frozenset({"tools/list", "prompts/list", "resources/templates/list"})
_STATIC_RESULTS: dict[tuple[str, str, Any], tuple[Hashable, EncodedResult]] = {}


# What json.dumps(value, separators=(",", ":")) would build on every call.
_ENCODER = json.JSONEncoder(separators=(",", ":"))


def encode_json(value: Any) -> bytes:
    """The JSON of a message as sent over HTTP: compact, ASCII escapes (an echoed lone
    surrogate such as "\\ud800" must not break the encoding)."""
    return _ENCODER.encode(value).encode()


class EncodedResult(dict):
    """A serialised result that also keeps its JSON (`encoded`), so the transport can send a
    cached answer without encoding it again. Never mutated once built."""

    def __init__(self, result: dict[str, Any]):
        super().__init__(result)
        self.encoded = encode_json(result)


def _static_key(method: str, version: str, params: Any) -> tuple[str, str, Any] | None:
    if method not in _STATIC_METHODS:
        return None
    # Called once the params have parsed, so the cursor is a string or absent.
    return (method, version, params.get("cursor") if isinstance(params, dict) else None)


def _static_stamp(method: str) -> Hashable:
    return dispatch.tools_generation() if method == "tools/list" else None


def _check_scope(method: str, caller: Caller) -> None:
    scope = dispatch.REQUIRED_SCOPES.get(method)
    if scope is not None and scope not in caller.scopes:
        raise Forbidden(
            types.INVALID_REQUEST,
            f"Forbidden: {method} needs the scope {scope}, which this caller does not have. "
            "Use an API key with that scope (ask an administrator for one).",
        )


def negotiate(params: Any) -> tuple[str, types.InitializeRequestParams]:
    """Validate `initialize` params and choose the version: the client's, if we speak it."""
    try:
        request = types.InitializeRequest.model_validate(
            {"method": "initialize", "params": params}, by_name=False
        )
    except ValidationError as exc:
        raise RpcError(types.INVALID_PARAMS, params_problem("initialize", exc)) from None
    requested = request.params.protocol_version
    version = requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
    return version, request.params


def initialize_result(version: str) -> dict[str, Any]:
    result = types.InitializeResult(
        protocol_version=version,
        capabilities=dispatch.server_capabilities(),
        server_info=dispatch.server_info(),
        instructions=dispatch.INSTRUCTIONS,
    )
    dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    return methods.serialize_server_result("initialize", version, dumped)
