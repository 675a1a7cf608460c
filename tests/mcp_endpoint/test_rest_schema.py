"""schemathesis against the REST API's own OpenAPI schema: no server errors, and every
response is one the schema documents, with the documented shape.

Each generated request (valid and deliberately invalid bodies and parameters) is sent three
times: with a key holding every scope, with a key holding none the routes need, and with no
key, so the 401 and 403 refusals are checked against the schema as well as the 200s.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings

from config.wsgi import application
from tests.mcp_endpoint.helpers import auth_headers, make_key

schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", application)

# Per operation; with 10 operations and 3 callers the whole test stays around ten seconds.
MAX_EXAMPLES = 25


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """The WSGI app closes old database connections around each request, which would close
    the test's own connection in the middle of its transaction on PostgreSQL; Django's test
    client turns that off the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def callers(db) -> list[dict[str, str]]:
    """Headers for a key with every scope (the 200s), a key with only health:check (403 on the
    tool and run routes) and no key at all (401)."""
    return [
        auth_headers(make_key()),
        auth_headers(make_key(scopes=["health:check"])),
        auth_headers(None),
    ]


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_the_rest_api_keeps_to_its_schema(case, callers):
    for headers in callers:
        # Raises on a server error or on a status, header or body the schema does not allow.
        response = case.call_and_validate(headers=headers)
        assert response.status_code < 500
