"""The database connection of a run ended under it (a restart, a failover, an operator's
`pg_terminate_backend`) while a node is running: the run still ends with its outcome
recorded, never left `running`, and the next run works without restarting anything."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connection

from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import Run

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def terminate_when_running(dsn: str, backend_pid: int, errors: list[str]) -> None:
    """From a connection of its own: once the run's `call` node is running, end the run's
    database connection."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            row = admin.execute(
                "SELECT 1 FROM graphs_nodeexecution WHERE node_id = 'call' AND status = 'running'"
            ).fetchone()
            if row:
                admin.execute("SELECT pg_terminate_backend(%s)", [backend_pid])
                return
            time.sleep(0.02)
    errors.append("the run's call node never showed as running")


def test_a_run_whose_connection_is_terminated_between_nodes_completes(fault_workflows):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (pg_terminate_backend); set DATABASE_URL to run it")
    workflow_call(RunRequest(name="faulty_pid", arguments={}))  # the server started
    connection.ensure_connection()
    backend_pid = connection.connection.info.backend_pid
    dsn = connection.connection.info.dsn
    errors: list[str] = []
    killer = threading.Thread(target=terminate_when_running, args=(dsn, backend_pid, errors))
    killer.start()
    outcome = workflow_call(RunRequest(name="faulty_sleep", arguments={"seconds": 0.8}))
    killer.join()
    assert not errors
    assert connection.connection.info.backend_pid != backend_pid, "it was not terminated"
    assert outcome.succeeded, outcome.error
    run = Run.objects.get(pk=outcome.run_id)
    assert run.status == Run.Status.SUCCEEDED
    assert [row.status for row in run.node_executions.order_by("index")] == ["succeeded"] * 3
    # The next run needs no restart.
    assert workflow_call(RunRequest(name="healthy_add", arguments={"a": 1})).result == {"sum": 2}
