"""Ending a session ends its calls, on real processes: a 2025 client that DELETEs its session
while a workflow call runs, and a legacy SSE client that closes its stream, see the run end
`cancelled` with the reason within seconds, in direct mode (the run in the web process) and
in queued mode (the run on a Celery worker).

A web server per mode, each on its own database with the workflows of test_queued_runs.py,
whose slow `nap_twice` (two 2-second sleeps on the echo server) is called here. Requests are raw
JSON-RPC over httpx: the official client, leaving, would first send notifications/cancelled
for its call, which cancels the run by itself; here the call's request stays open while the
session ends, so only the end of the session can stop the run. The run rows are read
straight from the database.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.e2e.conftest import LiveServer, _database_url, needs_redis, start_server
from tests.e2e.test_queued_runs import (
    GRAPH,
    NAP_TWICE,
    _celery,
    _query,
    _running,
    run_with_nodes,
    wait_for,
)
from tests.peers import ECHO_SERVER

pytestmark = pytest.mark.slow

# Databases of their own on the Redis of REDIS_URL (other suites use 9 and 12 to 15).
CACHE_DATABASES = {"direct": 10, "queued": 11}
BROKER_DATABASE = 8
LEGACY = "2025-11-25"
NAP_SECONDS = 2.0
DELETED = "The client ended its session (DELETE)"
SSE_CLOSED = "The client closed its SSE stream"
# Seconds a run may take to end beyond the sleep under way when its session ends (a queued
# run's worker hears of it at its next heartbeat, 0.3 s; the rest is a busy machine).
SLACK = 3.0
# Each test's limit: the first one includes starting the servers and the worker on shared
# cores.
LIMIT = 150


@dataclass(frozen=True)
class Mode:
    server: LiveServer
    database_url: str


def _start(stack: ExitStack, tmp: Path, mode: str, redis_server: str | None) -> Mode:
    """A server in `mode` on a database of its own with the workflows of test_queued_runs.py,
    and in queued mode a Celery worker; ready to run them (the echo server started)."""
    database_url = _database_url(tmp, f"session_end_{mode}")
    settings = {"EXECUTION_MODE": mode, "DATABASE_URL": database_url}
    if redis_server:
        settings["REDIS_URL"] = f"{redis_server}/{CACHE_DATABASES[mode]}"
    if mode == "queued":
        settings["CELERY_BROKER_URL"] = f"{redis_server}/{BROKER_DATABASE}"
        # The worker sees a cancel asked from the web process at its next heartbeat.
        settings["GRAPHS_HEARTBEAT_SECONDS"] = "0.3"
    graph = tmp / "graph.yaml"
    graph.write_text(
        GRAPH.format(
            python=json.dumps(sys.executable),
            server=json.dumps(str(ECHO_SERVER)),
            nap_twice=NAP_TWICE.rstrip(),
        )
    )
    commands = [("import_graph", str(graph))]
    server = stack.enter_context(contextmanager(start_server)(tmp, commands, **settings))
    if mode == "queued":
        worker_args = ["worker", "--concurrency", "1", "--hostname", "session-end-tests@%h",
                       "--without-gossip", "--without-mingle"]  # fmt: skip
        worker = _celery(server.env, tmp / "worker.log", *worker_args, ready="ready.")
        stack.enter_context(_running(worker))
    _warm(server)
    return Mode(server, database_url)


def _started(tmp: Path, mode: str, redis_server: str | None) -> tuple[ExitStack, Mode]:
    """`_start` with a stack of its own, closed if it fails part way."""
    with ExitStack() as stack:
        started = _start(stack, tmp, mode, redis_server)
        return stack.pop_all(), started


@pytest.fixture(scope="module")
def modes(tmp_path_factory) -> Iterator[dict[str, Mode]]:
    """A direct server and, when REDIS_URL names a Redis, a queued one with its worker:
    started side by side (each on its own database), so the module waits for the slower."""
    configured = os.environ.get("REDIS_URL", "")
    redis_server = configured.rsplit("/", 1)[0] if configured else None
    wanted = ["direct"]
    if redis_server:
        import redis

        for database in (*CACHE_DATABASES.values(), BROKER_DATABASE):
            redis.Redis.from_url(f"{redis_server}/{database}").flushdb()
        wanted.append("queued")
    with ExitStack() as stack, ThreadPoolExecutor(max_workers=len(wanted)) as pool:
        futures = {
            mode: pool.submit(_started, tmp_path_factory.mktemp(mode), mode, redis_server)
            for mode in wanted
        }
        started: dict[str, Mode] = {}
        for mode, future in futures.items():
            try:
                mode_stack, started[mode] = future.result()
            except BaseException:
                # Stop what the other modes started before failing with this one.
                for other in futures.values():
                    if other is not future and other.exception() is None:
                        other.result()[0].close()
                raise
            stack.push(mode_stack.__exit__)
        yield started


MODES = ["direct", pytest.param("queued", marks=needs_redis)]


def _row(mode: Mode, run_id: int) -> dict[str, Any]:
    columns = ("status", "cancel_reason", "error", "finished_at")
    return run_with_nodes(mode.database_url, run_id, {column: column for column in columns})


def _nap1_running(mode: Mode, where: str, *params: Any) -> int:
    """The id of the one nap_twice run matching `where`, once its first sleep has begun."""

    def found() -> int | None:
        rows = _query(
            mode.database_url,
            f"SELECT id FROM graphs_run WHERE workflow_name = 'nap_twice' AND {where}",
            *params,
        )
        if len(rows) != 1:
            return None
        run_id = rows[0][0]
        return run_id if ("nap1", "running") in _row(mode, run_id)["nodes"] else None

    return wait_for(found, 30, "nap1 of the call did not start")


def _until_ended(mode: Mode, run_id: int) -> tuple[dict[str, Any], float]:
    """The run's row once it no longer runs, and when that was seen."""
    row = wait_for(
        lambda: (row := _row(mode, run_id))["status"] not in ("queued", "running") and row,
        NAP_SECONDS + 10,
        f"run {run_id} did not end",
    )
    return row, time.monotonic()


def _assert_cancelled_before_nap2(row: dict[str, Any], reason: str) -> None:
    assert row["status"] == "cancelled", row
    assert row["cancel_reason"] == reason
    assert f"before node 'nap2' ran: {reason}" in row["error"]
    assert row["finished_at"] is not None
    # The sleep under way finished; nap2 never started.
    assert row["nodes"] == [("entry", "succeeded"), ("nap1", "succeeded")]


def _rpc(method: str, request_id: int | None = None, params: dict | None = None) -> dict:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if request_id is not None:
        message["id"] = request_id
    return message


INITIALIZE = _rpc(
    "initialize",
    1,
    {
        "protocolVersion": LEGACY,
        "capabilities": {},
        "clientInfo": {"name": "session-end-tests", "version": "1"},
    },
)
CALL_NAP = _rpc("tools/call", 2, {"name": "nap_twice", "arguments": {"seconds": NAP_SECONDS}})


def _session(http: httpx2.Client) -> dict[str, str]:
    """Open a 2025 session; the headers that name it."""
    started = http.post("/mcp", json=INITIALIZE)
    assert started.status_code == 200, started.text
    session = {"Mcp-Session-Id": started.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
    initialized = http.post("/mcp", json=_rpc("notifications/initialized"), headers=session)
    assert initialized.status_code == 202, initialized.text
    return session


def _client(server: LiveServer) -> httpx2.Client:
    headers = {
        "Authorization": f"Bearer {server.key}",
        "Accept": "application/json, text/event-stream",
    }
    return httpx2.Client(base_url=server.url, headers=headers, timeout=30)


def _warm(server: LiveServer) -> None:
    """Start the echo server in the process that runs this server's workflows (a cold start
    takes seconds on a busy machine, and would count as part of the first sleep)."""
    shout = _rpc("tools/call", 9, {"name": "shout", "arguments": {"value": "warm"}})
    with _client(server) as http:
        answer = _answer(http.post("/mcp", json=shout, headers=_session(http)))
    assert answer["result"]["content"][0]["text"] == "WARM", answer


def _answer(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC answer of a call, sent as JSON or as the last event of a stream."""
    if response.headers["content-type"].startswith("application/json"):
        return response.json()
    events = [
        json.loads(line.removeprefix("data: "))
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]
    return events[-1]


@pytest.mark.timeout(LIMIT)
@pytest.mark.parametrize("mode", MODES)
def test_deleting_a_2025_session_cancels_its_running_call(modes, mode):
    target = modes[mode]
    server = target.server
    with _client(server) as http:
        session = _session(http)
        with ThreadPoolExecutor(max_workers=1) as pool:
            # The call's request stays open, waiting for its answer, while the session ends.
            call: Future[httpx2.Response] = pool.submit(
                http.post, "/mcp", json=CALL_NAP, headers=session
            )
            run_id = _nap1_running(target, "session_id = %s", session["Mcp-Session-Id"])
            assert not call.done()
            deleted = http.delete("/mcp", headers=session)
            deleted_at = time.monotonic()
            assert deleted.status_code == 200, deleted.text
            row, ended_at = _until_ended(target, run_id)
            answer = _answer(call.result(timeout=15))

    _assert_cancelled_before_nap2(row, DELETED)
    # Within the sleep under way (at most NAP_SECONDS) of the DELETE, give or take a worker's
    # heartbeat and a busy machine; left alone, it would have slept NAP_SECONDS more, and
    # succeeded.
    assert ended_at - deleted_at < NAP_SECONDS + SLACK, ended_at - deleted_at
    # The open call is answered: its run was cancelled.
    result = answer["result"]
    assert result["isError"] is True, answer
    assert "cancelled" in result["content"][0]["text"], answer
    # The session is gone.
    with _client(server) as http:
        gone = http.post("/mcp", json=_rpc("ping", 3), headers=session)
    assert gone.status_code == 404


@pytest.mark.timeout(LIMIT)
@pytest.mark.parametrize("mode", MODES)
def test_closing_a_legacy_sse_stream_cancels_its_running_call(modes, mode):
    target = modes[mode]
    server = target.server
    auth = {"Authorization": f"Bearer {server.key}"}
    [(before,)] = _query(target.database_url, "SELECT coalesce(max(id), 0) FROM graphs_run")
    with httpx2.Client(base_url=server.url, headers=auth, timeout=30) as http:
        with http.stream("GET", "/sse") as stream:
            assert stream.status_code == 200
            lines = stream.iter_lines()
            endpoint = next(line for line in lines if line.startswith("data: "))
            endpoint = endpoint.removeprefix("data: ")
            assert endpoint.startswith("/messages?channel=")

            assert http.post(endpoint, json=INITIALIZE).status_code == 202
            initialized = json.loads(
                next(line for line in lines if line.startswith("data: ")).removeprefix("data: ")
            )
            assert initialized["result"]["protocolVersion"] == LEGACY
            assert http.post(endpoint, json=_rpc("notifications/initialized")).status_code == 202
            assert http.post(endpoint, json=CALL_NAP).status_code == 202
            run_id = _nap1_running(target, "id > %s", before)
            # Leaving the block closes the stream while the call runs.
        closed_at = time.monotonic()

        row, ended_at = _until_ended(target, run_id)
        assert http.post(endpoint, json=_rpc("ping", 3)).status_code == 404

    _assert_cancelled_before_nap2(row, SSE_CLOSED)
    assert ended_at - closed_at < NAP_SECONDS + SLACK, ended_at - closed_at
    [(session_id,)] = _query(
        target.database_url, "SELECT session_id FROM graphs_run WHERE id = %s", run_id
    )
    assert session_id  # the run was started within the stream's session
