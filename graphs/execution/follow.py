"""Following a workflow call from the caller's side, whichever way it executes.

`run_follow(request, threads)` is the one place where a call becomes a run and is watched until it
ends; every transport reaches it through the MCP core (mcp_endpoint/calls/workflow_calls.py). It
chooses once, by `EXECUTION_MODE`:

- direct (the default): the run executes on a thread of `threads.run` in this process and
  reports each node as it ends;
- queued: the run is recorded and sent to the workers, then watched in the database, a short
  look at a time (`control.run_check`) on `threads.short`.

In direct mode a caller has at most its share of the run threads (`Threads.run_share`,
GRAPHS_RUN_THREADS_PER_CALLER): a call beyond it waits its turn (`RunWaiting`), and other
callers' runs start meanwhile (graphs/execution/direct_turns.py).

It yields `RunWaiting` when the call waits for its caller's share, `RunStarted` (with the
run's id, and again when its status changes), a `NodeFinished` per finished node when the
request asks for them, `ApprovalAwaited` each time the run stops at an approval node, and ends
with `RunEnded` (the run's `RunOutcome`). A run waiting at an approval node holds no thread:
from then on it is watched in the database in either mode, as a queued run is, wherever the
decision lets it go on. A call that cannot
run raises `WorkflowCallError` and records nothing. A caller that stops listening early (it
gave up waiting, or its client went away) stops the watching only: the run goes on, and ends
in the history; cancelling it is the caller's decision (`control.run_cancel`). But a direct
run that has not started by then never does: nobody waits for it any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from django.conf import settings

from graphs.execution.approvals.waits import WaitingFor, waiting_for
from graphs.execution.control import (
    POLL_FIRST_SECONDS,
    next_pause,
    run_check,
    run_ended_nodes,
    run_enqueue,
    run_result_keep,
)
from graphs.execution.direct_turns import SHARES, Ticket
from graphs.execution.recorder import Progress
from graphs.execution.runs import RunOutcome, RunRequest, WorkflowCallError, workflow_call
from graphs.models import Run

logger = logging.getLogger(__name__)

T = TypeVar("T")
Blocking = Callable[[Callable[[], T]], Awaitable[T]]


@dataclass(frozen=True)
class Threads:
    """Where blocking work goes: `short` for a query or two, `run` for a whole direct run
    (which holds its thread while its nodes call out). The transport provides them."""

    short: Blocking[Any]
    run: Blocking[Any]
    # The most runs one caller may have on `run` at once (GRAPHS_RUN_THREADS_PER_CALLER), for
    # a pool that serves many callers; None for one that serves one (stdio's).
    run_share: int | None = None


@dataclass(frozen=True)
class RunStarted:
    """The run is recorded (`queued` or `running`), or its status changed."""

    run_id: int
    status: str


@dataclass(frozen=True)
class RunWaiting:
    """The call waits for its turn: its caller already has `share` runs on the threads."""

    share: int


@dataclass(frozen=True)
class NodeFinished:
    """A node ended: the count of nodes ended so far, and which one and how."""

    count: int
    message: str


@dataclass(frozen=True)
class ApprovalAwaited:
    """The run stopped at an approval node and waits for a decision: what it waits for."""

    waiting: WaitingFor


@dataclass(frozen=True)
class RunEnded:
    """The run ended: its outcome."""

    outcome: RunOutcome


RunEvent = RunWaiting | RunStarted | NodeFinished | ApprovalAwaited | RunEnded

# What the run's side posts to the follower: an event, or why the call could not run.
_Posted = RunEvent | WorkflowCallError


async def run_follow(
    request: RunRequest,
    threads: Threads,
    *,
    report_nodes: bool = False,
    keep_result: bool = False,
    continues: int | None = None,
) -> AsyncGenerator[RunEvent, None]:
    """The events of a call's run until it ends (see the module docstring).

    `report_nodes` asks for a `NodeFinished` per node (else a run does not wake the event
    loop, nor query when queued, per node); `keep_result` keeps a direct run's whole result
    where another process can fetch it later (`control.run_result`), for a caller that may
    come back for it (an MCP task); `continues` follows a run that an earlier call started
    and that this one answered for (it starts none)."""
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[_Posted] = asyncio.Queue()

    def post(item: _Posted) -> None:
        # Once the follower has gone the loop may be gone too; the history has the rest.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(inbox.put_nowait, item)

    queued = settings.EXECUTION_MODE == "queued"
    ticket: Ticket | None = None
    if continues is not None:
        queued = True  # nothing runs here: as a queued run, it is watched
        producer = asyncio.ensure_future(_continued(continues, post, threads, report_nodes))
    elif queued:
        producer = asyncio.ensure_future(_queued(request, post, threads, report_nodes))
    else:
        ticket = Ticket(request.caller, request.session_id, request.request_id)
        direct = partial(_direct, request, post, report_nodes, keep_result, ticket)
        producer = asyncio.ensure_future(
            _direct_then_watched(request.caller, threads, direct, post, report_nodes)
        )
    producer.add_done_callback(partial(_told_if_failed, request.name, post))
    announced = False
    try:
        while True:
            item = await inbox.get()
            if isinstance(item, WorkflowCallError):
                raise item
            announced = announced or isinstance(item, RunStarted)
            yield item
            if isinstance(item, RunEnded):
                return
    finally:
        if queued:
            producer.cancel()  # stop watching; the run goes on in its worker
        elif ticket is not None:
            if not announced:
                # Nobody was told of a run, and nobody waits for it: it must not start.
                ticket.leave(_LEFT)
                producer.cancel()  # ends a wait for the caller's turn; a thread's run goes on
            ticket.close()


_LEFT = "The caller left before its run started (it went away or stopped waiting)"


def _told_if_failed(
    name: str, post: Callable[[_Posted], None], producer: asyncio.Future[None]
) -> None:
    """Tell the follower when the side that runs or watches the call failed outright: it
    would otherwise wait for an event that never comes, until it gives up."""
    if producer.cancelled() or producer.exception() is None:
        return
    logger.error("Following the call of %s failed", name, exc_info=producer.exception())
    post(WorkflowCallError(f"Workflow {name!r} failed on the server; it is logged."))


async def _in_turn(
    caller: str, threads: Threads, direct: Callable[[], T], post: Callable[[_Posted], None]
) -> T:
    """Run `direct` on a run thread once `caller` has a place in its share of them; what it
    returns."""
    share = threads.run_share
    if share is not None:
        turn = SHARES.claim(caller, share)
        if turn is not None:
            post(RunWaiting(share))
            await SHARES.wait(caller, turn)
    if share is None:
        return await asyncio.shield(threads.run(direct))

    def direct_in_place() -> T:
        # The place is given back by the run's thread when it is done with it, not by this
        # task: a follower that leaves cancels this task, and the thread goes on until
        # `direct` sees it left (nor by the event loop, which may have closed by then).
        try:
            return direct()
        finally:
            SHARES.give_back(caller)

    try:
        running = threads.run(direct_in_place)
    except BaseException:
        SHARES.give_back(caller)
        raise
    return await asyncio.shield(running)


@dataclass(frozen=True)
class _Paused:
    """A direct run stopped at an approval node: its id, the count of its nodes reported,
    and what it waits for (None when the decision came first)."""

    run_id: int
    reported: int
    awaited: ApprovalAwaited | None


async def _direct_then_watched(
    caller: str,
    threads: Threads,
    direct: Callable[[], RunEnded | WorkflowCallError | _Paused],
    post: Callable[[_Posted], None],
    report_nodes: bool,
) -> None:
    """Run the call in its turn; a run that stopped at an approval node is then watched in
    the database until it ends, as a queued one is."""
    # The run's last word comes back with its thread's result, not posted on its own: one
    # wake of the event loop where two would say the same.
    last = await _in_turn(caller, threads, direct, post)
    if not isinstance(last, _Paused):
        post(last)
        return
    if last.awaited is not None:
        post(last.awaited)
    await _watched(last.run_id, post, threads, report_nodes, Run.Status.WAITING, last.reported)


def _direct(
    request: RunRequest,
    post: Callable[[_Posted], None],
    report_nodes: bool,
    keep_result: bool,
    ticket: Ticket,
) -> RunEnded | WorkflowCallError | _Paused:
    """Execute the run in this thread (direct mode), posting what happens while it runs;
    unless its caller left while it waited for the thread. Returns how it ended, or why the
    call could not run, for the follower; or, for a run that stopped at an approval node,
    what the watching that follows needs."""
    token = ticket.take()
    if token is None:
        logger.info("Workflow call of %s dropped before it started: %s", request.name, ticket.left)
        return WorkflowCallError(f"Workflow {request.name!r} did not start: {ticket.left}.")
    reported = 0

    def progress(count: int, message: str) -> None:
        nonlocal reported
        reported = count
        post(NodeFinished(count, message))

    try:
        outcome = workflow_call(
            request,
            progress=progress if report_nodes else None,
            cancel=token,
            started=lambda run_id: post(RunStarted(run_id, Run.Status.RUNNING)),
        )
    except WorkflowCallError as exc:
        return exc
    except Exception:
        logger.exception("Workflow call of %s failed before its run ended", request.name)
        return WorkflowCallError(f"Workflow {request.name!r} failed on the server; it is logged.")
    if outcome.status == Run.Status.WAITING:
        waiting = waiting_for(outcome.run_id)
        awaited = None if waiting is None else ApprovalAwaited(waiting)
        return _Paused(outcome.run_id, reported, awaited)
    if keep_result and outcome.succeeded:
        run_result_keep(outcome.run_id, outcome.result)
    return RunEnded(outcome)


def _look(
    run_id: int, reported: int, progress: Progress | None, status: str
) -> tuple[RunOutcome | RunEnded | ApprovalAwaited, int]:
    """One look at a watched run last seen in `status`: how it stands, what it waits for
    (read once, when it starts waiting), or its end."""
    outcome, reported = run_check(run_id, reported, progress)
    # A test run paused at a breakpoint is as far as a call follows it: its caller answers.
    if outcome.status in Run.FINISHED or outcome.status == Run.Status.PAUSED:
        return RunEnded(outcome), reported
    if outcome.status == Run.Status.WAITING and status != Run.Status.WAITING:
        waiting = waiting_for(run_id)
        if waiting is not None:
            return ApprovalAwaited(waiting), reported
    return outcome, reported


async def _queued(
    request: RunRequest,
    post: Callable[[_Posted], None],
    threads: Threads,
    report_nodes: bool,
) -> None:
    """Send the run to the workers (queued mode) and watch it until it ends."""
    try:
        run_id = await threads.short(partial(run_enqueue, request))
    except WorkflowCallError as exc:
        post(exc)
        return
    post(RunStarted(run_id, Run.Status.QUEUED))
    await _watched(run_id, post, threads, report_nodes, Run.Status.QUEUED, 0)


async def _continued(
    run_id: int, post: Callable[[_Posted], None], threads: Threads, report_nodes: bool
) -> None:
    """Watch a run an earlier call started, from where it stands."""
    status, reported = await threads.short(partial(_standing, run_id))
    post(RunStarted(run_id, status))
    await _watched(run_id, post, threads, report_nodes, status, reported)


def _standing(run_id: int) -> tuple[str, int]:
    """A run's status and how many of its nodes have ended."""
    status = Run.objects.values_list("status", flat=True).get(pk=run_id)
    return status, run_ended_nodes(run_id)


async def _watched(
    run_id: int,
    post: Callable[[_Posted], None],
    threads: Threads,
    report_nodes: bool,
    status: str,
    reported: int,
) -> None:
    """Watch a run in the database until it ends, from `status` and `reported` nodes."""
    pause = POLL_FIRST_SECONDS

    def progress(count: int, message: str) -> None:
        post(NodeFinished(count, message))

    while True:
        await asyncio.sleep(pause)
        pause = next_pause(pause)
        try:
            looked, reported = await threads.short(
                partial(_look, run_id, reported, progress if report_nodes else None, status)
            )
        except Exception:
            # The run goes on in its worker whatever befell this look (the database was
            # unreachable for a moment): look again, until the follower gives up.
            logger.exception("Looking at queued run %s failed; looking again", run_id)
            continue
        if isinstance(looked, RunEnded):
            post(looked)
            return
        if isinstance(looked, ApprovalAwaited):
            status = Run.Status.WAITING
            post(looked)
            continue
        if looked.status != status:
            status = looked.status
            post(RunStarted(run_id, status))
