"""A run seen from outside its process: queueing it, looking at it, its result, stopping it.

In queued mode (`EXECUTION_MODE=queued`) a call's run is recorded as queued and sent to a
Celery worker (`run_enqueue`), and the caller looks at it now and then (`run_check`) until it
ends; graphs/execution/follow.py does both, for every transport. A worker runs it with the same
`_execute` of graphs/execution/runs.py as a direct run.

`run_cancel` stops a queued, waiting or running run from any process, in either mode: a queued
run is cancelled at once (its task then executes nothing), and so is one waiting at an approval
node (a decision then finds it cancelled); a running one gets `cancel_reason` set,
which its process reads with its next heartbeat (at once when it runs here), and the engine
stops before its next node, so the run ends `cancelled` with its history up to there. A direct
run not written yet (graphs/execution/recorder.py) is found only in its own process, which is
where its id is known until then (its follower; a task handle waits for the row).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from graphs.execution import direct_turns, liveness
from graphs.execution.payloads import stored_error
from graphs.execution.queue import run_queued, run_send, task_id_of
from graphs.execution.recorder import Progress
from graphs.execution.runs import RunOutcome, RunRequest, run_create
from graphs.models import Approval, NodeExecution, Run, RunPause

logger = logging.getLogger(__name__)

POLL_FIRST_SECONDS = 0.02
POLL_MAX_SECONDS = 0.5
_RESULT_FETCH_SECONDS = 5


class RunNotFound(LookupError):
    """No such run (or not one the caller may act on)."""


@dataclass(frozen=True)
class Cancellation:
    """What a cancel request did: the run's status after it, and a sentence saying so."""

    run_id: int
    status: str
    message: str


def run_enqueue(request: RunRequest) -> int:
    """Record a queued run and send it to the workers; its id. A broker that cannot be
    reached fails the run with a message saying so."""
    run = run_create(request)
    try:
        run_send(run.pk, request.arguments)
    except Exception as exc:  # kombu's errors differ by broker; all mean "not queued"
        logger.exception("Run %s could not be queued", run.pk)
        Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED).update(
            status=Run.Status.FAILED,
            finished_at=timezone.now(),
            # The broker's error may quote its URL, with the broker's password.
            error=stored_error(
                f"The run could not be queued ({exc.__class__.__name__}: {exc}): check that "
                "the broker at CELERY_BROKER_URL is up, or set EXECUTION_MODE=direct."
            ),
        )
    return run.pk


def next_pause(pause: float) -> float:
    """The pause before the next look at a run: short at first, as most runs are quick."""
    return min(pause * 1.5, POLL_MAX_SECONDS)


def run_check(
    run_id: int, reported: int = 0, progress: Progress | None = None
) -> tuple[RunOutcome, int]:
    """One look at a run, from any process: its outcome so far (with the result once it
    has succeeded), and how many nodes have been reported to `progress`, counting from
    `reported` (the count of a previous look)."""
    row = Run.objects.filter(pk=run_id).values("status", "error", "error_node_id").get()
    if progress is not None:
        reported = _report(run_id, reported, progress)
    status = row["status"]
    if status not in Run.FINISHED:
        return RunOutcome(run_id, status), reported
    result = run_result(run_id) if status == Run.Status.SUCCEEDED else None
    return RunOutcome(run_id, status, result, row["error"], row["error_node_id"]), reported


def run_ended_nodes(run_id: int) -> int:
    """How many of a run's node executions have ended (running and waiting ones not)."""
    return (
        NodeExecution.objects.filter(run_id=run_id)
        .exclude(status__in=(NodeExecution.Status.RUNNING, NodeExecution.Status.WAITING))
        .count()
    )


def _report(run_id: int, reported: int, progress: Progress) -> int:
    """Report the nodes finished since the last poll, in order; the count reported."""
    finished = (
        NodeExecution.objects.filter(run_id=run_id, index__gte=reported)
        .exclude(status__in=(NodeExecution.Status.RUNNING, NodeExecution.Status.WAITING))
        .order_by("index")
        .values_list("index", "node_id", "status")
    )
    for index, node_id, status in finished:
        if index != reported:
            break  # an earlier row is still in the worker's batch
        reported += 1
        progress(reported, f"{node_id} {status}")
    return reported


def _kept_key(run_id: int) -> str:
    return f"graphs:run-result:{run_id}"


def run_result_keep(run_id: int, value: Any) -> None:
    """Keep a run's whole exit value where any process can read it (`run_result`), for
    `GRAPHS_RESULT_KEEP_SECONDS`: for a caller that comes back for it later, as a task does.
    Queued runs need not: their worker's result backend keeps it."""
    cache.set(_kept_key(run_id), {"result": value}, settings.GRAPHS_RESULT_KEEP_SECONDS)


def run_result(run_id: int) -> Any:
    """A succeeded run's exit value, whole and unmasked where it is still kept (by
    `run_result_keep`, or by the worker that ran it), else the history's copy (secrets
    masked, perhaps a truncated preview)."""
    kept = cache.get(_kept_key(run_id))
    if kept is not None:
        return kept["result"]
    if settings.EXECUTION_MODE == "queued":
        try:
            returned = run_queued.AsyncResult(task_id_of(run_id)).get(
                timeout=_RESULT_FETCH_SECONDS, propagate=False
            )
        except Exception:  # the result backend is down, or lost it: the history has a copy
            logger.warning("Run %s: no result from the result backend", run_id, exc_info=True)
            returned = None
        if isinstance(returned, dict) and "result" in returned:
            return returned["result"]
    return Run.objects.values_list("result", flat=True).get(pk=run_id)


@dataclass(frozen=True)
class RunState:
    """Where a run stands, as a client following it sees it (a task's `tasks/get`)."""

    run_id: int
    workflow_name: str
    status: str
    created_at: datetime
    updated_at: datetime
    error: str
    error_node_id: str
    # The workflow's output schema now, for shaping its result.
    output_schema: dict[str, Any] | None


def run_state(*, run_id: int, caller: str) -> RunState:
    """A run started by `caller`, as it stands. Raises `RunNotFound` (for another caller's
    run too: a caller learns nothing of runs it did not start)."""
    row = (
        Run.objects.filter(pk=run_id, caller=caller[:200])
        .values_list(
            "workflow_name", "status", "created_at", "started_at", "heartbeat_at",
            "finished_at", "error", "error_node_id", "workflow__output_schema",
        )
        .first()
    )  # fmt: skip
    if row is None:
        raise RunNotFound(f"No run {run_id} started with your key.")
    name, status, created, started, beat, finished, error, node, schema = row
    updated = finished or beat or started or created
    return RunState(run_id, name, status, created, updated, error, node, schema)


def run_cancel(*, run_id: int, reason: str, caller: str | None = None) -> Cancellation:
    """Cancel a queued or running run, from any process; `caller`, when given, must be the
    one who started it. Raises `RunNotFound`."""
    runs = Run.objects.filter(pk=run_id)
    if caller is not None:
        runs = runs.filter(caller=caller[:200])
    reason = reason[:500]
    if runs.filter(status=Run.Status.QUEUED).update(
        status=Run.Status.CANCELLED,
        cancel_reason=reason,
        error=f"Cancelled before it started: {reason}",
        finished_at=timezone.now(),
    ):
        return Cancellation(run_id, Run.Status.CANCELLED, f"Run {run_id} was cancelled.")
    now = timezone.now()
    with transaction.atomic():
        paused = runs.filter(status=Run.Status.PAUSED).update(
            status=Run.Status.CANCELLED,
            cancel_reason=reason,
            error=f"Cancelled while paused at a breakpoint: {reason}",
            finished_at=now,
        )
        if paused:
            RunPause.objects.filter(run__in=runs, ending="").update(
                ending=RunPause.Ending.STOPPED, ended_at=now, ended_by=reason[:200]
            )
    if paused:
        return Cancellation(run_id, Run.Status.CANCELLED, f"Run {run_id} was cancelled.")
    if _waiting_ended(runs, Run.Status.CANCELLED, f"Cancelled while waiting: {reason}", reason):
        return Cancellation(
            run_id,
            Run.Status.CANCELLED,
            f"Run {run_id} was waiting for approval; it was cancelled.",
        )
    if runs.filter(status=Run.Status.RUNNING).update(cancel_reason=reason):
        liveness.registry.cancel(run_id, reason)
        return Cancellation(
            run_id,
            Run.Status.RUNNING,
            f"Run {run_id} will stop before its next node (a call in progress finishes "
            "first) and end cancelled.",
        )
    status = runs.values_list("status", flat=True).first()
    if status is None and liveness.registry.cancel(
        run_id, reason, caller=None if caller is None else caller[:200]
    ):
        # A direct run of this process before its first write: it has an id but no row yet.
        return Cancellation(
            run_id,
            Run.Status.RUNNING,
            f"Run {run_id} will stop before its next node and end cancelled.",
        )
    if status is None:
        raise RunNotFound(
            f"No run {run_id}" + (" started with your key." if caller is not None else ".")
        )
    return Cancellation(run_id, status, f"Run {run_id} already ended {status}: not cancelled.")


def _waiting_ended(runs: QuerySet[Run], status: str, error: str, reason: str = "") -> bool:
    """End the run of `runs` that waits at an approval node with `status` and `error`; False
    when it is not waiting (decided, ended). Its undecided Approval stays, for the history."""
    ended = runs.filter(status=Run.Status.WAITING).update(
        status=status, cancel_reason=reason, error=error, finished_at=timezone.now()
    )
    if ended:
        NodeExecution.objects.filter(run__in=runs, status=NodeExecution.Status.WAITING).update(
            status=NodeExecution.Status.FAILED, error=error
        )
    return bool(ended)


def run_unanswerable(*, run_id: int, why: str) -> bool:
    """Fail a run waiting for its caller's answer when the caller cannot give one (its
    client cannot be asked, or did not answer): rather failed, saying why, than waiting for
    ever. False when it was not waiting any more."""
    return _waiting_ended(Run.objects.filter(pk=run_id), Run.Status.FAILED, why)


def session_runs_cancel(*, session_id: str, reason: str) -> int:
    """Cancel every queued, running or waiting run that a session's requests started (the
    session ended, so nobody waits for their answers), and drop those still waiting for a
    thread here; how many there were. A run waiting for reviewers is left to them: it needs
    nothing of its caller (it answered that the run waits), and its decision may come days
    later, and so is a test run paused at a breakpoint: it is continued or stopped on its page
    (or expires)."""
    if not session_id:
        return 0
    dropped = direct_turns.cancel_session(session_id, reason)
    if settings.EXECUTION_MODE == "direct":
        # For its runs on other instances that no query finds yet (not written).
        direct_turns.note_session_ended(session_id, reason)
    for_reviewers = Approval.objects.filter(
        decision="", approvers="reviewers", run__status=Run.Status.WAITING
    ).values("run_id")
    run_ids = list(
        Run.objects.filter(status__in=Run.ACTIVE, session_id=session_id[:200])
        .exclude(status=Run.Status.PAUSED)
        .exclude(pk__in=for_reviewers)
        .values_list("pk", flat=True)
    )
    for run_id in run_ids:
        run_cancel(run_id=run_id, reason=reason)
    return dropped + len(run_ids)


def run_cancel_request(*, caller: str, session_id: str, request_id: str, reason: str) -> None:
    """`notifications/cancelled`: cancel the run that the caller's request started, if any
    is still going (a request that started no run, or ended, needs nothing). A direct run
    still waiting for its thread never starts: here, or on the instance where it waits."""
    named = {"caller": caller, "session_id": session_id, "request_id": request_id}
    if direct_turns.cancel_waiting(**named, reason=reason):
        return
    run_id = (
        Run.objects.filter(
            status__in=Run.ACTIVE,
            caller=caller[:200],
            session_id=session_id[:200],
            request_id=request_id[:200],
        )
        .values_list("pk", flat=True)
        .first()
    )
    if run_id is not None:
        run_cancel(run_id=run_id, reason=reason)
    elif session_id and settings.EXECUTION_MODE == "direct":
        direct_turns.note_cancelled(**named, reason=reason)
