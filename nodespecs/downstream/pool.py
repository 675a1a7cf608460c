"""The pool of live sessions with downstream MCP servers, one pool per process.

Graph runs and provider refreshes call servers synchronously, from many threads at once.
Starting a stdio server costs up to seconds, so each distinct `Connection` keeps one live
session that every caller shares. The sessions live on one background thread running an
asyncio loop: each is a task holding the SDK's `Client` open (anyio requires a context to be
left by the task that entered it), and callers hand coroutines to that loop and wait
(`request`). No lock is held while a server is awaited, so a slow or hung server delays only
its own callers, and every call has a deadline (`DownstreamTimeout`).

A server that dies is restarted by the next call. A call finding the server already gone
(it exited while idle; nothing was sent yet) goes to the restarted server transparently; a
call in flight when the server dies fails with `DownstreamError` and is not repeated, since
a tool call may have had effects. A session that breaks under a call (its connection closed,
its transport failed) is stopped, so the next call starts afresh.

A call that times out may have met a slow tool or a wedged server: the session is probed, and
stopped if the probe gets no answer within `PROBE_SECONDS`; calls arriving meanwhile wait for
the verdict, then go to the same session or a restarted one.

Sessions unused for `IDLE_SECONDS` are closed; `close_all` closes them all (at exit too), and
a forked child starts a pool of its own. Each request's duration and failure, and the number
of sessions, are recorded for operators (`nodespecs.telemetry`). What is called, and what is
done with the answers, is `nodespecs.downstream.client`'s.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import math
import os
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import anyio
from django.conf import settings
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED

from nodespecs import telemetry
from nodespecs.downstream.connection import Connection
from nodespecs.downstream.diagnostics import Diagnostics
from nodespecs.downstream.errors import DownstreamError, DownstreamTimeout, explain
from nodespecs.downstream.transports import logger, open_transport

# A synchronous caller waits this much longer than the call's deadline, which the loop
# itself enforces; only a wedged loop makes the difference matter.
_WAIT_GRACE_SECONDS = 5.0
# How long `close_all` waits for servers to stop (the SDK bounds a stdio server's to ~6 s).
_CLOSE_SECONDS = 15.0
# A session unused this long is closed: the servers of providers whose settings changed, or
# that were deleted, would otherwise run until the process ends.
IDLE_SECONDS = 600.0
# After a call times out, a server that does not answer a probe (tools/list: `ping` is gone
# from the 2026-07-28 protocol) within this is wedged; a busy server answers in milliseconds.
PROBE_SECONDS = 2.0

T = TypeVar("T")


class _Live:
    """One session with one server: a task on the pool's loop that holds the client open.

    Created and used on the loop thread only.
    """

    def __init__(self, pool: _Pool, connection: Connection) -> None:
        self.pool = pool
        self.connection = connection
        self.diagnostics = Diagnostics(
            connection.secrets, max_result_bytes=settings.MCP_CLIENT_MAX_RESULT_BYTES
        )
        self.client: Client | None = None
        self.error: DownstreamError | None = None
        self.stopped = False
        self.calls_in_flight = 0
        self.last_used = time.monotonic()
        # Cleared while a probe checks the server after a call timed out.
        self.responsive = asyncio.Event()
        self.responsive.set()
        # Set once the session is usable or has failed to start.
        self.settled = asyncio.Event()
        # Created here, entered by the task: `stop()` may come before the task first runs.
        self.scope = anyio.CancelScope()
        self.task = asyncio.get_running_loop().create_task(self._hold())

    @property
    def usable(self) -> bool:
        return self.client is not None and not (self.stopped or self.diagnostics.stream_ended)

    def stop(self) -> None:
        """End the session (and the stdio server) and take it out of the pool."""
        self.stopped = True
        self.pool.forget(self)
        self.scope.cancel()

    def check_responsive(self) -> None:
        """After a call timed out: probe the server in the background, and stop the session
        if it does not answer (a wedged server would time out every later call too)."""
        if self.stopped or self.client is None or not self.responsive.is_set():
            return
        self.responsive.clear()
        self.pool.keep(asyncio.get_running_loop().create_task(self._probe(self.client)))

    async def _probe(self, client: Client) -> None:
        try:
            with anyio.fail_after(PROBE_SECONDS):
                await client.list_tools()
        except Exception:  # no answer in time, or the session broke
            logger.warning(
                "%s did not answer tools/list within %g s after a call timed out: it is stopped, "
                "and the next call starts it again.",
                self.connection.describe(),
                PROBE_SECONDS,
            )
            self.stop()
        finally:
            self.responsive.set()

    def _hung_up(self) -> None:
        # The server closed its side (exited, or the HTTP session broke): retire the session
        # so the next call starts afresh, after the SDK has failed the calls in flight.
        asyncio.get_running_loop().call_soon(self.stop)

    async def _hold(self) -> None:
        connection = self.connection
        transport = open_transport(connection, self.diagnostics, on_end=self._hung_up)
        client = Client(transport, cache=None)
        try:
            with self.scope:
                self.scope.deadline = anyio.current_time() + connection.timeout_seconds
                async with client:
                    self.scope.deadline = math.inf
                    self.client = client
                    self.settled.set()
                    await anyio.sleep_forever()
            if self.client is None:
                self.error = self._start_interrupted()
        except Exception as exc:
            if self.client is None:
                self.error = await explain(
                    exc, connection, self.diagnostics, during="while starting"
                )
            else:
                # Nobody is waiting for this session's start to hear about it: log it.
                error = await explain(exc, connection, self.diagnostics, during="while connected")
                logger.warning("%s", error)
        finally:
            self.pool.forget(self)
            self.settled.set()

    def _start_interrupted(self) -> DownstreamError:
        where = self.connection.describe()
        if self.stopped:
            return DownstreamError(f"{where} was closed while it was starting.")
        stderr = self.diagnostics.stderr
        quoted = f"; {stderr.quote()}" if stderr is not None else ""
        return DownstreamTimeout(
            f"{where} did not finish starting within {self.connection.timeout_seconds:g} s"
            f"{quoted}. Check that it starts when run by hand, or raise the provider's timeout."
        )

    async def session(self) -> Client:
        """The connected client, once started; raises the reason it could not start."""
        await self.settled.wait()
        if self.client is None:
            error = self.error or self._start_interrupted()
            # A fresh exception per caller: many callers may be waiting on one start.
            raise type(error)(str(error))
        return self.client


class _Pool:
    """The loop thread and the live sessions on it (`live` is touched on that thread only)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.live: dict[Connection, _Live] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="mcp-client-pool", daemon=True
        )
        self.thread.start()
        self.loop.call_soon_threadsafe(self._close_idle)

    def _close_idle(self) -> None:
        now = time.monotonic()
        for live in list(self.live.values()):
            idle = now - live.last_used > IDLE_SECONDS
            if idle and live.usable and not live.calls_in_flight:
                live.stop()
        self.loop.call_later(IDLE_SECONDS / 4, self._close_idle)

    def forget(self, live: _Live) -> None:
        if self.live.get(live.connection) is live:
            del self.live[live.connection]
            telemetry.pool_size_changed(len(self.live))

    def keep(self, task: asyncio.Task[None]) -> None:
        """Hold a task of the loop until it is done (`close` waits for these)."""
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _live_for(self, connection: Connection) -> _Live:
        live = self.live.get(connection)
        if live is None:
            live = self.live[connection] = _Live(self, connection)
            self.keep(live.task)
            telemetry.pool_size_changed(len(self.live))
        return live

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run a coroutine on the loop and wait for it (from any thread but the loop's)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout + _WAIT_GRACE_SECONDS)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise DownstreamTimeout(
                f"The MCP client pool did not answer within {timeout:g} s; "
                "its event loop is blocked (see the logs)."
            ) from None

    async def request(
        self,
        connection: Connection,
        what: str,
        send: Callable[[Client], Awaitable[T]],
        timeout: float,
    ) -> T:
        try:
            with anyio.fail_after(timeout):
                return await self._attempt(connection, what, send)
        except TimeoutError:
            live = self.live.get(connection)
            seen = live.diagnostics.oddities() if live is not None else ""
            raise DownstreamTimeout(
                f"{connection.describe()} did not answer {what} within {timeout:g} s{seen}. "
                "Raise the timeout if the tool is slow, or check that the server is responsive."
            ) from None

    async def _attempt(
        self, connection: Connection, what: str, send: Callable[[Client], Awaitable[T]]
    ) -> T:
        for _ in range(2):
            live = self._live_for(connection)
            client = await live.session()
            await live.responsive.wait()
            if not live.usable:
                # It hung up while idle, or was found wedged: nothing was sent, so the
                # restarted server gets it.
                continue
            live.calls_in_flight += 1
            try:
                return await send(client)
            except anyio.get_cancelled_exc_class():
                # The call's deadline passed (or the pool is closing).
                live.check_responsive()
                raise
            except Exception as exc:
                if _breaks_session(exc):
                    live.stop()
                during = f"while handling {what}"
                raise await explain(exc, connection, live.diagnostics, during=during) from None
            finally:
                live.calls_in_flight -= 1
                live.last_used = time.monotonic()
        raise DownstreamError(
            f"{connection.describe()} hung up again right after starting; check its logs."
        )

    async def _close(self) -> None:
        for live in list(self.live.values()):
            live.stop()
        with anyio.move_on_after(_CLOSE_SECONDS):
            await asyncio.gather(*self.tasks, return_exceptions=True)

    def shutdown(self) -> None:
        """Stop every session and server, then the loop and its thread."""
        try:
            self.run(self._close(), _CLOSE_SECONDS)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(_CLOSE_SECONDS)
            if not self.thread.is_alive():
                self.loop.close()


def _breaks_session(exc: Exception) -> bool:
    """Whether a call's failure leaves its session unusable: anything but the server's own
    error answer or an answer that failed validation (the session itself is then fine)."""
    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED
    return not isinstance(exc, ValueError)  # pydantic's ValidationError is a ValueError


_pool: _Pool | None = None
_pool_lock = threading.Lock()
# Pools inherited through fork: their loop thread did not survive, and their servers belong
# to the parent. They are kept (never used, never closed) so that garbage collection does not
# try to close a loop that the parent process is still running.
_forked_away: list[_Pool] = []


def _current_pool() -> _Pool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = _Pool()
        return _pool


def request(
    connection: Connection,
    what: str,
    send: Callable[[Client], Awaitable[T]],
    timeout: float | None,
    *,
    trace_id: str = "",
) -> T:
    """Send a request (`what`, as messages name it) to the server's session, started if need
    be, and wait for its answer: at most `timeout` seconds (default: the connection's).
    `trace_id`, the trace the request belongs to, goes to its failure's log line."""
    deadline = connection.timeout_seconds if timeout is None else timeout
    pool = _current_pool()
    started = time.perf_counter()
    try:
        answer = pool.run(pool.request(connection, what, send, deadline), deadline)
    except Exception as exc:
        elapsed = time.perf_counter() - started
        telemetry.downstream_done(connection, what, elapsed, exc, trace_id=trace_id)
        raise
    telemetry.downstream_done(connection, what, time.perf_counter() - started)
    return answer


def close_all() -> None:
    """Close every session and stop every stdio server this process started."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown()


def pool_size() -> int:
    """How many sessions are live or starting."""
    pool = _pool
    # len() of a dict is atomic, so reading it from outside the loop thread is safe.
    return 0 if pool is None else len(pool.live)


def _forget_after_fork() -> None:
    global _pool, _pool_lock
    if _pool is not None:
        _forked_away.append(_pool)
    # The lock may have been held by a thread that does not exist in the child.
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
atexit.register(close_all)
