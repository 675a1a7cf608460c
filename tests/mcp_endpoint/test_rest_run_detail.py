"""One run over the REST API: GET /api/v1/runs/{id}, the run and keyset pages of its node
executions in execution order, for the scope runs:read."""

from __future__ import annotations

import pytest

from graphs.models import NodeExecution, Run
from tests.mcp_endpoint.helpers import auth_headers, make_key
from tests.mcp_endpoint.runs_helpers import RUNS, T0, add_run, assert_documented, refusal


@pytest.fixture
def headers(db) -> dict[str, str]:
    return auth_headers(make_key(scopes=["runs:read"]))


def test_a_run_is_served_with_its_node_executions_in_order(client, loops, headers):
    run = add_run(arguments={"n": 2}, executions=3, result={"sum": 3})

    response = client.get(f"{RUNS}/{run.pk}", headers=headers)

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["run"]["id"] == run.pk
    assert body["run"]["result"] == {"sum": 3}
    assert body["next_cursor"] is None
    first, second, third = body["node_executions"]
    assert [e["index"] for e in body["node_executions"]] == [0, 1, 2]
    assert first == {
        "index": 0,
        "node_id": "node_0",
        "node_type": "transform",
        "iteration": 1,
        "status": "succeeded",
        "input": {"n": 2},  # the run's arguments
        "detail": None,
        "output": {"step": 0},
        "error": None,
        "attempts": 1,
        "truncated": False,
        "started_at": "2026-11-01T12:00:00Z",
        "finished_at": "2026-11-01T12:00:00.002Z",
        "duration_ms": 2.5,
    }
    assert second["input"] == {"step": 0}  # the previous execution's output
    assert third["started_at"] == "2026-11-01T12:00:00.002Z"


def test_node_executions_page_by_cursor_without_gaps_or_repeats(
    client, loops, headers, django_assert_max_num_queries
):
    run = add_run(arguments={"n": 7}, executions=7)
    client.get(RUNS, headers=headers)  # the key is looked up once, then remembered

    executions, cursor, pages = [], None, 0
    while True:
        query = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        # The run, a page of its executions, and the approval nodes it reached.
        with django_assert_max_num_queries(3):
            response = client.get(f"{RUNS}/{run.pk}", query, headers=headers)
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["run"]["id"] == run.pk
        executions += body["node_executions"]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break

    assert pages == 3
    assert [e["index"] for e in executions] == list(range(7))
    # A page's first input is the output of the previous page's last execution.
    assert [e["input"] for e in executions] == [{"n": 7}] + [{"step": i} for i in range(6)]


def test_a_run_still_going_hands_out_a_cursor_for_the_executions_to_come(client, loops, headers):
    run = add_run(status=Run.Status.RUNNING, executions=2)

    body = client.get(f"{RUNS}/{run.pk}", headers=headers).json()
    assert [e["index"] for e in body["node_executions"]] == [0, 1]
    assert body["next_cursor"] is not None

    # Nothing new yet: an empty page, and the same place to ask again.
    again = client.get(f"{RUNS}/{run.pk}", {"cursor": body["next_cursor"]}, headers=headers)
    assert again.json()["node_executions"] == []
    assert again.json()["next_cursor"] == body["next_cursor"]

    NodeExecution.objects.create(
        run=run,
        index=2,
        node_id="exit",
        node_type="exit",
        status="succeeded",
        output={"done": True},
        started_at=T0,
        duration_ms=1.0,
    )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED)
    later = client.get(f"{RUNS}/{run.pk}", {"cursor": body["next_cursor"]}, headers=headers)
    assert [(e["index"], e["input"]) for e in later.json()["node_executions"]] == [(2, {"step": 1})]
    assert later.json()["next_cursor"] is None


def test_a_run_page_refuses_a_cursor_it_did_not_hand_out(client, loops, headers):
    run = add_run(executions=3)
    list_cursor = "1793620800000000-42"

    for bad in (list_cursor, "garbage", "", "1000000000", "-1", "1.5"):
        response = client.get(f"{RUNS}/{run.pk}", {"cursor": bad}, headers=headers)
        message = refusal(response, 400)
        assert "Invalid cursor" in message
        assert "next_cursor" in message


def test_a_run_page_refuses_a_limit_out_of_bounds(client, loops, headers):
    run = add_run(executions=1)

    message = refusal(client.get(f"{RUNS}/{run.pk}", {"limit": 500}, headers=headers), 422)

    assert message.startswith("Invalid request: limit:")


def test_an_unknown_run_is_404_saying_so(client, loops, headers):
    response = client.get(f"{RUNS}/987654", headers=headers)

    assert "No run 987654" in refusal(response, 404)
    assert_documented(response, f"{RUNS}/{{run_id}}")


def test_a_run_page_of_every_kind_of_execution_matches_the_published_schema(client, loops, headers):
    run = add_run(status=Run.Status.RUNNING, executions=2)
    for index, status in enumerate(NodeExecution.Status.values, start=2):
        NodeExecution.objects.create(
            run=run,
            index=index,
            node_id="call",
            node_type="mcp",
            iteration=index,
            status=status,
            detail={"tool": "list"},
            output=None if status != "succeeded" else "text",
            error="Timed out." if status == "failed" else "",
            truncated=True,
            started_at=T0,
            duration_ms=None if status == "running" else 4.0,
        )

    response = client.get(f"{RUNS}/{run.pk}", headers=headers)

    assert [e["status"] for e in response.json()["node_executions"]][2:] == (
        NodeExecution.Status.values
    )
    assert response.json()["node_executions"][2]["finished_at"] is None  # still running
    assert_documented(response, f"{RUNS}/{{run_id}}")
