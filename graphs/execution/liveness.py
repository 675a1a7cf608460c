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
asked) is served from here (`cancel`, `graphs.execution.control.run_cancel`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from graphs.engine import CancelToken
from graphs.models import Run

logger = logging.getLogger(__name__)


def process_label() -> str:
    """This process as `Run.worker` records it: `host:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


class _Registry:
    """Run id → the token of its execution in this process and who started it, and the
    heartbeat thread."""

    def __init__(self) -> None:
        self._tokens: dict[int, CancelToken] = {}
        self._callers: dict[int, str] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def reset(self) -> None:
        """Forget everything (in a forked child: the parent's runs and thread are not ours)."""
        self._tokens = {}
        self._callers = {}
        self._lock = threading.Lock()
        self._thread = None

    @contextmanager
    def watching(
        self, run_id: int, token: CancelToken | None, *, caller: str = ""
    ) -> Iterator[CancelToken]:
        """Register a run started by `caller` for the time it executes; yields the token the
        engine must check."""
        token = token or CancelToken()
        with self._lock:
            self._tokens[run_id] = token
            self._callers[run_id] = caller
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._beat_while_busy, name="run-heartbeat", daemon=True
                )
                self._thread.start()
        try:
            yield token
        finally:
            with self._lock:
                self._tokens.pop(run_id, None)
                self._callers.pop(run_id, None)

    def cancel(self, run_id: int, reason: str, *, caller: str | None = None) -> bool:
        """Cancel a run executing in this process at once; False if it is not here (or,
        `caller` given, was not started by that caller)."""
        with self._lock:
            token = self._tokens.get(run_id)
            started_by = self._callers.get(run_id)
        if token is None or (caller is not None and started_by != caller):
            return False
        token.cancel(reason)
        return True

    def _beat_while_busy(self) -> None:
        try:
            while True:
                time.sleep(settings.GRAPHS_HEARTBEAT_SECONDS)
                with self._lock:
                    tokens = dict(self._tokens)
                    if not tokens:
                        self._thread = None
                        return
                try:
                    self._beat(tokens)
                except Exception:
                    # A database hiccup must not end the heartbeats; a long one ends in the
                    # reaper failing the runs, which is the truth then.
                    logger.exception("Heartbeat of runs %s failed", sorted(tokens))
        finally:
            connection.close()

    @staticmethod
    def _beat(tokens: dict[int, CancelToken]) -> None:
        close_old_connections()
        active = Run.objects.filter(pk__in=tokens, status=Run.Status.RUNNING)
        active.update(heartbeat_at=timezone.now())
        asked = active.exclude(cancel_reason="").values_list("pk", "cancel_reason")
        for run_id, reason in asked:
            tokens[run_id].cancel(reason)


registry = _Registry()
os.register_at_fork(after_in_child=registry.reset)
