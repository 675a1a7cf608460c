"""`/mcp` (and the legacy `/sse` and `/messages`) as lean ASGI apps, mounted in front of
Django by `config.asgi`.

Django's ASGI handler runs every middleware through a thread hop and starts threads per
request; for the endpoint agents call thousands of times a minute that was most of the cost
(docs/benchmarks.md). This app does only what `/mcp` needs: read the body, hand the request
to `admission.admit_request` and the admitted request to the protocol (in the event loop when
it needs no database and its work does not grow with what the caller sends, else on a small
pool of worker threads), and write the answer or the event stream. The legacy HTTP+SSE
transport (`sse.py`) goes through the same steps.

Requests that read whole workflow definitions (`_reads_documents`) have threads of their own,
and one key has at most MCP_DOCUMENT_CALLS_PER_CALLER of them at once: eight loops of
validate_workflow on a 718 KB definition once held every request thread, and another key's
get_node_details waited 10 s (issue 25, item 10).
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Generic, NamedTuple, TypeVar
from urllib.parse import parse_qs

from django.conf import settings
from django.core.exceptions import SynchronousOnlyOperation
from django.db import close_old_connections, connections

from graphs.execution.direct_turns import CallerShares
from graphs.execution.follow import Threads
from graphs.execution.toolset import refresh_workflow_tools, workflow_tools
from mcp_endpoint.access.auth import presented_key
from mcp_endpoint.features.tools import TOOLS
from mcp_endpoint.jsonrpc.errors import unavailable_errors
from mcp_endpoint.observability import request_metrics
from mcp_endpoint.observability.facts import Facts
from mcp_endpoint.transports import admission, event_stream, http_messages, sse, streamable_http
from nodespecs.knowledge.registry import refresh_registry

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# Each thread keeps its own database connection between requests; Django's request cycle,
# which would recycle it, does not run here, so the threads do it every so often.
logger = logging.getLogger(__name__)
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mcp")
# Direct-mode workflow runs, each holding its thread while its nodes call out: apart from
# `_POOL`, so that long runs never keep other requests waiting.
_RUNS = ThreadPoolExecutor(max_workers=settings.GRAPHS_DIRECT_RUN_THREADS, thread_name_prefix="run")
# Requests that read whole definitions, apart from `_POOL` so that knowledge calls never wait
# behind them; each key's take their turns (`_DOCUMENT_TURNS`) before they take a thread.
_DOCUMENTS = ThreadPoolExecutor(
    max_workers=settings.MCP_DOCUMENT_THREADS, thread_name_prefix="documents"
)
_DOCUMENT_TURNS = CallerShares()
# A body this large is a document, whatever it calls (a knowledge call's fits in a few KB).
DOCUMENT_BODY_BYTES = 64 * 1024
_RECYCLE_SECONDS = 30.0
_local = threading.local()
# Requests answered in the event loop run in this one context: Django keeps its cache
# connections in context-local storage, and each request's own context would open (and
# drop) a Redis connection per request.
_LOOP_CONTEXT = contextvars.copy_context()
# Answers to legacy SSE POSTs still being worked out after their 202 (kept from collection).
_deliveries: set[asyncio.Task[None]] = set()
Result = TypeVar("Result")
# Only requests whose work stays small whatever the caller sends are answered in the event
# loop, where it holds up every other request: a body over this size (parsing and validating
# it grows with it; 4 KB takes tens of microseconds), a call of a tool whose cost is not fixed
# (search_nodes stems each word of its query; get_node_details may compare each of 50 names
# with the whole catalog) and `resources/read` (which corrects a misspelt name the same way)
# go to a thread.
INLINE_BODY_BYTES = 4096
_TOOL_NAME = re.compile(rb'"name"\s*:\s*"([^"]*)"')


def _work(work: Callable[[], Result]) -> Result:
    """Do `work` on a worker thread, keeping the thread's database connection and the
    snapshots fresh first."""
    now = time.monotonic()
    if now - getattr(_local, "recycled_at", 0.0) > _RECYCLE_SECONDS:
        close_old_connections()
        _local.recycled_at = now
    else:
        _drop_broken_connections()
    # Bring the catalog and workflow snapshots up to date while on a thread that may query: a
    # request sent here because one was due for its check then leaves the next second's
    # requests to the event loop, even when it does not read that snapshot itself.
    try:
        refresh_registry()
        refresh_workflow_tools()
    except unavailable_errors():
        # The snapshots are kept as they were. A connection that broke here (the database
        # restarted, or ended its session) is dropped, so that the work connects anew.
        logger.warning("Could not refresh the snapshots", exc_info=True)
        _drop_broken_connections()
    return work()


def _drop_broken_connections() -> None:
    """Close this thread's database connections that failed since their last check and no
    longer answer, rather than at the thread's next recycling: looked at only after an error,
    so that a healthy connection costs no round trip."""
    for connection in connections.all(initialized_only=True):
        if connection.errors_occurred:
            connection.close_if_unusable_or_obsolete()


async def _read_body(receive: Receive, declared: str | None) -> bytes | None:
    """The request body, or None when it is over the limit (then not read further)."""
    if admission.body_too_large(declared):
        return None
    limit = admission.max_body_bytes()
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _encode(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    return [
        (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()
    ]


async def _request(scope: Scope, receive: Receive) -> dict[str, Any]:
    """`admission.admit_request`'s arguments for a request, its body read. The headers are
    decoded once: the declared Content-Length is read from them."""
    # A field's value excludes the whitespace around it (RFC 9110, 5.5; MCP's SEP-2243). ASGI
    # servers give header names in lower case (the ASGI HTTP spec requires it).
    raw_headers = [
        (n.decode("latin-1"), v.decode("latin-1").strip(" \t")) for n, v in scope["headers"]
    ]
    headers = dict(raw_headers)
    body = await _read_body(receive, headers.get("content-length"))
    client = scope.get("client") or ("", 0)
    return {
        "method": scope["method"],
        "headers": headers,
        "raw_headers": raw_headers,
        "body": body,
        "client_address": client[0],
        "scheme": scope.get("scheme", "http"),
        "path": scope["path"],
    }


# A transport's step that answers an admitted request.
Step = Callable[[http_messages.Inbound], Result]


def _admitted_answer(arguments: dict[str, Any], answer: Step[Result]) -> Result:
    """Admit the request (`admission.admit_request`), then `answer` it; a refusal answers it."""
    admitted = admission.admit_request(**arguments)
    if isinstance(admitted, http_messages.Outbound):
        return admitted  # type: ignore[return-value]
    return answer(admitted)


async def _run(
    arguments: dict[str, Any],
    *,
    headers: dict[str, str],
    body: bytes | None,
    answer: Step[Result],
) -> Result:
    """Admit a request and `answer` it: in the event loop when that will make no query (the
    common case, a known key and fresh catalog, is pure computation: a thread hop would cost
    more than the work), else on a worker thread."""
    done = _LOOP_CONTEXT.run(_in_loop, arguments, headers, body, answer)
    if isinstance(done, _Done):
        return done.answer
    if isinstance(done, http_messages.Inbound):
        work = partial(answer, done)  # admitted in the loop: not counted against its limit twice
    else:
        work = partial(_admitted_answer, arguments, answer)
    return await _on_a_thread(work, headers, body, arguments.get("client_address", ""))


async def _on_a_thread(
    work: Callable[[], Result], headers: dict[str, str], body: bytes | None, address: str
) -> Result:
    """Do `work` on a worker thread: a document thread, in its holder's turn, for a request
    whose work grows with a document it carries; else the pool's."""
    if _reads_documents(body):
        return await _in_document_turn(_holder(headers, address), partial(_work, work))
    return await asyncio.get_running_loop().run_in_executor(_POOL, _work, work)


def _reads_documents(body: bytes | None) -> bool:
    """Whether a request's work may grow with a document it carries: a body over
    DOCUMENT_BODY_BYTES, a call of a tool that reads definitions, or a body over
    INLINE_BODY_BYTES whose tool names cannot be read in its bytes (an escape in it). Errs
    towards yes: a wrong yes makes a call wait for its key's turn, a wrong no lets one
    caller's documents hold the threads that every other caller's requests need."""
    if body is None:
        return False  # refused by its size, unread
    if len(body) > DOCUMENT_BODY_BYTES or (len(body) > INLINE_BODY_BYTES and b"\\" in body):
        return True
    if b"tools/call" not in body:
        return False
    names = [name.decode("utf-8", "replace") for name in _TOOL_NAME.findall(body)]
    return any(TOOLS[name].reads_documents for name in names if name in TOOLS)


def _holder(headers: dict[str, str], address: str) -> str:
    """Whose turn a request takes: its key's (hashed: the key is not kept), or, without one,
    its client address's."""
    raw = presented_key(headers)
    if raw is None:
        return "address:" + address
    return "key:" + hashlib.sha256(raw.encode()).hexdigest()[:32]


async def _in_document_turn(holder: str, work: Callable[[], Result]) -> Result:
    """Do `work` on a document thread once `holder` has a place among its
    MCP_DOCUMENT_CALLS_PER_CALLER: a call past them waits, holding no thread."""
    turn = _DOCUMENT_TURNS.claim(holder, settings.MCP_DOCUMENT_CALLS_PER_CALLER)
    if turn is not None:
        await _DOCUMENT_TURNS.wait(holder, turn)

    def in_place() -> Result:
        # The thread gives the place back when the work is done, not this task: the place is
        # taken for as long as the thread works, whoever stops waiting for it.
        try:
            return work()
        finally:
            _DOCUMENT_TURNS.give_back(holder)

    try:
        working = asyncio.get_running_loop().run_in_executor(_DOCUMENTS, in_place)
    except BaseException:
        _DOCUMENT_TURNS.give_back(holder)
        raise
    return await asyncio.shield(working)


class _Done(NamedTuple, Generic[Result]):
    """A request answered in the event loop."""

    answer: Result


def _in_loop(
    arguments: dict[str, Any],
    headers: dict[str, str],
    body: bytes | None,
    answer: Step[Result],
) -> _Done[Result] | http_messages.Inbound | None:
    """The answer, when it can be made without a query and at a small fixed cost; else the
    request as admitted here, when only its answer needs a thread; else None (a thread does
    it all)."""
    # A legacy SSE message (`sse.answer`) is always a POST.
    method = arguments.get("method", "POST")
    # First: `_fixed_cost` reads the workflow snapshot, which must then be fresh.
    if not admission.answers_without_database(method, headers, body):
        return None
    if not _fixed_cost(arguments.get("body"), body):
        return None
    try:
        admitted = admission.admit_request(**arguments)
    except SynchronousOnlyOperation:
        # The remembered key expired between the check and now (the loop was busy):
        # admitting it needs a query, so a thread does it.
        return None
    if isinstance(admitted, http_messages.Outbound):
        return _Done(admitted)  # type: ignore[arg-type]
    try:
        return _Done(answer(admitted))
    except SynchronousOnlyOperation:
        # A snapshot fell due between the check and the answer: the answer needs a query, and
        # a thread makes it for the request admitted here.
        return admitted


def _fixed_cost(received: bytes | None, message: bytes | None) -> bool:
    """Whether answering a request is small work whatever the caller sent (see
    INLINE_BODY_BYTES). `received` is the HTTP body, `message` the one answered (they differ
    for a legacy SSE POST). Errs towards no: a wrong no costs a thread hop, a wrong yes
    holds every other request for the caller's work."""
    if len(received or b"") > INLINE_BODY_BYTES or len(message or b"") > INLINE_BODY_BYTES:
        return False
    if not message:
        return True
    # With no escape in the body, a method or tool name reads in the bytes as in the JSON.
    if b"\\" in message or b"resources/read" in message:
        return False
    if b"tools/call" not in message:
        return True
    names = [name.decode("utf-8", "replace") for name in _TOOL_NAME.findall(message)]
    # A workflow's call only starts here: its run goes on the reply's threads.
    return bool(names) and all(
        TOOLS[name].fixed_cost if name in TOOLS else name in workflow_tools() for name in names
    )


def _threads() -> Threads:
    """Where the blocking work of a reply that goes on is done. The run threads serve every
    caller: each has a share of them (graphs/execution/direct_turns.py)."""
    loop = asyncio.get_running_loop()
    return Threads(
        short=lambda work: loop.run_in_executor(_POOL, _work, work),
        run=lambda work: loop.run_in_executor(_RUNS, _work, work),
        run_share=settings.GRAPHS_RUN_THREADS_PER_CALLER,
    )


async def mcp_app(scope: Scope, receive: Receive, send: Send, group: str | None = None) -> None:
    """Serve one HTTP request to `/mcp`, or to `/mcp/<group>` (a workflow group's); once
    answered, record it (mcp_endpoint/observability/request_metrics.py) with what the protocol
    reported."""
    started = time.perf_counter()
    arguments = await _request(scope, receive)
    facts = Facts()
    answer: http_messages.Answer = await _run(
        {**arguments, "group": group, "facts": facts},
        headers=arguments["headers"],
        body=arguments["body"],
        answer=streamable_http.handle,
    )
    written = None
    try:
        stream = None
        if not isinstance(answer, http_messages.Outbound):
            threads = _threads()  # only an answer that goes on needs them
            settled = await _until_disconnect(event_stream.settle(answer, threads), receive)
            if settled is None:
                return  # the client left before its answer
            answer = settled
            written = event_stream.written_record(answer)
            stream = event_stream.stream_of(answer, threads, written)
        else:
            written = event_stream.written_record(answer)
        await _respond(answer, stream, receive, send)
    except BaseException:
        written = None  # the client left, or writing failed: not answered
        raise
    finally:
        request_metrics.mcp_request_done(written, started, http_method=scope["method"], facts=facts)


async def sse_app(scope: Scope, receive: Receive, send: Send) -> None:
    """Serve `GET /sse` (a legacy stream) or `POST /messages` (a message for one)."""
    arguments = await _request(scope, receive)
    if scope["path"] == sse.STREAM_PATH:
        # Admitting the GET never runs a workflow, whatever its body.
        opened: http_messages.Outbound | http_messages.ChannelOpened = await _run(
            arguments, headers=arguments["headers"], body=None, answer=sse.open_stream
        )
        stream = None
        if isinstance(opened, http_messages.ChannelOpened):
            stream = sse.stream(opened.channel, opened.lease, opened.watch, _threads())
        await _respond(opened, stream, receive, send)
        return
    started = time.perf_counter()
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    # The stream's channel (sse.py), not a 2025 session: a stream carries one once its
    # client has initialized.
    channel_id = (query.get("channel") or [""])[0]
    accepted: http_messages.Outbound | http_messages.Inbound = await _run(
        arguments,
        headers=arguments["headers"],
        body=None,
        answer=partial(sse.accept_message, channel_id=channel_id),
    )
    if isinstance(accepted, http_messages.Outbound):
        await _respond(accepted, None, receive, send)
        written = event_stream.written_record(accepted)
        request_metrics.mcp_request_done(
            written, started, http_method="POST", transport="sse", facts=None
        )
        return
    task = asyncio.create_task(_answer_on_stream(accepted, channel_id, started))
    _deliveries.add(task)
    task.add_done_callback(_deliveries.discard)
    await _respond(http_messages.Outbound(202), None, receive, send)


async def _answer_on_stream(
    inbound: http_messages.Inbound, channel_id: str, started: float
) -> None:
    """Answer an accepted legacy SSE message and send the answer to its stream (`started`:
    when its POST arrived, for its telemetry)."""
    try:
        answer = await _answer_accepted(inbound, channel_id)
        await sse.deliver(channel_id, answer, _threads())
        written = event_stream.written_record(answer)
        request_metrics.mcp_request_done(
            written, started, http_method="POST", transport="sse", facts=inbound.facts
        )
    except Exception:
        logger.exception("Answering a message for SSE stream %s failed", channel_id[:8])


async def _answer_accepted(inbound: http_messages.Inbound, channel_id: str) -> http_messages.Answer:
    """The answer to a legacy SSE message already admitted with its POST: in the event loop
    when that makes no query at a small fixed cost, else on a worker thread."""
    headers, body = dict(inbound.headers), inbound.body
    fixed = _fixed_cost(body, body) and admission.answers_without_database("POST", headers, body)
    if fixed:
        try:
            return _LOOP_CONTEXT.run(sse.answer, inbound, channel_id)
        except SynchronousOnlyOperation:
            pass  # a snapshot fell due meanwhile: a thread answers it
    # The POST's client address is not kept with its message: the key holds the turn.
    return await _on_a_thread(partial(sse.answer, inbound, channel_id), headers, body, "")


async def _respond(
    outbound: http_messages.Answer | http_messages.ChannelOpened,
    stream: AsyncIterator[bytes] | None,
    receive: Receive,
    send: Send,
) -> None:
    """Write a plain answer, or the event stream `stream` when there is one."""
    if stream is None:
        assert isinstance(outbound, http_messages.Outbound)
        headers = _encode(outbound.headers)
        headers.append((b"content-length", b"%d" % len(outbound.body)))
        await send({"type": "http.response.start", "status": outbound.status, "headers": headers})
        await send({"type": "http.response.body", "body": outbound.body})
        return
    await send(
        {
            "type": "http.response.start",
            "status": outbound.status,
            "headers": _encode({**outbound.headers, **event_stream.SSE_HEADERS}),
        }
    )
    await _send_stream(stream, receive, send)


async def _send_stream(stream: Any, receive: Receive, send: Send) -> None:
    """Send an event stream until it ends or the client goes away (which cancels it)."""

    async def pump() -> bool:
        async for chunk in stream:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return True

    await _until_disconnect(pump(), receive)


async def _until_disconnect(work: Awaitable[Result], receive: Receive) -> Result | None:
    """Await `work` unless the client disconnects first; then cancel it (its cleanup runs
    before this returns: a legacy stream ends its session, a 2026-07-28 call its run) and
    return None."""

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    working, watching = asyncio.ensure_future(work), asyncio.ensure_future(watch())
    done, pending = await asyncio.wait({working, watching}, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return working.result() if working in done else None
