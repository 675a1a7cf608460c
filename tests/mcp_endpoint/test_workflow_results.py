"""What a caller is told of a result that breaks its workflow's outputSchema is what the
history records (issue 25, items 5 and 6): the run failed at its exit, naming the JSON path,
in both execution modes, over REST and MCP, and for test runs; a number is never answered as
`{"result": 42}` unless the schema declares `result`; and create_workflow refuses an exit
whose value certainly breaks the schema."""

from __future__ import annotations

import copy

import pytest
import yaml

from graphs.models import Run
from tests.graph_files import FILES, import_file
from tests.mcp_endpoint.helpers import auth_headers, make_key, modern, result

pytestmark = pytest.mark.timeout(60)

CONTRACTS = yaml.safe_load((FILES / "contracts.yaml").read_text())
PATH_FAILS = "the result does not match the tool's outputSchema at $.count"


@pytest.fixture
def contracts(db):
    return import_file("contracts.yaml")


def invoke(client, name: str, arguments: dict) -> dict:
    answer = client.post(
        "/api/v1/mcp/invoke",
        {"name": name, "arguments": arguments},
        content_type="application/json",
        headers=auth_headers(make_key(scopes=["tools:execute"])),
    )
    assert answer.status_code == 200
    return answer.json()["result"]


def test_the_caller_and_the_history_both_say_a_result_breaking_its_schema_failed(
    client, contracts, mode
):
    answer = invoke(client, "counted", {"n": "three"})

    run = Run.objects.get(pk=answer["_run_id"])
    assert run.status == Run.Status.FAILED
    assert answer["isError"] is True
    text = answer["content"][0]["text"]
    assert f"Workflow 'counted' failed at node 'exit': node 'exit': {PATH_FAILS}" in text
    assert run.error in text


def test_a_number_under_an_object_schema_is_an_error_not_a_result_field(client, contracts, mode):
    answer = invoke(client, "bare_number", {"n": 42})

    assert answer["isError"] is True
    assert "structuredContent" not in answer
    assert "the result is an integer, not an object" in answer["content"][0]["text"]
    assert Run.objects.get(pk=answer["_run_id"]).status == Run.Status.FAILED
    wrapped = invoke(client, "wrapped_number", {"n": 42})  # its schema declares `result`
    assert (wrapped["isError"], wrapped["structuredContent"]) == (False, {"result": 42})


def test_a_tools_call_over_mcp_is_told_what_the_history_records(client, contracts):
    key = make_key()
    params = {"name": "counted", "arguments": {"n": "three"}}

    answer = result(modern(client, "tools/call", params, key=key))

    run = Run.objects.get(pk=answer["_meta"]["io.switchyard/runId"])
    assert (answer["isError"], run.status) == (True, Run.Status.FAILED)
    assert PATH_FAILS in answer["content"][0]["text"]


def _draft(**changes) -> dict:
    """contracts.yaml's `counted`, alone, in a group of the builder's own."""
    tool = copy.deepcopy(CONTRACTS["tools"][0])
    tool.update(changes)
    return {**CONTRACTS, "server": {"name": "built", "version": "1.0.0"}, "tools": [tool]}


def call(client, key, name, arguments):
    return result(modern(client, "tools/call", {"name": name, "arguments": arguments}, key=key))


def test_a_test_run_whose_result_breaks_the_schema_fails_and_says_where(client, key):
    created = call(client, key, "create_workflow", {"definition": _draft(name="drafted")})
    assert created.get("isError") is not True, created

    tested = call(client, key, "test_workflow", {"name": "drafted", "arguments": {"n": "x"}})

    assert tested["isError"] is True
    report = tested["structuredContent"]
    assert (report["error_node"], report["result"]) == ("exit", None)
    assert PATH_FAILS in report["error"]
    run = Run.objects.get(pk=report["run_id"])
    assert (run.is_test, run.status) == (True, Run.Status.FAILED)


def test_create_workflow_refuses_an_exit_that_certainly_breaks_the_schema(client, key):
    nodes = copy.deepcopy(CONTRACTS["tools"][0]["nodes"])
    nodes[1]["transform"]["expr"] = "42"

    refused = call(client, key, "create_workflow", {"definition": _draft(nodes=nodes)})

    assert refused["isError"] is True
    [problem] = refused["structuredContent"]["problems"]
    assert (problem["severity"], problem["code"]) == ("error", "exit_output_mismatch")
    assert problem["path"] == "/tools/0/nodes/1/transform/expr"
    assert not Run.objects.exists()
