"""The reaper: a run whose process died (a worker killed mid-run, a web process that crashed)
stops getting heartbeats (graphs/liveness.py); after `GRAPHS_RUN_STALE_SECONDS` it is failed
with the reason recorded, and so is the node that was running. `celery -A config beat`
schedules it every `GRAPHS_REAP_INTERVAL_SECONDS`; `manage.py reap_runs` runs it once.

Runs are never re-queued: a node may have had effects downstream that a second run would
repeat. Run the workflow again when it is safe to.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from graphs.models import NodeExecution, Run

logger = logging.getLogger(__name__)


def _stale(cutoff: datetime) -> Q:
    return Q(status=Run.Status.RUNNING) & (
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    )


def runs_reap(*, now: datetime | None = None) -> list[int]:
    """Fail every running run without a heartbeat for GRAPHS_RUN_STALE_SECONDS; their ids."""
    now = now or timezone.now()
    stale_seconds = settings.GRAPHS_RUN_STALE_SECONDS
    cutoff = now - timedelta(seconds=stale_seconds)
    reaped = []
    stale = Run.objects.filter(_stale(cutoff)).only("worker", "heartbeat_at", "started_at")
    for run in stale:
        last = run.heartbeat_at or run.started_at
        reason = (
            f"The process running this run ({run.worker or 'unknown'}) stopped: no heartbeat "
            f"since {last:%Y-%m-%d %H:%M:%S} UTC ({stale_seconds:g} s allowed). It was killed "
            "or lost its database connection; run the workflow again if it is safe to repeat "
            "what it did."
        )
        with transaction.atomic():
            node = NodeExecution.objects.filter(run=run, status=NodeExecution.Status.RUNNING)
            node_id = node.values_list("node_id", flat=True).first() or ""
            updated = Run.objects.filter(_stale(cutoff), pk=run.pk).update(
                status=Run.Status.FAILED,
                error=reason,
                error_node_id=node_id,
                finished_at=now,
            )
            if not updated:
                continue  # it beat, or finished, since it was read
            node.update(status=NodeExecution.Status.FAILED, error=reason)
        logger.warning("Reaped run %s: %s", run.pk, reason)
        reaped.append(run.pk)
    return reaped
