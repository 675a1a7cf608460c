"""The reaper's recovery: queued runs whose message was lost are sent again, then failed;
running runs of a workflow that is safe to retry are queued again after their worker died.

Sending uses Celery's eager mode: the real task runs in this process at once. The same paths
on a real broker and worker processes are in tests/e2e/test_queued_runs.py."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from graphs.execution.queue import run_queued
from graphs.execution.reaper import Reaped, runs_reap
from graphs.execution.runs import RunRequest, run_create
from graphs.models import NodeExecution, Run, Workflow


@pytest.fixture
def eager_workers():
    """Sent runs execute at once in this process, through the real task."""
    run_queued.app.conf.task_always_eager = True
    yield
    run_queued.app.conf.task_always_eager = False


@pytest.fixture
def retried(loops, settings):
    """Queued mode, and `sum_to` marked safe to retry."""
    settings.EXECUTION_MODE = "queued"
    settings.GRAPHS_RUN_STALE_SECONDS = 60
    settings.GRAPHS_RUN_RETRIES = 1
    Workflow.objects.filter(name="sum_to").update(retry_on_worker_loss=True)


def queued_run(*, age: float, arguments: dict | None = None, **fields) -> Run:
    """A queued run of sum_to created `age` seconds ago."""
    run = run_create(RunRequest(name="sum_to", arguments=arguments or {"n": 3}))
    created = timezone.now() - timedelta(seconds=age)
    Run.objects.filter(pk=run.pk).update(created_at=created, **fields)
    run.refresh_from_db()
    return run


def lost_run(*, heartbeat_age: float, **fields) -> Run:
    """A run of sum_to whose worker died `heartbeat_age` seconds ago while at node `step`."""
    run = queued_run(age=heartbeat_age + 1)
    beat = timezone.now() - timedelta(seconds=heartbeat_age)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING, started_at=beat, heartbeat_at=beat, worker="box:4242", **fields
    )
    NodeExecution.objects.create(
        run=run, index=0, node_id="entry", node_type="entry", status="succeeded", started_at=beat
    )
    NodeExecution.objects.create(
        run=run, index=1, node_id="step", node_type="transform", status="running", started_at=beat
    )
    run.refresh_from_db()
    return run


def nodes(run: Run) -> list[tuple[str, str]]:
    return list(run.node_executions.order_by("index").values_list("node_id", "status"))


# ------------------------------------------------------------------ queued, never started


def test_a_queued_run_no_worker_started_is_sent_again_and_then_runs(loops, settings, eager_workers):
    settings.GRAPHS_QUEUED_STALE_SECONDS = 300
    settings.GRAPHS_QUEUED_RESENDS = 2
    lost = queued_run(age=301)
    waiting = queued_run(age=30)

    assert runs_reap() == [Reaped(lost.pk, "sent to the workers again (1 of 2)")]

    lost.refresh_from_db()
    assert lost.status == Run.Status.SUCCEEDED
    assert lost.result == {"sum": 6, "steps": 3}
    assert lost.resends == 1
    assert "no worker started it within 300 s (GRAPHS_QUEUED_STALE_SECONDS)" in lost.reaper_notes
    assert "sent again (1 of 2)" in lost.reaper_notes
    waiting.refresh_from_db()
    assert (waiting.status, waiting.resends) == (Run.Status.QUEUED, 0)


def test_a_resent_run_waits_the_stale_time_again_before_the_next_resend(loops, settings):
    settings.GRAPHS_QUEUED_STALE_SECONDS = 300
    # Sent again 100 s ago: its last sign of life, not its creation, counts.
    run = queued_run(age=900, resends=1, heartbeat_at=timezone.now() - timedelta(seconds=100))

    assert runs_reap() == []
    run.refresh_from_db()
    assert (run.status, run.resends) == (Run.Status.QUEUED, 1)


def test_a_queued_run_is_failed_after_its_last_resend_saying_what_to_check(loops, settings):
    settings.GRAPHS_QUEUED_STALE_SECONDS = 300
    settings.GRAPHS_QUEUED_RESENDS = 2
    run = queued_run(age=1000, resends=2, heartbeat_at=timezone.now() - timedelta(seconds=301))

    assert runs_reap() == [Reaped(run.pk, "failed: no worker started it")]

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.finished_at is not None
    assert run.error.startswith("Never started: no worker started it within 300 s")
    assert "it was sent again 2 time(s)" in run.error
    assert "CELERY_BROKER_URL" in run.error
    assert "celery -A config worker" in run.error
    assert not run.node_executions.exists()


def test_a_queued_run_with_masked_secrets_is_failed_not_sent_with_the_masks(loops, settings):
    settings.GRAPHS_QUEUED_STALE_SECONDS = 300
    run = queued_run(age=301, arguments={"n": 3, "api_key": "s3cret"})
    assert run.arguments["api_key"] != "s3cret"

    assert runs_reap() == [Reaped(run.pk, "failed: no worker started it")]

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.resends == 0
    assert "its arguments hold secrets, which the history keeps masked" in run.error


def test_a_duplicate_message_executes_nothing_and_stores_no_result(loops, eager_workers):
    run = run_create(RunRequest(name="sum_to", arguments={"n": 3}))

    first = run_queued.apply(args=[run.pk, {"n": 3}])
    second = run_queued.apply(args=[run.pk, {"n": 3}])

    assert first.state == "SUCCESS"
    assert first.result == {"result": {"sum": 6, "steps": 3}}
    assert second.state == "IGNORED"
    assert run.node_executions.count() == 9


# ----------------------------------------------------------- running, its worker lost


def test_a_lost_run_of_a_retryable_workflow_runs_again_under_its_id(retried, eager_workers):
    run = lost_run(heartbeat_age=61)

    [reaped] = runs_reap()

    attempt = Run.objects.get(attempt_of=run)
    assert reaped == Reaped(
        run.pk, f"queued again: its worker was lost (the lost attempt is run {attempt.pk})"
    )
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert run.result == {"sum": 6, "steps": 3}
    assert run.retries == 1
    assert run.error == ""
    assert nodes(run)[0] == ("entry", "succeeded")
    assert len(nodes(run)) == run.node_count == 9
    assert f"the lost attempt is run {attempt.pk}" in run.reaper_notes
    assert "(box:4242) stopped: no heartbeat" in run.reaper_notes
    # The lost attempt keeps its history, failed with the reason, listed beside the run.
    assert attempt.status == Run.Status.FAILED
    assert attempt.error.startswith(f"Attempt 1 of run {run.pk}. The process running this run")
    assert "queued again (retry 1 of 1)" in attempt.error
    assert attempt.error_node_id == "step"
    assert attempt.worker == "box:4242"
    assert attempt.created_at == run.created_at
    assert nodes(attempt) == [("entry", "succeeded"), ("step", "failed")]
    assert attempt.node_executions.get(node_id="step").error == attempt.error


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"workflow": False}, "run the workflow again if it is safe to repeat what it did"),
        ({"mode": "direct"}, "runs are retried only when queued (EXECUTION_MODE=queued)"),
        ({"run": {"retries": 1}}, "queued again 1 time(s) already, the most GRAPHS_RUN_RETRIES"),
        ({"run": {"cancel_reason": "stop it"}}, "it was being cancelled (stop it)"),
        ({"run": {"arguments": {"n": 3, "token": "********"}}}, "its arguments hold secrets"),
    ],
    ids=["not-marked", "direct-mode", "retries-spent", "cancelling", "masked-arguments"],
)
def test_a_lost_run_that_may_not_be_retried_is_failed_saying_why(
    retried, settings, change, expected
):
    Workflow.objects.filter(name="sum_to").update(retry_on_worker_loss=change.get("workflow", True))
    settings.EXECUTION_MODE = change.get("mode", "queued")
    run = lost_run(heartbeat_age=61, **change.get("run", {}))

    assert runs_reap() == [Reaped(run.pk, "failed: its process stopped")]

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "(box:4242) stopped: no heartbeat" in run.error
    assert expected in run.error
    assert nodes(run) == [("entry", "succeeded"), ("step", "failed")]
    assert not Run.objects.filter(attempt_of=run).exists()


def test_a_live_run_is_left_alone(retried):
    run = lost_run(heartbeat_age=5)

    assert runs_reap() == []
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


def test_reap_runs_prints_each_runs_outcome(retried, eager_workers):
    run = lost_run(heartbeat_age=61)
    out = StringIO()

    call_command("reap_runs", stdout=out)

    attempt = Run.objects.get(attempt_of=run)
    assert out.getvalue().splitlines() == [
        f"run {run.pk} queued again: its worker was lost (the lost attempt is run {attempt.pk})",
        "1 reaped.",
    ]


def test_the_workflow_admin_sets_the_retry_flag(loops, admin_client):
    workflow = Workflow.objects.get(name="sum_to")
    url = reverse("admin:graphs_workflow_change", args=[workflow.pk])
    page = admin_client.get(url)
    data = {
        "name": workflow.name,
        "group": workflow.group_id,
        "enabled": "on",
        "retry_on_worker_loss": "on",
        "graph": page.context["adminform"].form.initial["graph"],
        "versions-TOTAL_FORMS": "0",
        "versions-INITIAL_FORMS": "0",
    }

    response = admin_client.post(url, data)

    assert response.status_code == 302, response.context["adminform"].form.errors
    workflow.refresh_from_db()
    assert workflow.retry_on_worker_loss
    assert "Tick it only when repeating the nodes" in page.text
