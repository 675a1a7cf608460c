"""The protocol core: one JSON-RPC request, executed for a protocol version.

`execute` parses the request, checks the caller's scope, has `dispatch` answer it, and
returns a `Reply`: the messages to send, in order, ending in exactly one final response. Most
replies are complete at once; a workflow call's (workflow_calls.py) and a 2025 call that asks
the client for input midway (client_requests.py) go on as their `messages()` are read. A
request refused outright (unknown method, bad params, missing scope) raises `RpcError` instead,
which the transport answers as a JSON-RPC error.

Every transport goes through here the same way (docs/architecture.md): Streamable HTTP in both
eras (streamable_http.py), the legacy SSE transport (sse.py), stdio (stdio.py) and the REST
API (api.py). None of them decides anything about a call; the core never asks which one it
serves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.conf import settings
from mcp import types
from mcp.types import methods
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from graphs.execution import tracing
from graphs.execution.follow import Threads
from graphs.execution.nesting import deeper_than
from mcp_endpoint.calls import task_extension, workflow_calls
from mcp_endpoint.calls.workflow_calls import WorkflowCall
from mcp_endpoint.observability import traces
from mcp_endpoint.protocol import client_requests, dispatch
from mcp_endpoint.protocol.dispatch import LOG_LEVELS, CallContext
from mcp_endpoint.protocol.encoding import encode_json
from mcp_endpoint.protocol.errors import Forbidden, RpcError
from mcp_endpoint.protocol.interaction import LegacyInteraction
from nodespecs.downstream import call_lineage

Message = dict[str, Any]

MODERN_VERSION = MODERN_PROTOCOL_VERSIONS[-1]
# How telemetry names the era of the 2025 revisions (2025-03-26 to 2025-11-25: sessions,
# `initialize`).
LEGACY_ERA = "2025"
LATEST_HANDSHAKE_VERSION = HANDSHAKE_PROTOCOL_VERSIONS[-1]
# As the transports give headers: lower-cased.
_LINEAGE_HEADER = call_lineage.HEADER.lower()

# How long a client may cache each list or read result (2026-07-28 `ttlMs`); the answers
# are the same for every caller, so `cacheScope` is public. tools/list is not among them:
# it shows what the caller may call, and says how long itself (dispatch._list_tools).
CACHE_HINTS: dict[str, int] = {
    "server/discover": 300_000,
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
    # May make this server start a process (a stdio provider): the local user of stdio only.
    may_start_processes: bool = False
    # The user an API key acts for (its owner), by id and name; None for a key without one.
    owner_id: int | None = None
    owner_name: str = ""


@dataclass
class Reply:
    """A request's answer: `notes` (notifications made while answering), then either the
    result, known at once, or what `later` sends while the call goes on, its response last."""

    request_id: Any
    notes: list[Message] = field(default_factory=list)
    # The serialised result of an answer complete at once (an `EncodedResult` keeps its JSON).
    result: dict[str, Any] | None = None
    # The rest of an answer still being worked out: its notifications, then its response.
    later: Callable[[Threads], AsyncIterator[Message]] | None = None
    # Sends messages before its response (progress, log): worth an event stream.
    streams: bool = False
    # Sends requests to the client and waits for its answers: only an event stream will do.
    asks_client: bool = False

    @property
    def complete(self) -> bool:
        return self.later is None

    def response(self) -> Message:
        """The final message of a complete answer."""
        return {"jsonrpc": "2.0", "id": self.request_id, "result": self.result}

    def response_body(self) -> bytes:
        """The JSON of `response()`, reusing a cached result's JSON."""
        if isinstance(self.result, EncodedResult):
            # The same bytes as encoding the response, without encoding the result again.
            return b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (
                encode_json(self.request_id),
                self.result.encoded,
            )
        return encode_json(self.response())

    async def messages(self, threads: Threads) -> AsyncIterator[Message]:
        """Every message of the answer in order, the response last (`threads` takes the
        blocking work of an answer still going on). Closing it early abandons the answer."""
        for note in self.notes:
            yield note
        if self.later is None:
            yield self.response()
            return
        async for message in self.later(threads):
            yield message

    async def final(self, threads: Threads) -> Message:
        """The answer's response, for a client that takes one message (notifications
        dropped)."""
        response: Message = {}
        async for message in self.messages(threads):
            response = message
        return response


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
    request_id: Any = None,
    session_id: str = "",
    session_log_level: str | None = None,
    session_capabilities: dict[str, Any] | None = None,
    server: str | None = None,
    lineage_header: str | None = None,
) -> CallContext:
    """The call context: progress token, log level and client capabilities, from `_meta`
    (2026-07-28) or from the session (2025 revisions); `server` is the slug of the workflow
    group whose endpoint was called (None for `/mcp`). The lineage of a call made by a
    workflow run (nodespecs/downstream/call_lineage.py) comes from `_meta` or `lineage_header` (the
    request's HTTP header of it), whichever says more."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    level = meta.get(types.LOG_LEVEL_META_KEY, session_log_level)
    capabilities = meta.get(types.CLIENT_CAPABILITIES_META_KEY, session_capabilities)
    return CallContext(
        protocol_version=version,
        progress_token=meta.get("progressToken"),
        log_level=level if level in LOG_LEVELS else None,
        client_capabilities=capabilities if isinstance(capabilities, dict) else {},
        session_id=session_id,
        request_id=request_id,
        server=server,
        lineage=call_lineage.longest(
            call_lineage.from_meta(meta.get(call_lineage.META_KEY)),
            call_lineage.from_header(lineage_header),
        ),
    )


def _modern_result(method: str, dumped: dict[str, Any], server: str | None) -> dict[str, Any]:
    if method in CACHE_HINTS:
        dumped["ttlMs"] = CACHE_HINTS[method]
        dumped["cacheScope"] = "public"
    dumped.setdefault("resultType", "complete")
    meta = dumped.setdefault("_meta", {})
    meta[types.SERVER_INFO_META_KEY] = dispatch.server_info(server).model_dump(
        by_alias=True, exclude_none=True
    )
    return dumped


def discover_result(server: str | None = None) -> types.DiscoverResult:
    """`server/discover` at `/mcp`, or at the endpoint of the group whose slug is `server`."""
    capabilities = dispatch.server_capabilities(server)
    if capabilities.resources is not None:
        # subscriptions/listen reports catalog changes in this era.
        capabilities.resources.list_changed = True
    capabilities.extensions = {task_extension.EXTENSION: {}}
    return types.DiscoverResult(
        supported_versions=list(MODERN_PROTOCOL_VERSIONS),
        capabilities=capabilities,
        instructions=dispatch.server_instructions(server),
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
    on_set_level: Callable[[str], None] | None = None,
    trace_headers: Mapping[str, str] | None = None,
) -> Reply:
    """Answer one request (the id is `context.request_id`) for `version`.

    Raises `RpcError` (unknown method, bad params, a failing method) or `Forbidden`.
    `on_set_level(level)` stores a `logging/setLevel` for the session, where there is one. With
    tracing on, the request has a span (mcp_endpoint/observability/traces.py), continuing the trace
    of its `_meta`'s `traceparent`, else of `trace_headers` (its HTTP headers, lower-cased), which
    may also carry the call's lineage (`call_lineage.HEADER`).
    """
    if trace_headers is not None:
        header = trace_headers.get(_LINEAGE_HEADER)
        if header:
            heard = call_lineage.from_header(header)
            context.lineage = call_lineage.longest(context.lineage, heard)
    if not tracing.enabled():
        return _answer(method, params, version, caller, context, on_set_level)
    span = traces.request_span(
        method,
        params,
        version=version,
        caller=caller.identity,
        request_id=context.request_id,
        session_id=context.session_id,
        headers=trace_headers,
    )
    context.trace_id = tracing.trace_id_of(span)
    token = traces.attached(span)
    try:
        reply = _answer(method, params, version, caller, context, on_set_level)
    except BaseException as exc:
        traces.refused(span, exc)
        raise
    finally:
        traces.detached(token)
    if reply.later is None:
        traces.result_answered(span, reply.result)
    else:
        reply.later = traces.traced_later(span, reply.later)
    return reply


def _answer(
    method: str,
    params: Any,
    version: str,
    caller: Caller,
    context: CallContext,
    on_set_level: Callable[[str], None] | None,
) -> Reply:
    """`execute`'s answer, untraced."""
    refuse_deep_params(method, params)
    request_id = context.request_id
    if version in MODERN_PROTOCOL_VERSIONS and method in task_extension.METHODS:
        _check_scope(method, caller)
        answer = task_extension.METHODS[method](
            params, context.client_capabilities, caller.identity
        )
        return Reply(request_id, result=_modern_result(method, answer, context.server))
    try:
        request = methods.parse_client_request(method, version, params)
    except KeyError:
        raise RpcError(types.METHOD_NOT_FOUND, f"Method not found: {method}", method) from None
    except ValidationError as exc:
        raise RpcError(types.INVALID_PARAMS, params_problem(method, exc)) from None
    _check_scope(method, caller)
    memo_key = _static_key(method, version, params, context.server, caller.scopes)
    # Read before the list is built: a change meanwhile leaves an older stamp, not a stale list.
    stamp = _static_stamp(method)
    memo = _STATIC_RESULTS.get(memo_key) if memo_key is not None else None
    if memo is not None and memo[0] == stamp:
        return Reply(request_id, result=memo[1])
    if method == "server/discover":
        result: types.Result | WorkflowCall | LegacyInteraction = discover_result(context.server)
    elif method == "logging/setLevel" and on_set_level is not None:
        on_set_level(request.params.level)
        result = types.EmptyResult()
    else:
        context.caller = caller.identity
        context.scopes = caller.scopes
        context.may_start_processes = caller.may_start_processes
        context.owner_id, context.owner_name = caller.owner_id, caller.owner_name
        result = dispatch.call_method(request, context)
    serialize = partial(_serialize, method, version, context.server)
    notes = [{"jsonrpc": "2.0", **note} for note in context.notifications]
    if isinstance(result, WorkflowCall):
        result.serialize = serialize
        return Reply(
            request_id,
            notes,
            later=partial(workflow_calls.follow, result),
            streams=bool(notes) or result.progress_token is not None,
        )
    if isinstance(result, LegacyInteraction):
        asking = partial(
            client_requests.ask, result.handler, request_id, context.session_id, serialize
        )
        return Reply(request_id, notes, later=asking, streams=True, asks_client=True)
    serialized = serialize(result)
    if memo_key is not None:
        serialized = EncodedResult(serialized)
        _STATIC_RESULTS[memo_key] = (stamp, serialized)
    return Reply(request_id, notes, result=serialized, streams=bool(notes))


def _serialize(
    method: str, version: str, server: str | None, result: types.Result
) -> dict[str, Any]:
    """A method's result as `version` shapes it, answered by `server` (see `context_for`)."""
    dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    if version in MODERN_PROTOCOL_VERSIONS:
        dumped = _modern_result(method, dumped, server)
        if isinstance(result, types.CacheableResult) and "ttl_ms" in result.model_fields_set:
            # The handler chose (a run:// read: never cached): its choice wins, as in the SDK.
            dumped.update(ttlMs=result.ttl_ms, cacheScope=result.cache_scope)
    if isinstance(result, task_extension.CreateTaskResult):
        return dumped  # SEP-2663's flat shape, which the SDK's result surfaces do not know
    return methods.serialize_server_result(method, version, dumped)


# Lists that change only with a stamp (tools: `dispatch.tools_generation()`) or never (prompts,
# templates), kept per version, page and audience (tools: the scopes the list depends on) with
# their JSON: tools/list is among the most frequent calls an agent makes, and encoding its 4 KB
# answer cost more than the rest of the request.
_STATIC_METHODS = frozenset({"tools/list", "prompts/list", "resources/templates/list"})
_StaticKey = tuple[str, str, Any, str | None, frozenset[str]]
_STATIC_RESULTS: dict[_StaticKey, tuple[Hashable, EncodedResult]] = {}


class EncodedResult(dict[str, Any]):
    """A serialised result that also keeps its JSON (`encoded`), so the transport can send a
    cached answer without encoding it again. Never mutated once built."""

    def __init__(self, result: dict[str, Any]):
        super().__init__(result)
        self.encoded = encode_json(result)


def _static_key(
    method: str, version: str, params: Any, server: str | None, scopes: frozenset[str]
) -> _StaticKey | None:
    if method not in _STATIC_METHODS:
        return None
    # Called once the params have parsed, so the cursor is a string or absent.
    cursor = params.get("cursor") if isinstance(params, dict) else None
    audience = dispatch.tools_audience(scopes) if method == "tools/list" else frozenset()
    return (method, version, cursor, server, audience)


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


def refuse_deep_params(method: str, params: Any) -> None:
    """Refuse params that nest deeper than MCP_MAX_JSON_DEPTH, before any work reads them:
    nothing answers, stores or shows a value past a few hundred levels
    (graphs/execution/nesting.py)."""
    limit = settings.MCP_MAX_JSON_DEPTH
    if deeper_than(params, limit):
        raise RpcError(
            types.INVALID_PARAMS,
            f"Invalid params for {method}: they nest arrays and objects more than {limit} "
            "levels deep (MCP_MAX_JSON_DEPTH); send flatter arguments.",
        )


def negotiate(params: Any) -> tuple[str, types.InitializeRequestParams]:
    """Validate `initialize` params and choose the version: the client's, if we speak it."""
    refuse_deep_params("initialize", params)
    try:
        request = types.InitializeRequest.model_validate(
            {"method": "initialize", "params": params}, by_name=False
        )
    except ValidationError as exc:
        raise RpcError(types.INVALID_PARAMS, params_problem("initialize", exc)) from None
    requested = request.params.protocol_version
    version = requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
    return version, request.params


def initialize_result(version: str, server: str | None = None) -> dict[str, Any]:
    """The `initialize` answer at `/mcp`, or at the endpoint of the group whose slug is
    `server`."""
    result = types.InitializeResult(
        protocol_version=version,
        capabilities=dispatch.server_capabilities(server),
        server_info=dispatch.server_info(server),
        instructions=dispatch.server_instructions(server),
    )
    dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    return methods.serialize_server_result("initialize", version, dumped)
