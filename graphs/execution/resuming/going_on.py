"""Sending a run that stood still on: after an approval's decision, a breakpoint's continue
or step, or as a re-run from a node. Whoever takes the run out of its stop writes it
`going_on_fields` (in the same conditional update that takes it), then calls `go_on`, and the
run goes on where the mode says: a worker (queued: it is queued again, and the worker that
claims it resumes it, graphs/execution/runs.py `run_resume`), or a thread of this process
(direct)."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection

from graphs.execution import liveness
from graphs.execution.control import run_result_keep
from graphs.execution.queue import run_send
from graphs.execution.runs import run_resume
from graphs.models import Run

logger = logging.getLogger(__name__)


def going_on_fields(now: datetime) -> dict[str, Any]:
    """The fields of a run that goes on from `now`: queued for a worker, or running here."""
    if settings.EXECUTION_MODE == "queued":
        return {"status": Run.Status.QUEUED, "heartbeat_at": now, "worker": ""}
    return {"status": Run.Status.RUNNING, "heartbeat_at": now, "worker": liveness.process_label()}


# Direct mode: resumed runs go on here, each holding a thread while its nodes call out, as a
# direct run does; at most as many at once as a web process runs.
_resuming: ThreadPoolExecutor | None = None
_resuming_lock = threading.Lock()


def go_on(run_id: int) -> None:
    """Send a run written `going_on_fields` on: to the workers (queued), or to a thread
    here (direct)."""
    global _resuming
    if settings.EXECUTION_MODE == "queued":
        try:
            run_send(run_id, None)
        except Exception:  # kombu's errors differ by broker: the reaper sends it again
            logger.exception("Run %s could not be queued; the reaper sends it again", run_id)
        return
    with _resuming_lock:
        if _resuming is None:
            _resuming = ThreadPoolExecutor(
                settings.GRAPHS_DIRECT_RUN_THREADS, thread_name_prefix="run-resumed"
            )
        going = _resuming.submit(_resume_here, run_id)
        _going.add(going)
    going.add_done_callback(_gone)


# The runs resuming here now, for `resumed_runs_wait`.
_going: set[Future[None]] = set()


def _gone(going: Future[None]) -> None:
    with _resuming_lock:
        _going.discard(going)


def resumed_runs_wait(timeout: float) -> bool:
    """Wait until the runs this process is resuming (direct mode) have ended, at most
    `timeout` seconds: for a server shutting down, so that a run going on is not cut short
    by it, and for a test. False when some were still going."""
    with _resuming_lock:
        going = list(_going)
    _, still = wait(going, timeout=timeout)
    return not still


def _resume_here(run_id: int) -> None:
    try:
        outcome = run_resume(run_id)
        if outcome.succeeded:
            # A follower in another process (or a task) reads the whole result from here.
            run_result_keep(outcome.run_id, outcome.result)
    except Exception:
        logger.exception("Resuming run %s failed", run_id)
    finally:
        # A pool thread may wait long for its next run: it holds no connection meanwhile.
        connection.close()
