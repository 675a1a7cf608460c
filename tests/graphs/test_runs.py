"""Running workflows: results, the history written as they run, and failures."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from graphs.execution.runs import RunRequest, WorkflowCallError, workflow_call
from graphs.models import NodeExecution, Run
from tests.graph_files import import_file


def test_a_loop_returns_the_right_sum_and_records_every_iteration(loops):
    outcome = workflow_call(RunRequest(name="sum_to", arguments={"n": 10}, caller="tests"))
    assert outcome.succeeded
    assert outcome.result == {"sum": 55, "steps": 10}
    run = Run.objects.get(pk=outcome.run_id)
    assert run.status == Run.Status.SUCCEEDED
    assert run.result == {"sum": 55, "steps": 10}
    assert run.caller == "tests"
    assert run.version == run.workflow.current_version
    rows = list(run.node_executions.order_by("index"))
    # entry, 10 times (step, more), result, exit
    assert len(rows) == run.node_count == 23
    assert [row.index for row in rows] == list(range(23))
    steps = [row for row in rows if row.node_id == "step"]
    assert [row.iteration for row in steps] == list(range(1, 11))
    assert steps[-1].output == {"i": 10, "sum": 55}
    assert rows[2].detail == {"target": "step", "matched": 0}
    assert rows[-3].detail == {"target": "result", "matched": "default"}
    assert all(row.status == NodeExecution.Status.SUCCEEDED for row in rows)
    assert all(row.duration_ms is not None for row in rows)


@pytest.mark.parametrize(("value", "branch"), [(3, "small"), (42, "medium"), (1000, "large")])
def test_a_switch_takes_each_branch(loops, value, branch):
    outcome = workflow_call(RunRequest(name="classify", arguments={"value": value}))
    assert outcome.result == branch
    path = Run.objects.get(pk=outcome.run_id).node_executions.values_list("node_id", flat=True)
    assert list(path) == ["entry", "size", branch, "exit"]


@pytest.mark.parametrize("value", [0, False, "", None])
def test_an_exit_returns_falsy_values_unchanged(loops, value):
    outcome = workflow_call(RunRequest(name="is_zero", arguments={"value": value}))
    assert outcome.succeeded
    assert outcome.result == value
    assert type(outcome.result) is type(value)


def test_a_limit_breach_fails_the_run_naming_the_limit_and_the_node(loops):
    outcome = workflow_call(RunRequest(name="sum_to", arguments={"n": 1000}))
    assert outcome.status == Run.Status.FAILED
    assert "maxNodeExecutions (500)" in outcome.error
    run = Run.objects.get(pk=outcome.run_id)
    assert run.status == Run.Status.FAILED
    assert run.error_node_id == outcome.error_node_id != ""
    assert run.node_count == 500
    assert run.node_executions.count() == 500


def test_arguments_that_break_the_input_schema_start_no_run(loops):
    with pytest.raises(WorkflowCallError, match="n: 0 is less than the minimum of 1"):
        workflow_call(RunRequest(name="sum_to", arguments={"n": 0}))
    with pytest.raises(WorkflowCallError, match="arguments: 'n' is a required property"):
        workflow_call(RunRequest(name="sum_to", arguments={}))
    assert not Run.objects.exists()


def test_an_unknown_workflow_is_refused_by_name(loops):
    with pytest.raises(WorkflowCallError, match="No workflow named 'sum_two'"):
        workflow_call(RunRequest(name="sum_two", arguments={}))


def test_secret_arguments_are_masked_in_the_history(loops):
    import_file("loops.yaml", **{"value: {}": "value: {}\n        api_key: {}"})
    outcome = workflow_call(
        RunRequest(name="is_zero", arguments={"value": 1, "api_key": "sk-live-123"})
    )
    run = Run.objects.get(pk=outcome.run_id)
    assert run.arguments == {"value": 1, "api_key": "********"}
    entry = run.node_executions.get(node_id="entry")
    assert "sk-live-123" not in str(entry.output)


def test_a_large_payload_is_stored_as_a_marked_preview(loops, settings):
    settings.GRAPHS_MAX_PAYLOAD_BYTES = 100
    outcome = workflow_call(RunRequest(name="is_zero", arguments={"value": "x" * 500}))
    assert outcome.result == "x" * 500
    run = Run.objects.get(pk=outcome.run_id)
    assert run.truncated
    assert run.result["_truncated"] is True
    assert run.result["bytes"] == 502
    assert len(run.result["preview"]) == 100
    pick = run.node_executions.get(node_id="pick")
    assert pick.truncated
    assert pick.output["_truncated"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_calls_each_get_their_own_answer_and_history():
    if connection.vendor == "sqlite":
        pytest.skip("the SQLite test database is in memory, where writers lock whole tables")
    import_file("loops.yaml")

    def call(n: int):
        try:
            return n, workflow_call(RunRequest(name="sum_to", arguments={"n": n}))
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=20) as pool:
        outcomes = list(pool.map(call, range(1, 21)))
    for n, outcome in outcomes:
        assert outcome.result == {"sum": n * (n + 1) // 2, "steps": n}
        run = Run.objects.get(pk=outcome.run_id)
        assert run.arguments == {"n": n}
        assert run.node_executions.count() == 2 * n + 3
        assert run.node_executions.filter(node_id="step").last().output["sum"] == n * (n + 1) // 2


def test_a_run_of_a_known_version_makes_a_fixed_number_of_queries(
    loops, django_assert_num_queries, monkeypatch
):
    from graphs.execution import recorder
    from graphs.execution.toolset import workflow_tools

    # One batch of finished rows, however slow the machine (batches are also time-bounded).
    monkeypatch.setattr(recorder, "FLUSH_SECONDS", 60)
    tool = workflow_tools()["sum_to"]
    version = (tool.version_id, tool.digest)
    workflow_call(RunRequest(name="sum_to", arguments={"n": 2}, version=version))
    # Whatever n is (n=30: 63 rows): the run's id reserved, then the run, its rows and its
    # outcome written together when it ends, in one statement on PostgreSQL, in a transaction
    # of two on SQLite (here a savepoint in the test's transaction, made and released).
    # tests/graphs/test_run_writes.py says which statements.
    written = 1 if connection.vendor == "postgresql" else 2 + 2
    with django_assert_num_queries(1 + written):
        workflow_call(RunRequest(name="sum_to", arguments={"n": 30}, version=version))


def test_a_run_out_of_time_ends_timed_out(db):
    import_file("loops.yaml", **{"maxNodeExecutions: 500": "maxExecutionTimeMs: 1"})
    outcome = workflow_call(RunRequest(name="sum_to", arguments={"n": 100000}))
    assert outcome.status == Run.Status.TIMED_OUT
    assert outcome.error.startswith("maxExecutionTimeMs (1) reached")
