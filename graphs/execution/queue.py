"""The queue of runs executed by Celery workers (EXECUTION_MODE=queued): the task that executes
a queued run, sending a run to it, and what it leaves in the result backend.

The task is declared here, with the functions that send to it, so that the reaper and
`control` send runs without importing `graphs/tasks.py`, which only gathers the tasks for
Celery's autodiscovery."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.exceptions import Ignore

from graphs.execution.runs import run_execute
from graphs.execution.tracing import carrier, continued
from graphs.models import Run

logger = logging.getLogger(__name__)


def task_id_of(run_id: int) -> str:
    """The id of the task executing a run: known to the web side without storing it."""
    return f"run-{run_id}"


# Acknowledged only when it ends (settings: CELERY_TASK_ACKS_LATE), so a worker lost mid-run
# does not silently drop it. `run_execute` claims the run with a conditional UPDATE (queued →
# running), so of several messages for one run (a redelivery, the reaper's re-send) one
# executes it and the others nothing.
@shared_task(name="graphs.tasks.run_queued", acks_late=True)
def run_queued(
    run_id: int, arguments: Any, trace: dict[str, str] | None = None
) -> dict[str, Any] | None:
    """Execute a queued run; returns `{"result": exit value}` when it succeeded (the history
    keeps only a masked copy, so the waiting web process reads the value from here).

    `trace` is the sender's trace context (W3C `traceparent`, `tracestate`): the run's spans
    continue the trace of the call that queued it (graphs/execution/tracing.py)."""
    with continued(trace):
        outcome = run_execute(run_id=run_id, arguments=arguments)
    if outcome is None or outcome.status in (Run.Status.WAITING, Run.Status.PAUSED):
        # A duplicate stores no result: under the same task id it would overwrite the exit
        # value that the message which ran the run left for the waiting web process. Nor does
        # a run that stopped at an approval node or a breakpoint: the message that resumes
        # it, under the same task id, leaves its exit value.
        raise Ignore()
    if not outcome.succeeded:
        return None
    return {"result": outcome.result}


def run_send(run_id: int, arguments: Any) -> None:
    """Send a queued run to the workers. Raises the broker client's error when it cannot."""
    # The arguments travel unmasked in the message: the run needs them (the history keeps
    # the masked copy). So does the trace context when this process traces, as an argument:
    # arguments reach the task alike through every broker and in eager mode; headers do not.
    trace = carrier()
    run_queued.apply_async(
        args=[run_id, arguments],
        kwargs={"trace": trace} if trace else None,
        task_id=task_id_of(run_id),
        retry_policy={"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5},
    )


def result_forget(run_id: int) -> None:
    """Drop what an earlier attempt of a run left in the result backend under its task id (a
    worker lost mid-run leaves a failure there), so that the waiting web process reads the
    next attempt's exit value, not that."""
    try:
        run_queued.AsyncResult(task_id_of(run_id)).forget()
    except Exception:  # a backend that cannot forget, or is down: the history has the result
        logger.warning("The result backend kept run %s's earlier result", run_id, exc_info=True)
