"""Examples guard publishing (issue 28, item 5), over MCP and REST: a run whose mcp node
really called the echo peer is kept as an example with POST /api/v1/runs/{id}/example; a new
version that changes its result is refused by publish_workflow, naming the example and what
changed, and published with `force`, which the audit trail records. The checks never call a
server: the downstream client is made to fail meanwhile."""

from __future__ import annotations

import jsonschema
import pytest

from graphs.authoring.files import graph_import
from graphs.models import ExampleCheck, Run, Workflow, WorkflowExample
from mcp_endpoint.models import ApiKey
from nodespecs.downstream import client as downstream
from nodespecs.models import AuditEvent
from tests.graph_files import OPERATOR
from tests.graphs.test_examples import graph
from tests.mcp_endpoint.helpers import auth_headers, make_key, modern, result
from tests.nodespecs.providers_helpers import servers  # noqa: F401

pytestmark = pytest.mark.timeout(60)

# add_thrice's nodes: entry, add, more, done, exit.
DONE_EXPR = "/tools/0/nodes/3/transform/expr"


def call(client, key, name, arguments):
    return result(modern(client, "tools/call", {"name": name, "arguments": arguments}, key=key))


def example_url(run_id: int) -> str:
    return f"/api/v1/runs/{run_id}/example"


def keep(client, run_id: int, key: str, body: dict | None = None):
    if body is None:  # no body at all, as `curl -X POST` sends
        return client.generic("POST", example_url(run_id), b"", headers=auth_headers(key))
    return client.post(
        example_url(run_id), body, content_type="application/json", headers=auth_headers(key)
    )


@pytest.fixture
def add_thrice(transactional_db, servers):  # noqa: F811
    graph_import(text=graph(), caller=OPERATOR)
    return Workflow.objects.get(name="add_thrice")


@pytest.fixture
def ran(client, key, add_thrice) -> Run:
    """add_thrice called over MCP: its `add` node called the echo peer three times."""
    answer = call(client, key, "add_thrice", {"start": 1, "step": 2})
    assert answer.get("isError") is not True, answer
    return Run.objects.get(workflow_name="add_thrice")


@pytest.fixture
def no_server_called(monkeypatch):
    """From here on, any call to a downstream server fails the test."""

    def refused(*args, **kwargs):
        raise AssertionError("an example check called a server")

    monkeypatch.setattr(downstream, "call_tool", refused)


def test_a_publish_changing_an_example_is_refused_then_forced_and_audited(
    client, key, ran, no_server_called
):
    kept = keep(client, ran.pk, key, {"note": "1 + 2 three times is 7"})
    assert kept.status_code == 200, kept.json()
    example = kept.json()
    assert (example["run_id"], example["calls"], example["decisions"]) == (
        ran.pk,
        {"add": 3},
        {},
    )
    patch = [
        {
            "op": "replace",
            "path": DONE_EXPR,
            "value": '{"total": $.add.sum * 10, "calls": $executionCount("add")}',
        }
    ]
    updated = call(client, key, "update_workflow", {"name": "add_thrice", "patch": patch})
    assert updated["structuredContent"]["version"] == 2, updated

    refused = call(client, key, "publish_workflow", {"name": "add_thrice", "version": 2})

    assert refused["isError"] is True
    text = refused["content"][0]["text"]
    assert f"example {example['example']} (run {ran.pk})" in text
    assert "result at /total: example 7.0, now 70" in text
    assert "force: true" in text
    [problem] = refused["structuredContent"]["problems"]
    assert (problem["example"], problem["passed"]) == (example["example"], False)
    assert problem["differences"]["items"] == [{"path": "/total", "a": 7.0, "b": 70}]
    assert Workflow.objects.get(name="add_thrice").current_version.number == 1
    assert not AuditEvent.objects.filter(action="force-published").exists()

    forced = call(
        client, key, "publish_workflow", {"name": "add_thrice", "version": 2, "force": True}
    )

    assert forced.get("isError") is not True, forced
    assert forced["structuredContent"]["status"] == "published"
    assert forced["structuredContent"]["examples"] == (
        f"examples: 0/1 passed; failed: #{example['example']}"
    )
    assert Workflow.objects.get(name="add_thrice").current_version.number == 2
    event = AuditEvent.objects.get(action="force-published")
    assert event.object_type == "graphs.workflowversion"
    assert event.actor.startswith("key:")
    assert event.fields == [f"example {example['example']} (run {ran.pk})"]


def test_an_unchanged_version_publishes_and_test_workflow_answers_each_example(
    client, key, ran, no_server_called
):
    example = keep(client, ran.pk, key).json()  # no body: no note
    assert example["note"] == ""
    patch = [{"op": "replace", "path": "/tools/0/description", "value": "Adds, thrice."}]
    call(client, key, "update_workflow", {"name": "add_thrice", "patch": patch})
    changed = [
        {"op": "replace", "path": DONE_EXPR, "value": '{"total": 0, "calls": 3}'},
    ]
    call(client, key, "update_workflow", {"name": "add_thrice", "patch": changed})

    same = call(
        client, key, "test_workflow", {"name": "add_thrice", "version": 2, "examples": True}
    )
    other = call(
        client, key, "test_workflow", {"name": "add_thrice", "version": 3, "examples": True}
    )

    assert same["structuredContent"]["examples"] == [
        {"example": example["example"], "run_id": ran.pk, "passed": True}
    ]
    [failed] = other["structuredContent"]["examples"]
    assert (failed["passed"], failed["differences"]["items"]) == (
        False,
        [{"path": "/total", "a": 7.0, "b": 0}],
    )
    assert ExampleCheck.objects.filter(version__number=3, passed=False).count() == 1
    published = call(client, key, "publish_workflow", {"name": "add_thrice", "version": 2})
    assert published["structuredContent"]["examples"] == "examples: 1/1 passed"
    # The answers fit the tools' outputSchemas, which clients check them against.
    schemas = {
        tool["name"]: tool.get("outputSchema")
        for tool in result(modern(client, "tools/list", key=key))["tools"]
    }
    for answer in (same, other):
        jsonschema.validate(answer["structuredContent"], schemas["test_workflow"])
    jsonschema.validate(published["structuredContent"], schemas["publish_workflow"])


def test_test_workflow_with_examples_takes_no_arguments_or_mocks(client, key, ran):
    refused = call(
        client,
        key,
        "test_workflow",
        {"name": "add_thrice", "examples": True, "arguments": {"start": 1}, "mocks": {}},
    )
    assert refused["isError"] is True
    assert "With examples: true, leave out arguments, mocks" in refused["content"][0]["text"]


def test_keeping_an_example_needs_workflows_write(client, ran):
    reader = make_key(scopes=["runs:read", "tools:execute"])

    refused = keep(client, ran.pk, reader)

    assert refused.status_code == 403
    assert "workflows:write" in refused.json()["error"]
    assert client.delete(example_url(ran.pk), headers=auth_headers(reader)).status_code == 403
    assert not WorkflowExample.objects.exists()


def test_a_key_without_runs_read_keeps_only_its_own_runs(client, ran):
    writer = make_key(scopes=["workflows:write", "workflows:admin"])

    refused = keep(client, ran.pk, writer)

    assert refused.status_code == 404
    assert f"No run {ran.pk} that you may read" in refused.json()["error"]
    # Its own run it may keep.
    prefix = ApiKey.objects.get(scopes=["workflows:write", "workflows:admin"]).prefix
    Run.objects.filter(pk=ran.pk).update(caller=f"key:{prefix}")
    assert keep(client, ran.pk, writer).status_code == 200


@pytest.mark.parametrize(
    ("status", "code", "message"),
    [
        ("waiting", 409, "is still waiting: keep it as an example once it has succeeded"),
        ("failed", 400, "failed, so it has no result to keep"),
        ("timed_out", 400, "timed out, so it has no result to keep"),
    ],
)
def test_a_run_without_a_result_is_refused_clearly(client, key, ran, status, code, message):
    Run.objects.filter(pk=ran.pk).update(status=status, result=None)

    refused = keep(client, ran.pk, key)

    assert refused.status_code == code
    assert message in refused.json()["error"]
    assert not WorkflowExample.objects.exists()


def test_a_run_is_kept_once_and_removed_once(client, key, ran):
    assert keep(client, ran.pk, key).status_code == 200
    again = keep(client, ran.pk, key)
    assert again.status_code == 409
    assert "already an example" in again.json()["error"]

    removed = client.delete(example_url(ran.pk), headers=auth_headers(key))
    assert removed.status_code == 200
    assert removed.json()["run_id"] == ran.pk
    assert not WorkflowExample.objects.exists()
    gone = client.delete(example_url(ran.pk), headers=auth_headers(key))
    assert gone.status_code == 404
    assert "is not an example" in gone.json()["error"]


def test_bad_input_is_refused_not_a_500(client, key, ran):
    long_note = keep(client, ran.pk, key, {"note": "x" * 2001})
    assert long_note.status_code == 422
    unknown = keep(client, 999_999, key)
    assert unknown.status_code == 404
    not_json = client.post(
        example_url(ran.pk), "{", content_type="application/json", headers=auth_headers(key)
    )
    assert not_json.status_code == 400
