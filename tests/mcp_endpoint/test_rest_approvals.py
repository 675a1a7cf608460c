"""Approvals over REST: a waiting run listed and shown with what it waits for, decided with
POST /api/v1/runs/{id}/decision by a key with runs:decide (never the key that started it),
every bad decision a clear refusal that changes nothing."""

from __future__ import annotations

import pytest

from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import Approval, Run
from mcp_endpoint.models import ApiKey
from tests.approval_runs import ended
from tests.graph_files import import_file
from tests.mcp_endpoint.helpers import auth_headers, make_key
from tests.mcp_endpoint.runs_helpers import assert_documented

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def waiting(transactional_db) -> tuple[int, str]:
    """A run waiting for reviewers, started by a key of its own; that key's secret."""
    import_file("approvals.yaml")
    starter = make_key(scopes=["tools:execute", "runs:decide", "runs:read"])
    actor = "key:" + ApiKey.objects.get().prefix
    outcome = workflow_call(
        RunRequest(name="refund", arguments={"amount": 25, "customer": "ann"}, caller=actor)
    )
    assert outcome.status == Run.Status.WAITING
    return outcome.run_id, starter


def _decide(client, run_id: int, key: str, **body):
    return client.post(
        f"/api/v1/runs/{run_id}/decision",
        body,
        content_type="application/json",
        headers=auth_headers(key),
    )


def test_a_waiting_run_is_listed_and_shows_what_it_waits_for(client, waiting):
    run_id, _ = waiting
    reader = auth_headers(make_key(scopes=["runs:read"]))
    listed = client.get("/api/v1/runs?status=waiting", headers=reader)
    assert [run["id"] for run in listed.json()["runs"]] == [run_id]
    shown = client.get(f"/api/v1/runs/{run_id}", headers=reader)
    assert shown.status_code == 200
    assert_documented(shown, "/api/v1/runs/{run_id}")
    waits = shown.json()["waiting_for"]
    assert waits["node"] == "approve"
    assert waits["message"] == "Refund 25 to ann?"
    assert waits["form"]["properties"]["reason"]["maxLength"] == 500
    assert waits["approvers"] == "reviewers"
    assert waits["timeout_at"] is not None
    assert waits["decision"] is None


def test_a_second_key_approves_and_the_history_shows_the_wait(client, waiting):
    run_id, _ = waiting
    reviewer = make_key(scopes=["runs:decide", "runs:read"])
    answer = _decide(
        client, run_id, reviewer, decision="approved", comment="fine", form={"reason": "loyal"}
    )
    assert answer.status_code == 200, answer.json()
    assert answer.json()["by"]["kind"] == "api_key"
    run = ended(run_id)
    assert run.status == Run.Status.SUCCEEDED
    assert run.result["refunded"] == 25
    shown = client.get(f"/api/v1/runs/{run_id}", headers=auth_headers(reviewer)).json()
    assert shown["waiting_for"] is None
    (approval,) = shown["approvals"]
    assert approval["decision"] == "approved"
    assert approval["comment"] == "fine"
    assert approval["form_values"] == {"reason": "loyal"}
    assert approval["until"] is not None
    assert approval["waited_ms"] >= 0
    again = _decide(client, run_id, reviewer, decision="rejected")
    assert again.status_code == 409
    assert "already decided: approved by" in again.json()["error"]


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"decision": "maybe"}, 400, "send 'approved' or 'rejected'"),
        ({"decision": "approved", "form": {"reason": 5}}, 400, "reason"),
        ({"decision": "approved", "form": {"extra": "x"}}, 400, "extra"),
        ({"comment": "no decision"}, 422, "decision"),
    ],
)
def test_bad_decisions_are_refused_and_change_nothing(client, waiting, body, status, says):
    run_id, _ = waiting
    reviewer = make_key(scopes=["runs:decide"])
    answer = _decide(client, run_id, reviewer, **body)
    assert answer.status_code == status, answer.content
    assert says in answer.content.decode()
    assert Approval.objects.get(run_id=run_id).decision == ""


def test_the_key_that_started_the_run_may_not_decide_it(client, waiting):
    run_id, starter = waiting
    answer = _decide(client, run_id, starter, decision="approved")
    assert answer.status_code == 403
    assert "separation of duties" in answer.json()["error"]


def test_deciding_needs_the_scope_and_a_run(client, waiting):
    run_id, _ = waiting
    reader = make_key(scopes=["runs:read"])
    assert _decide(client, run_id, reader, decision="approved").status_code == 403
    decider = make_key(scopes=["runs:decide"])
    missing = _decide(client, 999999, decider, decision="approved")
    assert missing.status_code == 404
    assert "No run 999999" in missing.json()["error"]
