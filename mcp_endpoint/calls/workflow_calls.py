"""A workflow's `tools/call`: its run followed (graphs/execution/follow.py) and told as MCP
messages.

Each finished node goes out at once as `notifications/progress` when the client gave a
progress token. The call ends with its result; or, after GRAPHS_RUN_WAIT_SECONDS, with a result
saying the run goes on; or, for a 2026-07-28 client that declared the tasks extension, after
MCP_TASK_AFTER_SECONDS with a task handle (task_extension.py). A 2026-07-28 client that stops
listening before the answer (it closed the connection) cancels the run: that is the era's
cancellation signal. A 2025 client cancels with `notifications/cancelled`, or by ending its
session (mcp_endpoint/protocol/sessions.py).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from mcp import types

from graphs.engine.nesting import MAX_DEPTH, deeper_than
from graphs.execution.control import RunNotFound, run_cancel
from graphs.execution.follow import (
    ApprovalAwaited,
    NodeFinished,
    RunEvent,
    RunStarted,
    RunWaiting,
    Threads,
    run_follow,
)
from graphs.execution.runs import RunOutcome, RunRequest, WorkflowCallError
from graphs.execution.toolset import WorkflowTool
from mcp_endpoint.calls import caller_approvals, task_extension, workflow_answers
from mcp_endpoint.calls.caller_approvals import NOT_ASKED, Channel
from mcp_endpoint.jsonrpc.interaction import StateBinding
from mcp_endpoint.jsonrpc.results import Era

logger = logging.getLogger(__name__)

Message = dict[str, Any]
# How soon a call whose task is due asks again when its run had no row to name yet.
TASK_AGAIN_SECONDS = 0.05
# A run's outcome this small (values, and characters of text) is answered in the event loop:
# shaping it takes tens of microseconds, less than a hop to a thread and back. A larger one,
# whose size the caller's arguments may choose, is answered on a thread.
SMALL_VALUES = 64
SMALL_CHARS = 4096


@dataclass(frozen=True)
class WorkflowCall:
    """A workflow call checked by the core, to be followed as its answer is sent."""

    tool: WorkflowTool
    request: RunRequest
    # The JSON-RPC id of the call, as sent.
    request_id: Any
    # The era the call's result is shaped for.
    era: Era
    progress_token: str | int | None
    # A 2026-07-28 client that declared the tasks extension on this request.
    may_become_task: bool
    # 2026-07-28: a client that stops listening cancels the request.
    cancel_on_disconnect: bool
    # How the client is asked at an approval node that asks the caller (caller_approvals).
    channel: Channel = NOT_ASKED
    # A 2026-07-28 call answering a round: the run it continues (none is started).
    continues: int | None = None


@dataclass(frozen=True)
class ClientAsked:
    """Not a message: the core is to send the client `elicitation/create` with `params` on
    the call's stream, and give its answer to `caller_approvals.client_answered`."""

    run_id: int
    params: dict[str, Any]


def _response(call: WorkflowCall, result: Message) -> Message:
    return {"jsonrpc": "2.0", "id": call.request_id, "result": result}


def _tool_response(call: WorkflowCall, result: types.CallToolResult) -> Message:
    return _response(call, call.era.shape("tools/call", result))


def _outcome_response(call: WorkflowCall, outcome: RunOutcome) -> Message:
    """The response to a call whose run has ended (on a thread unless `_answers_in_loop`: it
    may query, and its work grows with the result). A result too deep to be written
    (graphs/engine/nesting.py) is answered as an error naming the run."""
    if outcome.succeeded and deeper_than(outcome.result, MAX_DEPTH):
        return _unanswerable(
            call, outcome.run_id, f"its result nests more than {MAX_DEPTH} levels deep"
        )
    return _tool_response(call, workflow_answers.call_result(call.tool, outcome, call.request))


def _unanswerable(call: WorkflowCall, run_id: int, why: str) -> Message:
    """The response to a call whose run ended but whose answer could not be made."""
    return _tool_response(
        call,
        workflow_answers.error_result(
            f"Workflow {call.tool.name!r} ran (run {run_id}), but its answer could not be "
            f"made: {why}. The run is in the history (get_run); change the workflow so that "
            "it returns a value that can be answered.",
            run_id=run_id,
        ),
    )


def _progress(call: WorkflowCall, count: int, message: str) -> Message:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": call.progress_token, "progress": count, "message": message},
    }


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
    call: WorkflowCall,
    started: RunStarted | RunWaiting | None,
    task_due: bool,
    threads: Threads,
) -> Message | None:
    """The response to a call whose run has not ended in time: a task handle when one is
    due, else a result saying that the run goes on (or that it could not even start: its
    caller's share of the run threads was taken, or the server is overloaded). None when the
    task is due but its run has no row yet (a direct run before its first write,
    graphs/execution/recorder.py): a task must name a run that any instance finds."""
    if isinstance(started, RunWaiting):
        return _tool_response(
            call,
            workflow_answers.error_result(
                f"Workflow {call.tool.name!r} could not start within "
                f"{settings.GRAPHS_RUN_WAIT_SECONDS:g} s: your calls already had "
                f"{started.share} runs going, the most one caller may have at once "
                "(GRAPHS_RUN_THREADS_PER_CALLER), and this one waited for one of them to end. "
                "Nothing ran: try again when your other calls have answered."
            ),
        )
    if started is None:
        return _tool_response(
            call,
            workflow_answers.error_result(
                f"Workflow {call.tool.name!r} could not be started within "
                f"{settings.GRAPHS_RUN_WAIT_SECONDS:g} s; the server is overloaded. Try again."
            ),
        )
    if task_due:
        try:
            handle = await threads.short(
                partial(task_extension.created, started.run_id, call.request.caller)
            )
        except RunNotFound:
            return None
        return _response(call, handle)
    return _tool_response(
        call, workflow_answers.still_going(call.tool.name, started.run_id, started.status)
    )


def _answers_in_loop(call: WorkflowCall, outcome: RunOutcome) -> bool:
    """Whether the response to a call whose run ended is small fixed work that makes no
    query: a workflow's own call (a test run's answer reads its history) whose result and
    error are small. Found out at a cost bounded by SMALL_VALUES, whatever the result's size."""
    if call.request.is_test or len(outcome.error) > SMALL_CHARS:
        return False
    pending, values, chars = [outcome.result], 0, 0
    while pending:
        value = pending.pop()
        values += 1
        if isinstance(value, dict | list):
            # Its length is read before its items: a large one is refused as cheaply.
            if values + len(value) > SMALL_VALUES:
                return False
            if isinstance(value, dict):
                chars += sum(len(str(key)) for key in value)
                value = list(value.values())
            pending += value
        elif isinstance(value, str):
            chars += len(value)
        if values > SMALL_VALUES or chars > SMALL_CHARS:
            return False
    return True


async def _ended(call: WorkflowCall, outcome: RunOutcome, threads: Threads) -> Message:
    """The response to a call whose run has ended: in the event loop when that is small work
    (`_answers_in_loop`), else on a thread; whatever fails while it is made ends the call too,
    saying why (the run ended all the same)."""
    try:
        if _answers_in_loop(call, outcome):
            return _outcome_response(call, outcome)
        response: Message = await threads.short(partial(_outcome_response, call, outcome))
    except Exception as exc:
        logger.exception("Making the answer of run %s failed", outcome.run_id)
        return _unanswerable(call, outcome.run_id, f"{type(exc).__name__}: {exc}"[:300])
    return response


async def _asked_otherwise(call: WorkflowCall, event: ApprovalAwaited, threads: Threads) -> Message:
    """The response to a call whose run waits for its client's answer, where the client is
    not asked on the call's stream: a round (InputRequiredResult), a task in input_required,
    or, for a client that cannot be asked, the error of its failed run."""
    waiting = event.waiting
    kind = call.channel.kind
    if kind == "rounds":
        binding = StateBinding(
            call.request.caller, "tools/call", call.tool.name, call.request.arguments
        )
        result = caller_approvals.round_result(waiting.run_id, waiting, binding)
        return _response(call, call.era.shape("tools/call", result))
    if kind == "task":
        handle = await threads.short(
            partial(task_extension.created, waiting.run_id, call.request.caller)
        )
        return _response(call, handle)
    why = call.channel.why or "it asks no questions midway"
    message = await threads.short(
        partial(caller_approvals.unreachable, waiting.run_id, call.tool.name, waiting, why)
    )
    return _tool_response(call, workflow_answers.error_result(message, run_id=waiting.run_id))


def _awaiting(event: ApprovalAwaited) -> str:
    waiting = event.waiting
    who = "its caller's answer" if waiting.approvers == "caller" else "approval"
    return f"waiting for {who} at node {waiting.node}: {waiting.message}"[:500]


async def follow(call: WorkflowCall, threads: Threads) -> AsyncIterator[Message | ClientAsked]:
    """The messages to send for a call after the core's: its progress as it happens, then
    its response; and a `ClientAsked` where the run waits for its client's answer. Closing
    the iterator early (the client left) cancels the run when the request's era says so."""
    events = run_follow(
        call.request,
        threads,
        report_nodes=call.progress_token is not None,
        keep_result=call.may_become_task,
        continues=call.continues,
    )
    loop = asyncio.get_running_loop()
    now = loop.time()
    give_up_at = now + settings.GRAPHS_RUN_WAIT_SECONDS
    task_at = now + settings.MCP_TASK_AFTER_SECONDS if call.may_become_task else math.inf
    started: RunStarted | None = None
    waiting: RunWaiting | None = None
    response: Message | None = None
    count = 0  # nodes reported so far
    # The next event, awaited across a deadline that passes without it: cancelling the read
    # would end `events`, and a task that is due may have to wait for its run's row.
    reading: asyncio.Task[RunEvent] | None = None
    try:
        while response is None:
            deadline = min(give_up_at, task_at if started is not None else math.inf)
            reading = reading or asyncio.ensure_future(anext(events))
            if not (await asyncio.wait({reading}, timeout=max(deadline - loop.time(), 0)))[0]:
                task_due = loop.time() >= task_at
                response = await _late_response(call, started or waiting, task_due, threads)
                if response is None:
                    task_at = loop.time() + TASK_AGAIN_SECONDS
                continue
            arrived, reading = reading, None
            try:
                event = arrived.result()
            except WorkflowCallError as exc:
                response = _tool_response(call, workflow_answers.error_result(str(exc)))
            else:
                if isinstance(event, NodeFinished):
                    count = event.count
                    yield _progress(call, count, event.message)
                elif isinstance(event, ApprovalAwaited):
                    started = RunStarted(event.waiting.run_id, "waiting")
                    if call.progress_token is not None:
                        yield _progress(call, count, _awaiting(event))
                    if event.waiting.approvers == "caller":
                        if call.channel.kind == "stream":
                            params = caller_approvals.elicitation(event.waiting)
                            yield ClientAsked(event.waiting.run_id, params)
                            # The person's time to answer is not the run's.
                            give_up_at = loop.time() + settings.GRAPHS_RUN_WAIT_SECONDS
                        else:
                            response = await _asked_otherwise(call, event, threads)
                elif isinstance(event, RunStarted):
                    started = event
                elif isinstance(event, RunWaiting):
                    waiting = event
                else:
                    # Checking the result against the outputSchema and serialising it grow
                    # with the result, which a caller's arguments can make large: on a thread.
                    response = await _ended(call, event.outcome, threads)
        yield response
    finally:
        if reading is not None:
            reading.cancel()  # ends `events`, as its caller leaving does
            await asyncio.wait({reading})
        await events.aclose()
        if response is None and started is not None and call.cancel_on_disconnect:
            _cancel_in_background(started.run_id)
