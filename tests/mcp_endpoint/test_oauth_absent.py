"""What a client that follows the MCP authorization spec finds while this server offers no
OAuth: each OAuth discovery URL and `/register` answers a JSON 404 saying the server takes API
keys and how to send one; no path MCP clients try answers an HTML page, with DEBUG on (the
README's start) or off, under Django and under the ASGI app uvicorn serves."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import async_to_sync

from mcp_endpoint.transports import streamable_http
from tests.mcp_endpoint.helpers import BOTH, make_key, modern, rpc_error

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


@pytest.fixture(autouse=True)
def _oauth_off(settings):
    settings.OAUTH_ENABLED = False


OAUTH_URLS = [
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-protected-resource/mcp/countfiles",
    "/.well-known/oauth-protected-resource/sse",
    "/.well-known/oauth-authorization-server",
    "/.well-known/oauth-authorization-server/mcp",
    "/.well-known/openid-configuration",
    "/.well-known/openid-configuration/mcp",
    "/register",
    "/authorize",
    "/token",
]
# What the answer must say: that OAuth is not offered, how to send a key, where keys come from.
OAUTH_WORDS = (
    "does not offer OAuth",
    "API keys",
    "'Authorization: Bearer KEY'",
    "'X-API-Key: KEY'",
    "in the admin",
    "manage.py create_api_key",
)


def assert_oauth_absent(status: int, content_type: str, body: bytes, path: str) -> None:
    assert status == 404, body
    assert content_type == "application/json", content_type
    answer = json.loads(body)
    assert answer["error"] == "oauth_not_offered"
    assert path in answer["error_description"]
    for words in OAUTH_WORDS:
        assert words in answer["error_description"], answer


async def asgi_request(method: str, path: str, headers: dict[str, str] | None = None):
    """`method path` through the ASGI app uvicorn serves (config.asgi): status, Content-Type
    and body."""
    from config.asgi import application

    sent: list[dict] = []
    pending = [{"type": "http.request", "body": b"{}", "more_body": False}]
    raw = {"host": "localhost", "content-type": "application/json", "content-length": "2"}
    raw.update({name.lower(): value for name, value in (headers or {}).items()})
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(name.encode(), value.encode()) for name, value in raw.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("localhost", 80),
    }

    async def receive():
        if pending:
            return pending.pop(0)
        await asyncio.sleep(60)  # the client stays until the answer is written
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    await asyncio.wait_for(application(scope, receive, send), timeout=30)
    start = next(message for message in sent if message["type"] == "http.response.start")
    response_headers = {name.decode().lower(): value.decode() for name, value in start["headers"]}
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], response_headers.get("content-type", ""), body


# Where OAuth is looked for.


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("path", OAUTH_URLS)
def test_each_oauth_url_is_a_json_404_saying_how_to_send_an_api_key(client, settings, path, method):
    settings.DEBUG = True
    response = client.generic(method, path, b"{}", content_type="application/json")
    assert_oauth_absent(response.status_code, response["Content-Type"], response.content, path)


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/openid-configuration"]
)
def test_under_uvicorn_the_oauth_urls_answer_the_same(settings, path, worker_thread):
    settings.DEBUG = True
    status, content_type, body = async_to_sync(asgi_request)("GET", path)
    assert_oauth_absent(status, content_type, body, path)


def test_under_uvicorn_a_client_registering_is_told_the_same(settings, worker_thread):
    settings.DEBUG = True
    status, content_type, body = async_to_sync(asgi_request)("POST", "/register")
    assert_oauth_absent(status, content_type, body, "/register")


# No HTML for MCP clients.


@pytest.mark.parametrize("debug", [True, False], ids=["debug", "no-debug"])
@pytest.mark.parametrize(
    "path", ["/mcp/x/y", "/mcp/", "/mcp/nosuch", "/mcp/.well-known/openid-configuration"]
)
def test_an_unknown_path_under_mcp_is_the_endpoint_s_json_rpc_404(client, settings, path, debug):
    settings.DEBUG = debug
    key = make_key()
    for response in (
        modern(client, "tools/list", key=key, url=path),
        client.get(path, headers={"Authorization": f"Bearer {key}", "Accept": BOTH}),
    ):
        assert response.status_code == 404, response.content
        assert response["Content-Type"] == "application/json"
        assert "No MCP server at /mcp/" in rpc_error(response)["message"]


@pytest.mark.parametrize("path", ["/sse", "/messages", "/sse/x", "/.well-known/x", "/register/x"])
def test_other_paths_mcp_clients_try_answer_json_where_django_serves_them(client, settings, path):
    settings.DEBUG = True
    for method in ("GET", "POST", "PUT"):
        response = client.generic(method, path, b"{}", content_type="application/json")
        assert response.status_code == 404, response.content
        assert response["Content-Type"] == "application/json"
        assert path in response.json()["error_description"]
    if path in ("/sse", "/messages"):
        assert "uvicorn" in response.json()["error_description"]


@pytest.mark.parametrize("path", ["/mcp/x/y", "/sse/x", "/.well-known/x"])
def test_under_uvicorn_unknown_paths_answer_json_too(settings, path, worker_thread):
    settings.DEBUG = True
    headers = {"Authorization": f"Bearer {make_key()}", "Accept": BOTH}
    status, content_type, body = async_to_sync(asgi_request)("POST", path, headers)
    assert status == 404, body
    assert content_type == "application/json"
    json.loads(body)


def test_a_fault_while_answering_is_a_json_rpc_500_not_the_debug_page(
    client, settings, monkeypatch, caplog
):
    settings.DEBUG = True

    def broken(inbound):
        raise RuntimeError("a bug")

    monkeypatch.setattr(streamable_http, "handle", broken)
    response = modern(client, "tools/list", key=make_key())
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    error = rpc_error(response)
    assert error["code"] == -32603
    assert "logged" in error["message"]
    assert "a bug" not in response.content.decode()
    assert "RuntimeError: a bug" in caplog.text
