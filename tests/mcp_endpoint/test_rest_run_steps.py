"""A run's steps over REST (mcp_endpoint/rest/run_steps.py): a step with the context its
expressions saw, an expression evaluated there, a re-run from a node, and continue, step or
stop at a breakpoint; each refusal a status and a message that says what to change, with
nothing created or changed."""

from __future__ import annotations

import jsonschema
import pytest

from graphs.engine.language import expressions
from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import NodeExecution, Run, RunPause
from mcp_endpoint.models import ApiKey
from tests.graph_files import import_file
from tests.mcp_endpoint.helpers import auth_headers, make_key
from tests.mcp_endpoint.runs_helpers import assert_documented, client_schema
from tests.step_runs import PATH, settled, tidy_import, tidy_run

pytestmark = pytest.mark.timeout(60)

SECRET = "s3cret-token-value"


@pytest.fixture
def reader(transactional_db) -> dict[str, str]:
    tidy_import()
    return auth_headers(make_key(scopes=["runs:read"]))


@pytest.fixture
def runner(transactional_db) -> tuple[dict[str, str], str]:
    """A key that may read and run: its headers and the actor its runs are recorded under."""
    tidy_import()
    secret = make_key(scopes=["runs:read", "tools:execute"])
    return auth_headers(secret), "key:" + ApiKey.objects.get().prefix


def documented(response, path: str, method: str = "post") -> None:
    """The body fits what the OpenAPI document gives for the route, method and status."""
    openapi = client_schema()
    answers = openapi["paths"][path][method]["responses"][str(response.status_code)]
    schema = answers["content"]["application/json"]["schema"]
    jsonschema.Draft202012Validator({**schema, "components": openapi["components"]}).validate(
        response.json()
    )


def _post(client, path: str, headers: dict[str, str], **body):
    return client.post(path, body, content_type="application/json", headers=headers)


def _evaluate(client, headers, run_id: int, index: int, expression: str):
    return _post(
        client, f"/api/v1/runs/{run_id}/steps/{index}/evaluate", headers, expression=expression
    )


# Scopes


def test_each_route_needs_its_scope(client, transactional_db):
    tidy_import()
    run = tidy_run()
    executing = auth_headers(make_key(scopes=["tools:execute"]))
    reading = auth_headers(make_key(scopes=["runs:read"]))
    step = client.get(f"/api/v1/runs/{run.pk}/steps/1", headers=executing)
    assert step.status_code == 403
    assert "runs:read" in step.json()["error"]
    assert _evaluate(client, executing, run.pk, 1, "1").status_code == 403
    rerun = _post(client, f"/api/v1/runs/{run.pk}/rerun", reading, from_node="count")
    assert rerun.status_code == 403
    assert "tools:execute" in rerun.json()["error"]
    paused = _post(client, f"/api/v1/runs/{run.pk}/breakpoint", reading, action="continue")
    assert paused.status_code == 403
    assert client.get(f"/api/v1/runs/{run.pk}/steps/1").status_code == 401
    assert Run.objects.count() == 1


# The step and its context


def test_a_step_gives_its_node_and_the_context_its_expressions_saw(client, reader):
    run = tidy_run()
    answer = client.get(f"/api/v1/runs/{run.pk}/steps/3", headers=reader)
    assert answer.status_code == 200, answer.json()
    documented(answer, "/api/v1/runs/{run_id}/steps/{index}", "get")
    step = answer.json()
    assert (step["run_id"], step["index"], step["node"], step["type"]) == (
        run.pk,
        3,
        "size",
        "switch",
    )
    assert (step["iteration"], step["status"]) == (1, "succeeded")
    context = step["context"]
    assert context["$"] == {
        "entry": {"words": ["pear", "fig", "plum"]},
        "upper": {"words": ["PEAR", "FIG", "PLUM"]},
        "count": {"n": 3, "first": "PEAR"},
    }
    assert context["previousNode"] == {"n": 3, "first": "PEAR"}
    assert context["executionCount"] == {"entry": 1, "upper": 1, "count": 1}
    assert step["unfaithful"] == []
    first = client.get(f"/api/v1/runs/{run.pk}/steps/0", headers=reader).json()
    assert first["context"]["$"] == {}


def test_an_unknown_step_or_run_is_a_404_naming_the_steps(client, reader):
    run = tidy_run()
    missing = client.get(f"/api/v1/runs/{run.pk}/steps/6", headers=reader)
    assert missing.status_code == 404
    assert missing.json()["error"] == f"Run {run.pk} has no step 6: its steps are 0 to 5."
    assert client.get("/api/v1/runs/999999/steps/0", headers=reader).status_code == 404
    assert _evaluate(client, reader, run.pk, 6, "1").status_code == 404
    # An index past what the column holds is refused by its declared bound.
    assert client.get(f"/api/v1/runs/{run.pk}/steps/{2**40}", headers=reader).status_code == 422


def test_a_masked_output_is_named_as_not_what_the_node_produced(client, reader):
    run = tidy_run({"words": ["kiwi"], "token": SECRET})
    step = client.get(f"/api/v1/runs/{run.pk}/steps/2", headers=reader).json()
    assert step["unfaithful"] == ["entry", "upper"]
    assert SECRET not in str(step)


def test_a_paused_run_has_the_node_it_stands_before_as_a_step(client, runner):
    headers, actor = runner
    run = tidy_run(caller=actor, breakpoints=("count",))
    assert run.status == Run.Status.PAUSED
    step = client.get(f"/api/v1/runs/{run.pk}/steps/2", headers=headers).json()
    assert (step["node"], step["type"], step["status"], step["iteration"]) == (
        "count",
        "transform",
        "paused",
        1,
    )
    assert step["context"]["$"]["upper"] == {"words": ["PEAR", "FIG", "PLUM"]}
    shown = client.get(f"/api/v1/runs/{run.pk}", headers=headers)
    assert_documented(shown, "/api/v1/runs/{run_id}")
    record = shown.json()["run"]
    assert record["status"] == "paused"
    assert record["paused_at"]["node"] == "count"
    assert (record["paused_at"]["index"], record["paused_at"]["iteration"]) == (2, 1)
    assert record["paused_at"]["expires_at"].endswith("Z")
    assert (record["rerun_of"], record["rerun_from"]) == (None, None)


# Evaluating


def test_an_expression_is_evaluated_in_the_steps_context(client, reader):
    run = tidy_run()
    answer = _evaluate(
        client, reader, run.pk, 3, '{"n": $.count.n * 10, "before": $previousNode().first}'
    )
    assert answer.status_code == 200, answer.json()
    documented(answer, "/api/v1/runs/{run_id}/steps/{index}/evaluate")
    assert answer.json() == {"value": {"n": 30, "before": "PEAR"}}
    # The history functions answer as they did at that step: `many` had not run yet.
    counted = _evaluate(client, reader, run.pk, 3, '[$executionCount("count"), $.many]')
    assert counted.json() == {"value": [1]}
    nothing = _evaluate(client, reader, run.pk, 3, "$.nowhere")
    assert nothing.json() == {"value": None}


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "$.count.n +",
            "The expression does not parse: Unexpected end of expression (at character 11).",
        ),
        ("$nodeExecution(1)", "$nodeExecution(id, index) needs a node id string"),
        ("", 'Send the JSONata to evaluate as "expression"'),
    ],
)
def test_a_bad_expression_is_a_400_saying_what_and_where(client, reader, expression, message):
    run = tidy_run()
    answer = _evaluate(client, reader, run.pk, 3, expression)
    assert answer.status_code == 400
    documented(answer, "/api/v1/runs/{run_id}/steps/{index}/evaluate")
    assert message in answer.json()["error"]


def test_an_expression_that_runs_too_long_is_stopped_at_the_time_bound(client, reader, monkeypatch):
    monkeypatch.setattr(expressions, "TIME_LIMIT_MS", 50)
    run = tidy_run()
    answer = _evaluate(client, reader, run.pk, 3, "($f := function($n){ $f($n + 1) }; $f(0))")
    assert answer.status_code == 400
    assert "the expression ran longer than 50 ms" in answer.json()["error"]


def test_an_expression_over_the_length_of_a_field_is_refused_before_it_is_read(client, reader):
    run = tidy_run()
    answer = _evaluate(client, reader, run.pk, 3, "1 + " * 2600 + "1")
    assert answer.status_code == 422
    assert "expression" in answer.json()["error"]


# Re-running


def _rerun(client, headers, run_id: int, **body):
    return _post(client, f"/api/v1/runs/{run_id}/rerun", headers, **body)


def test_a_rerun_starts_a_new_run_linked_to_the_original(client, runner):
    headers, actor = runner
    run = tidy_run(caller=actor)
    answer = _rerun(client, headers, run.pk, from_node="count")
    assert answer.status_code == 201, answer.json()
    made = answer.json()
    new = settled(made["run_id"])
    documented(answer, "/api/v1/runs/{run_id}/rerun")
    assert (made["rerun_of"], made["from_node"], made["index"]) == (run.pk, "count", 2)
    assert new.status == Run.Status.SUCCEEDED, new.error
    assert new.result == run.result == {"size": "many", "n": 3, "first": "PEAR"}
    assert new.caller == actor
    replayed = NodeExecution.objects.filter(run=new, detail__replayed_from=run.pk)
    assert sorted(replayed.values_list("index", flat=True)) == [0, 1]
    record = client.get(f"/api/v1/runs/{new.pk}", headers=headers).json()["run"]
    assert record["rerun_of"] == run.pk
    assert record["rerun_from"] == {
        "node": "count",
        "iteration": 1,
        "index": 2,
        "version": "original",
        "input_edited": False,
    }
    assert record["paused_at"] is None


def test_an_input_given_replaces_the_nodes_own_and_null_is_an_input(client, runner):
    headers, actor = runner
    run = tidy_run(caller=actor)
    edited = _rerun(
        client, headers, run.pk, from_node="count", input={"words": ["A", "B"]}, version="current"
    )
    assert edited.status_code == 201, edited.json()
    new = settled(edited.json()["run_id"])
    assert new.result == {"size": "few", "n": 2, "first": "A"}
    assert new.rerun_from["input_edited"] is True
    assert new.rerun_from["version"] == "current"
    # A null input is given (the node reads no words), unlike an input left out.
    nulled = settled(
        _rerun(client, headers, run.pk, from_node="count", input=None).json()["run_id"]
    )
    assert nulled.result == {"size": "few", "n": 0}
    assert nulled.rerun_from["input_edited"] is True


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"from_node": "nowhere"},
            "never reached node 'nowhere'; it reached 'count', 'entry', 'exit', 'many', 'size', "
            "'upper'. Re-run from one of those.",
        ),
        ({"from_node": "count", "iteration": 1}, "ran 1 time(s) in run"),
        ({"from_node": "entry", "input": {"words": "pear"}}, "'pear' is not of type 'array'"),
        ({"from_node": "entry", "input": {"colour": "red"}}, "'words' is a required property"),
        ({"from_node": "count", "version": "latest"}, "Unknown version 'latest'"),
    ],
)
def test_a_bad_rerun_is_a_400_saying_why_and_creates_nothing(client, runner, body, message):
    headers, actor = runner
    run = tidy_run(caller=actor)
    answer = _rerun(client, headers, run.pk, **body)
    assert answer.status_code == 400, answer.json()
    documented(answer, "/api/v1/runs/{run_id}/rerun")
    assert message in answer.json()["error"]
    assert Run.objects.count() == 1


def test_an_iteration_the_node_never_had_is_refused_with_the_ones_it_had(client, runner):
    headers, _ = runner
    import_file("loops.yaml")
    looped = workflow_call(RunRequest(name="sum_to", arguments={"n": 3}, caller="key:other"))
    answer = _rerun(client, headers, looped.run_id, from_node="step", iteration=3)
    assert answer.status_code == 400
    assert answer.json()["error"] == (
        f"Node 'step' ran 3 time(s) in run {looped.run_id}: iteration is 0 to 2 (or -1 for the "
        "latest), not 3."
    )
    # The latest of them, counted from the end, re-runs the last turn of the loop.
    latest = _rerun(client, headers, looped.run_id, from_node="step", iteration=-1)
    assert latest.status_code == 201
    new = settled(latest.json()["run_id"])
    assert new.result == {"sum": 6, "steps": 3}
    assert new.rerun_from["iteration"] == 3


def test_a_run_still_going_cannot_be_rerun(client, runner):
    headers, actor = runner
    run = tidy_run(caller=actor, breakpoints=("size",))
    answer = _rerun(client, headers, run.pk, from_node="upper")
    assert answer.status_code == 409
    documented(answer, "/api/v1/runs/{run_id}/rerun")
    assert f"Run {run.pk} is still paused" in answer.json()["error"]


def test_a_masked_output_cannot_be_replayed(client, runner):
    headers, actor = runner
    run = tidy_run({"words": ["kiwi"], "token": SECRET}, caller=actor)
    answer = _rerun(client, headers, run.pk, from_node="count")
    assert answer.status_code == 400
    assert "output in run" in answer.json()["error"]
    assert "stored masked (a secret)" in answer.json()["error"]
    assert Run.objects.count() == 1


def test_a_key_without_runs_read_reruns_only_its_users_runs(client, transactional_db):
    tidy_import()
    secret = make_key(scopes=["tools:execute"])
    headers, actor = auth_headers(secret), "key:" + ApiKey.objects.get().prefix
    others = tidy_run(caller="key:someone")
    answer = _rerun(client, headers, others.pk, from_node="count")
    assert answer.status_code == 404
    assert "started with your key" in answer.json()["error"]
    own = tidy_run(caller=actor)
    assert _rerun(client, headers, own.pk, from_node="count").status_code == 201
    settled(own.pk)
    assert _rerun(client, headers, 999999, from_node="count").status_code == 404


def test_a_deep_input_is_refused(client, runner, settings):
    headers, actor = runner
    run = tidy_run(caller=actor)
    deep: object = 1
    for _ in range(settings.MCP_MAX_JSON_DEPTH + 1):
        deep = [deep]
    answer = _rerun(client, headers, run.pk, from_node="count", input=deep)
    assert answer.status_code == 400
    assert "nests deeper than" in answer.json()["error"]
    assert Run.objects.count() == 1


# Breakpoints


def _act(client, headers, run_id: int, action: str):
    return _post(client, f"/api/v1/runs/{run_id}/breakpoint", headers, action=action)


def test_step_then_continue_takes_a_paused_run_to_its_end(client, runner):
    headers, actor = runner
    run = tidy_run(caller=actor, breakpoints=("count",))
    stepped = _act(client, headers, run.pk, "step")
    # Stepping ran `count` and paused before the next node, whatever it is.
    run = settled(run.pk)
    assert stepped.status_code == 200, stepped.json()
    documented(stepped, "/api/v1/runs/{run_id}/breakpoint")
    assert stepped.json()["status"] == "running"
    assert "stepped" in stepped.json()["message"]
    assert run.status == Run.Status.PAUSED
    pause = RunPause.objects.filter(run=run, ending="").get()
    assert (pause.node_id, pause.index) == ("size", 3)
    step = client.get(f"/api/v1/runs/{run.pk}/steps/3", headers=headers).json()
    assert step["status"] == "paused"
    assert step["context"]["$"]["count"] == {"n": 3, "first": "PEAR"}
    assert _act(client, headers, run.pk, "continue").json()["status"] == "running"
    run = settled(run.pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.result == {"size": "many", "n": 3, "first": "PEAR"}
    assert list(NodeExecution.objects.filter(run=run).values_list("node_id", flat=True)) == PATH
    endings = list(RunPause.objects.filter(run=run).values_list("ending", "ended_by"))
    assert endings == [("stepped", actor), ("continued", actor)]
    again = _act(client, headers, run.pk, "continue")
    assert again.status_code == 409
    documented(again, "/api/v1/runs/{run_id}/breakpoint")
    assert "is not paused at a breakpoint (it is succeeded)" in again.json()["error"]


def test_stop_ends_a_paused_run_cancelled(client, runner):
    headers, actor = runner
    run = tidy_run(caller=actor, breakpoints=("upper",))
    stopped = _act(client, headers, run.pk, "stop")
    assert stopped.status_code == 200
    assert stopped.json()["status"] == "cancelled"
    run = Run.objects.get(pk=run.pk)
    assert run.status == Run.Status.CANCELLED
    assert f"before node 'upper' by {actor}" in run.error
    assert NodeExecution.objects.filter(run=run).count() == 1


def test_a_bad_action_or_a_run_not_paused_changes_nothing(client, runner):
    headers, actor = runner
    run = tidy_run(caller=actor, breakpoints=("upper",))
    bad = _act(client, headers, run.pk, "skip")
    assert bad.status_code == 400
    assert "Unknown action 'skip'" in bad.json()["error"]
    ended = tidy_run(caller=actor)
    assert _act(client, headers, ended.pk, "step").status_code == 409
    assert _act(client, headers, 999999, "step").status_code == 404
    assert Run.objects.get(pk=run.pk).status == Run.Status.PAUSED


def test_another_users_paused_run_needs_runs_decide(client, runner):
    headers, _ = runner
    run = tidy_run(caller="admin test run by ann", breakpoints=("upper",))
    refused = _act(client, headers, run.pk, "stop")
    assert refused.status_code == 404
    assert "may continue, step or stop any" in refused.json()["error"]
    assert Run.objects.get(pk=run.pk).status == Run.Status.PAUSED
    reviewer = auth_headers(make_key(scopes=["tools:execute", "runs:decide"]))
    assert _act(client, reviewer, run.pk, "stop").status_code == 200
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED
