"""Runs that wait at an approval node: the wait holds nothing but rows, a decision is taken
once and sends the run on along its route, the timer fires timeouts, and a waiting run can be
cancelled (graphs/execution/approvals/)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from graphs.execution.approvals.decisions import (
    Decider,
    DecisionError,
    decide,
)
from graphs.execution.approvals.timer import timer
from graphs.execution.approvals.waits import waiting_for, waiting_runs
from graphs.execution.control import run_cancel
from graphs.execution.reaper import runs_reap
from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import Approval, NodeExecution, Run
from tests.approval_runs import ended, waiting_run
from tests.graph_files import import_file
from tests.mcp_endpoint.test_tracing import spans as spans

pytestmark = pytest.mark.timeout(60)

REVIEWER = Decider("api_key", "key:rev", "reviewer key", frozenset({"key:rev"}))


@pytest.fixture
def approvals(transactional_db):
    import_file("approvals.yaml")


def test_a_run_waits_at_the_node_holding_only_rows(approvals):
    run_id = waiting_run()
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.WAITING
    assert run.worker == ""
    assert run.heartbeat_at is None
    rows = list(run.node_executions.order_by("index").values_list("node_id", "status"))
    assert rows == [("entry", "succeeded"), ("approve", "waiting")]
    waiting = waiting_for(run_id)
    assert waiting is not None
    assert waiting.message == "Refund 25 to ann?"
    assert waiting.form == {
        "type": "object",
        "properties": {"reason": {"type": "string", "maxLength": 500}},
    }
    assert waiting.timeout_at is not None
    assert 59 < (waiting.timeout_at - waiting.since).total_seconds() <= 60
    assert [each.run_id for _, each in waiting_runs()] == [run_id]
    # The saved state holds the arguments unmasked: encrypted at rest.
    with connection.cursor() as cursor:
        cursor.execute("SELECT state FROM graphs_approval WHERE run_id = %s", [run_id])
        (raw,) = cursor.fetchone()
    assert "ann" not in raw


def test_an_approved_run_goes_on_along_its_route_with_who_decided(approvals):
    run_id = waiting_run()
    decided = decide(run_id, "approved", REVIEWER, comment="ok", form={"reason": "loyal"})
    assert decided.by == {"kind": "api_key", "id": "key:rev", "name": "reviewer key"}
    run = ended(run_id)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.result == {"refunded": 25, "by": "reviewer key", "reason": "loyal"}
    rows = list(run.node_executions.order_by("index"))
    assert [row.node_id for row in rows] == ["entry", "approve", "refunded", "done"]
    assert run.node_count == 4
    approve = rows[1]
    assert approve.status == NodeExecution.Status.SUCCEEDED
    assert approve.output["decision"] == "approved"
    assert approve.output["comment"] == "ok"
    assert approve.output["by"]["kind"] == "api_key"
    # The wait does not count as the run's time.
    assert run.duration_ms < 5000


def test_a_rejected_run_takes_the_rejected_route(approvals):
    run_id = waiting_run()
    decide(run_id, "rejected", REVIEWER)
    run = ended(run_id)
    assert run.result == {"refunded": 0, "decision": "rejected"}


def test_the_second_of_two_decisions_is_told_who_decided(approvals):
    run_id = waiting_run()
    decide(run_id, "approved", REVIEWER)
    with pytest.raises(DecisionError) as refused:
        decide(run_id, "rejected", Decider("user", "7", "bob", frozenset({"bob"})))
    assert refused.value.status == 409
    assert "already decided: approved by reviewer key (api_key)" in refused.value.message
    ended(run_id)
    assert Approval.objects.get(run_id=run_id).decision == "approved"


def test_racing_decisions_take_exactly_one(approvals):
    from concurrent.futures import ThreadPoolExecutor

    if connection.vendor == "sqlite":
        pytest.skip("the in-memory test SQLite refuses concurrent writers; CI races on PostgreSQL")
    run_id = waiting_run()
    deciders = [Decider("user", str(i), f"user{i}", frozenset({f"user{i}"})) for i in range(6)]

    def attempt(decider: Decider) -> str:
        try:
            decide(run_id, "approved", decider)
            return "won"
        except DecisionError as exc:
            return str(exc.status)
        finally:
            connection.close()

    with ThreadPoolExecutor(6) as pool:
        outcomes = list(pool.map(attempt, deciders))
    assert outcomes.count("won") == 1, outcomes
    assert ended(run_id).status == Run.Status.SUCCEEDED


@pytest.mark.parametrize(
    ("decision", "decider", "form", "status", "says"),
    [
        ("maybe", REVIEWER, None, 400, "send 'approved' or 'rejected'"),
        ("approved", REVIEWER, {"reason": "x" * 501}, 400, "reason"),
        ("approved", REVIEWER, {"colour": "red"}, 400, "colour"),
        (
            "approved",
            Decider("api_key", "key:start", "starter", frozenset({"key:start"})),
            None,
            403,
            "separation of duties",
        ),
        ("approved", Decider("client", "key:rev", "client", frozenset()), None, 403, "reviewers"),
    ],
)
def test_bad_decisions_change_nothing(approvals, decision, decider, form, status, says):
    run_id = waiting_run()
    with pytest.raises(DecisionError) as refused:
        decide(run_id, decision, decider, form=form)
    assert refused.value.status == status
    assert says in refused.value.message
    assert Run.objects.get(pk=run_id).status == Run.Status.WAITING
    assert Approval.objects.get(run_id=run_id).decision == ""


@pytest.mark.parametrize(
    "decider",
    [
        Decider("user", "7", "alice", frozenset({"alice"})),  # in the admin
        Decider("api_key", "key:hers", "key:hers (alice)", frozenset({"key:hers", "alice"})),
    ],
    ids=["in-the-admin", "with-her-key"],
)
def test_a_run_started_with_oauth_is_not_decided_by_its_user(approvals, decider):
    """The run's caller names the person and the client; the person may not decide it,
    whichever way they come."""
    run_id = waiting_run(caller="oauth:alice via Claude")
    with pytest.raises(DecisionError) as refused:
        decide(run_id, "approved", decider)
    assert refused.value.status == 403
    assert "oauth:alice via Claude" in refused.value.message
    other = Decider("user", "8", "bob", frozenset({"bob"}))
    decide(run_id, "approved", other)
    assert ended(run_id).status == Run.Status.SUCCEEDED


def test_a_run_that_does_not_exist_is_404(approvals):
    with pytest.raises(DecisionError) as refused:
        decide(999999, "approved", REVIEWER)
    assert refused.value.status == 404


def test_the_timer_fires_a_due_timeout_and_the_run_takes_the_timeout_route(approvals):
    run_id = waiting_run()
    due = timezone.now() - timedelta(milliseconds=5)
    Approval.objects.filter(run_id=run_id).update(timeout_at=due)
    timer.tick()
    run = ended(run_id)
    assert run.result == {"refunded": 0, "decision": "timeout"}
    approval = Approval.objects.get(run_id=run_id)
    assert approval.decision == "timeout"
    assert approval.decided_by is None
    with pytest.raises(DecisionError) as refused:
        decide(run_id, "approved", REVIEWER)
    assert refused.value.status == 409
    assert "timed out at" in refused.value.message


def test_a_decision_after_the_timeout_is_due_loses_to_it(approvals):
    run_id = waiting_run()
    Approval.objects.filter(run_id=run_id).update(timeout_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(DecisionError) as refused:
        decide(run_id, "approved", REVIEWER)
    assert refused.value.status == 409
    assert "timed out" in refused.value.message
    assert ended(run_id).result == {"refunded": 0, "decision": "timeout"}


def test_the_timer_sleeps_until_the_next_due_time(approvals):
    run_id = waiting_run()
    Approval.objects.filter(run_id=run_id).update(
        timeout_at=timezone.now() + timedelta(seconds=0.4)
    )
    pause = timer.tick()
    assert 0.2 < pause <= 0.4


def test_a_waiting_run_can_be_cancelled_and_then_not_decided(approvals):
    run_id = waiting_run()
    cancelled = run_cancel(run_id=run_id, reason="not needed")
    assert cancelled.status == Run.Status.CANCELLED
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.CANCELLED
    assert run.node_executions.get(node_id="approve").status == NodeExecution.Status.FAILED
    with pytest.raises(DecisionError) as refused:
        decide(run_id, "approved", REVIEWER)
    assert refused.value.status == 409
    assert timer.tick() > 0  # nothing due: the cancelled run's approval is not fired


def test_the_reaper_leaves_a_waiting_run_alone(approvals):
    run_id = waiting_run()
    runs_reap(now=timezone.now() + timedelta(days=30))
    assert Run.objects.get(pk=run_id).status == Run.Status.WAITING


def test_a_decision_is_in_the_audit_trail(approvals):
    from nodespecs.models import AuditEvent

    run_id = waiting_run()
    decide(run_id, "approved", REVIEWER)
    ended(run_id)  # before the test's end empties the tables under the resumed run
    event = AuditEvent.objects.get(object_type="graphs.approval")
    assert event.actor == "key:rev"
    assert event.action == "decided"
    assert event.object_label == f"approval at approve in run {run_id} (approved)"


def test_reviewers_are_told_of_a_waiting_run_at_approval_notify_url(approvals, settings):
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    received: list[dict] = []
    arrived = threading.Event()

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            received.append(json.loads(self.rfile.read(length)))
            self.send_response(200)
            self.end_headers()
            arrived.set()

        def log_message(self, *args: object) -> None:
            pass

    receiver = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.handle_request, daemon=True).start()
    settings.APPROVAL_NOTIFY_URL = f"http://127.0.0.1:{receiver.server_port}/hook"
    settings.PUBLIC_URL = "https://switchyard.example"
    try:
        run_id = waiting_run(customer="zoe")
        assert arrived.wait(10)
    finally:
        receiver.server_close()
    (body,) = received
    assert body["run_id"] == run_id
    assert body["message"] == "Refund 25 to zoe?"
    assert body["url"] == "https://switchyard.example/approvals/"
    assert f"Run {run_id} of refund waits for approval at node 'approve'" in body["text"]
    assert body["text"].endswith("Decide at https://switchyard.example/approvals/")


def test_the_runs_trace_spans_the_wait(approvals, spans):
    from opentelemetry import trace

    with trace.get_tracer("tests").start_as_current_span("caller") as caller:
        run_id = waiting_run()
    time.sleep(0.05)
    decide(run_id, "approved", REVIEWER)  # from another context: the trace is the run's
    ended(run_id)
    finished = spans.get_finished_spans()
    runs = [span for span in finished if span.name == "run refund"]
    assert len(runs) == 2  # up to the wait, and from the decision on
    trace_id = caller.get_span_context().trace_id
    assert {span.context.trace_id for span in runs} == {trace_id}
    waits = [span for span in finished if span.name == "node approval approve"]
    waited = [span for span in waits if span.start_time < runs[1].start_time]
    assert waited, [span.name for span in finished]
    assert all(span.context.trace_id == trace_id for span in waits)
    # The approval node's span of the resumed run covers the wait: from when it began.
    covering = max(waits, key=lambda span: span.end_time - span.start_time)
    assert covering.end_time - covering.start_time >= 50_000_000


def test_a_run_whose_saved_state_would_be_too_large_fails_at_the_node(approvals, settings):
    settings.GRAPHS_MAX_WAIT_STATE_BYTES = 100
    outcome = workflow_call(
        RunRequest(name="refund", arguments={"amount": 1, "customer": "x" * 200})
    )
    assert outcome.status == Run.Status.FAILED
    assert "GRAPHS_MAX_WAIT_STATE_BYTES (100)" in outcome.error
    run = Run.objects.get(pk=outcome.run_id)
    assert run.node_executions.get(node_id="approve").status == NodeExecution.Status.FAILED
    assert not Approval.objects.filter(run=run).exists()
