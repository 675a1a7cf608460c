"""Runs for agents over MCP: the tools list_runs and get_run (scope runs:read) and the resource
run://<id> (resources:read and runs:read), in both protocol eras. They answer what the REST
routes answer, from the same reads, with the same limits, and bound an answer's size."""

from __future__ import annotations

import json
from datetime import timedelta

import jsonschema
import pytest

from graphs.history.run_api_queries import MAX_PAGE, run_read, runs_read
from graphs.models import Run
from mcp_endpoint.features import run_tools
from mcp_endpoint.features.tools import TOOLS
from tests.mcp_endpoint.helpers import (
    auth_headers,
    legacy,
    legacy_session,
    make_key,
    modern,
    result,
    rpc_error,
)
from tests.mcp_endpoint.runs_helpers import RUNS, T0, add_run

pytestmark = [pytest.mark.timeout(30), pytest.mark.django_db(transaction=True)]

RUN_ID_KEY = "io.switchyard/runId"
ERAS = ["modern", "legacy"]


@pytest.fixture
def key(loops) -> str:
    """A key with every scope, and the loops workflows to run."""
    return make_key()


class Agent:
    """An MCP client of one era, with its key: calls tools, reads resources."""

    def __init__(self, client, key: str, era: str):
        self.client, self.key, self.era = client, key, era
        self.session = legacy_session(client, key) if era == "legacy" else None

    def request(self, method: str, params: dict):
        if self.era == "legacy":
            return legacy(self.client, self.session, method, params, key=self.key)
        return modern(self.client, method, params, key=self.key)

    def call(self, name: str, arguments: dict) -> dict:
        return result(self.request("tools/call", {"name": name, "arguments": arguments}))

    def structured(self, name: str, arguments: dict) -> dict:
        answer = self.call(name, arguments)
        assert not answer.get("isError"), answer
        # The same JSON as text, for clients that read only the text.
        assert json.loads(answer["content"][0]["text"]) == answer["structuredContent"]
        return answer["structuredContent"]

    def refused(self, name: str, arguments: dict) -> str:
        answer = self.call(name, arguments)
        assert answer["isError"] is True, answer
        return answer["content"][0]["text"]


@pytest.fixture(params=ERAS)
def agent(request, client, key) -> Agent:
    return Agent(client, key, request.param)


def rest(client, key: str, path: str, query: dict | None = None) -> dict:
    response = client.get(path, query or {}, headers=auth_headers(key))
    assert response.status_code == 200, response.content
    return response.json()


def validate(name: str, answer: dict) -> None:
    """The answer matches the tool's published outputSchema (as the SDK client checks)."""
    jsonschema.Draft202012Validator(TOOLS[name].output_schema).validate(answer)


# Listing and reading: the REST answer, over MCP.


def test_list_runs_answers_what_the_rest_api_answers(client, key, agent):
    add_run("sum_to", at=T0, arguments={"n": 3}, result={"sum": 6}, caller="key:aaa")
    add_run(
        "classify",
        at=T0 + timedelta(minutes=1),
        status=Run.Status.FAILED,
        arguments={"value": -1},
        error="The switch found no branch.",
        error_node_id="route",
        finished_at=T0 + timedelta(minutes=1, seconds=2, microseconds=123456),
        duration_ms=2000.0,
    )

    answer = agent.structured("list_runs", {})

    assert answer == rest(client, key, RUNS)
    assert [run["workflow"] for run in answer["runs"]] == ["classify", "sum_to"]
    assert answer["runs"][0]["finished_at"] == "2026-11-01T12:01:02.123Z"
    validate("list_runs", answer)


def test_get_run_answers_the_run_and_its_node_executions_as_rest_does(client, key, agent):
    run = add_run(arguments={"n": 2}, executions=3, result={"sum": 3})

    answer = agent.structured("get_run", {"run_id": run.pk})

    assert answer == rest(client, key, f"{RUNS}/{run.pk}")
    assert answer["run"]["id"] == run.pk
    assert [e["input"] for e in answer["node_executions"]] == [{"n": 2}, {"step": 0}, {"step": 1}]
    assert answer["next_cursor"] is None
    validate("get_run", answer)


def test_a_workflow_called_over_mcp_is_read_back_node_by_node(agent):
    called = agent.call("sum_to", {"n": 3})
    run_id = called["_meta"][RUN_ID_KEY]

    answer = agent.structured("get_run", {"run_id": run_id})

    assert answer["run"]["status"] == "succeeded"
    assert answer["run"]["result"] == {"sum": 6, "steps": 3}
    assert answer["run"]["caller"].startswith("key:")
    nodes = [e["node_id"] for e in answer["node_executions"]]
    assert nodes == ["entry", *["step", "more"] * 3, "result", "exit"]
    assert answer["run"]["node_count"] == len(nodes)
    [listed] = agent.structured("list_runs", {"workflow": "sum_to"})["runs"]
    assert listed == answer["run"]


def test_list_runs_filters_by_workflow_and_status(agent):
    a = add_run("sum_to", at=T0)
    b = add_run("classify", at=T0 + timedelta(hours=1), status=Run.Status.FAILED)
    c = add_run("classify", at=T0 + timedelta(hours=2))

    def listed(**arguments) -> list[int]:
        return [run["id"] for run in agent.structured("list_runs", arguments)["runs"]]

    assert listed(workflow="classify") == [c.pk, b.pk]
    assert listed(status="failed") == [b.pk]
    assert listed(workflow="classify", status="succeeded") == [c.pk]
    assert listed(workflow="sum_to") == [a.pk]


# Pages.


def test_list_runs_pages_cover_every_run_once(agent):
    runs = [add_run(at=T0 + timedelta(seconds=index // 2)) for index in range(7)]
    expected = [run.pk for run in sorted(runs, key=lambda r: (r.created_at, r.pk), reverse=True)]

    seen, cursor, pages = [], None, 0
    while True:
        arguments = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = agent.structured("list_runs", arguments)
        seen += [run["id"] for run in page["runs"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert seen == expected
    assert pages == 3


def test_get_run_pages_its_node_executions_by_cursor(agent):
    run = add_run(arguments={"n": 7}, executions=7)

    executions, cursor = [], None
    while True:
        arguments = {"run_id": run.pk, "limit": 3, **({"cursor": cursor} if cursor else {})}
        page = agent.structured("get_run", arguments)
        executions += page["node_executions"]
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert [e["index"] for e in executions] == list(range(7))
    assert [e["input"] for e in executions] == [{"n": 7}] + [{"step": i} for i in range(6)]


def test_a_run_still_going_hands_out_a_cursor_for_what_is_to_come(agent):
    run = add_run(status=Run.Status.RUNNING, executions=2, node_count=0)

    answer = agent.structured("get_run", {"run_id": run.pk})

    assert answer["run"]["node_count"] is None
    assert answer["next_cursor"] == "2"


# Bounds.


def test_an_answer_ends_early_once_its_json_passes_the_budget_and_goes_on_from_there(
    agent, monkeypatch
):
    # Each execution's output (and so the next one's input) is about 1 KB.
    run = add_run(arguments={"n": 1}, executions=0)
    for index in range(6):
        run.node_executions.create(
            index=index,
            node_id=f"node_{index}",
            node_type="transform",
            status="succeeded",
            output={"blob": "x" * 1000},
            started_at=T0,
        )
    monkeypatch.setattr(run_tools, "ANSWER_BYTES", 5000)

    executions, cursor, pages = [], None, 0
    while True:
        arguments = {"run_id": run.pk, "limit": MAX_PAGE, **({"cursor": cursor} if cursor else {})}
        page = agent.structured("get_run", arguments)
        assert len(json.dumps(page, separators=(",", ":"))) <= 5000
        executions += page["node_executions"]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert [e["index"] for e in executions] == list(range(6))
    assert pages >= 3


def test_a_page_of_runs_ends_early_at_the_budget_without_losing_a_run(loops):
    runs = [
        add_run(at=T0 + timedelta(seconds=index), arguments={"blob": "y" * 2000})
        for index in range(5)
    ]

    seen, cursor = [], None
    while True:
        page = runs_read(limit=MAX_PAGE, cursor=cursor, max_bytes=5000)
        assert 1 <= len(page.runs) <= 2
        seen += [run["id"] for run in page.runs]
        cursor = page.next_cursor
        if cursor is None:
            break

    assert seen == [run.pk for run in reversed(runs)]


def test_one_record_larger_than_the_budget_is_still_served_alone(loops):
    run = add_run(arguments={"blob": "z" * 3000}, executions=2)

    detail = run_read(run_id=run.pk, max_bytes=100)

    assert [e["index"] for e in detail.node_executions] == [0]
    assert detail.next_cursor == "1"
    assert len(runs_read(max_bytes=100).runs) == 1


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"run_id": "forty-two"}, "run_id: Input should be a valid integer"),
        ({"run_id": 0}, "run_id: Input should be greater than or equal to 1"),
        ({}, "run_id: Field required"),
        ({"run_id": 1, "limit": 0}, "limit: Input should be greater than or equal to 1"),
        ({"run_id": 1, "limit": 10**9}, f"limit: Input should be less than or equal to {MAX_PAGE}"),
        ({"run_id": 1, "page": 2}, "page: unknown argument"),
    ],
)
def test_bad_get_run_arguments_are_tool_errors_naming_the_argument(agent, arguments, expected):
    assert expected in agent.refused("get_run", arguments)


def test_an_unknown_run_is_a_tool_error_saying_so(agent):
    for run_id in (987654, 10**30):
        message = agent.refused("get_run", {"run_id": run_id})
        assert f"No run {run_id}" in message
        assert "list_runs" in message


def test_a_forged_cursor_is_a_tool_error_saying_to_pass_next_cursor_back(agent):
    run = add_run(executions=3)
    list_cursor = "1793620800000000-42"

    for bad in (list_cursor, "garbage", "", "1000000000", "-1", "9" * 10_000):
        message = agent.refused("get_run", {"run_id": run.pk, "cursor": bad})
        assert "Invalid cursor" in message
        assert "next_cursor" in message
    for bad in ("3", "garbage", "99999999999999999999-1"):
        message = agent.refused("list_runs", {"cursor": bad})
        assert "Invalid cursor" in message
        assert "next_cursor" in message


def test_a_bad_status_or_workflow_is_a_tool_error_saying_what_to_send(agent):
    status = agent.refused("list_runs", {"status": "done"})
    assert "Unknown status 'done'" in status
    assert "succeeded" in status
    workflow = agent.refused("list_runs", {"workflow": "sum_too"})
    assert "No workflow named 'sum_too'" in workflow
    assert "did you mean sum_to" in workflow
    too_long = agent.refused("list_runs", {"workflow": "w" * 129})
    assert "workflow: String should have at most 128 characters" in too_long
    limit = agent.refused("list_runs", {"limit": MAX_PAGE + 1})
    assert f"limit: Input should be less than or equal to {MAX_PAGE}" in limit


# Scopes.


def test_a_key_without_runs_read_gets_403_for_the_run_tools_and_resources(
    client, loops, loaded_catalog
):
    key = make_key(scopes=["tools:read", "tools:execute", "resources:read"])
    run = add_run()
    calls = [
        ("tools/call", {"name": "list_runs", "arguments": {}}),
        ("tools/call", {"name": "get_run", "arguments": {"run_id": run.pk}}),
        ("resources/read", {"uri": f"run://{run.pk}"}),
    ]
    session = legacy_session(client, key)
    for method, params in calls:
        for response in (
            modern(client, method, params, key=key),
            legacy(client, session, method, params, key=key),
        ):
            assert response.status_code == 403, response.content
            assert "runs:read" in rpc_error(response)["message"]
    # The node specs stay readable with resources:read alone.
    specs = modern(client, "resources/read", {"uri": "nodespec://ACTION/HTTP_REQUEST"}, key=key)
    assert result(specs)["contents"][0]["uri"] == "nodespec://ACTION/HTTP_REQUEST"


def test_runs_read_alone_calls_the_run_tools_but_reads_no_resource(client, loops):
    key = make_key(scopes=["runs:read"])
    run = add_run()

    listed = modern(client, "tools/call", {"name": "list_runs", "arguments": {}}, key=key)
    read = modern(client, "resources/read", {"uri": f"run://{run.pk}"}, key=key)

    assert result(listed)["structuredContent"]["runs"][0]["id"] == run.pk
    assert read.status_code == 403
    assert "resources:read" in rpc_error(read)["message"]


# The run:// resource.


def test_a_run_resource_is_the_run_as_get_run_answers_it(agent):
    run = add_run(arguments={"n": 2}, executions=3, result={"sum": 3})
    uri = f"run://{run.pk}"

    answer = result(agent.request("resources/read", {"uri": uri}))

    [content] = answer["contents"]
    assert content["uri"] == uri
    assert content["mimeType"] == "application/json"
    assert json.loads(content["text"]) == agent.structured("get_run", {"run_id": run.pk})


def test_a_run_resource_is_never_cached_unlike_a_node_spec(client, key, loaded_catalog):
    run = add_run()

    read = result(modern(client, "resources/read", {"uri": f"run://{run.pk}"}, key=key))
    spec = result(modern(client, "resources/read", {"uri": "nodespec://FLOW/IF"}, key=key))

    assert (read["ttlMs"], read["cacheScope"]) == (0, "private")
    assert spec["ttlMs"] > 0
    assert spec["cacheScope"] == "public"
    # A run that changes is read anew: no stale copy is served by the server either.
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED)
    again = result(modern(client, "resources/read", {"uri": f"run://{run.pk}"}, key=key))
    assert json.loads(again["contents"][0]["text"])["run"]["status"] == "failed"


def test_a_legacy_run_resource_read_has_none_of_the_2026_fields(client, key):
    run = add_run()
    session = legacy_session(client, key)

    answer = result(legacy(client, session, "resources/read", {"uri": f"run://{run.pk}"}, key=key))

    assert json.loads(answer["contents"][0]["text"])["run"]["id"] == run.pk
    for field in ("ttlMs", "cacheScope", "resultType"):
        assert field not in answer


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("run://987654", "No run 987654"),
        ("run://abc", "a run is at run://ID"),
        ("run://12/nodes", "a run is at run://ID"),
        ("run://" + "9" * 40, "a run is at run://ID"),
        ("run://", "a run is at run://ID"),
    ],
)
def test_a_run_uri_that_names_no_run_is_invalid_params_saying_so(client, key, uri, expected):
    response = modern(client, "resources/read", {"uri": uri}, key=key)

    assert response.status_code == 400, response.content
    error = rpc_error(response)
    assert error["code"] == -32602
    assert expected in error["message"]
    assert error["data"] == {"uri": uri}


def test_the_run_template_is_listed_in_both_eras(client, key):
    session = legacy_session(client, key)
    for response in (
        modern(client, "resources/templates/list", key=key),
        legacy(client, session, "resources/templates/list", key=key),
    ):
        templates = {t["uriTemplate"]: t for t in result(response)["resourceTemplates"]}
        run = templates["run://{run_id}"]
        assert run["name"] == "run"
        assert run["mimeType"] == "application/json"
        assert "runs:read" in run["description"]
        assert "nodespec://{node_type}/{subtype}" in templates
    # Run ids are not offered as completions: completion/complete needs no runs:read.
    ref = {"type": "ref/resource", "uri": "run://{run_id}"}
    params = {"ref": ref, "argument": {"name": "run_id", "value": "1"}}
    completion = result(modern(client, "completion/complete", params, key=key))["completion"]
    assert completion["values"] == []


# The tools as listed.


def test_the_run_tools_are_listed_read_only_with_their_schemas(client, key):
    tools = {t["name"]: t for t in result(modern(client, "tools/list", key=key))["tools"]}

    for name in ("list_runs", "get_run"):
        tool = tools[name]
        assert tool["outputSchema"] == TOOLS[name].output_schema
        assert tool["annotations"]["readOnlyHint"] is True
        assert TOOLS[name].scope == "runs:read"
    get_run = tools["get_run"]["inputSchema"]
    assert get_run["required"] == ["run_id"]
    assert get_run["properties"]["limit"]["maximum"] == MAX_PAGE
    assert get_run["properties"]["cursor"]["pattern"] == "^[0-9]{1,9}$"
    list_runs = tools["list_runs"]["inputSchema"]["properties"]
    assert list_runs["status"]["enum"] == Run.Status.values
    assert set(list_runs) == {"workflow", "status", "limit", "cursor"}
