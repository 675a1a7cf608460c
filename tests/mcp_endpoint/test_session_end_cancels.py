"""Ending a 2025 session ends its calls: `DELETE /mcp` with the session's id, or the close of
the legacy SSE stream that started it, cancels the queued and running runs of that session,
with the reason recorded; runs of other sessions, and finished runs, are left alone.

The runs are rows written directly (no workflow executes here); a running one is registered
in this process as a direct run's execution is, so the test sees its engine told to stop.
DELETE is sent through Django's view (the test client) and through the lean ASGI app that
uvicorn serves, which answers some requests in its event loop. tests/e2e/test_session_end.py
proves the same on live servers with real runs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from graphs.authoring.files import graph_import
from graphs.engine import CancelToken
from graphs.execution import liveness
from graphs.models import Run, Workflow
from mcp_endpoint.protocol import sessions
from mcp_endpoint.transports import asgi
from nodespecs.callers import caller_command
from tests.mcp_endpoint.helpers import BOTH, LATEST_LEGACY, legacy, legacy_session, make_key
from tests.mcp_endpoint.test_sse import (
    INITIALIZE,
    _close,
    _identity,
    _message,
    _next_event,
    _open,
    _request,
    _scope,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(30),
    # The app on one worker thread whose database connection is closed afterwards.
    pytest.mark.usefixtures("worker_thread"),
]

DELETED = "The client ended its session (DELETE)"
SSE_CLOSED = "The client closed its SSE stream"

GRAPH = """
version: "1.0"
server: {name: "sessionEnd", version: "1.0.0"}
tools:
  - name: hello
    description: Says hello.
    inputSchema: {type: object}
    nodes:
      - {id: entry, type: entry, next: exit}
      - {id: exit, type: exit}
"""


@pytest.fixture(autouse=True)
def sync_thread_connections() -> Iterator[None]:
    """A closed SSE stream ends its session in asgiref's one thread for sync code (the app
    calls it with sync_to_async, outside any request), which now queries the database: close
    that thread's connection afterwards, or the test database (PostgreSQL) cannot be dropped."""
    yield
    asyncio.run(sync_to_async(connections.close_all)())


@pytest.fixture
def workflow(transactional_db) -> Workflow:
    graph_import(text=GRAPH, caller=caller_command("import_graph"))
    return Workflow.objects.get(name="hello")


def add_run(workflow: Workflow, session_id: str, status: str) -> Run:
    return Run.objects.create(
        workflow=workflow,
        version=workflow.current_version,
        workflow_name=workflow.name,
        status=status,
        session_id=session_id,
        request_id="7",
    )


def delete(client, session_id: str, key: str):
    return client.delete(
        "/mcp", headers={"Mcp-Session-Id": session_id, "Authorization": f"Bearer {key}"}
    )


def state(run: Run) -> tuple[str, str, str]:
    run.refresh_from_db()
    return run.status, run.cancel_reason, run.error


def test_delete_cancels_the_sessions_queued_and_running_runs_and_nothing_else(
    client, key, workflow
):
    ended = legacy_session(client, key)
    other = legacy_session(client, key)
    queued = add_run(workflow, ended, Run.Status.QUEUED)
    running = add_run(workflow, ended, Run.Status.RUNNING)
    finished = add_run(workflow, ended, Run.Status.SUCCEEDED)
    failed = add_run(workflow, ended, Run.Status.FAILED)
    others = [add_run(workflow, other, status) for status in Run.ACTIVE]
    sessionless = add_run(workflow, "", Run.Status.RUNNING)

    token = CancelToken()
    with liveness.registry.watching(running, token):
        assert delete(client, ended, key).status_code == 200
        # The running run executes in this process (a direct run): its engine is told at once.
        assert token.cancelled
        assert token.reason == DELETED

    # A queued run ends at once; a running one is asked to stop before its next node (its
    # executor then ends it `cancelled`).
    assert state(queued) == (
        Run.Status.CANCELLED,
        DELETED,
        f"Cancelled before it started: {DELETED}",
    )
    assert queued.finished_at is not None
    assert state(running) == (Run.Status.RUNNING, DELETED, "")
    # Finished runs of the session, runs of another session, and runs of no session: untouched.
    assert state(finished) == (Run.Status.SUCCEEDED, "", "")
    assert state(failed) == (Run.Status.FAILED, "", "")
    for run in [*others, sessionless]:
        assert state(run)[1:] == ("", ""), run
    assert [run.status for run in others] == list(Run.ACTIVE)
    assert sessionless.status == Run.Status.RUNNING
    # The other session goes on.
    ping = legacy(client, other, "ping", key=key, request_id=2)
    assert ping.status_code == 200
    assert ping.json()["result"] == {}


def test_a_delete_refused_for_another_key_cancels_nothing(client, key, workflow):
    session = legacy_session(client, key)
    running = add_run(workflow, session, Run.Status.RUNNING)
    queued = add_run(workflow, session, Run.Status.QUEUED)

    assert delete(client, session, make_key()).status_code == 404

    assert state(running) == (Run.Status.RUNNING, "", "")
    assert state(queued) == (Run.Status.QUEUED, "", "")
    assert legacy(client, session, "ping", key=key, request_id=2).status_code == 200


def test_closing_a_legacy_sse_stream_cancels_its_sessions_runs(key, workflow):
    identity = _identity(key)

    async def scenario() -> tuple[str, list[Run]]:
        stream, leave, task, channel_id = await _open(key)
        query = f"channel={channel_id}"
        await _request("POST", "/messages", key=key, body=INITIALIZE, query=query)
        await _next_event(stream)  # the initialize result
        note = _message("notifications/initialized")
        assert (await _request("POST", "/messages", key=key, body=note, query=query)).status == 202
        session_id = sessions.channel_get(channel_id, owner=identity)["session"]
        # In the app's worker thread, whose database connection the fixture closes.
        runs = await asyncio.get_running_loop().run_in_executor(
            asgi._POOL,
            lambda: [
                add_run(workflow, session_id, Run.Status.QUEUED),
                add_run(workflow, session_id, Run.Status.RUNNING),
                add_run(workflow, session_id, Run.Status.SUCCEEDED),
                add_run(workflow, "another-session", Run.Status.RUNNING),
            ],
        )
        await _close(leave, task)
        return session_id, runs

    session_id, (queued, running, finished, foreign) = asyncio.run(scenario())

    assert sessions.session_get(session_id, owner=identity) is None
    assert state(queued) == (
        Run.Status.CANCELLED,
        SSE_CLOSED,
        f"Cancelled before it started: {SSE_CLOSED}",
    )
    assert state(running) == (Run.Status.RUNNING, SSE_CLOSED, "")
    assert state(finished) == (Run.Status.SUCCEEDED, "", "")
    assert state(foreign) == (Run.Status.RUNNING, "", "")


async def _mcp(
    method: str, key: str, body: Any = None, **headers: str
) -> tuple[int, dict[str, str], bytes]:
    """One request to `/mcp` through the lean ASGI app that uvicorn serves."""
    data = json.dumps(body).encode() if body is not None else b""
    sent = {
        "host": "localhost",
        "authorization": f"Bearer {key}",
        "accept": BOTH,
        "content-length": str(len(data)),
        **({"content-type": "application/json"} if data else {}),
        **headers,
    }
    answer: dict[str, Any] = {"status": 0, "headers": {}, "chunks": []}
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": data, "more_body": False}
        await asyncio.Event().wait()  # the client stays until the answer is sent
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = {n.decode(): v.decode() for n, v in message["headers"]}
        elif message.get("body"):
            answer["chunks"].append(message["body"])

    await asyncio.wait_for(asgi.mcp_app(_scope(method, "/mcp", sent, ""), receive, send), 10)
    return answer["status"], answer["headers"], b"".join(answer["chunks"])


INITIALIZE_REQUEST = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": LATEST_LEGACY,
        "capabilities": {},
        "clientInfo": {"name": "tests", "version": "1"},
    },
}


def test_delete_through_the_asgi_app_ends_the_session_and_cancels_its_runs(key, workflow):
    """As under uvicorn, where a request of a key the app already knows is answered in the
    event loop when no query is needed: ending a session, which cancels runs, needs one."""

    async def scenario() -> tuple[int, bytes, int, list[Run]]:
        status, headers, body = await _mcp("POST", key, INITIALIZE_REQUEST)
        assert status == 200, body
        session = {"mcp-session-id": headers["mcp-session-id"]}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await _mcp("POST", key, note, **session))[0] == 202
        runs = await asyncio.get_running_loop().run_in_executor(
            asgi._POOL,
            lambda: [
                add_run(workflow, session["mcp-session-id"], Run.Status.QUEUED),
                add_run(workflow, session["mcp-session-id"], Run.Status.RUNNING),
                add_run(workflow, "another-session", Run.Status.RUNNING),
            ],
        )
        status, _, body = await _mcp("DELETE", key, **session)
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        after, _, _ = await _mcp("POST", key, ping, **session)
        return status, body, after, runs

    status, body, after, (queued, running, foreign) = asyncio.run(scenario())

    assert status == 200, body
    assert after == 404
    assert state(queued)[:2] == (Run.Status.CANCELLED, DELETED)
    assert state(running) == (Run.Status.RUNNING, DELETED, "")
    assert state(foreign) == (Run.Status.RUNNING, "", "")
