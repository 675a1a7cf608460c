"""A workflow call that comes back through other workflows' calls (issue 24, "No recursion"):
whatever carries it (Streamable HTTP in both eras, REST, stdio) and however its lineage comes
(`_meta` or the `Switchyard-Lineage` header), a cycle or a chain deeper than
GRAPHS_MAX_CALL_DEPTH is answered at once with a tool error naming the chain and the setting:
no run is started (no thread, no history). A call within the depth runs and records its
lineage."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from graphs.models import Run
from mcp_endpoint.calls import workflow_calls
from mcp_endpoint.transports.stdio import serve
from nodespecs.downstream.call_lineage import HEADER, META_KEY
from tests.mcp_endpoint.helpers import (
    auth_headers,
    legacy,
    legacy_session,
    make_key,
    modern,
    result,
    sse_messages,
)
from tests.mcp_endpoint.test_stdio import INITIALIZE, Client, answer_to

pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db(transaction=True)]


def call_with_lineage(client, how: str, name: str, lineage: list[str]) -> dict[str, Any]:
    """Call workflow `name` carrying `lineage` as `how` says; the call's result."""
    arguments = {"n": 3} if name == "sum_to" else {"value": 3}
    header = {HEADER: ",".join(lineage)}
    key = make_key()
    if how == "2026 _meta":
        params = {"name": name, "arguments": arguments, "_meta": {META_KEY: lineage}}
        return result(modern(client, "tools/call", params, key=key))
    if how == "2026 header":
        params = {"name": name, "arguments": arguments}
        return result(modern(client, "tools/call", params, key=key, headers=header))
    if how == "2025 header":
        session = legacy_session(client, key)
        params = {"name": name, "arguments": arguments}
        answer = legacy(client, session, "tools/call", params, key=key, headers=header)
        if answer["Content-Type"].startswith("text/event-stream"):
            return sse_messages(answer)[-1]["result"]
        return result(answer)
    if how == "REST header":
        answer = client.post(
            "/api/v1/mcp/invoke",
            {"name": name, "arguments": arguments},
            content_type="application/json",
            headers={**auth_headers(key), **header},
        )
        assert answer.status_code == 200, answer.content
        return answer.json()["result"]
    assert how == "stdio _meta"
    return stdio_call(name, arguments, lineage)


def stdio_call(name: str, arguments: dict[str, Any], lineage: list[str]) -> dict[str, Any]:
    async def scenario() -> dict[str, Any]:
        client = Client()
        serving = asyncio.create_task(serve(client.read_line, client.write_line))
        client.send(INITIALIZE)
        await client.wait_for(answer_to(0))
        params = {"name": name, "arguments": arguments, "_meta": {META_KEY: lineage}}
        client.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        answer = await client.wait_for(answer_to(1))
        client.close()
        await serving
        return answer["result"]

    return asyncio.run(scenario())


HOW = ["2026 _meta", "2026 header", "2025 header", "REST header", "stdio _meta"]


@pytest.fixture
def no_run_starts(monkeypatch):
    """Fails the test if a workflow call gets as far as following a run."""

    def refuse(*args, **kwargs):
        raise AssertionError("a run was started for a call that should have been refused")

    monkeypatch.setattr(workflow_calls, "run_follow", refuse)


def text_of(answer: dict[str, Any]) -> str:
    return answer["content"][0]["text"]


@pytest.mark.parametrize("how", HOW)
def test_a_workflow_called_again_by_its_own_run_is_refused_at_once(
    client, loops, how, no_run_starts
):
    answer = call_with_lineage(client, how, "sum_to", ["sum_to/41"])

    assert answer["isError"] is True
    assert "workflow sum_to → workflow sum_to" in text_of(answer)
    assert "GRAPHS_MAX_CALL_DEPTH" in text_of(answer)
    assert Run.objects.count() == 0


@pytest.mark.parametrize("how", ["2026 _meta", "2025 header", "REST header"])
def test_a_chain_deeper_than_the_setting_is_refused_naming_it(client, loops, how, no_run_starts):
    answer = call_with_lineage(client, how, "classify", ["a/1", "b/2", "c/3"])

    assert answer["isError"] is True
    message = text_of(answer)
    assert "workflow a → workflow b → workflow c → workflow classify" in message
    assert "GRAPHS_MAX_CALL_DEPTH (3)" in message
    assert answer["structuredContent"]["chain"] == ["a/1", "b/2", "c/3", "classify"]
    assert Run.objects.count() == 0


@pytest.mark.parametrize("how", HOW)
def test_a_call_within_the_depth_runs_and_its_run_records_the_lineage(client, loops, how):
    answer = call_with_lineage(client, how, "sum_to", ["outer/7", "middle/8"])

    assert answer["isError"] is False, answer
    assert answer["structuredContent"] == {"sum": 6, "steps": 3}
    assert Run.objects.get().lineage == ["outer/7", "middle/8"]


def test_of_a_meta_and_a_header_that_differ_the_longer_lineage_counts(client, loops):
    params = {"name": "sum_to", "arguments": {"n": 3}, "_meta": {META_KEY: ["outer/1"]}}
    answer = modern(
        client, "tools/call", params, key=make_key(), headers={HEADER: "outer/1,sum_to/2"}
    )

    assert result(answer)["isError"] is True
    assert "workflow outer → workflow sum_to → workflow sum_to" in text_of(result(answer))
