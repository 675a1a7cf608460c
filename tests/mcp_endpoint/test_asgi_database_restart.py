"""A database restart under a running server: the threads of mcp_endpoint/transports/asgi.py
drop a connection that broke at its first failure, not at their next recycling 30 s later,
during which every request on the thread failed (a 500 when the snapshots' refresh met it)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import DatabaseError, connection, connections

from mcp_endpoint.transports import asgi
from tests.mcp_endpoint.test_stdio import wait_ended

pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db(transaction=True)]


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def test_a_worker_threads_broken_connection_fails_one_request_at_most():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL; set DATABASE_URL to run it")
    connection.ensure_connection()
    dsn = connection.connection.info.dsn
    thread = ThreadPoolExecutor(1)

    def request() -> int | str:
        try:
            return asgi._work(backend_pid)
        except DatabaseError as exc:
            return type(exc).__name__

    try:
        first = thread.submit(request).result()
        assert isinstance(first, int)
        wait_ended(dsn, [first])
        after = [thread.submit(request).result() for _ in range(3)]
    finally:
        thread.submit(connections.close_all).result()
        thread.shutdown()

    failed = [outcome for outcome in after if not isinstance(outcome, int)]
    assert len(failed) <= 1, after
    assert after[-1] != first, "the broken session was used again"
    assert isinstance(after[-1], int)
