"""Deeply nested JSON (issue 25, item 13): arguments 1,000 levels deep ran, but the answer
could not be written, the caller waited two minutes to be told "still running", and then
get_run and list_runs failed for every reader.

Now a request's params nest at most MCP_MAX_JSON_DEPTH levels, refused before any work with
an error naming the limit; a failure while a call is answered ends the call with an error at
once; and a run stored too deep is still read, the part too deep marked."""

from __future__ import annotations

import json
import time

import pytest
from django.db import connection

from bench.hostile_inputs import HOSTILE_FILE, nested_text
from graphs.authoring.files import graph_import
from graphs.engine.nesting import TRUNCATED_KEY
from graphs.models import Run
from mcp_endpoint.calls import workflow_calls
from tests.graph_files import OPERATOR
from tests.mcp_endpoint.helpers import (
    auth_headers,
    initialize,
    legacy,
    legacy_session,
    make_key,
    modern,
    result,
    rpc_error,
)
from tests.mcp_endpoint.runs_helpers import RUNS, add_run

pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db(transaction=True)]

# A workflow that answers what it is given, with an output schema (so the answer is
# structured).
ECHO = """
version: "1.0"
server: {name: "deep", version: "1.0.0"}
tools:
  - name: "echo"
    description: "Answers its arguments."
    inputSchema: {type: object}
    outputSchema: {type: object}
    nodes:
      - {id: entry, type: entry, next: exit}
      - {id: exit, type: exit}
"""


@pytest.fixture
def key() -> str:
    graph_import(text=ECHO, caller=OPERATOR)
    # `burrow` nests its result a level deeper per turn of a loop: no request carries it.
    graph_import(text=HOSTILE_FILE.read_text(), caller=OPERATOR)
    return make_key()


def under_x(text: str) -> str:
    """`{"x": <text>}`, as JSON text."""
    return '{"x":' + text + "}"


def call_body(name: str, arguments_text: str, era: str) -> str:
    meta = ""
    if era == "modern":
        meta = (
            ',"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
            '"io.modelcontextprotocol/clientCapabilities":{}}'
        )
    return (
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":'
        + json.dumps(name)
        + ',"arguments":'
        + arguments_text
        + meta
        + "}}"
    )


def post_call(client, key: str, name: str, arguments_text: str, era: str):
    headers = {"Accept": "application/json, text/event-stream", **auth_headers(key)}
    if era == "modern":
        headers.update(
            {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
        )
    else:
        headers["Mcp-Session-Id"] = legacy_session(client, key)
    body = call_body(name, arguments_text, era)
    return client.generic("POST", "/mcp", body, content_type="application/json", headers=headers)


@pytest.mark.parametrize("era", ["modern", "legacy"])
@pytest.mark.parametrize("depth", [63, 1000])
def test_params_nested_past_the_limit_are_refused_before_anything_runs(client, key, era, depth):
    # params {"name", "arguments": {"x": [[...]]}}: 2 levels, then the arrays.
    response = post_call(client, key, "echo", under_x(nested_text(depth)), era)

    error = rpc_error(response)
    assert error["code"] == -32602
    assert "more than 64 levels deep (MCP_MAX_JSON_DEPTH)" in error["message"]
    assert not Run.objects.exists()
    # One level less is answered: the limit counts the whole params.
    answered = result(post_call(client, key, "echo", under_x(nested_text(62)), era))
    assert json.loads(answered["content"][0]["text"])["x"] == json.loads(nested_text(62))


def test_a_body_too_deep_to_parse_is_a_parse_error_naming_the_limit(client, key):
    response = post_call(client, key, "echo", under_x(nested_text(100_000)), "modern")

    assert response.status_code == 400
    error = rpc_error(response)
    assert error["code"] == -32700
    assert "at most 64 levels (MCP_MAX_JSON_DEPTH)" in error["message"]


def test_initialize_params_nested_past_the_limit_are_refused(client, key):
    response = client.generic(
        "POST",
        "/mcp",
        '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":'
        '"2025-11-25","capabilities":'
        + under_x(nested_text(100))
        + ',"clientInfo":{"name":"t","version":"1"}}}',
        content_type="application/json",
        headers={"Accept": "application/json, text/event-stream", **auth_headers(key)},
    )

    assert "MCP_MAX_JSON_DEPTH" in rpc_error(response)["message"]
    assert initialize(client, key).status_code == 200  # the flat one opens a session


def test_rest_invoke_refuses_arguments_past_the_limit_with_an_error_out(client, key):
    response = client.post(
        "/api/v1/mcp/invoke",
        '{"name":"echo","arguments":' + under_x(nested_text(100)) + "}",
        content_type="application/json",
        headers=auth_headers(key),
    )

    assert response.status_code == 422, response.content
    assert "MCP_MAX_JSON_DEPTH" in response.json()["error"]
    assert not Run.objects.exists()


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_a_result_too_deep_to_answer_ends_the_call_at_once_naming_its_run(
    client, key, era, settings
):
    settings.GRAPHS_RUN_WAIT_SECONDS = 8
    started = time.monotonic()

    response = post_call(client, key, "burrow", '{"levels":300}', era)

    answered = result(response)
    assert time.monotonic() - started < 6  # not GRAPHS_RUN_WAIT_SECONDS, then "still running"
    assert answered["isError"] is True
    text = answered["content"][0]["text"]
    run = Run.objects.get()
    assert f"ran (run {run.pk}), but its answer could not be made" in text
    assert "nests more than 100 levels deep" in text
    assert run.status == Run.Status.SUCCEEDED
    assert run.truncated


def test_any_failure_while_the_answer_is_made_ends_the_call_with_an_error(
    client, key, settings, monkeypatch
):
    settings.GRAPHS_RUN_WAIT_SECONDS = 8

    def broken(call, outcome):
        raise ValueError("Maximum serialization depth exceeded")

    monkeypatch.setattr(workflow_calls, "_outcome_response", broken)
    started = time.monotonic()

    response = post_call(client, key, "echo", '{"x":1}', "modern")

    assert time.monotonic() - started < 6
    answered = result(response)
    assert answered["isError"] is True
    assert "could not be made: ValueError: Maximum serialization" in answered["content"][0]["text"]


def deep_row(key: str) -> Run:
    """A run stored before the bound, its arguments and result 300 levels deep: past what
    pydantic and orjson write (255), under what Python's JSON reader reads."""
    run = add_run("echo", caller="key:old", executions=1)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE graphs_run SET arguments = %s, result = %s WHERE id = %s",
            [under_x(nested_text(300)), nested_text(300), run.pk],
        )
        cursor.execute(
            "UPDATE graphs_nodeexecution SET output = %s WHERE run_id = %s",
            [nested_text(300), run.pk],
        )
    return run


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_a_run_stored_too_deep_is_read_by_get_run_and_list_runs_marked(client, key, era):
    run = deep_row(key)
    session = legacy_session(client, key) if era == "legacy" else None

    def call(name: str, arguments: dict) -> dict:
        params = {"name": name, "arguments": arguments}
        if era == "legacy":
            return result(legacy(client, session, "tools/call", params, key=key))
        return result(modern(client, "tools/call", params, key=key))

    listed = call("list_runs", {})
    detail = call("get_run", {"run_id": run.pk})

    assert not listed.get("isError"), listed
    assert not detail.get("isError"), detail
    [row] = listed["structuredContent"]["runs"]
    assert row["truncated"] is True
    assert TRUNCATED_KEY in json.dumps(row["arguments"])
    [step] = detail["structuredContent"]["node_executions"]
    assert step["truncated"] is True
    assert "nested deeper than 100 levels; not kept" in json.dumps(step["output"])


def test_a_run_stored_too_deep_is_read_over_rest(client, key):
    run = deep_row(key)

    listed = client.get(RUNS, headers=auth_headers(key))
    detail = client.get(f"{RUNS}/{run.pk}", headers=auth_headers(key))

    assert listed.status_code == 200, listed.content
    assert detail.status_code == 200, detail.content
    assert detail.json()["run"]["truncated"] is True
