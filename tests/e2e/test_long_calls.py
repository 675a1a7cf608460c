"""Long workflow calls over /mcp on real processes, in both execution modes: progress sent
while the run goes, the 2026-07-28 tasks extension (task handle, tasks/get, tasks/cancel), a
2026-07-28 client's closed connection cancelling its run, and waits that hold no thread.

A web server in queued mode with a Celery worker, and one in direct mode, share a database
(the stack of test_queued_runs.py); requests are raw JSON-RPC over HTTP, as an agent sends
them, so every byte of the answers is checked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2
import pytest

from tests.e2e.conftest import LiveServer, _manage, needs_redis
from tests.e2e.test_queued_runs import Stack, latest_run, run_row, wait_for
from tests.e2e.test_queued_runs import stack as stack

pytestmark = [pytest.mark.slow, needs_redis]

MODERN = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
ACCEPT_BOTH = "application/json, text/event-stream"


@pytest.fixture(scope="module", autouse=True)
def warm(stack: Stack) -> None:
    """Start each mode's echo server (a cold start takes seconds on a busy machine) so
    that the timings below are the runs' own."""
    for server in (stack.direct, stack.queued):
        shout = _request("tools/call", {"name": "shout", "arguments": {"value": "warm"}})
        assert call(server, shout).json()["result"]["content"][0]["text"] == "WARM"


def _server(stack: Stack, mode: str) -> LiveServer:
    return stack.queued if mode == "queued" else stack.direct


def _request(
    method: str, params: dict[str, Any], *, tasks: bool = False, progress: Any = None
) -> dict[str, Any]:
    capabilities = {"extensions": {TASKS: {}}} if tasks else {}
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    if progress is not None:
        meta["progressToken"] = progress
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}


def _headers(server: LiveServer, body: dict[str, Any], key: str | None = None) -> dict[str, str]:
    params = body["params"]
    name = params.get("name", params.get("taskId"))
    headers = {
        "Authorization": f"Bearer {key or server.key}",
        "Content-Type": "application/json",
        "Accept": ACCEPT_BOTH,
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": body["method"],
    }
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def call(server: LiveServer, body: dict[str, Any], key: str | None = None) -> httpx2.Response:
    return httpx2.post(
        f"{server.url}/mcp", json=body, headers=_headers(server, body, key), timeout=60
    )


def events(server: LiveServer, body: dict[str, Any]) -> Iterator[tuple[float, dict[str, Any]]]:
    """Each event of a streamed answer with the time it arrived."""
    with httpx2.stream(
        "POST", f"{server.url}/mcp", json=body, headers=_headers(server, body), timeout=60
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                yield time.monotonic(), json.loads(line.removeprefix("data: "))


def nap(seconds: float, **options: Any) -> dict[str, Any]:
    return _request(
        "tools/call", {"name": "nap_twice", "arguments": {"seconds": seconds}}, **options
    )


def task_get(server: LiveServer, task_id: str, key: str | None = None) -> httpx2.Response:
    return call(server, _request("tasks/get", {"taskId": task_id}, tasks=True), key)


def until_task(server: LiveServer, task_id: str, status: str, seconds: float) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        task = task_get(server, task_id).json()["result"]
        return task if task["status"] == status else None

    return wait_for(reached, seconds, f"task {task_id} did not become {status}")


@pytest.mark.parametrize("mode", ["direct", "queued"])
def test_each_node_is_reported_while_the_run_goes(stack, mode):
    server = _server(stack, mode)
    started = time.monotonic()
    received = list(events(server, nap(1.0, progress="p1")))
    progress = [(at, event) for at, event in received if "method" in event]
    (answered_at, answer) = received[-1]
    assert answer["id"] == 7
    assert not answer["result"].get("isError"), answer
    assert [event["params"]["message"] for _, event in progress] == [
        "entry succeeded", "nap1 succeeded", "nap2 succeeded", "exit succeeded",
    ]  # fmt: skip
    assert all(event["params"]["progressToken"] == "p1" for _, event in progress)
    # nap1's report came as nap1 ended, a second before nap2 and the answer did.
    nap1_at = progress[1][0]
    assert nap1_at - started < answered_at - started - 0.7, (nap1_at, answered_at)


def test_server_discover_advertises_the_tasks_extension(stack):
    answer = call(stack.direct, _request("server/discover", {})).json()
    assert answer["result"]["capabilities"]["extensions"] == {TASKS: {}}


@pytest.mark.parametrize("mode", ["direct", "queued"])
def test_a_long_call_becomes_a_task_that_is_polled_to_its_result(stack, mode):
    server = _server(stack, mode)
    response = call(server, nap(1.5, tasks=True))
    assert response.status_code == 200
    created = response.json()["result"]
    assert created["resultType"] == "task", created
    assert created["status"] == "working"
    assert created["taskId"].startswith("run-")
    assert created["pollIntervalMs"] > 0
    run_id = int(created["taskId"].removeprefix("run-"))
    polled = task_get(server, created["taskId"]).json()["result"]
    assert polled["resultType"] == "complete"
    assert polled["status"] == "working"
    done = until_task(server, created["taskId"], "completed", 20)
    assert done["result"]["isError"] is False
    assert done["result"]["_meta"]["io.switchyard/runId"] == run_id
    record = run_row(stack, run_id)
    assert record["status"] == "succeeded"
    assert [node for node, _ in record["nodes"]] == ["entry", "nap1", "nap2", "exit"]


def test_a_quick_call_from_a_task_client_gets_its_result_at_once(stack):
    response = call(
        stack.direct,
        _request("tools/call", {"name": "shout", "arguments": {"value": "hi"}}, tasks=True),
    )
    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert result["content"][0]["text"] == "HI"


@pytest.mark.parametrize("mode", ["direct", "queued"])
def test_tasks_cancel_ends_the_run_cancelled_with_its_history(stack, mode):
    server = _server(stack, mode)
    created = call(server, nap(2.0, tasks=True)).json()["result"]
    assert created["resultType"] == "task"
    cancelled = call(server, _request("tasks/cancel", {"taskId": created["taskId"]}, tasks=True))
    assert cancelled.status_code == 200
    assert cancelled.json()["result"]["resultType"] == "complete"
    task = until_task(server, created["taskId"], "cancelled", 20)
    assert "cancelled" in task["statusMessage"]
    record = run_row(stack, int(created["taskId"].removeprefix("run-")))
    assert record["status"] == "cancelled"
    assert "The client cancelled the task" in record["error"]
    assert ("nap2", "succeeded") not in record["nodes"]


def test_tasks_methods_refuse_what_the_extension_refuses(stack):
    server = stack.direct
    created = call(server, nap(1.2, tasks=True)).json()["result"]
    task_id = created["taskId"]
    # Without the extension declared on the request: -32021, naming what to declare.
    undeclared = call(server, _request("tasks/get", {"taskId": task_id}))
    assert undeclared.status_code == 400
    error = undeclared.json()["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    # Unknown, malformed, and another key's task: not found, alike.
    for unknown in ("run-999999999", "nonsense"):
        answer = task_get(server, unknown).json()
        assert answer["error"]["code"] == -32602
        assert "no task" in answer["error"]["message"]
    other_key = _manage(server.env, "create_api_key", "--name", "other").strip().splitlines()[-1]
    foreign = task_get(server, task_id, key=other_key).json()
    assert foreign["error"]["code"] == -32602
    assert "no task" in foreign["error"]["message"]
    # Mcp-Name must name the task.
    body = _request("tasks/get", {"taskId": task_id}, tasks=True)
    headers = {**_headers(server, body), "Mcp-Name": "run-1"}
    mismatch = httpx2.post(f"{server.url}/mcp", json=body, headers=headers, timeout=30)
    assert mismatch.json()["error"]["code"] == -32020
    # Task notifications need the extension too.
    listen = _request("subscriptions/listen", {"notifications": {"taskIds": [task_id]}})
    refused = call(server, listen)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == -32021
    until_task(server, task_id, "completed", 20)


@pytest.mark.parametrize("mode", ["direct", "queued"])
def test_a_2026_client_closing_the_connection_cancels_its_run(stack, mode):
    server = _server(stack, mode)
    before = latest_run(stack, "nap_twice") or 0
    for _, event in events(server, nap(1.5, progress="p")):
        if event.get("params", {}).get("message") == "entry succeeded":
            break  # leave while nap1 sleeps: the stream is closed
    wait_for(lambda: (latest_run(stack, "nap_twice") or 0) > before, 5, "no run was started")
    run_id = latest_run(stack, "nap_twice")
    wait_for(lambda: run_row(stack, run_id)["status"] == "cancelled", 20, "not cancelled")
    record = run_row(stack, run_id)
    assert "The client closed the connection" in record["error"]
    assert record["nodes"] == [("entry", "succeeded"), ("nap1", "succeeded")]


def test_waiting_runs_hold_no_request_thread(stack):
    """Twelve direct runs at once each sleep 2 x 1 s: they overlap (the web process's four
    request threads are not what runs them), and a request that needs a thread is answered
    at once meanwhile."""
    server = stack.direct
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=13) as pool:
        calls = [pool.submit(call, server, nap(1.0)) for _ in range(12)]
        time.sleep(0.3)
        asked = time.monotonic()
        details = call(
            server,
            _request("tools/call", {"name": "get_node_details", "arguments": {
                "nodes": [{"node_type": "ACTION", "subtype": "HTTP_REQUEST"}]}}),
        )  # fmt: skip
        answered_in = time.monotonic() - asked
        results = [future.result().json()["result"] for future in calls]
    elapsed = time.monotonic() - started
    assert details.status_code == 200
    assert answered_in < 2.0, answered_in
    assert all(not result.get("isError") for result in results), results
    # Four at a time would take three rounds of 2 s.
    assert elapsed < 4.5, elapsed
