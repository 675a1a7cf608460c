"""Two uvicorn instances on one database and one Redis: sessions and legacy SSE streams are
served by whichever instance a request lands on."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import anyio
import httpx2
import pytest
import redis
from mcp import Client
from mcp.client.sse import sse_client
from mcp.types import Implementation

from tests.e2e.conftest import LiveServer, _database_url, needs_redis, start_together
from tests.e2e.test_mcp_client import run

pytestmark = [pytest.mark.slow, needs_redis]

REDIS_DATABASE = 12
LATEST_LEGACY = "2025-11-25"


@dataclass(frozen=True)
class Pair:
    a: LiveServer
    b: LiveServer


@pytest.fixture(scope="module")
def instances(tmp_path_factory) -> Iterator[Pair]:
    """Instances A and B sharing a database (`_sse`) and Redis database 12 (flushed)."""
    base = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    redis_url = base.rsplit("/", 1)[0] + f"/{REDIS_DATABASE}"
    redis.Redis.from_url(redis_url).flushdb()
    shared = {
        "DATABASE_URL": _database_url(tmp_path_factory.mktemp("sse"), "sse"),
        "REDIS_URL": redis_url,
    }
    with ExitStack() as stack:
        a, b = start_together(
            stack,
            (tmp_path_factory.mktemp("a"), [], shared),
            (tmp_path_factory.mktemp("b"), [], shared),
        )
        yield Pair(a, b)


def _rpc(method: str, request_id: int | None = None, params: dict | None = None) -> dict:
    message: dict = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if request_id is not None:
        message["id"] = request_id
    return message


def test_a_streamable_http_session_continues_on_the_other_instance(instances):
    headers = {
        "Authorization": f"Bearer {instances.a.key}",
        "Accept": "application/json, text/event-stream",
    }
    with httpx2.Client(headers=headers, timeout=10) as http:
        started = http.post(
            f"{instances.a.url}/mcp",
            json=_rpc(
                "initialize",
                1,
                {
                    "protocolVersion": LATEST_LEGACY,
                    "capabilities": {},
                    "clientInfo": {"name": "switchyard-tests", "version": "1"},
                },
            ),
        )
        assert started.status_code == 200, started.text
        assert started.json()["result"]["protocolVersion"] == LATEST_LEGACY
        session = {"Mcp-Session-Id": started.headers["mcp-session-id"]}

        def post(server: LiveServer, message: dict) -> httpx2.Response:
            return http.post(f"{server.url}/mcp", json=message, headers=session)

        assert post(instances.b, _rpc("notifications/initialized")).status_code == 202
        listed = post(instances.b, _rpc("tools/list", 2))
        assert listed.status_code == 200, listed.text
        names = [tool["name"] for tool in listed.json()["result"]["tools"]]
        assert "search_nodes" in names
        called = post(
            instances.a,
            _rpc("tools/call", 3, {"name": "search_nodes", "arguments": {"query": "slack"}}),
        )
        assert called.status_code == 200, called.text
        assert called.json()["result"]["structuredContent"]["results"]

        ended = http.delete(f"{instances.b.url}/mcp", headers=session)
        assert ended.status_code == 200
        for server in (instances.a, instances.b):
            gone = post(server, _rpc("tools/list", 4))
            assert gone.status_code == 404
            assert "initialize" in gone.json()["error"]["message"]


class PostsTo(httpx2.AsyncBaseTransport):
    """Sends every POST to another instance (as a load balancer might), the rest as asked;
    records where each POST went and how it was answered."""

    def __init__(self, other: str) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.other = httpx2.URL(other)
        self.posts: list[tuple[str, int]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "POST":
            request.url = request.url.copy_with(port=self.other.port)
            request.headers["Host"] = f"{self.other.host}:{self.other.port}"
        response = await self.inner.handle_async_request(request)
        if request.method == "POST":
            self.posts.append((str(request.url), response.status_code))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_the_official_sse_client_streams_from_one_instance_and_posts_to_the_other(
    instances, mode, version
):
    """In its default mode the client opens with a `server/discover` probe, answered on the
    stream, and goes on statelessly; in legacy mode it starts a session with `initialize`."""
    transport = PostsTo(instances.b.url)

    def factory(headers=None, timeout=None, auth=None) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth, transport=transport)

    async def scenario():
        with anyio.fail_after(30):
            async with Client(
                sse_client(
                    f"{instances.a.url}/sse",
                    headers={"Authorization": f"Bearer {instances.a.key}"},
                    timeout=10,
                    sse_read_timeout=20,
                    httpx_client_factory=factory,
                ),
                mode=mode,
                client_info=Implementation(name="switchyard-tests", version="1"),
            ) as client:
                assert client.protocol_version == version
                tools = await client.list_tools()
                found = await client.call_tool(
                    "search_nodes",
                    {"query": "remember earlier conversation turns", "max_results": 3},
                )
                return [t.name for t in tools.tools], found

    names, found = run(scenario)
    assert "search_nodes" in names
    assert not found.is_error
    assert found.structured_content["results"][0]["subtype"] == "CONVERSATION_BUFFER"
    # initialize and notifications/initialized (legacy) or server/discover (auto), then
    # tools/list and tools/call: all on B, all accepted.
    assert len(transport.posts) >= (4 if mode == "legacy" else 3)
    for url, status in transport.posts:
        assert url.startswith(f"{instances.b.url}/messages?channel="), url
        assert status == 202
