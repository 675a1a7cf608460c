"""The Origin rule: an origin is read strictly as scheme, host and port, or refused."""

from __future__ import annotations

import pytest

from mcp_endpoint.access.origins import Origin, origin_allowed, parse_origin
from tests.mcp_endpoint.helpers import modern


@pytest.mark.parametrize(
    ("origin", "parsed"),
    [
        ("http://127.0.0.1:8765", Origin("http", "127.0.0.1", 8765)),
        ("HTTPS://App.Example", Origin("https", "app.example", 443)),
        ("http://[::1]:8000", Origin("http", "[::1]", 8000)),
        ("http://localhost", Origin("http", "localhost", 80)),
    ],
)
def test_it_reads_a_serialised_origin(origin, parsed):
    assert parse_origin(origin) == parsed


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:8765.evil.com",  # a lenient parser reads host 127.0.0.1
        "http://localhost:80@evil.com",  # user info
        "http://evil.com#@127.0.0.1",  # fragment
        "http://127.0.0.1:8765/",  # a path
        "http://127.0.0.1:99999",  # no such port
        "http://127.0.0.1:",  # an empty port
        "ftp://127.0.0.1",  # not a web scheme
        "null",  # an opaque origin
        "http://127.0.0.1 ",
        "",
    ],
)
def test_it_refuses_anything_else(origin):
    assert parse_origin(origin) is None
    assert not origin_allowed(origin, "127.0.0.1:8765")


@pytest.mark.parametrize(
    ("origin", "host", "allowed"),
    [
        ("http://testserver", "testserver", True),
        ("http://testserver:80", "testserver", True),
        ("https://testserver", "testserver:443", True),
        ("http://testserver:8080", "testserver", False),
        ("http://other.example", "testserver", False),
        ("http://localhost:5173", "127.0.0.1:8000", True),
        ("http://[::1]:5173", "localhost:8000", True),
        ("http://localhost:5173", "testserver", False),
        ("http://127.0.0.1.evil.com", "127.0.0.1:8765", False),
    ],
)
def test_it_allows_the_same_origin_and_local_pages_on_a_local_server(origin, host, allowed):
    assert origin_allowed(origin, host) is allowed


@pytest.mark.django_db
def test_the_endpoint_refuses_a_host_lookalike_origin(client, key):
    headers = {"Origin": "http://127.0.0.1:8765.evil.com", "Host": "127.0.0.1:8765"}
    response = modern(client, "tools/list", key=key, headers=headers)
    assert response.status_code == 403
    assert "MCP_ALLOWED_ORIGINS" in response.content.decode()
