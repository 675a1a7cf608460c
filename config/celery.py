"""The Celery app: `celery -A config worker` executes queued runs, `celery -A config beat`
schedules the reaper (docs/operations.md). Settings are the Django settings named CELERY_*;
tasks are declared in the apps with `shared_task` (graphs/tasks.py)."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("switchyard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _serve_metrics(**_: object) -> None:
    """With METRICS_PORT set, the worker's main process serves the host's metrics (its pool
    processes' too, through PROMETHEUS_MULTIPROC_DIR): docs/operations.md, "Metrics"."""
    from nodespecs.telemetry import serve_metrics_port

    serve_metrics_port()


@worker_ready.connect
def _start_approval_timer(**_: object) -> None:
    """A worker fires approvals' timeouts too (graphs/execution/approvals/timer.py), so that
    queued mode needs no web process for them."""
    from graphs.execution.approvals.timer import timer

    timer.start()
