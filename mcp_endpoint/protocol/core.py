"""The protocol core: one JSON-RPC request, executed for a protocol version.

A transport hands `execute` a `Request` and gets back a `Reply`, one immutable type per kind:
`Answered` (complete at once), `Following` (a workflow call, told as its run goes),
`Asking` (a 2025 call that asks its client for input midway) or `Refused` (unknown method, bad
params, a missing scope). `messages(reply, threads)` yields what to send, in order, ending in
exactly one response; the transport writes each as it comes. Calls go down, messages come back:
nothing is handed to the transport to call later.

Every transport goes through here the same way (docs/architecture.md): Streamable HTTP in both eras
(mcp_endpoint/transports/streamable_http.py), the legacy SSE transport
(mcp_endpoint/transports/sse.py), stdio (mcp_endpoint/transports/stdio.py) and the REST API
(mcp_endpoint/rest/api.py). None of them decides anything about a call; the core never asks which
one it serves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping
from functools import partial
from typing import Any, NamedTuple

from asgiref.sync import sync_to_async
from django.conf import settings
from mcp import types
from mcp.types import methods
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from graphs.engine.nesting import deeper_than
from graphs.execution import tracing
from graphs.execution.follow import Threads
from graphs.execution.toolset import workflow_tools_token
from mcp_endpoint.access.challenges import SCOPE_HOW
from mcp_endpoint.calls import task_extension, workflow_calls
from mcp_endpoint.calls.workflow_calls import WorkflowCall
from mcp_endpoint.jsonrpc.context import LOG_LEVELS, CallContext
from mcp_endpoint.jsonrpc.encoding import encode_json
from mcp_endpoint.jsonrpc.errors import Forbidden, RpcError
from mcp_endpoint.jsonrpc.interaction import StreamedInteraction
from mcp_endpoint.jsonrpc.results import CACHE_HINTS, EncodedResult, Era
from mcp_endpoint.protocol import client_requests, dispatch, tool_answers, traces
from nodespecs.callers import Caller
from nodespecs.downstream import call_lineage

Message = dict[str, Any]
Notes = tuple[Message, ...]

MODERN_VERSION = MODERN_PROTOCOL_VERSIONS[-1]
# How telemetry names the era of the 2025 revisions (2025-03-26 to 2025-11-25: sessions,
# `initialize`).
SESSION_ERA = "2025"
LATEST_HANDSHAKE_VERSION = HANDSHAKE_PROTOCOL_VERSIONS[-1]
# As the transports give headers: lower-cased.
_LINEAGE_HEADER = call_lineage.HEADER.lower()


def _in_request_thread(work: Callable[[], Any]) -> Awaitable[Any]:
    return sync_to_async(work, thread_sensitive=True)()


# Where a request served by Django (the /mcp view, the REST API) does the blocking work of a
# reply that goes on: the request's own sync thread, where Django manages the database
# connection (and which the test client shares).
REQUEST_THREADS = Threads(short=_in_request_thread, run=_in_request_thread)


class Request(NamedTuple):
    """One JSON-RPC request as a transport hands it to the core, with what the transport knows
    of it: the era it chose, the caller it admitted, the 2025 session it belongs to (stdio's
    connection is one), the workflow group whose endpoint was called (`/mcp/<slug>`; None for
    `/mcp`) and the HTTP headers (lower-cased; they may carry a trace and a call's lineage)."""

    method: str
    params: Any
    version: str
    caller: Caller
    request_id: Any = None
    session_id: str = ""
    session_log_level: str | None = None
    session_capabilities: Mapping[str, Any] | None = None
    group: str | None = None
    headers: Mapping[str, str] | None = None
    # Whether the client takes messages before the response (it accepts an event stream,
    # or is on stdio); False for JSON answers only and REST.
    streams: bool = True


# The core's answer to a request, one type per kind. Each carries the notifications made while
# answering (`notes`, sent first) and the trace of the request's span ("" untraced).


class Answered(NamedTuple):
    """Complete at once: `result` is the serialised result (an `EncodedResult` keeps its JSON).
    `log_level` is a `logging/setLevel` the transport keeps for the session."""

    request_id: Any
    result: dict[str, Any]
    notes: Notes = ()
    trace_id: str = ""
    log_level: str | None = None


class Following(NamedTuple):
    """A workflow call, whose messages come as its run goes (mcp_endpoint/calls/)."""

    request_id: Any
    call: WorkflowCall
    notes: Notes = ()
    trace_id: str = ""
    span: Any = None


class Asking(NamedTuple):
    """A 2025 call that asks its client for input midway, on its own stream."""

    request_id: Any
    interaction: StreamedInteraction
    session_id: str
    # The call's method and era, which shape its result.
    method: str
    era: Era
    notes: Notes = ()
    trace_id: str = ""
    span: Any = None


class Refused(NamedTuple):
    """Refused outright (unknown method, bad params, a missing scope: `error.forbidden`)."""

    request_id: Any
    error: RpcError
    trace_id: str = ""
    notes: Notes = ()


Reply = Answered | Following | Asking | Refused


def streams(reply: Reply) -> bool:
    """Whether the reply sends messages before its response (progress, log, requests to the
    client): worth an event stream."""
    if isinstance(reply, Asking):
        return True
    if isinstance(reply, Following):
        call = reply.call
        asks = call.channel.kind == "stream"
        return bool(reply.notes) or call.progress_token is not None or asks
    return bool(reply.notes)


def response_of(reply: Answered | Refused) -> Message:
    """The final message of a reply complete at once."""
    if isinstance(reply, Refused):
        return reply.error.message_for(reply.request_id)
    return {"jsonrpc": "2.0", "id": reply.request_id, "result": reply.result}


def response_body(reply: Answered) -> bytes:
    """The JSON of `response_of(reply)`, reusing a cached result's JSON."""
    if isinstance(reply.result, EncodedResult):
        # The same bytes as encoding the response, without encoding the result again.
        return b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (
            encode_json(reply.request_id),
            reply.result.encoded,
        )
    return encode_json(response_of(reply))


async def messages(reply: Reply, threads: Threads) -> AsyncIterator[Message]:
    """Every message of the reply in order, the response last (`threads` takes the blocking
    work of one that goes on). Closing it early abandons the answer (a workflow call's run is
    then cancelled when its era says so)."""
    for note in reply.notes:
        yield note
    if isinstance(reply, Answered | Refused):
        yield response_of(reply)
        return
    if isinstance(reply, Following):
        going = partial(_following, reply.call)
    else:
        going = partial(
            client_requests.ask,
            reply.interaction,
            reply.request_id,
            reply.session_id,
            reply.era,
            reply.method,
        )
    if reply.span is None:
        async for message in going(threads):
            yield message
        return
    async for message in traces.followed(reply.span, going, threads):
        yield message


async def _following(call: WorkflowCall, threads: Threads) -> AsyncIterator[Message]:
    """A workflow call's messages; where its run waits for the client's answer, the request
    that asks it, on the call's own stream (protocol/client_requests.py)."""
    async for message in workflow_calls.follow(call, threads):
        if isinstance(message, workflow_calls.ClientAsked):
            async for sent in client_requests.ask_for_run(message, call, threads):
                yield sent
        else:
            yield message


async def final(reply: Reply, threads: Threads) -> Message:
    """The reply's response, for a client that takes one message (notifications dropped)."""
    response: Message = {}
    async for message in messages(reply, threads):
        response = message
    return response


def is_modern(message: Any, version_header: str | None = None) -> bool:
    """Whether a request is answered in the 2026-07-28 era, chosen the same way for every
    transport: by its `MCP-Protocol-Version` header when it has one (any version newer than
    the handshake's), else by its body: a protocol version in `_meta` (the era's envelope) on
    anything but `initialize`."""
    if version_header is not None:
        return version_header not in HANDSHAKE_PROTOCOL_VERSIONS
    if not isinstance(message, dict) or message.get("method") == "initialize":
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and types.PROTOCOL_VERSION_META_KEY in meta


def params_problem(method: str, exc: ValidationError) -> str:
    """Name each bad field of a request's params and what is wrong with it."""
    problems = []
    for error in exc.errors():
        # The SDK validates the whole request body; drop the wrapper's own positions.
        location = [str(p) for p in error["loc"] if p not in ("params", "method", "jsonrpc", "id")]
        problems.append(f"{'.'.join(location) or 'params'}: {error['msg']}")
    return f"Invalid params for {method}: " + "; ".join(dict.fromkeys(problems))


def era_of(version: str, group: str | None) -> Era:
    """How results are shaped for `version`, answered at `/mcp` or at `group`'s endpoint.
    Kept while the workflow groups stay as they are: every 2026-07-28 request needs one."""
    if version not in MODERN_PROTOCOL_VERSIONS:
        return Era(version)
    key = (version, group, workflow_tools_token() if group is not None else None)
    era = _ERAS.get(key)
    if era is None:
        info = dispatch.server_info(group).model_dump(by_alias=True, exclude_none=True)
        if len(_ERAS) >= _ERAS_KEPT:
            _ERAS.clear()
        era = _ERAS[key] = Era(version, info)
    return era


# By version, group and the workflow snapshot that named the group's server (groups come and
# go with the admin, so the few kept are cleared when there are too many).
_ERAS: dict[tuple[str, str | None, Hashable], Era] = {}
_ERAS_KEPT = 256


def _context(request: Request, trace_id: str) -> CallContext:
    """The call context, whole: progress token, log level and client capabilities from `_meta`
    (2026-07-28) or from the session (2025 revisions). The lineage of a call made by a workflow
    run (nodespecs/downstream/call_lineage.py) comes from `_meta` or the HTTP header of it,
    whichever says more."""
    params = request.params
    meta = params.get("_meta") if isinstance(params, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    level = meta.get(types.LOG_LEVEL_META_KEY, request.session_log_level)
    capabilities = meta.get(types.CLIENT_CAPABILITIES_META_KEY, request.session_capabilities)
    header = (request.headers or {}).get(_LINEAGE_HEADER)
    return CallContext(
        era=era_of(request.version, request.group),
        caller=request.caller,
        progress_token=meta.get("progressToken"),
        log_level=level if level in LOG_LEVELS else None,
        client_capabilities=capabilities if isinstance(capabilities, dict) else {},
        session_id=request.session_id,
        request_id=request.request_id,
        group=request.group,
        trace_id=trace_id,
        streams=request.streams,
        lineage=call_lineage.longest(
            call_lineage.from_meta(meta.get(call_lineage.META_KEY)),
            call_lineage.from_header(header),
        ),
    )


def discover_result(group: str | None = None) -> types.DiscoverResult:
    """`server/discover` at `/mcp`, or at the endpoint of the group whose slug is `group`."""
    capabilities = dispatch.server_capabilities(group)
    if capabilities.resources is not None:
        # subscriptions/listen reports catalog changes in this era.
        capabilities.resources.list_changed = True
    capabilities.extensions = {task_extension.EXTENSION: {}}
    return types.DiscoverResult(
        supported_versions=list(MODERN_PROTOCOL_VERSIONS),
        capabilities=capabilities,
        instructions=dispatch.server_instructions(group),
        ttl_ms=CACHE_HINTS["server/discover"],
        cache_scope="public",
    )


def execute(request: Request) -> Reply:
    """Answer one request. A refusal (unknown method, bad params, a failing method, a missing
    scope) is a `Refused` reply, for the transport to write as its era asks. With tracing on,
    the request has a span (mcp_endpoint/protocol/traces.py), continuing the trace of its
    `_meta`'s `traceparent`, else of its HTTP headers."""
    if not tracing.enabled():
        return _answer(request, "", None)
    span = traces.request_span(
        request.method,
        request.params,
        version=request.version,
        caller=request.caller.actor,
        request_id=request.request_id,
        session_id=request.session_id,
        headers=request.headers,
    )
    token = traces.attached(span)
    try:
        reply = _answer(request, tracing.trace_id_of(span), span)
    except BaseException as exc:
        traces.refused(span, exc)
        raise
    finally:
        traces.detached(token)
    if isinstance(reply, Refused):
        traces.refused(span, reply.error)
    elif isinstance(reply, Answered):
        traces.result_answered(span, reply.result)
    return reply


def _answer(request: Request, trace_id: str, span: Any) -> Reply:
    """`execute`'s answer, for the request's trace (`trace_id`, "" untraced); `span` goes with
    a reply that goes on."""
    try:
        return _answered(request, trace_id, span)
    except RpcError as exc:
        return Refused(request.request_id, exc, trace_id)


def _answered(request: Request, trace_id: str, span: Any) -> Reply:
    method, params, version = request.method, request.params, request.version
    request_id = request.request_id
    kept = _kept_answer(request)
    if kept is not None and kept.answer is not None:
        # The same params were answered before, so they pass the checks of params (depth,
        # parsing) as they did then; only the caller is new, and its scopes are checked as
        # the call's would be.
        _check_scope(method, request.caller)
        dispatch.check_tool_scope(params["name"], request.group, request.caller)
        return Answered(request_id, kept.answer, trace_id=trace_id)
    refuse_deep_params(method, params)
    if version in MODERN_PROTOCOL_VERSIONS and method in task_extension.METHODS:
        _check_scope(method, request.caller)
        context = _context(request, trace_id)
        answer = task_extension.METHODS[method](
            params, context.client_capabilities, request.caller.actor
        )
        return Answered(request_id, context.era.shape_modern(method, answer), trace_id=trace_id)
    try:
        parsed = methods.parse_client_request(method, version, params)
    except KeyError:
        raise RpcError(types.METHOD_NOT_FOUND, f"Method not found: {method}", method) from None
    except ValidationError as exc:
        raise RpcError(types.INVALID_PARAMS, params_problem(method, exc)) from None
    _check_scope(method, request.caller)
    memo_key = _static_key(method, version, params, request.group, request.caller.scopes)
    # Read before the list is built: a change meanwhile leaves an older stamp, not a stale list.
    stamp = _static_stamp(method)
    memo = _STATIC_RESULTS.get(memo_key) if memo_key is not None else None
    if memo is not None and memo[0] == stamp:
        # A cached list is the same for every request of its key: no context is needed.
        return Answered(request_id, memo[1], trace_id=trace_id)
    context = _context(request, trace_id)
    log_level = None
    if method == "server/discover":
        result: types.Result | WorkflowCall | StreamedInteraction = discover_result(request.group)
    elif method == "logging/setLevel" and request.session_id:
        log_level = parsed.params.level
        result = types.EmptyResult()
    else:
        result = dispatch.call_method(parsed, context)
    notes: Notes = ()
    if context.notifications:
        notes = tuple({"jsonrpc": "2.0", **note} for note in context.notifications)
    if isinstance(result, WorkflowCall):
        return Following(request_id, result, notes, trace_id, span)
    if isinstance(result, StreamedInteraction):
        session_id, era = request.session_id, context.era
        return Asking(request_id, result, session_id, method, era, notes, trace_id, span)
    shaped = context.era.shape(method, result)
    if memo_key is not None:
        shaped = EncodedResult(shaped)
        _STATIC_RESULTS[memo_key] = (stamp, shaped)
    elif kept is not None and not notes and not shaped.get("isError"):
        # A failure may not happen again (a tool that failed on the server); notes are sent
        # before the answer, which a kept answer would lose.
        shaped = tool_answers.keep(kept.key, kept.stamp, shaped)
    return Answered(request_id, shaped, notes, trace_id, log_level)


class _Kept(NamedTuple):
    """A call whose answer is kept: its key, the stamp it is kept under, and the answer
    when one is kept already."""

    key: tool_answers.Key
    stamp: Hashable
    answer: EncodedResult | None


def _kept_answer(request: Request) -> _Kept | None:
    """Where a `tools/call` of a tool whose answer is kept (protocol/tool_answers.py) finds
    it; None for any other request. The stamp is read before the answer is built: a change
    meanwhile leaves the answer under an older stamp, never a stale one under the new."""
    if request.method != "tools/call":
        return None
    stamp = dispatch.kept_answer_stamp(request.params, request.group)
    if stamp is None:
        return None
    key = tool_answers.key_of(request.version, request.params, request.session_log_level)
    if key is None:
        return None
    return _Kept(key, stamp, tool_answers.kept(key, stamp))


# Lists that change only with a stamp (tools: `dispatch.tools_generation()`) or never (prompts,
# templates), kept per version, page and audience (tools: the scopes the list depends on) with
# their JSON: tools/list is among the most frequent calls an agent makes, and encoding its 4 KB
# answer cost more than the rest of the request.
_STATIC_METHODS = frozenset({"tools/list", "prompts/list", "resources/templates/list"})
_StaticKey = tuple[str, str, Any, str | None, frozenset[str]]
_STATIC_RESULTS: dict[_StaticKey, tuple[Hashable, EncodedResult]] = {}


def _static_key(
    method: str, version: str, params: Any, group: str | None, scopes: frozenset[str] | None
) -> _StaticKey | None:
    if method not in _STATIC_METHODS:
        return None
    # Called once the params have parsed, so the cursor is a string or absent.
    cursor = params.get("cursor") if isinstance(params, dict) else None
    audience: frozenset[str] = frozenset()
    if method == "tools/list":
        audience = dispatch.tools_audience(scopes or frozenset())
    return (method, version, cursor, group, audience)


def _static_stamp(method: str) -> Hashable:
    return dispatch.tools_generation() if method == "tools/list" else None


def _check_scope(method: str, caller: Caller) -> None:
    scope = dispatch.REQUIRED_SCOPES.get(method)
    if scope is not None and not caller.has_scope(scope):
        raise Forbidden(
            types.INVALID_REQUEST,
            f"Forbidden: {method} needs the scope {scope}, which this caller does not have. "
            f"{SCOPE_HOW}",
            scope=scope,
        )


def refuse_deep_params(method: str, params: Any) -> None:
    """Refuse params that nest deeper than MCP_MAX_JSON_DEPTH, before any work reads them:
    nothing answers, stores or shows a value past a few hundred levels
    (graphs/engine/nesting.py)."""
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


def initialize_result(version: str, group: str | None = None) -> dict[str, Any]:
    """The `initialize` answer at `/mcp`, or at the endpoint of the group whose slug is
    `group`."""
    result = types.InitializeResult(
        protocol_version=version,
        capabilities=dispatch.server_capabilities(group),
        server_info=dispatch.server_info(group),
        instructions=dispatch.server_instructions(group),
    )
    dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    return methods.serialize_server_result("initialize", version, dumped)
