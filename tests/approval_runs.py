"""Runs waiting at an approval node, for the suites of the runtime, REST and pages: the refund
of tests/graphs/files/approvals.yaml started and left waiting, and a run waited for until it
ends (a decided run goes on in a thread of the test's process)."""

from __future__ import annotations

import time

from graphs.execution.resuming.going_on import resumed_runs_wait
from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import Run


def waiting_run(amount: float = 25, customer: str = "ann", caller: str = "key:start") -> int:
    """A run of `refund` waiting at its approval node; its id."""
    outcome = workflow_call(
        RunRequest(name="refund", arguments={"amount": amount, "customer": customer}, caller=caller)
    )
    assert outcome.status == Run.Status.WAITING, outcome
    return outcome.run_id


def ended(run_id: int, seconds: float = 20) -> Run:
    """The run once it has finished. A run resumed in this process is waited for without
    reading the database meanwhile: the in-memory test SQLite refuses a write beside a read
    ("table is locked"), which a file database (the embedded default's) waits out."""
    resumed_runs_wait(seconds)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        run = Run.objects.get(pk=run_id)
        if run.status in Run.FINISHED:
            return run
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} did not end: {Run.objects.get(pk=run_id).status}")
