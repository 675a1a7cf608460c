"""Approval nodes on a real server (uvicorn, lifespan, the timer), with the official client
in both protocol eras: a call waits while a reviewer decides over REST, the client itself
answers (elicitation in a 2025 session, an InputRequiredResult round in 2026-07-28, tasks/update
for a tasks client), a timeout fires on time, and a client that cannot be asked gets its run
failed, not left waiting. The Approvals page in a browser is tests/browser/; queued mode with
two web instances, and a restart, are tests/e2e/test_approvals_durable.py."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitResult, Implementation

from tests.e2e.conftest import LiveServer, _database_url, create_key, start_server
from tests.e2e.test_long_calls import call as raw_call
from tests.e2e.test_mcp_client import run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

FILES = Path(__file__).parent.parent / "graphs" / "files"
ERAS = [("auto", "2026-07-28"), ("legacy", "2025-11-25")]
# The timeout of `refund_soon`, an approval that nobody decides.
SOON_MS = 1500


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("approvals")
    database = _database_url(tmp, "approvals")
    graph = (FILES / "approvals.yaml").read_text()
    soon = (
        graph.replace("name: approvals", "name: approvals_soon")
        .replace("name: refund\n", "name: refund_soon\n")
        .replace("timeoutMs: 60000", f"timeoutMs: {SOON_MS}")
    )
    soon = soon[: soon.index("  - name: ask_caller")]
    (tmp / "approvals.yaml").write_text(graph)
    (tmp / "approvals_soon.yaml").write_text(soon)
    commands = [
        ("import_graph", str(tmp / name)) for name in ("approvals.yaml", "approvals_soon.yaml")
    ]
    with contextmanager(start_server)(tmp, commands, DATABASE_URL=database) as live:
        yield live


@pytest.fixture(scope="module")
def reviewer(server: LiveServer) -> str:
    return create_key(server, "reviewer", "runs:decide,runs:read")


@asynccontextmanager
async def connect(server: LiveServer, mode: str, elicitation: Any = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {server.key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(
            streamable_http_client(f"{server.url}/mcp", http_client=http),
            mode=mode,
            client_info=Implementation(name="approvals-tests", version="1"),
            elicitation_callback=elicitation,
        ) as client,
    ):
        yield client


def _rest(server: LiveServer, key: str, method: str, path: str, body: Any = None) -> Any:
    response = httpx2.request(
        method,
        f"{server.url}/api/v1{path}",
        json=body,
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    )
    return response.status_code, response.json()


async def _waiting_run(server: LiveServer, key: str, customer: str) -> dict[str, Any]:
    """The waiting run of `customer`, once there is one."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        _, page = await anyio.to_thread.run_sync(
            _rest, server, key, "GET", "/runs?status=waiting&limit=100"
        )
        for listed in page["runs"]:
            if listed["arguments"].get("customer") == customer:
                return listed
        await anyio.sleep(0.05)
    raise AssertionError(f"no run of {customer} waited")


def _nodes(server: LiveServer, key: str, run_id: int) -> tuple[list[str], dict[str, Any]]:
    _, detail = _rest(server, key, "GET", f"/runs/{run_id}")
    return [each["node_id"] for each in detail["node_executions"]], detail


@pytest.mark.parametrize(("mode", "version"), ERAS)
def test_a_reviewer_decides_over_rest_while_the_call_waits(server, reviewer, mode, version):
    customer = f"rest-{mode}"

    async def scenario():
        said: list[str] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            said.append(message or "")

        async def decide() -> dict[str, Any]:
            waiting = await _waiting_run(server, reviewer, customer)
            _, shown = await anyio.to_thread.run_sync(
                _rest, server, reviewer, "GET", f"/runs/{waiting['id']}"
            )
            assert shown["waiting_for"]["message"] == f"Refund 40 to {customer}?"
            status, body = await anyio.to_thread.run_sync(
                _rest,
                server,
                reviewer,
                "POST",
                f"/runs/{waiting['id']}/decision",
                {"decision": "approved", "comment": "checked", "form": {"reason": "damaged"}},
            )
            assert status == 200, body
            return body

        async with connect(server, mode) as client:
            assert client.protocol_version == version
            decided: dict[str, Any] = {}
            async with anyio.create_task_group() as group:

                async def deciding() -> None:
                    decided.update(await decide())

                group.start_soon(deciding)
                result = await client.call_tool(
                    "refund", {"amount": 40, "customer": customer}, progress_callback=progress
                )
        return result, said, decided

    result, said, decided = run(scenario)
    assert not result.is_error, result
    assert _value(result) == {
        "refunded": 40,
        "by": decided["by"]["name"],
        "reason": "damaged",
    }
    assert any("waiting for approval at node approve" in each for each in said), said
    path, detail = _nodes(server, reviewer, decided["run_id"])
    assert path == ["entry", "approve", "refunded", "done"]
    (approval,) = detail["approvals"]
    assert approval["decision"] == "approved"
    assert approval["comment"] == "checked"
    assert approval["by"]["kind"] == "api_key"


@pytest.mark.parametrize(("mode", "version"), ERAS)
def test_the_client_answers_its_own_approval(server, reviewer, mode, version):
    asked: list[Any] = []

    async def answer(context: Any, params: Any) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="accept", content={"quantity": 3})

    async def scenario():
        async with connect(server, mode, elicitation=answer) as client:
            assert client.protocol_version == version
            return await client.call_tool("ask_caller", {"item": f"tea-{mode}"})

    result = run(scenario)
    assert not result.is_error, result
    assert _value(result) == {"ordered": f"tea-{mode}", "quantity": 3, "by": "client"}
    (params,) = asked
    assert params.message == f"Order tea-{mode}?"
    assert params.requested_schema["properties"]["quantity"]["maximum"] == 10


def test_a_client_that_declines_takes_the_rejected_route(server):
    async def decline(context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="decline")

    async def scenario():
        async with connect(server, "legacy", elicitation=decline) as client:
            return await client.call_tool("ask_caller", {"item": "no"})

    result = run(scenario)
    assert _value(result) == {"ordered": None, "comment": ""}


@pytest.mark.parametrize(("mode", "version"), ERAS)
def test_a_client_that_cannot_be_asked_gets_its_run_failed(server, reviewer, mode, version):
    async def scenario():
        async with connect(server, mode) as client:  # no elicitation callback
            return await client.call_tool("ask_caller", {"item": f"nobody-{mode}"})

    result = run(scenario)
    assert result.is_error
    text = result.content[0].text
    assert "cannot be asked" in text, text
    assert "elicitation" in text, text
    run_id = result.meta["io.switchyard/runId"]
    _, detail = _rest(server, reviewer, "GET", f"/runs/{run_id}")
    assert detail["run"]["status"] == "failed"


def test_a_tasks_client_answers_with_tasks_update(server):
    capabilities = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }

    def request(method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 9, "method": method, "params": {**params, "_meta": meta}}
        answer = raw_call(server, body).json()
        assert "result" in answer, answer
        return answer["result"]

    created = request("tools/call", {"name": "ask_caller", "arguments": {"item": "task"}})
    assert created["resultType"] == "task", created
    task_id = created["taskId"]
    asked = request("tasks/get", {"taskId": task_id})
    assert asked["status"] == "input_required", asked
    assert asked["inputRequests"]["approval"]["method"] == "elicitation/create"
    answer = {"action": "accept", "content": {"quantity": 2}}
    request("tasks/update", {"taskId": task_id, "inputResponses": {"approval": answer}})
    deadline = time.monotonic() + 20
    while (task := request("tasks/get", {"taskId": task_id}))["status"] != "completed":
        assert time.monotonic() < deadline, task
        time.sleep(0.1)
    assert json.loads(task["result"]["content"][0]["text"]) == {
        "ordered": "task",
        "quantity": 2,
        "by": "client",
    }


@pytest.mark.parametrize(("mode", "version"), ERAS)
def test_an_undecided_approval_times_out_on_time(server, reviewer, mode, version):
    customer = f"late-{mode}"

    async def scenario():
        async with connect(server, mode) as client:
            started = time.monotonic()
            result = await client.call_tool("refund_soon", {"amount": 5, "customer": customer})
            return result, time.monotonic() - started

    result, took = run(scenario)
    assert _value(result) == {"refunded": 0, "decision": "timeout"}
    assert SOON_MS / 1000 <= took < SOON_MS / 1000 + 3
    run_id = result.meta["io.switchyard/runId"]
    path, detail = _nodes(server, reviewer, run_id)
    assert path == ["entry", "approve", "declined", "done"]
    (approval,) = detail["approvals"]
    late = _moment(approval["until"]) - _moment(approval["timeout_at"])
    assert approval["decision"] == "timeout"
    assert approval["by"] is None
    assert 0 <= late.total_seconds() < 1.0, late


def _value(result: Any) -> Any:
    """A workflow's value (these declare no outputSchema: it comes as JSON text)."""
    return json.loads(result.content[0].text)


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
