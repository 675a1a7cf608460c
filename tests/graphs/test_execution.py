"""Execution without a worker: cancelling queued and running runs, the reaper, the REST call.
(Queued runs on a real Celery worker are in tests/e2e/test_queued_runs.py.)"""

from __future__ import annotations

import os
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from graphs.execution.control import RunNotFound, run_cancel
from graphs.execution.reaper import runs_reap
from graphs.execution.runs import RunRequest, run_create, run_execute, workflow_call
from graphs.models import NodeExecution, Run
from mcp_endpoint.access.auth import authenticate
from tests.mcp_endpoint.helpers import make_key


def test_a_queued_run_cancelled_before_it_starts_is_never_executed(loops):
    run = run_create(RunRequest(name="sum_to", arguments={"n": 3}, caller="key:abc"))

    cancellation = run_cancel(run_id=run.pk, reason="not needed any more")

    assert cancellation.status == Run.Status.CANCELLED
    assert run_execute(run_id=run.pk, arguments={"n": 3}) is None
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert run.error == "Cancelled before it started: not needed any more"
    assert run.finished_at is not None
    assert not run.node_executions.exists()


def test_a_queued_run_is_executed_once_however_often_its_task_arrives(loops):
    run = run_create(RunRequest(name="sum_to", arguments={"n": 3}))

    outcome = run_execute(run_id=run.pk, arguments={"n": 3})

    assert outcome.result == {"sum": 6, "steps": 3}
    assert run_execute(run_id=run.pk, arguments={"n": 3}) is None
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert run.worker.endswith(f":{os.getpid()}")
    assert run.node_executions.count() == 9


def test_a_running_run_cancelled_in_its_process_stops_before_its_next_node(loops):
    started, cancelled = [], []

    def cancel_after_three_nodes(done: int, message: str) -> None:
        if done == 3 and not cancelled:
            cancelled.append(run_cancel(run_id=started[0], reason="the reviewer stopped it"))

    outcome = workflow_call(
        RunRequest(name="sum_to", arguments={"n": 50}),
        progress=cancel_after_three_nodes,
        started=started.append,
    )

    assert cancelled[0].status == Run.Status.RUNNING
    assert outcome.status == Run.Status.CANCELLED
    run = Run.objects.get(pk=outcome.run_id)
    assert run.status == Run.Status.CANCELLED
    assert "the reviewer stopped it" in run.error
    assert run.cancel_reason == "the reviewer stopped it"
    assert run.node_executions.count() == 3
    assert run.error_node_id == "step"


def test_cancelling_an_ended_or_unknown_run_says_so(loops):
    outcome = workflow_call(RunRequest(name="sum_to", arguments={"n": 1}, caller="key:abc"))

    ended = run_cancel(run_id=outcome.run_id, reason="too late")

    assert ended.status == Run.Status.SUCCEEDED
    assert "already ended succeeded" in ended.message
    with pytest.raises(RunNotFound, match="started with your key"):
        run_cancel(run_id=outcome.run_id, reason="not mine", caller="key:other")
    with pytest.raises(RunNotFound, match="No run 999999"):
        run_cancel(run_id=999999, reason="nothing")


def _running(loops, *, heartbeat_age: float) -> Run:
    run = run_create(RunRequest(name="sum_to", arguments={"n": 1}))
    beat = timezone.now() - timedelta(seconds=heartbeat_age)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING, started_at=beat, heartbeat_at=beat, worker="box:4242"
    )
    NodeExecution.objects.create(
        run=run, index=0, node_id="entry", node_type="entry", status="succeeded", started_at=beat
    )
    NodeExecution.objects.create(
        run=run, index=1, node_id="step", node_type="mcp", status="running", started_at=beat
    )
    return run


def test_the_reaper_fails_a_run_whose_process_stopped_and_names_the_node(loops, settings):
    settings.GRAPHS_RUN_STALE_SECONDS = 60
    stale = _running(loops, heartbeat_age=61)
    alive = _running(loops, heartbeat_age=5)

    assert [reaped.run_id for reaped in runs_reap()] == [stale.pk]

    stale.refresh_from_db()
    assert stale.status == Run.Status.FAILED
    assert "(box:4242) stopped: no heartbeat" in stale.error
    assert "run the workflow again" in stale.error
    assert stale.error_node_id == "step"
    assert stale.finished_at is not None
    step = stale.node_executions.get(node_id="step")
    assert (step.status, step.error) == ("failed", stale.error)
    assert stale.node_executions.get(node_id="entry").status == "succeeded"
    alive.refresh_from_db()
    assert alive.status == Run.Status.RUNNING
    assert runs_reap() == []


def test_reap_runs_prints_what_it_reaped(loops, settings):
    settings.GRAPHS_RUN_STALE_SECONDS = 60
    stale = _running(loops, heartbeat_age=120)
    out = StringIO()

    call_command("reap_runs", stdout=out)
    call_command("reap_runs", stdout=out)

    assert out.getvalue().splitlines() == [
        f"run {stale.pk} failed: its process stopped",
        "1 reaped.",
        "Nothing to reap: no run without a heartbeat for 60 s, none queued and not started "
        "for 300 s.",
    ]


def _cancel(client, run_id: int, key: str):
    return client.post(f"/api/v1/runs/{run_id}/cancel", headers={"Authorization": f"Bearer {key}"})


def test_the_rest_api_cancels_a_run_started_with_the_same_key(loops, client):
    key = make_key()
    caller = authenticate({"authorization": f"Bearer {key}"}, "127.0.0.1").actor
    run = run_create(RunRequest(name="sum_to", arguments={"n": 2}, caller=caller))

    response = _cancel(client, run.pk, key)

    assert response.status_code == 200
    assert response.json() == {
        "run_id": run.pk,
        "status": "cancelled",
        "message": f"Run {run.pk} was cancelled.",
    }
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert caller in run.cancel_reason


def test_the_rest_api_refuses_to_cancel_without_the_scope_or_for_another_key(loops, client):
    run = run_create(RunRequest(name="sum_to", arguments={"n": 2}, caller="key:someone"))

    read_only = _cancel(client, run.pk, make_key(["tools:read"]))
    other = _cancel(client, run.pk, make_key())

    assert read_only.status_code == 403
    assert "tools:execute" in read_only.json()["error"]
    assert other.status_code == 404
    assert "only by the key that started them" in other.json()["error"]
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
