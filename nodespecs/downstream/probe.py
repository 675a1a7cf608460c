"""One fresh connection to a downstream MCP server, to see whether it works: start or reach it,
initialize, list its tools, close, each step timed.

The pool (`nodespecs.downstream.pool`) is left alone on purpose: a session it holds would hide
whether the server starts and answers *now*, and a probe must never disturb the sessions that
graph runs share. The probe goes through the same transports as every call
(`nodespecs.downstream.transports`: the egress policy, the size limit, the redaction of secrets),
and a failure is explained with the same words (`nodespecs.downstream.errors.explain`), with its
class (`errors.failure_kind`) for whoever has to say it plainly.

The whole probe has one deadline. It runs on a thread of its own with its own event loop, and the
caller waits for its verdict at most the deadline and a short grace: a server that hangs, or a
transport slow to close, never holds the caller longer.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from dataclasses import dataclass

import anyio
from django.conf import settings
from mcp import Client
from mcp.types import Tool

from nodespecs.downstream.client import all_tools
from nodespecs.downstream.connection import Connection
from nodespecs.downstream.diagnostics import Diagnostics
from nodespecs.downstream.errors import DownstreamError, Failure, explain, failure_kind
from nodespecs.downstream.transports import open_transport

# How much longer than its deadline the caller waits for the probe's own verdict (its loop cuts
# it off at the deadline, then explains what it saw); past this the caller gives the verdict
# itself, and the probe's thread finishes closing the connection on its own.
_GRACE_SECONDS = 0.5


@dataclass(frozen=True)
class Probed:
    """What a probe that worked saw: the server's name and version as its initialize result
    gives them (empty when it gives none), the protocol version agreed, its tools, and how
    long connecting (starting it, initialize) and listing the tools took, in milliseconds."""

    server_name: str
    server_version: str
    protocol_version: str
    tools: tuple[Tool, ...]
    connect_ms: float
    list_ms: float


class ProbeFailed(DownstreamError):
    """A probe that did not work: the message says what happened and what to check;
    `failure` is its class, and `elapsed_ms` how long the probe ran until then."""

    def __init__(self, message: str, *, failure: Failure, elapsed_ms: float) -> None:
        super().__init__(message)
        self.failure = failure
        self.elapsed_ms = elapsed_ms


def probe(connection: Connection, *, timeout: float) -> Probed:
    """Connect to the server afresh, initialize, list all its tools and close, within
    `timeout` seconds in all. Returns what it saw; raises `ProbeFailed` saying why not."""
    diagnostics = Diagnostics(
        connection.secrets, max_result_bytes=settings.MCP_CLIENT_MAX_RESULT_BYTES
    )
    verdicts: queue.SimpleQueue[Probed | ProbeFailed] = queue.SimpleQueue()
    started = time.perf_counter()

    def run() -> None:
        asyncio.run(_probe(connection, diagnostics, timeout, started, verdicts))

    threading.Thread(target=run, name=f"mcp-probe-{connection.name}", daemon=True).start()
    try:
        verdict = verdicts.get(timeout=timeout + _GRACE_SECONDS)
    except queue.Empty:
        # Still closing the connection (a stdio server slow to stop): what it saw so far is
        # the verdict.
        verdict = _timed_out(connection, diagnostics, timeout, "while starting", started)
    if isinstance(verdict, ProbeFailed):
        raise verdict
    return verdict


def _elapsed_ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _timed_out(
    connection: Connection, diagnostics: Diagnostics, timeout: float, stage: str, started: float
) -> ProbeFailed:
    """No answer in time; "not an MCP server" when what it sent before it fell silent was not
    JSON-RPC."""
    seen = diagnostics.oddities()
    if diagnostics.stderr is not None and not diagnostics.class_only:
        seen += f"; {diagnostics.stderr.quote()}"
    return ProbeFailed(
        f"{connection.describe()} did not answer within {timeout:g} s {stage}{seen}. Check that "
        "the server is up and answers at this address, or raise the provider's timeout if it "
        "is slow to start.",
        failure=failure_kind(TimeoutError(), connection, diagnostics),
        elapsed_ms=_elapsed_ms(started),
    )


async def _probe(
    connection: Connection,
    diagnostics: Diagnostics,
    timeout: float,
    started: float,
    verdicts: queue.SimpleQueue[Probed | ProbeFailed],
) -> None:
    """Probe the server, putting the verdict in `verdicts` as soon as it is known: a probe
    that worked is told before the connection closes."""
    transport = open_transport(connection, diagnostics, on_end=lambda: None)
    stage = "while starting"
    try:
        with anyio.fail_after(timeout):
            async with Client(transport, cache=None) as client:
                connect_ms = _elapsed_ms(started)
                stage = "while listing its tools"
                listed = time.perf_counter()
                tools = await all_tools(connection, client)
                info = client.server_info
                verdicts.put(
                    Probed(
                        server_name=info.name if info is not None else "",
                        server_version=info.version if info is not None else "",
                        protocol_version=client.protocol_version,
                        tools=tuple(tools),
                        connect_ms=connect_ms,
                        list_ms=_elapsed_ms(listed),
                    )
                )
    except TimeoutError:
        verdicts.put(_timed_out(connection, diagnostics, timeout, stage, started))
    except Exception as exc:
        error = await explain(exc, connection, diagnostics, during=stage)
        failure = failure_kind(exc, connection, diagnostics)
        verdicts.put(ProbeFailed(str(error), failure=failure, elapsed_ms=_elapsed_ms(started)))
