"""Workflows served as tools on /mcp: listed with their schemas, called, and kept current."""

from __future__ import annotations

import pytest

from graphs.authoring.services import workflow_set_enabled
from graphs.models import Run, Workflow
from mcp_endpoint.features.tools import TOOLS
from tests.graph_files import import_file
from tests.mcp_endpoint.helpers import (
    BOTH,
    legacy,
    legacy_session,
    make_key,
    modern,
    result,
    sse_messages,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def key() -> str:
    import_file("loops.yaml")
    return make_key()


def tool_names(client, key: str) -> list[str]:
    return [tool["name"] for tool in result(modern(client, "tools/list", key=key))["tools"]]


def test_workflows_are_listed_after_the_knowledge_tools_with_their_schemas(client, key):
    tools = result(modern(client, "tools/list", key=key))["tools"]
    names = [tool["name"] for tool in tools]
    assert names == [
        *TOOLS,
        "classify",
        "is_zero",
        "sum_to",
    ]
    sum_to = tools[-1]
    assert sum_to["description"].startswith("Adds 1 + 2")
    assert sum_to["inputSchema"]["required"] == ["n"]
    assert sum_to["outputSchema"]["properties"]["sum"] == {"type": "number"}
    assert sum_to["annotations"]["readOnlyHint"] is False


def test_a_call_returns_text_and_structured_content_and_records_the_run(client, key):
    answer = result(
        modern(client, "tools/call", {"name": "sum_to", "arguments": {"n": 4}}, key=key)
    )
    assert answer["structuredContent"] == {"sum": 10, "steps": 4}
    assert answer["content"][0]["text"] == '{"sum":10,"steps":4}'
    assert not answer.get("isError")
    run = Run.objects.get(pk=answer["_meta"]["io.switchyard/runId"])
    assert run.status == Run.Status.SUCCEEDED
    assert run.caller.startswith("key:") or run.caller


def test_a_scalar_result_is_text_without_structured_content_when_no_schema_asks(client, key):
    answer = result(
        modern(client, "tools/call", {"name": "classify", "arguments": {"value": 5}}, key=key)
    )
    assert answer["content"][0]["text"] == "small"
    assert "structuredContent" not in answer


def test_a_failed_run_is_an_error_result_naming_the_node_and_the_run(client, key):
    answer = result(
        modern(client, "tools/call", {"name": "sum_to", "arguments": {"n": 100000}}, key=key)
    )
    assert answer["isError"] is True
    text = answer["content"][0]["text"]
    run = Run.objects.get()
    assert f"(run {run.pk})" in text
    assert "maxNodeExecutions (500)" in text
    assert f"at node {run.error_node_id!r}" in text


def test_bad_arguments_are_an_error_result_and_start_no_run(client, key):
    answer = result(
        modern(client, "tools/call", {"name": "sum_to", "arguments": {"n": "ten"}}, key=key)
    )
    assert answer["isError"] is True
    assert "n: 'ten' is not of type 'integer'" in answer["content"][0]["text"]
    assert not Run.objects.exists()


def test_disabling_a_workflow_removes_it_from_tools_list_at_once(client, key):
    assert "classify" in tool_names(client, key)
    workflow_set_enabled(workflow=Workflow.objects.get(name="classify"), enabled=False)
    assert "classify" not in tool_names(client, key)
    answer = result(
        modern(client, "tools/call", {"name": "classify", "arguments": {"value": 1}}, key=key)
    )
    assert answer["isError"] is True
    assert "Unknown tool 'classify'" in answer["content"][0]["text"]


def test_changing_a_workflow_changes_the_listed_schema_at_once(client, key):
    result(modern(client, "tools/list", key=key))
    import_file("loops.yaml", **{"Adds 1 + 2": "Sums 1 + 2"})
    tools = result(modern(client, "tools/list", key=key))["tools"]
    assert next(t for t in tools if t["name"] == "sum_to")["description"].startswith("Sums")


def test_each_node_sends_progress_when_the_client_asks(client, key):
    response = modern(
        client,
        "tools/call",
        {"name": "classify", "arguments": {"value": 50}, "_meta": {"progressToken": "p1"}},
        key=key,
        accept=BOTH,
    )
    messages = sse_messages(response)
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3, 4]
    assert all(p["progressToken"] == "p1" and "total" not in p for p in progress)
    assert progress[2]["message"] == "medium succeeded"
    assert messages[-1]["result"]["content"][0]["text"] == "medium"


def test_a_2025_session_calls_workflows_and_the_run_records_the_session(client, key):
    session_id = legacy_session(client, key)
    response = legacy(
        client, session_id, "tools/call", {"name": "sum_to", "arguments": {"n": 3}}, key=key
    )
    messages = (
        sse_messages(response)
        if response["Content-Type"].startswith("text/event-stream")
        else [response.json()]
    )
    assert messages[-1]["result"]["structuredContent"] == {"sum": 6, "steps": 3}
    assert Run.objects.get().session_id == session_id


def test_a_listening_client_hears_that_the_tools_changed(client, key, settings, monkeypatch):
    import threading

    from django.db import connection

    from mcp_endpoint.protocol import list_changes

    settings.MCP_LISTEN_SECONDS = 2
    monkeypatch.setattr(list_changes, "LISTEN_POLL_SECONDS", 0.05)
    workflow = Workflow.objects.get(name="classify")
    params = {"notifications": {"toolsListChanged": True}}
    response = modern(client, "subscriptions/listen", params, key=key, accept=BOTH, request_id=7)

    # The stream runs while it is read: disable a workflow half a second into it, from a
    # thread of its own (which closes its database connection when done).
    def disable() -> None:
        try:
            workflow_set_enabled(workflow=workflow, enabled=False)
        finally:
            connection.close()

    change = threading.Timer(0.5, disable)
    change.start()
    try:
        messages = sse_messages(response)
    finally:
        change.join()
    methods = [message.get("method") for message in messages]
    assert methods[0] == "notifications/subscriptions/acknowledged"
    assert messages[0]["params"]["notifications"] == {"toolsListChanged": True}
    assert methods.count("notifications/tools/list_changed") == 1
    assert messages[-1]["id"] == 7
