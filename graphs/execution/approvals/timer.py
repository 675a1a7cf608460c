"""The timer of approvals' timeouts: one daemon thread per process, durable by the database.

A timeout is a row, not a timer in memory: `Approval.timeout_at` of an undecided approval.
Each process that serves calls or runs (the ASGI app at start-up, a Celery worker, stdio)
runs this thread: it reads the earliest due time (one indexed query), fires what is due
(`decisions.timeout_fire`: a conditional update, so of several processes one fires it), and
sleeps until the next due time, never longer than APPROVAL_TIMER_POLL_SECONDS, so that a
timeout set by any process, or left by one that stopped, fires within that of its time (and
one due later than that, at its time). After a restart the rows are still there. The same
look ends the breakpoint pauses that expired (graphs/execution/resuming/breakpoints.py).
"""

from __future__ import annotations

import logging
import os
import threading

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from graphs.execution.approvals.decisions import timeout_fire
from graphs.execution.resuming.breakpoints import pauses_expire
from graphs.models import Approval, Run

logger = logging.getLogger(__name__)

# How many due approvals one look fires at most before looking again.
_BATCH = 50


class _Timer:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget the thread (in a forked child: the parent's is not ours)."""
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._stopping = False

    def start(self) -> None:
        """Run the timer in this process (once; later calls do nothing)."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stopping = False
            self._thread = threading.Thread(target=self._loop, name="approval-timer", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """End the timer (the command that started it is done), waiting briefly for it."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stopping = True
        self._wake.set()
        if thread is not None:
            thread.join(timeout=5)

    def _loop(self) -> None:
        try:
            while not self._stopping:
                try:
                    pause = self.tick()
                except Exception:
                    # A database hiccup must not stop the timer; it looks again shortly.
                    logger.exception("The approval timer's look failed")
                    pause = settings.APPROVAL_TIMER_POLL_SECONDS
                if self._stopping:
                    return
                self._wake.wait(pause)
                self._wake.clear()
        finally:
            connection.close()

    @staticmethod
    def tick() -> float:
        """Fire the timeouts due now and end the breakpoint pauses that expired; how long to
        sleep until the next look."""
        close_old_connections()
        poll = float(settings.APPROVAL_TIMER_POLL_SECONDS)
        pause_due = pauses_expire()
        if pause_due is not None:
            poll = min(poll, pause_due)
        earliest = (
            Approval.objects.filter(
                decision="", timeout_at__isnull=False, run__status=Run.Status.WAITING
            )
            .order_by("timeout_at")
            .values_list("run_id", "timeout_at")[:_BATCH]
        )
        for run_id, due in earliest:
            assert due is not None  # filtered so
            left = (due - timezone.now()).total_seconds()
            if left > 0:
                return min(left, poll)
            timeout_fire(run_id)
        return 0.0 if len(earliest) == _BATCH else poll


timer = _Timer()
os.register_at_fork(after_in_child=timer.reset)
