"""The runs this process is executing: their heartbeat, and cancellation from any process.

Every run executing here, in a web process (direct mode) or a Celery worker (queued mode), is
registered with its `CancelToken` while the engine runs it. One daemon thread per process, every
`GRAPHS_HEARTBEAT_SECONDS`, stamps `heartbeat_at` on all of them in one UPDATE and reads in one
SELECT which of them someone asked to cancel (`Run.cancel_reason`, set by
`graphs.execution.control.run_cancel` in any process), cancelling their tokens; the engine stops
before its next node. A cancel for a run of this very process sets its token at once.

A run whose heartbeat stops (its process died) is failed by the reaper
(`graphs/execution/reaper.py`). The engine knows none of this: it only sees its token.

A direct run has no row until its first write (graphs/execution/recorder.py): until then this
registry is the only place that knows it, so a cancel of it by id (its client left, its caller
asked) is served from here (`cancel`, `graphs.execution.control.run_cancel`), and a cancel that
another instance could not find is read with each heartbeat from the note it left in the cache
(graphs/execution/direct_turns.py).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from graphs.engine import CancelToken
from graphs.execution.direct_turns import cancellations_noted
from graphs.models import Run

logger = logging.getLogger(__name__)


def process_label() -> str:
    """This process as `Run.worker` records it: `host:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class _Executing:
    """A run executing in this process: its token, and the call that started it (caller,
    session id, request id)."""

    token: CancelToken
    call: tuple[str, str, str]


class _Registry:
    """Run id → its execution in this process, and the heartbeat thread."""

    def __init__(self) -> None:
        self._runs: dict[int, _Executing] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def reset(self) -> None:
        """Forget everything (in a forked child: the parent's runs and thread are not ours)."""
        self._runs = {}
        self._lock = threading.Lock()
        self._thread = None

    @contextmanager
    def watching(self, run: Run, token: CancelToken | None) -> Iterator[CancelToken]:
        """Register a run for the time it executes; yields the token the engine must check."""
        token = token or CancelToken()
        with self._lock:
            self._runs[run.pk] = _Executing(token, (run.caller, run.session_id, run.request_id))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._beat_while_busy, name="run-heartbeat", daemon=True
                )
                self._thread.start()
        try:
            yield token
        finally:
            with self._lock:
                self._runs.pop(run.pk, None)

    def cancel(self, run_id: int, reason: str, *, caller: str | None = None) -> bool:
        """Cancel a run executing in this process at once; False if it is not here (or,
        `caller` given, was not started by that caller)."""
        with self._lock:
            executing = self._runs.get(run_id)
        if executing is None or (caller is not None and executing.call[0] != caller):
            return False
        executing.token.cancel(reason)
        return True

    def _beat_while_busy(self) -> None:
        try:
            while True:
                time.sleep(settings.GRAPHS_HEARTBEAT_SECONDS)
                with self._lock:
                    runs = dict(self._runs)
                    if not runs:
                        self._thread = None
                        return
                try:
                    self._beat(runs)
                except Exception:
                    # A database hiccup must not end the heartbeats; a long one ends in the
                    # reaper failing the runs, which is the truth then.
                    logger.exception("Heartbeat of runs %s failed", sorted(runs))
        finally:
            connection.close()

    @staticmethod
    def _beat(runs: dict[int, _Executing]) -> None:
        close_old_connections()
        active = Run.objects.filter(pk__in=runs, status=Run.Status.RUNNING)
        active.update(heartbeat_at=timezone.now())
        asked = dict(active.exclude(cancel_reason="").values_list("pk", "cancel_reason"))
        # And those cancelled on another instance that found no row of them (not written yet).
        noted = cancellations_noted({run_id: executing.call for run_id, executing in runs.items()})
        for run_id, reason in (noted | asked).items():
            runs[run_id].token.cancel(reason)


registry = _Registry()
os.register_at_fork(after_in_child=registry.reset)
