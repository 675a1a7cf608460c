"""The reaper: settles the runs that no process is going to finish. `celery -A config beat`
schedules it every `GRAPHS_REAP_INTERVAL_SECONDS`; `manage.py reap_runs` runs it once.

- A **running** run whose process died (a worker killed mid-run, a web process that crashed)
  stops getting heartbeats (graphs/execution/liveness.py). After `GRAPHS_RUN_STALE_SECONDS` it is
  failed with the reason, and so is the node that was running. When its workflow is marked safe to
  retry (`Workflow.retry_on_worker_loss`) and runs are queued, it is queued again instead, up to
  `GRAPHS_RUN_RETRIES` times: the dead attempt's node executions move to a run of their own
  (`attempt_of` the run, failed with the reason), and the run keeps its id and starts afresh, so
  whoever waits on it or holds its id gets the retry's outcome.
- A **queued** run that no worker started within `GRAPHS_QUEUED_STALE_SECONDS` lost its message
  (a broker restarted without persistence, a purged queue): it is sent again, up to
  `GRAPHS_QUEUED_RESENDS` times, then failed saying what to check. Sending again is safe: a worker
  claims a run with a conditional update (graphs.execution.runs.run_execute), so of two messages for
  one run only one executes it.

A run's arguments reach the worker in its message; the history keeps them with secrets masked,
so a run whose stored arguments are masked cannot be sent again: it is failed, saying so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from graphs.execution.payloads import MASK
from graphs.execution.queue import result_forget, run_send
from graphs.execution.tracing import continued
from graphs.models import NodeExecution, Run

logger = logging.getLogger(__name__)

MASKED_ARGUMENTS = (
    "its arguments hold secrets, which the history keeps masked, so it could not be sent to "
    "the workers again: call the workflow again"
)


@dataclass(frozen=True)
class Reaped:
    """What the reaper did to one run; `outcome` reads after "run <id>"."""

    run_id: int
    outcome: str


def runs_reap(*, now: datetime | None = None) -> list[Reaped]:
    """Fail or retry the running runs without a heartbeat, send again or fail the queued runs
    no worker started; what was done to each."""
    now = now or timezone.now()
    return [*_reap_running(now), *_reap_queued(now)]


def _stale(status: str, since_field: str, cutoff: datetime) -> Q:
    """Runs in `status` whose last sign of life (`heartbeat_at`, else `since_field`) is older
    than `cutoff`."""
    return Q(status=status) & (
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, **{f"{since_field}__lt": cutoff})
    )


def _holds_masked(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_masked(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_masked(item) for item in value)
    return value == MASK


def _note(now: datetime, text: str) -> str:
    return f"{now:%Y-%m-%d %H:%M:%S} UTC: {text}\n"


def _send(run: Run) -> None:
    """Send a run to the workers again, continuing the trace it was started in; a broker
    that refuses leaves it queued, for the next round of the reaper to send again or fail."""
    try:
        with continued({"traceparent": run.trace_parent}):
            run_send(run.pk, run.arguments)
    except Exception:  # kombu's errors differ by broker; all mean "not sent"
        logger.exception("Run %s could not be sent to the workers", run.pk)


# ------------------------------------------------------------------------ running, no heartbeat


def _reap_running(now: datetime) -> list[Reaped]:
    stale_seconds = settings.GRAPHS_RUN_STALE_SECONDS
    stale = _stale(Run.Status.RUNNING, "started_at", now - timedelta(seconds=stale_seconds))
    reaped = []
    for run in Run.objects.filter(stale).select_related("workflow"):
        last = run.heartbeat_at or run.started_at
        lost = (
            f"The process running this run ({run.worker or 'unknown'}) stopped: no heartbeat "
            f"since {last:%Y-%m-%d %H:%M:%S} UTC ({stale_seconds:g} s allowed). It was killed "
            "or lost its database connection"
        )
        refusal = _retry_refusal(run)
        if refusal:
            done = _fail_lost(run, stale, f"{lost}; {refusal}", now)
        else:
            done = _retry(run, stale, lost, now)
        if done is not None:
            logger.warning("Reaped run %s: %s", run.pk, done.outcome)
            reaped.append(done)
    return reaped


def _retry_refusal(run: Run) -> str:
    """Why a run whose process was lost is failed rather than queued again; "" to retry it."""
    if not run.workflow.retry_on_worker_loss:
        return "run the workflow again if it is safe to repeat what it did."
    if settings.EXECUTION_MODE != "queued":
        return (
            "its workflow allows a retry, but runs are retried only when queued "
            "(EXECUTION_MODE=queued): run the workflow again."
        )
    if run.cancel_reason:
        return f"it was being cancelled ({run.cancel_reason}), so it is not retried."
    if run.retries >= settings.GRAPHS_RUN_RETRIES:
        return (
            f"it was queued again {run.retries} time(s) already, the most GRAPHS_RUN_RETRIES "
            "allows: a run that loses its worker again and again may be what kills it (memory, "
            "a crash in a downstream server), so check the worker's log before running it again."
        )
    if run.approvals.exists():
        return (
            "it had reached an approval node, whose decision a retry from its entry would ask "
            "for again: run the workflow again."
        )
    if run.pauses.exists():
        return (
            "it had stopped before a node (a breakpoint, or the node a re-run starts at), "
            "from which a retry from its entry would not go on: re-run it from that node."
        )
    if _holds_masked(run.arguments):
        return MASKED_ARGUMENTS + "."
    return ""


def _fail_lost(run: Run, stale: Q, reason: str, now: datetime) -> Reaped | None:
    with transaction.atomic():
        node = NodeExecution.objects.filter(run=run, status=NodeExecution.Status.RUNNING)
        node_id = node.values_list("node_id", flat=True).first() or ""
        updated = Run.objects.filter(stale, pk=run.pk).update(
            status=Run.Status.FAILED, error=reason, error_node_id=node_id, finished_at=now
        )
        if not updated:
            return None  # it beat, or finished, since it was read
        node.update(status=NodeExecution.Status.FAILED, error=reason)
    return Reaped(run.pk, "failed: its process stopped")


def _retry(run: Run, stale: Q, lost: str, now: datetime) -> Reaped | None:
    """Queue a run again under its own id; its dead attempt's history becomes a failed run of
    its own that points at it."""
    attempt = run.retries + 1
    with transaction.atomic():
        updated = Run.objects.filter(stale, pk=run.pk, retries=run.retries).update(
            status=Run.Status.QUEUED,
            worker="",
            started_at=None,
            heartbeat_at=now,
            node_count=0,
            truncated=False,
            retries=attempt,
        )
        if not updated:
            return None
        executions = NodeExecution.objects.filter(run=run)
        running = executions.filter(status=NodeExecution.Status.RUNNING)
        node_id = running.values_list("node_id", flat=True).first() or ""
        reason = (
            f"Attempt {attempt} of run {run.pk}. {lost}. Its workflow is safe to retry, so run "
            f"{run.pk} was queued again (retry {attempt} of {settings.GRAPHS_RUN_RETRIES})."
        )
        dead = Run.objects.create(
            # Listed beside the run it was an attempt of (the lists order by creation).
            created_at=run.created_at,
            workflow_id=run.workflow_id,
            version_id=run.version_id,
            workflow_name=run.workflow_name,
            status=Run.Status.FAILED,
            arguments=run.arguments,
            error=reason,
            error_node_id=node_id,
            caller=run.caller,
            session_id=run.session_id,
            worker=run.worker,
            heartbeat_at=run.heartbeat_at,
            node_count=executions.count(),
            truncated=run.truncated,
            started_at=run.started_at,
            finished_at=now,
            attempt_of=run,
        )
        running.update(status=NodeExecution.Status.FAILED, error=reason)
        executions.update(run=dead)
        Run.objects.filter(pk=run.pk).update(
            reaper_notes=run.reaper_notes
            + _note(
                now,
                f"{lost} at node {node_id or '(none)'}. Queued again (retry {attempt} of "
                f"{settings.GRAPHS_RUN_RETRIES}); the lost attempt is run {dead.pk}.",
            )
        )
    # The lost attempt may have left a failure in the result backend under the run's task id.
    result_forget(run.pk)
    _send(run)
    return Reaped(run.pk, f"queued again: its worker was lost (the lost attempt is run {dead.pk})")


# ---------------------------------------------------------------------- queued, never started


def _reap_queued(now: datetime) -> list[Reaped]:
    stale_seconds = settings.GRAPHS_QUEUED_STALE_SECONDS
    most = settings.GRAPHS_QUEUED_RESENDS
    stale = _stale(Run.Status.QUEUED, "created_at", now - timedelta(seconds=stale_seconds))
    reaped = []
    for run in Run.objects.filter(stale).only(
        "arguments", "resends", "reaper_notes", "heartbeat_at", "created_at", "trace_parent"
    ):
        since = run.heartbeat_at or run.created_at
        waited = (
            f"no worker started it within {stale_seconds:g} s (GRAPHS_QUEUED_STALE_SECONDS) of "
            f"{since:%Y-%m-%d %H:%M:%S} UTC"
        )
        same = Run.objects.filter(stale, pk=run.pk, resends=run.resends)
        # A run decided at an approval node, or sent on from a pause (a breakpoint, a re-run's
        # start), goes on from its saved state, not its arguments.
        masked = (
            _holds_masked(run.arguments)
            and not run.approvals.exclude(decision="").exists()
            and not run.pauses.exclude(ending="").exists()
        )
        if run.resends < most and not masked:
            note = _note(
                now, f"{waited}; its message was probably lost: sent again ({run.resends + 1} of "
                f"{most})."
            )  # fmt: skip
            if not same.update(
                resends=run.resends + 1, heartbeat_at=now, reaper_notes=run.reaper_notes + note
            ):
                continue
            _send(run)
            done = Reaped(run.pk, f"sent to the workers again ({run.resends + 1} of {most})")
        else:
            why = MASKED_ARGUMENTS if masked else f"it was sent again {run.resends} time(s)"
            reason = (
                f"Never started: {waited}; {why}. Its message to the workers was lost or no "
                "worker takes from its queue: check that the broker at CELERY_BROKER_URL keeps "
                "its messages across restarts (Redis with persistence on), that `celery -A "
                "config worker` is running and consuming (its log), and that no one purged the "
                "queue; then run the workflow again."
            )
            if not same.update(status=Run.Status.FAILED, error=reason, finished_at=now):
                continue
            done = Reaped(run.pk, "failed: no worker started it")
        logger.warning("Reaped run %s: %s", run.pk, done.outcome)
        reaped.append(done)
    return reaped
