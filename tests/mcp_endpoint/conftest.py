"""Fixtures for the /mcp endpoint tests.

The view answers in a worker thread (`sync_to_async(thread_sensitive=False)`), which has its
own database connection, so these tests use committed (transactional) database state.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connections

from graphs.execution import control
from graphs.execution.queue import run_queued
from mcp_endpoint.transports import asgi
from tests.mcp_endpoint.helpers import make_key


@pytest.fixture
def key(transactional_db) -> str:
    """An API key with every scope."""
    return make_key()


@pytest.fixture(params=["direct", "queued"])
def mode(request, settings, monkeypatch):
    """Both execution modes; queued runs execute at once in this process, through the real
    task (no broker in unit tests: tests/e2e runs real workers)."""
    settings.EXECUTION_MODE = request.param
    settings.GRAPHS_RUN_WAIT_SECONDS = 20
    # No result backend answers here: the result comes from the history's copy.
    monkeypatch.setattr(control, "_RESULT_FETCH_SECONDS", 0.05)
    run_queued.app.conf.task_always_eager = request.param == "queued"
    yield request.param
    run_queued.app.conf.task_always_eager = False


@pytest.fixture
def lenient_client(client):
    """The test client, answering a server error with its 500 instead of raising it."""
    client.raise_request_exception = False
    return client


@pytest.fixture
def worker_thread(monkeypatch) -> Iterator[None]:
    """One worker thread for the ASGI app, whose database connection is closed afterwards
    (PostgreSQL will not drop the test database while a thread still holds one)."""
    pool = ThreadPoolExecutor(max_workers=1)
    monkeypatch.setattr(asgi, "_POOL", pool)
    yield
    pool.submit(connections.close_all).result(timeout=10)
    pool.shutdown()
