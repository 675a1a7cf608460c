"""A workflow `tools/call` over HTTP, driven from the event loop while its run goes.

The protocol layer (on a worker thread) checks the call and hands back a `PendingCall`; the
HTTP layer (asgi.py, views.py, sse.py) drives it here, holding no thread while it waits:

- direct mode: the run executes on a thread of `Threads.run` and reports each node as it ends;
- queued mode: the run is sent to the workers and watched in the database, a short look at a
  time (`graphs.control.run_check`), on `Threads.short`.

Each finished node is sent at once as `notifications/progress` when the client gave a progress
token. The call ends with its result; or, after GRAPHS_RUN_WAIT_SECONDS, with a result saying
the run goes on; or, for a 2026-07-28 client that declared the tasks extension, after
MCP_TASK_AFTER_SECONDS with a task handle (tasks.py). A 2026-07-28 client that closes the
connection before the answer cancels the run: that is the era's cancellation signal. A 2025
client's disconnection is not a cancellation, so its run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from django.conf import settings
from django.db import close_old_connections
from mcp import types

from graphs.control import (
    POLL_FIRST_SECONDS,
    next_pause,
    run_cancel,
    run_check,
    run_enqueue,
    run_result_keep,
)
from graphs.models import Run
from graphs.runs import RunOutcome, WorkflowCallError, workflow_call
from graphs.toolset import WorkflowTool
from mcp_endpoint import tasks, workflows

if TYPE_CHECKING:
    from mcp_endpoint.dispatch import CallContext

logger = logging.getLogger(__name__)

T = TypeVar("T")
Blocking = Callable[[Callable[[], T]], Awaitable[T]]


@dataclass(frozen=True)
class Threads:
    """Where the driver sends blocking work: `short` for a query or two, `run` for a whole
    direct run (which holds its thread while its nodes call out)."""

    short: Blocking
    run: Blocking


@dataclass
class PendingCall:
    """A workflow call checked by the protocol layer, to be driven by the HTTP layer."""

    tool: WorkflowTool
    arguments: dict[str, Any]
    caller: str
    session_id: str
    # The JSON-RPC id, as JSON.
    request_id: str
    progress_token: str | int | None
    # A 2026-07-28 client that declared the tasks extension on this request.
    may_become_task: bool
    # 2026-07-28: a closed connection cancels the request.
    cancel_on_disconnect: bool
    # Notifications queued before the call was handed over.
    events: list[dict[str, Any]] = field(default_factory=list)
    # Serialises a result for the request's era (set by rpc.execute).
    finish: Callable[[types.Result], dict[str, Any]] | None = None
    # Answer on an event stream (progress as it happens) rather than with one JSON body.
    stream: bool = False

    def run_call(self) -> dict[str, Any]:
        """The call as `workflow_call` and `run_enqueue` take it."""
        return {
            "name": self.tool.name,
            "arguments": self.arguments,
            "caller": self.caller,
            "session_id": self.session_id,
            "request_id": self.request_id,
            "version": (self.tool.version_id, self.tool.digest),
        }


def pending_call(
    tool: WorkflowTool, arguments: dict[str, Any] | None, context: CallContext
) -> PendingCall:
    """Hand a workflow call over to the HTTP layer."""
    return PendingCall(
        tool=tool,
        arguments=arguments if arguments is not None else {},
        caller=context.caller,
        session_id=context.session_id,
        request_id=context.request_id,
        progress_token=context.progress_token,
        may_become_task=context.stateless and tasks.declared(context.client_capabilities),
        cancel_on_disconnect=context.stateless,
        events=[{"jsonrpc": "2.0", **note} for note in context.notifications],
    )


def _response(call: PendingCall, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": json.loads(call.request_id), "result": result}


def _tool_response(call: PendingCall, result: types.CallToolResult) -> dict[str, Any]:
    return _response(call, call.finish(result))


def _outcome_response(call: PendingCall, outcome: RunOutcome) -> dict[str, Any]:
    """The response to a call whose run has ended (on a thread: see `drive`)."""
    return _tool_response(
        call, workflows.outcome_result(call.tool.name, call.tool.output_schema, outcome)
    )


def _progress(call: PendingCall, done: int, message: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": call.progress_token, "progress": done, "message": message},
    }


def _reporter(
    call: PendingCall, post: Callable[[tuple[Any, ...]], None]
) -> Callable[[int, str], None] | None:
    """What reports finished nodes to the driver; None when the client asked for no
    progress, so that a run does not wake the event loop (nor query, when queued) per node."""
    if call.progress_token is None:
        return None
    return lambda done, message: post(("progress", done, message))


def _direct(call: PendingCall, post: Callable[[tuple[Any, ...]], None]) -> None:
    """Execute the run in this thread (direct mode), posting what happens to the driver."""
    try:
        outcome = workflow_call(
            **call.run_call(),
            progress=_reporter(call, post),
            started=lambda run_id: post(("status", run_id, Run.Status.RUNNING)),
        )
    except WorkflowCallError as exc:
        post(("refused", str(exc)))
        return
    except Exception:
        logger.exception("Workflow call of %s failed before its run ended", call.tool.name)
        post(("refused", f"Workflow {call.tool.name!r} failed on the server; it is logged."))
        return
    if call.may_become_task and outcome.succeeded:
        # The answer may already be a task handle: keep the result for its tasks/get.
        run_result_keep(outcome.run_id, outcome.result)
    post(("done", outcome))


async def _queued(call: PendingCall, post: Callable[[tuple[Any, ...]], None], threads: Threads):
    """Send the run to the workers (queued mode) and watch it until it ends."""
    try:
        run_id = await threads.short(partial(run_enqueue, **call.run_call()))
    except WorkflowCallError as exc:
        post(("refused", str(exc)))
        return
    post(("status", run_id, Run.Status.QUEUED))
    reported, pause, status = 0, POLL_FIRST_SECONDS, Run.Status.QUEUED

    progress = _reporter(call, post)
    while True:
        await asyncio.sleep(pause)
        outcome, reported = await threads.short(partial(run_check, run_id, reported, progress))
        if outcome.status in Run.FINISHED:
            post(("done", outcome))
            return
        if outcome.status != status:
            status = outcome.status
            post(("status", run_id, status))
        pause = next_pause(pause)


def _cancel_in_background(run_id: int) -> None:
    """Cancel a run whose client went away, off the event loop, without waiting for it."""

    def cancel() -> None:
        try:
            run_cancel(run_id=run_id, reason="The client closed the connection before the answer")
        except Exception:
            logger.exception("Cancelling run %s after a disconnect failed", run_id)
        finally:
            close_old_connections()

    asyncio.get_running_loop().run_in_executor(None, cancel)


async def _late_response(
    call: PendingCall, run_id: int | None, status: str, task_due: bool, threads: Threads
) -> dict[str, Any]:
    """The response to a call whose run has not ended in time: a task handle when one is
    due, else a result saying that the run goes on (or that it could not even start)."""
    if run_id is None:
        return _tool_response(
            call,
            workflows.error_result(
                f"Workflow {call.tool.name!r} could not be started within "
                f"{settings.GRAPHS_RUN_WAIT_SECONDS:g} s; the server is overloaded. Try again."
            ),
        )
    if task_due:
        return _response(call, await threads.short(partial(tasks.created, run_id, call.caller)))
    return _tool_response(call, workflows.still_going(call.tool.name, run_id, status))


async def drive(call: PendingCall, threads: Threads) -> AsyncIterator[dict[str, Any]]:
    """The messages to send for a call, in order: its notifications as they happen, then
    its response. Closing the iterator early (the client left) cancels the run when the
    request's era says so."""
    for event in call.events:
        yield event
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()

    def post(item: tuple[Any, ...]) -> None:
        # Once the answer is sent the loop may be gone; the run's history has the rest.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(inbox.put_nowait, item)

    if settings.EXECUTION_MODE == "queued":
        producer = asyncio.ensure_future(_queued(call, post, threads))
    else:
        producer = asyncio.ensure_future(threads.run(partial(_direct, call, post)))
    now = loop.time()
    give_up_at = now + settings.GRAPHS_RUN_WAIT_SECONDS
    task_at = now + settings.MCP_TASK_AFTER_SECONDS if call.may_become_task else math.inf
    run_id: int | None = None
    status = Run.Status.QUEUED
    response: dict[str, Any] | None = None
    try:
        while response is None:
            deadline = min(give_up_at, task_at if run_id is not None else math.inf)
            try:
                kind, *data = await asyncio.wait_for(inbox.get(), max(deadline - loop.time(), 0))
            except TimeoutError:
                task_due = loop.time() >= task_at
                response = await _late_response(call, run_id, status, task_due, threads)
            else:
                if kind == "progress":
                    yield _progress(call, *data)
                elif kind == "status":
                    run_id, status = data
                elif kind == "refused":
                    response = _tool_response(call, workflows.error_result(data[0]))
                else:
                    # Checking the result against the outputSchema and serialising it grow
                    # with the result, which a caller's arguments can make large.
                    response = await threads.short(partial(_outcome_response, call, data[0]))
        yield response
    finally:
        if settings.EXECUTION_MODE == "queued":
            producer.cancel()  # stop watching; the run goes on in its worker
        if response is None and run_id is not None and call.cancel_on_disconnect:
            _cancel_in_background(run_id)


async def settle(call: PendingCall, threads: Threads) -> dict[str, Any]:
    """Drive a call to its response (for a client that takes one JSON body)."""
    response: dict[str, Any] = {}
    async for message in drive(call, threads):
        response = message
    return response
