"""MCP over stdio: newline-delimited JSON-RPC on stdin/stdout, for desktop clients.

The client is the local user who started the process, so every scope is granted. Both eras
work: `initialize` negotiates a 2025 revision for the connection; a request whose `_meta`
carries the 2026-07-28 envelope is answered statelessly.

`manage.py mcp_stdio --group SLUG` serves one workflow group's tools alone, as `/mcp/<slug>` does
over HTTP. When the tool list changes, a connection that has initialized hears
`notifications/tools/list_changed` (mcp_endpoint/protocol/list_changes.py).

Requests are answered concurrently, each through the protocol core like a request over HTTP,
its messages written as they come: a workflow call's progress, the requests a call sends the
client (whose answers come back as lines of their own), then its response. The connection is
a session of its own: once stdin has ended and the requests sent are answered, the workflow
runs its calls started that still go on (queued ones, in their workers) are cancelled.

Its threads keep their database connections from one request to the next, each dropped before
a request if it broke or is past CONN_MAX_AGE, and close them when the connection ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from django.conf import settings
from django.db import close_old_connections, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from mcp import types
from mcp.shared import inbound as envelope

from graphs.execution.follow import Threads
from mcp_endpoint.calls import workflow_answers
from mcp_endpoint.jsonrpc.encoding import encode_json_ascii
from mcp_endpoint.jsonrpc.errors import RpcError
from mcp_endpoint.models import Scope
from mcp_endpoint.observability import request_metrics
from mcp_endpoint.observability.facts import Facts
from mcp_endpoint.protocol import core, list_changes, sessions
from mcp_endpoint.protocol.core import (
    MODERN_VERSION,
    SESSION_ERA,
    Answered,
    Reply,
    Request,
    execute,
    initialize_result,
    is_modern,
    negotiate,
)
from nodespecs.callers import Caller

logger = logging.getLogger(__name__)
# The user who started the process: every scope, and the right to start processes (they can
# run any anyway).
LOCAL_USER = Caller(actor="stdio", scopes=frozenset(Scope.values), may_start_processes=True)
Message = dict[str, Any]
T = TypeVar("T")


def _error(request_id: Any, code: int, message: str, data: Any = None) -> Message:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


class _PoolConnections:
    """The database connections of the pools' threads, each kept from one job to the next as
    Django keeps a request thread's (connecting to PostgreSQL costs milliseconds, more than
    the rest of a short call), and closed when the pools have ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[int, BaseDatabaseWrapper] = {}

    def on_thread(self, pool: ThreadPoolExecutor) -> Callable[[Callable[[], T]], Awaitable[T]]:
        """Run blocking work on `pool`. Before each job a connection that broke (the database
        restarted, say) or outlived CONN_MAX_AGE is dropped, as between two requests, and the
        health check of CONN_HEALTH_CHECKS runs again at its first query: the job then works
        on a new one."""

        def work(job: Callable[[], T]) -> T:
            close_old_connections()
            try:
                return job()
            finally:
                opened = connections.all(initialized_only=True)
                with self._lock:
                    self._kept.update((id(connection), connection) for connection in opened)

        loop = asyncio.get_running_loop()
        return lambda job: loop.run_in_executor(pool, work, job)

    def close(self) -> None:
        """Close the connections kept, once the threads that opened them have ended (hence
        the sharing: a connection otherwise refuses any thread but its own)."""
        for connection in self._kept.values():
            connection.inc_thread_sharing()
            connection.close()


class StdioConnection:
    """One client connection: the negotiated version and log level, and its session id."""

    def __init__(
        self, write: Callable[[Message], None], threads: Threads, group: str | None = None
    ) -> None:
        self.write = write
        self.threads = threads
        # The slug of the workflow group served, as at `/mcp/<slug>`; None serves everything.
        self.group = group
        self.session_id = f"stdio:{secrets.token_urlsafe(16)}"
        self.version: str | None = None
        self.log_level: str | None = None
        self.capabilities: dict[str, Any] = {}
        # Requests being answered.
        self.answering: set[asyncio.Task[None]] = set()

    async def receive(self, line: str) -> None:
        """Take one input line. A request is answered in a task of its own (its answer is
        written when ready), but for `initialize`, whose version shapes the requests after
        it; anything else is dealt with at once."""
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as exc:
            self.write(_error(None, types.PARSE_ERROR, f"Parse error: {exc}"))
            return
        if not isinstance(message, dict):
            self.write(_error(None, types.INVALID_REQUEST, "Invalid Request: not a JSON object."))
            return
        if "id" in message and ("result" in message or "error" in message):
            # The client's answer to a request a call sent it
            # (mcp_endpoint/protocol/client_requests.py).
            await self.threads.short(partial(sessions.reply_store, self.session_id, message))
            return
        method = message.get("method")
        if not isinstance(method, str):
            self.write(
                _error(None, types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC request.")
            )
            return
        if "id" not in message:
            if method == "notifications/cancelled":
                cancel = partial(
                    workflow_answers.cancel_notification,
                    message.get("params"),
                    caller=LOCAL_USER.actor,
                    session_id=self.session_id,
                )
                await self.threads.short(cancel)
            return
        answering = self.answer(message["id"], method, message.get("params"), message)
        if method == "initialize":
            await answering
            return
        task = asyncio.create_task(answering)
        self.answering.add(task)
        task.add_done_callback(self.answering.discard)

    async def answer(self, request_id: Any, method: str, params: Any, message: Message) -> None:
        """Answer a request through the core, writing each of its messages as it comes;
        then record it (mcp_endpoint/observability/request_metrics.py), as the HTTP transports
        do."""
        started = time.perf_counter()
        facts = Facts(key=LOCAL_USER.actor)
        facts.note(message)
        response: Message | None = None
        try:
            reply = await self.threads.short(
                partial(self._execute, request_id, method, params, message, facts)
            )
            if isinstance(reply, Reply):
                async for outgoing in core.messages(reply, self.threads):
                    self.write(outgoing)
                    response = outgoing
            else:
                self.write(reply)
                response = reply
        except RpcError as exc:
            response = _error(request_id, exc.code, exc.message, exc.data)
            self.write(response)
        except Exception:  # never let one request end the connection
            logger.exception("stdio request %s failed", method)
            response = _error(request_id, types.INTERNAL_ERROR, "Internal error; see the log.")
            self.write(response)
        finally:
            # A reply abandoned midway (the connection closing) sent no response.
            if response is not None and "method" in response:
                response = None
            request_metrics.stdio_request_done(response, facts, started)

    def _execute(
        self, request_id: Any, method: str, params: Any, message: Message, facts: Facts
    ) -> Reply | Message:
        """The core's answer to a request (on a thread: it may query); notes the request's
        era, whether its tool is served here, and its trace on `facts`."""
        if facts.tool:
            facts.tool_known = request_metrics.known_tool(facts.tool, self.group)
        # A request without the 2026-07-28 envelope belongs to the 2025 revisions.
        facts.era = SESSION_ERA
        if method == "initialize":
            self.version, initialize = negotiate(params)
            self.capabilities = initialize.capabilities.model_dump(mode="json", exclude_none=True)
            result = initialize_result(self.version, self.group)
            return {"jsonrpc": "2.0", "id": request_id, "result": result}
        if is_modern(message):
            route = envelope.classify_inbound_request(message)
            if isinstance(route, envelope.InboundLadderRejection):
                return _error(request_id, route.code, route.message, route.data)
            version = MODERN_VERSION
            facts.era = MODERN_VERSION
        elif self.version is None:
            return _error(
                request_id,
                types.INVALID_REQUEST,
                "Send initialize first (or the 2026-07-28 _meta envelope with each request).",
            )
        else:
            version = self.version
        reply = execute(
            Request(
                method,
                params,
                version,
                LOCAL_USER,
                request_id=request_id,
                session_id=self.session_id,
                session_log_level=self.log_level,
                session_capabilities=self.capabilities,
                group=self.group,
            )
        )
        facts.trace_id = reply.trace_id
        if isinstance(reply, Answered) and reply.log_level is not None:
            self.log_level = reply.log_level
        return reply


async def serve(
    read_line: Callable[[], Awaitable[str]],
    write_line: Callable[[str], None],
    group: str | None = None,
) -> None:
    """Answer the lines `read_line` returns until it returns "" (the input ended); answers
    go to `write_line`, one JSON message per line, without the newline. `group` serves one
    workflow group's tools alone, as `/mcp/<slug>` does."""

    def write(message: Message) -> None:
        write_line(encode_json_ascii(message).decode())

    database = _PoolConnections()
    try:
        with (
            ThreadPoolExecutor(4, thread_name_prefix="stdio") as short,
            ThreadPoolExecutor(
                settings.GRAPHS_DIRECT_RUN_THREADS, thread_name_prefix="run"
            ) as runs,
        ):
            threads = Threads(short=database.on_thread(short), run=database.on_thread(runs))
            await _answer_lines(read_line, write, StdioConnection(write, threads, group))
    finally:
        # The pools have ended, and their threads with them. Off the event loop: Django
        # refuses to close a connection in a thread that runs one.
        await asyncio.to_thread(database.close)


async def _answer_lines(
    read_line: Callable[[], Awaitable[str]],
    write: Callable[[Message], None],
    connection: StdioConnection,
) -> None:
    """The lines of `connection` answered until the input ends, then its session ended."""
    threads = connection.threads

    async def announce() -> None:
        watcher = list_changes.ListWatcher(list_changes.Watch(connection.group), threads)
        async for method in watcher.changes():
            if connection.version is not None:  # after initialize (2025 revisions)
                write({"jsonrpc": "2.0", "method": method})

    watching = asyncio.create_task(announce())
    try:
        while line := await read_line():
            if line.strip():
                await connection.receive(line)
        # The input ended: a client that sent its requests and closed stdin (a pipe) still
        # gets their answers.
        await asyncio.gather(*connection.answering, return_exceptions=True)
    finally:
        watching.cancel()
        for task in connection.answering:
            task.cancel()
        end = partial(
            sessions.session_end, connection.session_id, reason="The stdio client went away"
        )
        await threads.short(end)
