"""Reviewing runs over REST: GET /api/v1/runs/{a}/compare/{b} (runs:read), a run's annotation
read (runs:read) and written (runs:decide) at /api/v1/runs/{id}/annotation and shown with the
run, and the runs list filtered by verdict and tag; every refusal a clear message that changes
nothing, every answer the shape the OpenAPI schema documents."""

from __future__ import annotations

import pytest

from graphs.execution.runs import RunRequest, workflow_call
from graphs.history.annotations import annotation_read, annotation_write
from graphs.models import RunAnnotation
from mcp_endpoint.models import ApiKey
from tests.mcp_endpoint.helpers import auth_headers, make_key
from tests.mcp_endpoint.runs_helpers import RUNS, T0, add_run, assert_documented, ids

pytestmark = pytest.mark.usefixtures("loops")


def call(name: str, **arguments) -> int:
    return workflow_call(RunRequest(name=name, arguments=arguments)).run_id


@pytest.fixture
def reader(db) -> dict[str, str]:
    return auth_headers(make_key(scopes=["runs:read"]))


@pytest.fixture
def decider(db) -> tuple[dict[str, str], str]:
    """Headers of a key that may annotate runs, and how the history names it."""
    headers = auth_headers(make_key(scopes=["runs:decide"]))
    return headers, "key:" + ApiKey.objects.get(scopes=["runs:decide"]).prefix


def annotation_url(run_id: int) -> str:
    return f"{RUNS}/{run_id}/annotation"


def put(client, run_id: int, headers: dict[str, str], **body):
    return client.put(
        annotation_url(run_id), body, content_type="application/json", headers=headers
    )


# ---------------------------------------------------------------------------- comparing


def test_two_runs_taking_different_branches_are_compared(client, reader):
    a, b = call("classify", value=3), call("classify", value=50)

    response = client.get(f"{RUNS}/{a}/compare/{b}", headers=reader)

    assert response.status_code == 200, response.json()
    assert_documented(response, "/api/v1/runs/{run_id}/compare/{other_id}")
    body = response.json()
    assert (body["a"]["id"], body["b"]["id"]) == (a, b)
    assert (body["a"]["result"], body["b"]["result"]) == ("small", "medium")
    assert body["same_version"] is True
    assert body["same_path"] is False
    assert body["divergence"] == {
        "index": 2,
        "a": {"node_id": "small", "iteration": 1},
        "b": {"node_id": "medium", "iteration": 1},
    }
    assert body["arguments"] == {
        "state": "different",
        "differences": {"items": [{"path": "/value", "a": 3, "b": 50}], "cut": False},
        "reason": "",
    }
    assert [(node["node_id"], node["state"]) for node in body["executions"]] == [
        ("entry", "different"),
        ("size", "different"),
        ("small", "only_a"),
        ("medium", "only_b"),
        ("exit", "different"),
    ]
    assert body["executions"][2]["b"] is None
    assert body["cut"] is False
    assert body["notes"] == []
    assert body["limits"]["executions"] == 500


def test_comparing_needs_runs_read(client, db):
    a = call("classify", value=3)
    other = auth_headers(make_key(scopes=["runs:decide"]))
    response = client.get(f"{RUNS}/{a}/compare/{a}", headers=other)
    assert response.status_code == 403
    assert response.json() == {"error": "Forbidden: this endpoint needs the scope runs:read."}
    assert client.get(f"{RUNS}/{a}/compare/{a}").status_code == 401


def test_runs_that_cannot_be_compared_are_refused_saying_why(client, reader):
    a, b = call("classify", value=3), call("sum_to", n=2)

    other_workflow = client.get(f"{RUNS}/{a}/compare/{b}", headers=reader)
    missing = client.get(f"{RUNS}/{a}/compare/424242", headers=reader)
    not_a_number = client.get(f"{RUNS}/{a}/compare/x", headers=reader)

    assert other_workflow.status_code == 409
    assert "only runs of one workflow can be compared" in other_workflow.json()["error"]
    assert_documented(other_workflow, "/api/v1/runs/{run_id}/compare/{other_id}")
    assert missing.status_code == 404
    assert missing.json()["error"].startswith("No run 424242; it may have been deleted.")
    assert not_a_number.status_code == 422


# ---------------------------------------------------------------------------- annotations


def test_a_key_with_runs_decide_annotates_a_run_and_readers_see_it(client, reader, decider):
    run = add_run()
    headers, actor = decider

    written = put(
        client, run.pk, headers, verdict="bad", note="Chose medium.", tags=["Slow", "v1.2"]
    )

    assert written.status_code == 200, written.json()
    body = written.json()
    assert {key: body[key] for key in ("run_id", "verdict", "note", "tags", "by")} == {
        "run_id": run.pk,
        "verdict": "bad",
        "note": "Chose medium.",
        "tags": ["slow", "v1.2"],
        "by": actor,
    }
    read = client.get(annotation_url(run.pk), headers=reader)
    assert read.json() == body
    detail = client.get(f"{RUNS}/{run.pk}", headers=reader)
    assert_documented(detail, "/api/v1/runs/{run_id}")
    assert detail.json()["annotation"] == body


def test_a_run_nobody_annotated_has_an_empty_annotation_and_none_in_its_detail(client, reader):
    run = add_run()
    read = client.get(annotation_url(run.pk), headers=reader)
    assert read.json() == {
        "run_id": run.pk,
        "verdict": "",
        "note": "",
        "tags": [],
        "by": "",
        "updated_at": None,
    }
    assert client.get(f"{RUNS}/{run.pk}", headers=reader).json()["annotation"] is None
    assert client.get(annotation_url(424242), headers=reader).status_code == 404


def test_annotating_needs_runs_decide_and_reading_runs_read(client, reader, decider, db):
    run = add_run()
    refused = put(client, run.pk, reader, verdict="good")
    assert refused.status_code == 403
    assert refused.json() == {"error": "Forbidden: this endpoint needs the scope runs:decide."}
    assert client.get(annotation_url(run.pk), headers=decider[0]).status_code == 403
    assert not RunAnnotation.objects.exists()


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (
            {"verdict": "great"},
            400,
            "Unknown verdict 'great': send good, bad, or an empty verdict for none. "
            "Nothing was changed.",
        ),
        (
            {"tags": ["ok", "no spaces"]},
            400,
            "Invalid tag 'no spaces': a tag is 1 to 40 letters (a-z), digits, '-', '_' or '.', "
            "e.g. wrong-branch or needs.review. Nothing was changed.",
        ),
        (
            {"tags": [f"t{i}" for i in range(21)]},
            422,
            "Invalid request: body.tags: List should have at most 20 items after validation, "
            "not 21",
        ),
        (
            {"tags": ["x" * 41]},
            422,
            "Invalid request: body.tags.0: String should have at most 40 characters",
        ),
        (
            {"note": "n" * 4001},
            422,
            "Invalid request: body.note: String should have at most 4000 characters",
        ),
        ({"tags": "slow"}, 422, "Invalid request: body.tags: Input should be a valid list"),
    ],
)
def test_bad_input_is_refused_saying_how_to_fix_it_and_changes_nothing(
    client, decider, body, status, message
):
    run = add_run()
    annotation_write(run_id=run.pk, verdict="good", note="fine", tags=["kept"], by="rita")
    before = annotation_read(run_id=run.pk)

    response = put(client, run.pk, decider[0], **body)

    assert response.status_code == status
    assert response.json() == {"error": message}
    assert annotation_read(run_id=run.pk) == before


def test_annotating_a_run_that_does_not_exist_is_not_found(client, decider):
    response = put(client, 424242, decider[0], verdict="good")
    assert response.status_code == 404
    assert response.json()["error"].startswith("No run 424242")


# ---------------------------------------------------------------------------- the list


def test_the_list_filters_by_verdict_and_tag(client, reader):
    good = add_run(at=T0, status="succeeded")
    bad = add_run(at=T0.replace(minute=1))
    plain = add_run(at=T0.replace(minute=2))
    annotation_write(run_id=good.pk, verdict="good", note="", tags=["slow"], by="r")
    annotation_write(run_id=bad.pk, verdict="bad", note="", tags=["slow", "x"], by="r")

    def listed(**query):
        response = client.get(RUNS, query, headers=reader)
        assert response.status_code == 200, response.json()
        return ids(response)

    assert listed(verdict="good") == [good.pk]
    assert listed(verdict="bad") == [bad.pk]
    assert listed(verdict="none") == [plain.pk]
    assert listed(tag="slow") == [bad.pk, good.pk]
    assert listed(tag="X") == [bad.pk]
    assert listed(verdict="good", tag="x") == []
    # Keyset pages keep the filter.
    first = client.get(RUNS, {"tag": "slow", "limit": 1}, headers=reader).json()
    following = client.get(
        RUNS, {"tag": "slow", "limit": 1, "cursor": first["next_cursor"]}, headers=reader
    )
    assert [run["id"] for run in first["runs"]] == [bad.pk]
    assert ids(following) == [good.pk]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"verdict": "meh"}, "Unknown verdict 'meh': send good, bad, or none for the runs"),
        ({"tag": "no/slash"}, "Invalid tag 'no/slash': a tag is 1 to 40 letters"),
    ],
)
def test_a_bad_verdict_or_tag_filter_is_refused(client, reader, query, message):
    response = client.get(RUNS, query, headers=reader)
    assert response.status_code == 400
    assert response.json()["error"].startswith(message)


@pytest.mark.parametrize("path", ["/annotation", "/compare/1", ""])
def test_a_run_id_past_any_database_column_is_refused_as_bad_input(client, db, path):
    response = client.get(f"{RUNS}/{'9' * 25}{path}", headers=auth_headers(make_key()))
    assert response.status_code == 422
    assert "9223372036854775807" in response.content.decode()
