"""The runs list of the REST API: GET /api/v1/runs, keyset pages of every run, filtered, for
the scope runs:read; and who may read runs at all (both routes)."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command

from graphs.models import Run
from mcp_endpoint.models import ApiKey, Scope
from tests.mcp_endpoint.helpers import auth_headers, make_key
from tests.mcp_endpoint.runs_helpers import RUNS, T0, add_run, assert_documented, ids, refusal


@pytest.fixture
def headers(db) -> dict[str, str]:
    return auth_headers(make_key(scopes=["runs:read"]))


def test_the_list_serves_every_field_of_a_run_newest_first(client, loops, headers):
    older = add_run("sum_to", at=T0, arguments={"n": 3}, result={"sum": 6}, caller="key:aaa")
    newer = add_run(
        "classify",
        at=T0 + timedelta(minutes=1),
        status=Run.Status.FAILED,
        arguments={"value": -1},
        error="The switch found no branch.",
        error_node_id="route",
        finished_at=T0 + timedelta(minutes=1, seconds=2),
        duration_ms=2000.0,
        caller="key:bbb",
    )

    response = client.get(RUNS, headers=headers)

    assert ids(response) == [newer.pk, older.pk]
    body = response.json()
    assert body["next_cursor"] is None
    failed, succeeded = body["runs"]
    assert failed == {
        "id": newer.pk,
        "workflow": "classify",
        "workflow_version_id": newer.version_id,
        "workflow_version": newer.version.number,
        "status": "failed",
        "caller": "key:bbb",
        "arguments": {"value": -1},
        "result": None,
        "error": "The switch found no branch.",
        "error_node_id": "route",
        "node_count": 0,
        "truncated": False,
        "created_at": "2026-11-01T12:01:00Z",
        "started_at": "2026-11-01T12:01:00Z",
        "finished_at": "2026-11-01T12:01:02Z",
        "duration_ms": 2000.0,
        "rerun_of": None,
        "rerun_from": None,
        "paused_at": None,
    }
    assert succeeded["result"] == {"sum": 6}
    assert succeeded["error"] is None
    assert succeeded["error_node_id"] is None


def test_a_run_still_going_has_no_node_count_yet(client, loops, headers):
    add_run(status=Run.Status.RUNNING, executions=2, node_count=0)

    [run] = client.get(RUNS, headers=headers).json()["runs"]

    assert run["status"] == "running"
    assert run["node_count"] is None


def test_the_list_filters_by_workflow_status_caller_and_time(client, loops, headers):
    a = add_run("sum_to", at=T0, caller="key:one")
    b = add_run("classify", at=T0 + timedelta(hours=1), status=Run.Status.FAILED)
    c = add_run("classify", at=T0 + timedelta(hours=2), caller="key:one")

    def listed(**query):
        return ids(client.get(RUNS, query, headers=headers))

    assert listed(workflow="classify") == [c.pk, b.pk]
    assert listed(status="failed") == [b.pk]
    assert listed(workflow="classify", status="succeeded") == [c.pk]
    assert listed(caller="key:one") == [c.pk, a.pk]
    # since is inclusive, until exclusive; an offset is honoured, and no offset means UTC.
    assert listed(since="2026-11-01T13:00:00Z") == [c.pk, b.pk]
    assert listed(until="2026-11-01T14:00:00+01:00") == [a.pk]
    assert listed(since="2026-11-01T13:00:00", until="2026-11-01T14:00:00") == [b.pk]
    assert listed(since="2026-11-01t13:00:00.000001z") == [c.pk]  # RFC 3339's lower case


def test_a_name_or_caller_with_a_nul_character_matches_nothing(client, loops, headers):
    """PostgreSQL refuses text with NUL even in a comparison: no 500, as for any unknown name."""
    add_run("classify", caller="key:one")

    missing = client.get(RUNS, {"workflow": "classify\x00"}, headers=headers)
    nobody = client.get(RUNS, {"caller": "key:one\x00"}, headers=headers)

    assert missing.status_code == 404
    assert "No workflow named 'classify\\x00'" in missing.json()["error"]
    assert nobody.status_code == 200
    assert nobody.json() == {"runs": [], "next_cursor": None}


def test_runs_read_sees_the_runs_of_every_caller(client, loops, headers):
    mine = add_run(caller="key:mine")
    theirs = add_run(caller="key:theirs", at=T0 + timedelta(seconds=1))
    anonymous = add_run(caller="", at=T0 + timedelta(seconds=2))

    assert ids(client.get(RUNS, headers=headers)) == [anonymous.pk, theirs.pk, mine.pk]


def test_pages_cover_every_run_once_even_when_runs_arrive_between_pages(client, loops, headers):
    # Runs created at the same instant are ordered by id, so ties never fall between pages.
    runs = [add_run(at=T0 + timedelta(seconds=index // 3)) for index in range(8)]
    expected = [run.pk for run in sorted(runs, key=lambda r: (r.created_at, r.pk), reverse=True)]

    seen, cursor, pages = [], None, 0
    while True:
        query = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        response = client.get(RUNS, query, headers=headers)
        seen += ids(response)
        pages += 1
        # A run started while the client pages is newer than every cursor handed out.
        add_run(at=T0 + timedelta(hours=pages))
        cursor = response.json()["next_cursor"]
        if cursor is None:
            break

    assert seen == expected
    assert pages == 3


def test_a_full_last_page_says_there_is_no_next_one(client, loops, headers):
    for index in range(4):
        add_run(at=T0 + timedelta(seconds=index))

    body = client.get(RUNS, {"limit": 4}, headers=headers).json()

    assert len(body["runs"]) == 4
    assert body["next_cursor"] is None


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "not-a-cursor",
        "12x-3",
        "123",  # a run page's cursor
        "999999999999999999-1",  # 18 digits of microseconds: past the year 9999
        "1793620800000000-42\n",
        "١٧٩٣-4",  # digits, but not ASCII ones
        "-5-3",
    ],
)
def test_a_cursor_not_handed_out_is_refused_saying_to_pass_back_next_cursor(
    client, loops, headers, cursor
):
    add_run()

    message = refusal(client.get(RUNS, {"cursor": cursor}, headers=headers), 400)

    assert "Invalid cursor" in message
    assert "next_cursor" in message


def test_a_cursor_handed_out_pages_on_and_a_mangled_one_is_refused(client, loops, headers):
    first = add_run(at=T0)
    add_run(at=T0 + timedelta(seconds=1))
    cursor = client.get(RUNS, {"limit": 1}, headers=headers).json()["next_cursor"]
    assert ids(client.get(RUNS, {"cursor": cursor}, headers=headers)) == [first.pk]

    for mangled in (cursor + "=", cursor[:-1] + "x", cursor.replace("-", "_"), " " + cursor):
        assert "next_cursor" in refusal(client.get(RUNS, {"cursor": mangled}, headers=headers), 400)


@pytest.mark.parametrize("limit", ["0", "201", "-1", "ten", "2.5"])
def test_a_limit_out_of_bounds_is_refused_naming_the_bounds(client, loops, headers, limit):
    message = refusal(client.get(RUNS, {"limit": limit}, headers=headers), 422)

    assert message.startswith("Invalid request: limit:")


def test_the_limit_bounds_a_page(client, loops, headers):
    for index in range(3):
        add_run(at=T0 + timedelta(seconds=index))

    assert len(ids(client.get(RUNS, {"limit": 2}, headers=headers))) == 2
    assert len(ids(client.get(RUNS, {"limit": 200}, headers=headers))) == 3


def test_an_unknown_status_is_refused_listing_the_valid_ones(client, loops, headers):
    message = refusal(client.get(RUNS, {"status": "done"}, headers=headers), 400)

    assert "Unknown status 'done'" in message
    for status in Run.Status.values:
        assert status in message


@pytest.mark.parametrize(
    "moment",
    ["yesterday", "2026-13-01T00:00:00Z", "2026-11-01T25:00", "1793620800", "0.5", "2026-11-01"],
)
@pytest.mark.parametrize("name", ["since", "until"])
def test_a_datetime_that_is_not_iso_8601_is_refused_by_name(client, loops, headers, name, moment):
    message = refusal(client.get(RUNS, {name: moment}, headers=headers), 400)

    assert message.startswith(f"{name}: {moment!r} is not an ISO 8601 date and time")
    assert "2026-11-01T09:30:00Z" in message


def test_an_empty_time_range_holds_no_runs(client, loops, headers):
    add_run(at=T0)
    query = {"since": "2026-11-02T00:00:00Z", "until": "2026-11-01T00:00:00Z"}

    assert ids(client.get(RUNS, query, headers=headers)) == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # Offsets that move a moment past what a datetime holds mean the first or last one.
        ({"since": "0001-01-01T00:00:00+01:00"}, True),
        ({"until": "9999-12-31T23:59:59-01:00"}, True),
        ({"since": "9999-12-31T23:59:59-01:00"}, False),
        ({"until": "0001-01-01T00:00:00+01:00"}, False),
    ],
)
def test_a_datetime_at_the_edge_of_the_calendar_is_a_bound_not_an_error(
    client, loops, headers, query, expected
):
    run = add_run(at=T0)

    assert ids(client.get(RUNS, query, headers=headers)) == ([run.pk] if expected else [])


def test_an_unknown_workflow_is_404_with_the_closest_names(client, loops, headers):
    message = refusal(client.get(RUNS, {"workflow": "clasify"}, headers=headers), 404)

    assert "No workflow named 'clasify'" in message
    assert "did you mean classify" in message


def test_a_page_costs_the_same_queries_whatever_its_size(
    client, loops, headers, django_assert_max_num_queries
):
    for index in range(60):
        add_run(at=T0 + timedelta(seconds=index), executions=1)
    client.get(RUNS, headers=headers)  # the key is looked up once, then remembered

    for query in ({"limit": 2}, {"limit": 50}, {"limit": 50, "workflow": "classify"}):
        with django_assert_max_num_queries(2):
            response = client.get(RUNS, query, headers=headers)
        assert len(ids(response)) == query["limit"]
    cursor = response.json()["next_cursor"]
    with django_assert_max_num_queries(2):
        assert len(ids(client.get(RUNS, {"cursor": cursor}, headers=headers))) == 10


def test_a_page_of_every_kind_of_run_matches_the_published_schema(client, loops, headers):
    for status in Run.Status.values:
        add_run(status=status, executions=2, arguments={"n": 1}, result=[1, "two", None])
    add_run(error="Stopped.", error_node_id="n", truncated=True, duration_ms=3.0)

    response = client.get(RUNS, headers=headers)

    assert len(ids(response)) == len(Run.Status.values) + 1
    assert_documented(response, RUNS)
    assert_documented(client.get(RUNS, {"status": "nonsense"}, headers=headers), RUNS)


# -------------------------------------------------------------------------------- access


@pytest.mark.parametrize("url", [RUNS, f"{RUNS}/1"])
def test_the_runs_routes_refuse_a_caller_without_a_key(client, loops, url):
    response = client.get(url)

    assert "send an API key" in refusal(response, 401)
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("url", [RUNS, f"{RUNS}/1"])
def test_the_runs_routes_refuse_a_key_without_runs_read(client, loops, url):
    key = make_key(scopes=[scope for scope in Scope.values if scope != "runs:read"])

    assert "runs:read" in refusal(client.get(url, headers=auth_headers(key)), 403)


def test_the_demo_key_and_a_default_command_key_can_read_runs(loops):
    call_command("setup_demo", stdout=io.StringIO())
    call_command("create_api_key", "--name", "ci", stdout=io.StringIO(), stderr=io.StringIO())

    assert "runs:read" in ApiKey.objects.get(name="demo", revoked_at=None).scopes
    assert "runs:read" in ApiKey.objects.get(name="ci").scopes


def test_the_admin_offers_the_runs_read_scope(admin_client):
    page = admin_client.get("/admin/mcp_endpoint/apikey/add/").content.decode()

    assert 'value="runs:read"' in page
