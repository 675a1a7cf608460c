"""Celery's tasks for this app, gathered where its autodiscovery looks (declared with
`shared_task`: apps never import `config`). The run queue's task lives with the functions that
send to it (graphs/execution/queue.py); the reaper's is here, scheduled by beat."""

from celery import shared_task

from graphs.execution.queue import run_queued
from graphs.execution.reaper import runs_reap

__all__ = ["run_queued", "runs_reap_task"]


@shared_task(name="graphs.tasks.runs_reap_task", ignore_result=True)
def runs_reap_task() -> None:
    """Settle the runs no process will finish (scheduled by beat): graphs/execution/reaper.py."""
    runs_reap()
