"""On uvicorn, no request to Django can make the server read an unbounded body: a body over
MAX_REQUEST_BODY_BYTES, declared or sent in chunks, is answered 413 naming the limit."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import LiveServer, start_server

LIMIT = 64 * 1024
pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[LiveServer]:
    yield from start_server(tmp_path_factory.mktemp("limits"), MAX_REQUEST_BODY_BYTES=str(LIMIT))


def _post(server: LiveServer, path: str, body: bytes | Iterator[bytes], **headers: str):
    parts = urlsplit(server.url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request(
            "POST",
            path,
            body=body,
            headers={"Authorization": f"Bearer {server.key}", **headers},
            encode_chunked=not isinstance(body, bytes),
        )
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type"), response.read()
    except (BrokenPipeError, ConnectionResetError):
        pytest.fail("the server dropped the connection instead of answering 413")
    finally:
        connection.close()


def _chunks(total: int) -> Iterator[bytes]:
    yield b'{"name": "search_nodes", "arguments": {"query": "'
    for _ in range(total // 8192):
        yield b"a" * 8192
    yield b'"}}'


def test_a_declared_oversized_rest_body_is_a_json_413(server):
    status, content_type, body = _post(
        server, "/api/v1/mcp/invoke", b"x" * (LIMIT + 1), **{"Content-Type": "application/json"}
    )

    assert status == 413
    assert content_type == "application/json"
    error = json.loads(body)["error"]
    assert f"{LIMIT} bytes (MAX_REQUEST_BODY_BYTES)" in error


def test_a_chunked_oversized_rest_body_is_a_json_413(server):
    status, content_type, body = _post(
        server, "/api/v1/mcp/invoke", _chunks(4 * LIMIT), **{"Content-Type": "application/json"}
    )

    assert (status, content_type) == (413, "application/json")
    assert "MAX_REQUEST_BODY_BYTES" in json.loads(body)["error"]


def test_a_chunked_oversized_body_to_the_sign_in_page_is_413(server):
    status, _, body = _post(
        server,
        "/admin/login/",
        _chunks(4 * LIMIT),
        **{"Content-Type": "application/x-www-form-urlencoded"},
    )

    assert status == 413
    assert b"MAX_REQUEST_BODY_BYTES" in body


def test_a_body_under_the_limit_is_served(server):
    body = json.dumps({"name": "search_nodes", "arguments": {"query": "send an email"}})
    status, _, answer = _post(
        server, "/api/v1/mcp/invoke", body.encode(), **{"Content-Type": "application/json"}
    )

    assert status == 200, answer
    assert json.loads(answer)["result"]["content"]
