"""Fixtures for the /mcp endpoint tests.

The view answers in a worker thread (`sync_to_async(thread_sensitive=False)`), which has its
own database connection, so these tests use committed (transactional) database state.
"""

from __future__ import annotations

import pytest

from tests.mcp_endpoint.helpers import make_key


@pytest.fixture
def key(transactional_db) -> str:
    """An API key with every scope."""
    return make_key()


@pytest.fixture
def lenient_client(client):
    """The test client, answering a server error with its 500 instead of raising it."""
    client.raise_request_exception = False
    return client
