"""Building requests to /mcp in both protocol eras, and reading their answers."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync

from mcp_endpoint.access.keys import api_key_create
from mcp_endpoint.models import Scope

URL = "/mcp"
MODERN = "2026-07-28"
LATEST_LEGACY = "2025-11-25"
JSON = "application/json"
BOTH = "application/json, text/event-stream"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
NAME_FIELDS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def make_key(scopes: list[str] | None = None, **extra: Any) -> str:
    """A new API key (all scopes unless told) as its secret string."""
    _, secret = api_key_create(
        name="tests", scopes=list(Scope.values) if scopes is None else scopes, **extra
    )
    return secret


def auth_headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def envelope(meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `_meta` every 2026-07-28 request carries."""
    return {VERSION_KEY: MODERN, CAPABILITIES_KEY: {}, **(meta or {})}


def post(
    client,
    body: Any,
    *,
    headers: dict[str, str] | None = None,
    raw: bool = False,
    content_type: str = JSON,
    url: str = URL,
):
    """POST a body (JSON-encoded unless `raw`) to `url` (/mcp) with the given headers.

    The Content-Type is set even for an empty body (the test client would drop it)."""
    data = body if raw else json.dumps(body)
    return client.generic(
        "POST",
        url,
        data,
        content_type=content_type,
        headers=headers or {},
        CONTENT_TYPE=content_type,
    )


def modern(
    client,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    key: str | None = None,
    request_id: Any = 1,
    meta: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    accept: str = JSON,
    url: str = URL,
):
    """A 2026-07-28 request to `url`: `_meta` envelope in the body, routing headers to match."""
    params = dict(params or {})
    params["_meta"] = envelope({**params.get("_meta", {}), **(meta or {})})
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if request_id is not None:
        body["id"] = request_id
    sent = {
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
        "Accept": accept,
        **auth_headers(key),
    }
    if method in NAME_FIELDS and isinstance(params.get(NAME_FIELDS[method]), str):
        sent["Mcp-Name"] = params[NAME_FIELDS[method]]
    sent.update(headers or {})
    return post(client, body, headers={k: v for k, v in sent.items() if v is not None}, url=url)


def legacy_session(
    client,
    key: str | None,
    version: str = LATEST_LEGACY,
    *,
    initialized: bool = True,
    url: str = URL,
) -> str:
    """Open a 2025 session at `url` with `initialize` (and `notifications/initialized`); its
    id."""
    response = initialize(client, key, version, url=url)
    assert response.status_code == 200, response.content
    session_id = response["Mcp-Session-Id"]
    if initialized:
        note = legacy(
            client, session_id, "notifications/initialized", key=key, request_id=None, url=url
        )
        assert note.status_code == 202, note.content
    return session_id


def initialize(client, key: str | None, version: str = LATEST_LEGACY, headers=None, url=URL):
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "tests", "version": "1"},
        },
    }
    headers = {"Accept": BOTH, **auth_headers(key), **(headers or {})}
    return post(client, body, headers=headers, url=url)


def legacy(
    client,
    session_id: str | None,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    key: str | None = None,
    request_id: Any = 1,
    version: str | None = None,
    headers: dict[str, str] | None = None,
    accept: str = BOTH,
    url: str = URL,
):
    """A request inside a 2025 session at `url` (no `_meta` envelope)."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        body["params"] = params
    if request_id is not None:
        body["id"] = request_id
    sent = {"Accept": accept, **auth_headers(key)}
    if session_id is not None:
        sent["Mcp-Session-Id"] = session_id
    if version is not None:
        sent["MCP-Protocol-Version"] = version
    sent.update(headers or {})
    return post(client, body, headers=sent, url=url)


def read_stream(response) -> bytes:
    """The whole body of a streaming (server-sent events) response."""
    if not response.is_async:
        return b"".join(response.streaming_content)

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(collect)()


def sse_messages(response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE response, in order."""
    assert response["Content-Type"].startswith("text/event-stream")
    messages = []
    for event in read_stream(response).decode().split("\n\n"):
        data = [line[len("data: ") :] for line in event.splitlines() if line.startswith("data: ")]
        if data:
            messages.append(json.loads("\n".join(data)))
    return messages


def rpc_error(response) -> dict[str, Any]:
    """The `error` object of a JSON-RPC error response."""
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert "result" not in body
    return body["error"]


def result(response) -> dict[str, Any]:
    """The `result` of a successful JSON-RPC response (HTTP 200)."""
    assert response.status_code == 200, response.content
    body = response.json()
    assert "error" not in body, body
    return body["result"]


def disable_workflow(name: str) -> None:
    """Disable a workflow, from a thread of the test's own (run it with asyncio.to_thread):
    that thread's database connection is closed after, or PostgreSQL would keep the test
    database."""
    from django.db import connections

    from graphs.authoring.services import workflow_set_enabled
    from graphs.models import Workflow

    try:
        workflow_set_enabled(workflow=Workflow.objects.get(name=name), enabled=False)
    finally:
        connections.close_all()
