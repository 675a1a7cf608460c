"""Celery tasks (declared with `shared_task`: apps never import `config`). They only call the
functions of graphs.runs and graphs.reaper."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from graphs.reaper import runs_reap
from graphs.runs import run_execute


def task_id_of(run_id: int) -> str:
    """The id of the task executing a run: known to the web side without storing it."""
    return f"run-{run_id}"


# Acknowledged only when it ends (settings: CELERY_TASK_ACKS_LATE), so a worker lost mid-run
# does not silently drop it; `run_execute` claims the run, so a redelivery executes nothing.
@shared_task(name="graphs.tasks.run_queued", acks_late=True)
def run_queued(run_id: int, arguments: Any) -> dict[str, Any] | None:
    """Execute a queued run; returns `{"result": exit value}` when it succeeded (the history
    keeps only a masked copy, so the waiting web process reads the value from here)."""
    outcome = run_execute(run_id=run_id, arguments=arguments)
    if outcome is None or not outcome.succeeded:
        return None
    return {"result": outcome.result}


@shared_task(name="graphs.tasks.runs_reap_task", ignore_result=True)
def runs_reap_task() -> None:
    """Fail the runs whose process stopped sending heartbeats (scheduled by beat)."""
    runs_reap()
