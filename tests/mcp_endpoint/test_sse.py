"""The legacy HTTP+SSE transport (`GET /sse`, `POST /messages`) through the lean ASGI app,
in one process (the in-process relay, or Redis when REDIS_URL is set)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from mcp_endpoint.access.auth import authenticate
from mcp_endpoint.protocol import sessions
from mcp_endpoint.transports.asgi import sse_app
from nodespecs.callers import Caller
from tests.mcp_endpoint.helpers import (
    LATEST_LEGACY,
    MODERN,
    disable_workflow,
    envelope,
    make_key,
)

WAIT_SECONDS = 10


@pytest.fixture(autouse=True)
def _one_worker_thread(worker_thread) -> None:
    """Every test here runs the app on the one worker thread of `worker_thread` (conftest)."""


@dataclass
class Exchange:
    """What the app sent for one request: status, headers and body chunks."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def json(self) -> Any:
        return json.loads(self.body)


def _scope(method: str, path: str, headers: dict[str, str], query: str) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query.encode(),
        "headers": [(n.lower().encode(), v.encode()) for n, v in headers.items()],
        "client": ("127.0.0.1", 5000),
    }


def _start(
    method: str,
    path: str,
    *,
    key: str | None,
    body: bytes = b"",
    query: str = "",
    headers: dict[str, str] | None = None,
) -> tuple[Exchange, asyncio.Event, asyncio.Task[None]]:
    """Run one request in the background; set the returned event to disconnect the client."""
    sent = {"host": "localhost", "content-type": "application/json", **(headers or {})}
    if key:
        sent["authorization"] = f"Bearer {key}"
    sent["content-length"] = str(len(body))
    exchange, leave = Exchange(), asyncio.Event()
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await leave.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            exchange.status = message["status"]
            exchange.headers = {n.decode(): v.decode() for n, v in message["headers"]}
            exchange.started.set()
        elif message.get("body"):
            exchange.chunks.append(message["body"])
            exchange.arrived.set()

    task = asyncio.create_task(sse_app(_scope(method, path, sent, query), receive, send))
    return exchange, leave, task


async def _request(method: str, path: str, **kwargs: Any) -> Exchange:
    exchange, _, task = _start(method, path, **kwargs)
    await asyncio.wait_for(task, WAIT_SECONDS)
    return exchange


async def _next_event(stream: Exchange) -> bytes:
    """The stream's next chunk that is not a keep-alive."""
    async with asyncio.timeout(WAIT_SECONDS):
        while True:
            while not stream.chunks:
                stream.arrived.clear()
                await stream.arrived.wait()
            chunk = stream.chunks.pop(0)
            if not chunk.startswith(b":"):
                return chunk


def _data(event: bytes) -> Any:
    return json.loads(event.split(b"data: ", 1)[1])


def _message(method: str, request_id: int | None = None, params: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if request_id is not None:
        message["id"] = request_id
    return json.dumps(message).encode()


def _initialize(version: str) -> bytes:
    return _message(
        "initialize",
        1,
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "tests", "version": "1"},
        },
    )


INITIALIZE = _initialize(LATEST_LEGACY)


async def _open(key: str) -> tuple[Exchange, asyncio.Event, asyncio.Task[None], str]:
    """Open a stream; its endpoint's channel."""
    stream, leave, task = _start("GET", "/sse", key=key)
    endpoint = await _next_event(stream)
    assert endpoint.startswith(b"event: endpoint\ndata: /messages?channel=")
    channel_id = endpoint.decode().split("channel=", 1)[1].strip()
    return stream, leave, task, channel_id


async def _close(leave: asyncio.Event, task: asyncio.Task[None]) -> None:
    leave.set()
    await asyncio.wait_for(task, WAIT_SECONDS)


def test_a_stream_answers_posted_messages_and_ends_its_session_when_it_closes(key):
    async def scenario() -> None:
        stream, leave, task, channel_id = await _open(key)
        assert stream.status == 200
        assert stream.headers["content-type"] == "text/event-stream"
        query = f"channel={channel_id}"

        posted = await _request("POST", "/messages", key=key, body=INITIALIZE, query=query)
        assert (posted.status, posted.body) == (202, b"")
        initialized = _data(await _next_event(stream))
        assert initialized["result"]["protocolVersion"] == LATEST_LEGACY
        note = await _request(
            "POST", "/messages", key=key, body=_message("notifications/initialized"), query=query
        )
        assert note.status == 202
        listed = await _request(
            "POST", "/messages", key=key, body=_message("tools/list", 2), query=query
        )
        assert listed.status == 202
        event = await _next_event(stream)
        assert event.startswith(b"event: message\n")
        assert "search_nodes" in [tool["name"] for tool in _data(event)["result"]["tools"]]
        session_id = sessions.channel_get(channel_id, owner=_identity(key))["session"]

        await _close(leave, task)
        assert sessions.channel_get(channel_id, owner=_identity(key)) is None
        assert sessions.session_get(session_id, owner=_identity(key)) is None
        after = await _request(
            "POST", "/messages", key=key, body=_message("tools/list", 3), query=query
        )
        assert after.status == 404

    asyncio.run(scenario())


def _identity(key: str) -> str:
    caller = authenticate({"authorization": f"Bearer {key}"}, "127.0.0.1")
    assert isinstance(caller, Caller)
    return caller.actor


def test_a_request_refused_by_scope_is_answered_on_the_stream(transactional_db):
    reader = make_key(scopes=[])

    async def scenario() -> None:
        stream, leave, task, channel_id = await _open(reader)
        query = f"channel={channel_id}"
        await _request("POST", "/messages", key=reader, body=INITIALIZE, query=query)
        await _next_event(stream)
        refused = await _request(
            "POST", "/messages", key=reader, body=_message("tools/list", 2), query=query
        )
        assert refused.status == 202
        answer = _data(await _next_event(stream))
        assert answer["id"] == 2
        assert "scope" in answer["error"]["message"]
        await _close(leave, task)

    asyncio.run(scenario())


@pytest.mark.parametrize("path", ["/sse", "/messages"])
def test_without_a_key_both_steps_are_refused(transactional_db, path):
    method = "GET" if path == "/sse" else "POST"
    answer = asyncio.run(_request(method, path, key=None, body=INITIALIZE, query="channel=x"))
    assert answer.status == 401
    assert "Authorization: Bearer" in answer.json()["error"]["message"]
    assert answer.headers["www-authenticate"].startswith("Bearer")


def test_a_stream_belongs_to_the_key_that_opened_it(key):
    other = make_key()

    async def scenario() -> Exchange:
        _, leave, task, channel_id = await _open(key)
        answer = await _request(
            "POST", "/messages", key=other, body=INITIALIZE, query=f"channel={channel_id}"
        )
        await _close(leave, task)
        return answer

    answer = asyncio.run(scenario())
    assert answer.status == 404
    assert "another API key" in answer.json()["error"]["message"]


def test_an_unknown_session_is_not_found_and_says_how_to_start_one(key):
    answer = asyncio.run(
        _request("POST", "/messages", key=key, body=INITIALIZE, query="channel=nope")
    )
    assert answer.status == 404
    error = answer.json()["error"]
    assert error["code"] == -32600
    assert "GET /sse" in error["message"]


def test_a_request_before_initialize_is_accepted_and_told_on_the_stream_to_initialize(key):
    async def scenario() -> tuple[Exchange, Exchange, dict[str, Any]]:
        stream, leave, task, channel_id = await _open(key)
        query = f"channel={channel_id}"
        note = await _request(
            "POST", "/messages", key=key, body=_message("notifications/initialized"), query=query
        )
        posted = await _request(
            "POST", "/messages", key=key, body=_message("tools/list", 7), query=query
        )
        # The notification had no answer: the request's is the stream's next event.
        answer = _data(await _next_event(stream))
        await _close(leave, task)
        return note, posted, answer

    note, posted, answer = asyncio.run(scenario())
    assert (note.status, posted.status) == (202, 202)
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32600
    assert "initialize first" in answer["error"]["message"]


def _modern_message(method: str, request_id: int, params: dict[str, Any] | None = None) -> bytes:
    """A 2026-07-28 request as an SSE client posts it: the envelope in `_meta`, no headers."""
    return _message(method, request_id, {**(params or {}), "_meta": envelope()})


def test_a_discover_probe_before_initialize_is_answered_and_so_are_stateless_requests(key):
    """The official Python client's default mode opens with `server/discover` and, answered,
    sends every request with the 2026-07-28 envelope, no session (as to the SDK's SSE server)."""

    async def scenario() -> list[tuple[int, dict[str, Any]]]:
        stream, leave, task, channel_id = await _open(key)
        query = f"channel={channel_id}"
        answers = []
        for request_id, method, params in [
            (1, "server/discover", {}),
            (2, "tools/list", {}),
            (3, "tools/call", {"name": "get_node_types", "arguments": {}}),
        ]:
            body = _modern_message(method, request_id, params)
            posted = await _request("POST", "/messages", key=key, body=body, query=query)
            answers.append((posted.status, _data(await _next_event(stream))))
        await _close(leave, task)
        return answers

    (discovered, listed, called) = asyncio.run(scenario())
    assert [status for status, _ in (discovered, listed, called)] == [202, 202, 202]
    assert discovered[1]["id"] == 1
    assert discovered[1]["result"]["supportedVersions"] == [MODERN]
    assert "search_nodes" in [tool["name"] for tool in listed[1]["result"]["tools"]]
    assert len(called[1]["result"]["structuredContent"]) == 8


def test_a_stream_of_a_key_without_tools_read_never_hears_that_the_tools_changed(key, monkeypatch):
    """As a 2025 session's GET stream refuses such a key: it may not list tools."""
    from mcp_endpoint.protocol import list_changes
    from tests.graph_files import import_file

    monkeypatch.setattr(list_changes, "LISTEN_POLL_SECONDS", 0.05)
    import_file("loops.yaml")
    caller = make_key(scopes=["tools:execute"])

    async def scenario() -> list[bytes]:
        reader, leave_reader, reading, _ = await _open(key)
        stream, leave, task, _ = await _open(caller)
        await asyncio.sleep(0.3)  # both watchers (if any) have taken the list as it is
        await asyncio.to_thread(disable_workflow, "sum_to")
        heard = _data(await _next_event(reader))
        assert heard["method"] == "notifications/tools/list_changed"
        await asyncio.sleep(0.5)  # ten polls more than the reader needed
        await _close(leave_reader, reading)
        await _close(leave, task)
        return [chunk for chunk in stream.chunks if not chunk.startswith(b":")]

    assert asyncio.run(scenario()) == []


def test_an_oversized_body_is_refused_before_it_is_read(key, settings):
    settings.MCP_MAX_BODY_BYTES = 100
    answer = asyncio.run(
        _request("POST", "/messages", key=key, body=b" " * 101 + INITIALIZE, query="channel=x")
    )
    assert answer.status == 413
    assert "MCP_MAX_BODY_BYTES" in answer.json()["error"]["message"]


@pytest.mark.parametrize("path", ["/sse", "/messages"])
def test_a_foreign_host_or_origin_is_refused(key, path):
    method = "GET" if path == "/sse" else "POST"
    host = asyncio.run(_request(method, path, key=key, headers={"host": "evil.example"}))
    assert host.status == 400
    assert b"ALLOWED_HOSTS" in host.body
    origin = asyncio.run(
        _request(method, path, key=key, headers={"origin": "https://evil.example"})
    )
    assert origin.status == 403
    assert b"MCP_ALLOWED_ORIGINS" in origin.body


def test_a_message_that_is_not_json_is_a_parse_error_on_the_post(key):
    async def scenario() -> Exchange:
        _, leave, task, channel_id = await _open(key)
        answer = await _request(
            "POST", "/messages", key=key, body=b"{not json", query=f"channel={channel_id}"
        )
        await _close(leave, task)
        return answer

    answer = asyncio.run(scenario())
    assert answer.status == 400
    assert answer.json()["error"]["code"] == -32700


def test_the_transports_own_revision_is_negotiated(key):
    async def scenario() -> dict[str, Any]:
        stream, leave, task, channel_id = await _open(key)
        await _request(
            "POST",
            "/messages",
            key=key,
            body=_initialize("2024-11-05"),
            query=f"channel={channel_id}",
        )
        answer = _data(await _next_event(stream))
        await _close(leave, task)
        return answer

    assert asyncio.run(scenario())["result"]["protocolVersion"] == "2024-11-05"


def test_a_stream_hears_that_the_tools_changed(key, monkeypatch):
    from mcp_endpoint.protocol import list_changes
    from tests.graph_files import import_file

    monkeypatch.setattr(list_changes, "LISTEN_POLL_SECONDS", 0.05)
    import_file("loops.yaml")

    async def scenario() -> None:
        stream, leave, task, _ = await _open(key)
        await asyncio.sleep(0.3)  # the stream's watcher has taken the list as it is
        await asyncio.to_thread(disable_workflow, "sum_to")
        changed = _data(await _next_event(stream))
        assert changed == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        await _close(leave, task)

    asyncio.run(scenario())


def test_a_caller_holds_a_bounded_number_of_sse_streams_and_gets_one_back_when_it_closes(
    key, settings
):
    settings.MCP_STREAMS_PER_CALLER = 1

    async def scenario() -> tuple[int, int]:
        _, leave, task, _ = await _open(key)
        refused = await _request("GET", "/sse", key=key)
        await _close(leave, task)
        _, leave, task, _ = await _open(key)  # the place closing gave back
        await _close(leave, task)
        return refused.status, refused.json()["error"]["message"]

    status, message = asyncio.run(scenario())

    assert status == 429
    assert "MCP_STREAMS_PER_CALLER" in message
