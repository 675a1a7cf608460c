"""Re-running a recorded run from one of its nodes (graphs/execution/resuming/reruns.py): the steps
before the node are replayed from the history, so the downstream server is called only from
the node on (counted on the server itself), on the run's version or the current one, with the
node's input edited or not; and every bad request refused with nothing created."""

from __future__ import annotations

import json

import pytest

from graphs.authoring.files import graph_import
from graphs.execution.resuming.going_on import resumed_runs_wait
from graphs.execution.resuming.reruns import RerunRefused, rerun
from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import NodeExecution, Run
from nodespecs.downstream import client
from nodespecs.models import Provider
from tests.approval_runs import ended
from tests.graph_files import OPERATOR
from tests.peers import echo_server_command

pytestmark = pytest.mark.timeout(60)

GRAPH = """
version: "1.0"
server: {{name: tallies, version: "1.0.0"}}
mcpServers:
  counter: {{command: {python}, args: [{peer}], env: {{ECHO_SERVER_TOOLS: "tally,tallied"}}}}
tools:
  - name: tally_twice
    inputSchema:
      type: object
      properties: {{x: {{type: integer}}, token: {{type: string, format: password}}}}
      required: [x]
    nodes:
      - {{id: entry, type: entry, next: first}}
      - {{id: first, type: mcp, server: counter, tool: tally, args: {{value: $.entry.x}},
          next: double}}
      - {{id: double, type: transform, transform: {{expr: "$.first.value * 2"}}, next: second}}
      - {{id: second, type: mcp, server: counter, tool: tally, args: {{value: $.double}},
          next: answer}}
      - {{id: answer, type: transform, transform: {{expr: '{{"value": $.second.value}}'}},
          next: exit}}
      - {{id: exit, type: exit}}
"""


@pytest.fixture
def tallies(transactional_db):
    client.close_all()
    python, peer = (json.dumps(part) for part in echo_server_command())
    graph_import(text=GRAPH.format(python=python, peer=peer), caller=OPERATOR)
    yield
    client.close_all()


def _server_calls() -> int:
    """How many tally calls the workflow's server process has answered, asked of it."""
    provider = Provider.objects.get(name="counter")
    result = client.call_tool(provider.connection(), "tallied", {}, timeout=10)
    return int(result.content[0].text)


def _original(x: int = 3) -> Run:
    outcome = workflow_call(RunRequest(name="tally_twice", arguments={"x": x}, caller="key:r"))
    assert outcome.succeeded, outcome
    return Run.objects.get(pk=outcome.run_id)


def test_a_rerun_replays_the_steps_before_the_node_and_calls_the_server_only_after(tallies):
    original = _original(3)
    assert original.result == {"value": 6}
    assert _server_calls() == 2
    made = rerun(run_id=original.pk, from_node="double", caller="rita")
    new = ended(made.run_id)
    assert new.status == Run.Status.SUCCEEDED, new.error
    assert new.result == {"value": 6}
    # `first` was replayed, not called: the server answered one more tally, `second`'s.
    assert _server_calls() == 3
    rows = list(NodeExecution.objects.filter(run=new).order_by("index"))
    assert [row.node_id for row in rows] == ["entry", "first", "double", "second", "answer", "exit"]
    assert [bool(row.detail and row.detail.get("replayed_from")) for row in rows] == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]
    assert new.rerun_of_id == original.pk
    assert new.rerun_from["node"] == "double"
    assert new.rerun_from["input_edited"] is False
    assert list(original.reruns.values_list("pk", flat=True)) == [new.pk]
    assert new.node_count == 6


def test_an_edited_input_replaces_what_the_node_acts_on(tallies):
    original = _original(3)
    # A transform's input is the previous output: `double` reads $.first.
    made = rerun(
        run_id=original.pk, from_node="double", input={"value": 50, "calls": 0}, caller="rita"
    )
    new = ended(made.run_id)
    assert new.result == {"value": 100}
    assert new.rerun_from["input_edited"] is True
    # An mcp node's input is its tool's arguments, sent instead of evaluating its args.
    made = rerun(run_id=original.pk, from_node="second", input={"value": 7}, caller="rita")
    assert ended(made.run_id).result == {"value": 7}
    # The entry's input is the run's arguments: every node runs again.
    before = _server_calls()
    made = rerun(run_id=original.pk, from_node="entry", input={"x": 10}, caller="rita")
    assert ended(made.run_id).result == {"value": 20}
    assert _server_calls() == before + 2


def test_a_rerun_on_the_current_version_runs_the_new_graph(tallies):
    original = _original(2)
    python, peer = (json.dumps(part) for part in echo_server_command())
    changed = GRAPH.replace("$.first.value * 2", "$.first.value * 3")
    graph_import(text=changed.format(python=python, peer=peer), caller=OPERATOR)
    on_current = ended(
        rerun(run_id=original.pk, from_node="double", version="current", caller="rita").run_id
    )
    on_original = ended(rerun(run_id=original.pk, from_node="double", caller="rita").run_id)
    assert (on_current.result, on_original.result) == ({"value": 6}, {"value": 4})
    assert on_current.version_id != original.version_id == on_original.version_id


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        ({"from_node": "nowhere"}, "never reached node 'nowhere'; it reached 'answer', 'double'"),
        ({"from_node": "double", "iteration": 1}, "ran 1 time(s) in run"),
        ({"from_node": "double", "version": "latest"}, "Unknown version 'latest'"),
        ({"from_node": "entry", "input": {"x": "ten"}}, "x: 'ten' is not of type 'integer'"),
        ({"from_node": "second", "input": [1]}, "its input is the tool's arguments, an object"),
    ],
)
def test_a_bad_rerun_is_refused_saying_why_and_nothing_is_created(tallies, asked, message):
    original = _original(1)
    runs = Run.objects.count()
    with pytest.raises(RerunRefused) as refused:
        rerun(run_id=original.pk, caller="rita", **asked)
    assert message in str(refused.value)
    assert Run.objects.count() == runs


def test_a_masked_output_or_argument_cannot_be_replayed(tallies):
    outcome = workflow_call(
        RunRequest(name="tally_twice", arguments={"x": 1, "token": "s3cret-value"}, caller="k")
    )
    assert outcome.succeeded
    with pytest.raises(RerunRefused, match="masked"):
        rerun(run_id=outcome.run_id, from_node="double", caller="rita")
    # From the entry, with the arguments given again, it can.
    made = rerun(
        run_id=outcome.run_id, from_node="entry", input={"x": 1, "token": "t"}, caller="rita"
    )
    assert ended(made.run_id).status == Run.Status.SUCCEEDED


def test_a_run_still_going_or_unknown_is_refused(tallies):
    original = _original(1)
    Run.objects.filter(pk=original.pk).update(status=Run.Status.RUNNING)
    with pytest.raises(RerunRefused) as refused:
        rerun(run_id=original.pk, from_node="double", caller="rita")
    assert refused.value.status == 409
    with pytest.raises(RerunRefused) as refused:
        rerun(run_id=999999, from_node="double", caller="rita")
    assert refused.value.status == 404


def test_an_mcp_nodes_edited_arguments_are_a_builders_right(tallies, client):
    from tests.mcp_endpoint.helpers import auth_headers, make_key

    original = _original(1)
    url = f"/api/v1/runs/{original.pk}/rerun"
    reviewer = auth_headers(make_key(["tools:execute", "runs:read"]))

    def rerun_over_rest(headers, **body):
        response = client.post(url, body, content_type="application/json", headers=headers)
        resumed_runs_wait(20)  # the in-memory SQLite: no read beside the re-run's writes
        return response

    runs = Run.objects.count()
    refused = rerun_over_rest(reviewer, from_node="second", input={"value": 7})
    assert refused.status_code == 403
    assert "needs the scope workflows:write" in refused.json()["error"]
    assert Run.objects.count() == runs
    # Replaying as recorded, or editing what a transform reads, sends nothing of the caller's
    # own to a provider.
    assert rerun_over_rest(reviewer, from_node="second").status_code == 201
    assert rerun_over_rest(reviewer, from_node="double", input={"value": 2}).status_code == 201
    builder = auth_headers(make_key(["tools:execute", "runs:read", "workflows:write"]))
    refused = rerun_over_rest(builder, from_node="second", input={"value": 7})
    assert refused.status_code == 403
    assert "may not re-run a run with an mcp node's arguments edited" in refused.json()["error"]
    operator = auth_headers(
        make_key(["tools:execute", "runs:read", "workflows:write", "workflows:admin"])
    )
    made = rerun_over_rest(operator, from_node="second", input={"value": 7})
    assert made.status_code == 201
    assert ended(made.json()["run_id"]).result == {"value": 7}
