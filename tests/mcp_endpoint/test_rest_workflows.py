"""Workflows over the REST API: /api/v1/mcp/invoke runs them through the protocol core, and
the tool routes list and describe them beside the knowledge tools."""

from __future__ import annotations

import pytest

from graphs.models import Run
from mcp_endpoint.models import ApiKey
from tests.mcp_endpoint.helpers import auth_headers, make_key

INVOKE = "/api/v1/mcp/invoke"
RUN_ID_META = "io.switchyard/runId"

pytestmark = pytest.mark.timeout(60)


def invoke(client, name: str, arguments: dict, key: str | None):
    return client.post(
        INVOKE,
        {"name": name, "arguments": arguments},
        content_type="application/json",
        headers=auth_headers(key),
    )


def test_a_workflow_runs_and_answers_with_its_result_and_run(client, loops, mode):
    key = make_key(scopes=["tools:execute"])
    answer = invoke(client, "sum_to", {"n": 3}, key)

    assert answer.status_code == 200
    result = answer.json()["result"]
    assert result["isError"] is False
    assert result["structuredContent"] == {"sum": 6, "steps": 3}
    assert result["_tool_name"] == "sum_to"
    run = Run.objects.get(pk=result["_run_id"])
    assert result["_meta"][RUN_ID_META] == run.pk
    assert run.status == Run.Status.SUCCEEDED
    prefix = ApiKey.objects.get().prefix
    assert run.caller == f"key:{prefix}"


def test_a_failed_run_is_an_error_result_naming_the_run(client, loops, mode):
    answer = invoke(client, "sum_to", {"n": 1000}, make_key(scopes=["tools:execute"]))

    assert answer.status_code == 200
    result = answer.json()["result"]
    assert result["isError"] is True
    run = Run.objects.get(pk=result["_run_id"])
    assert run.status == Run.Status.FAILED
    assert f"(run {run.pk})" in result["content"][0]["text"]
    assert "maxNodeExecutions" in result["content"][0]["text"]


def test_bad_arguments_are_an_error_result_and_record_no_run(client, loops, mode):
    answer = invoke(client, "sum_to", {"n": 0}, make_key(scopes=["tools:execute"]))

    result = answer.json()["result"]
    assert answer.status_code == 200
    assert result["isError"] is True
    assert "n" in result["content"][0]["text"]
    assert "_run_id" not in result
    assert not Run.objects.exists()


def test_an_unknown_tool_names_the_workflows_too(client, loops):
    answer = invoke(client, "sum_too", {}, make_key(scopes=["tools:execute"]))

    text = answer.json()["result"]["content"][0]["text"]
    assert "Unknown tool 'sum_too'" in text
    assert "sum_to" in text


@pytest.mark.parametrize(("scopes", "status"), [(None, 401), (["tools:read", "runs:read"], 403)])
def test_running_a_workflow_needs_tools_execute(client, loops, scopes, status):
    key = make_key(scopes=scopes) if scopes is not None else None
    answer = invoke(client, "sum_to", {"n": 3}, key)

    assert answer.status_code == status
    assert "error" in answer.json()
    assert not Run.objects.exists()


def test_the_tool_list_and_details_include_the_workflows(client, loops):
    # A key lists the workflows when it may call them (tools:execute).
    headers = auth_headers(make_key(scopes=["tools:read", "tools:execute"]))
    tools = client.get("/api/v1/mcp/tools", headers=headers).json()["result"]["tools"]
    by_name = {tool["name"]: tool for tool in tools}

    assert {"get_node_types", "sum_to", "classify", "is_zero"} <= set(by_name)
    assert by_name["sum_to"]["category"] == "graph"
    assert by_name["sum_to"]["parameters"]["required"] == ["n"]
    detail = client.get("/api/v1/mcp/tools/sum_to", headers=headers)
    assert detail.status_code == 200
    assert detail.json()["description"].startswith("Adds 1 + 2")
    missing = client.get("/api/v1/mcp/tools/sum_too", headers=headers)
    assert missing.status_code == 404
    assert "sum_to" in missing.json()["error"]
