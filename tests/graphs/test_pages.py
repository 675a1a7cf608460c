"""The reviewer history pages: who may see them, what they show, and what they cost."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.urls import reverse

from graphs.execution.runs import RunRequest, run_create, run_execute, workflow_call
from graphs.history import selectors
from graphs.history.selectors import Cursor, RunFilters
from graphs.models import NodeExecution, Run, Workflow
from graphs.pages import display

pytestmark = pytest.mark.usefixtures("loops")

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
RUNS = reverse("graphs:run_list")
WORKFLOWS = reverse("graphs:workflows")


@pytest.fixture
def reviewer(client, django_user_model):
    """A client signed in as a staff user (not a superuser)."""
    user = django_user_model.objects.create_user("rita", password="x", is_staff=True)
    client.force_login(user)
    return client


def add_run(
    workflow: str = "classify",
    *,
    created_at: datetime = T0,
    executions: list[dict] | None = None,
    **fields,
) -> Run:
    """A run written directly, with its node executions (each a dict of NodeExecution
    fields; index, started_at and status default)."""
    workflow_row = Workflow.objects.get(name=workflow)
    fields.setdefault("status", Run.Status.SUCCEEDED)
    run = Run.objects.create(
        workflow=workflow_row,
        version=workflow_row.current_version,
        workflow_name=workflow,
        created_at=created_at,
        started_at=created_at,
        node_count=len(executions or []),
        **fields,
    )
    NodeExecution.objects.bulk_create(
        NodeExecution(
            run=run,
            **{
                "index": index,
                "status": "succeeded",
                "started_at": created_at + timedelta(milliseconds=index),
                "duration_ms": 1.0,
                **execution,
            },
        )
        for index, execution in enumerate(executions or [])
    )
    return run


def detail_url(run: Run | int) -> str:
    return reverse("graphs:run_detail", args=[getattr(run, "pk", run)])


# ---------------------------------------------------------------------------- access


@pytest.mark.parametrize("url", [RUNS, "/runs/1/", WORKFLOWS])
def test_an_anonymous_visitor_is_sent_to_sign_in(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/?next=")


@pytest.mark.parametrize("url", [RUNS, "/runs/1/", WORKFLOWS])
def test_a_signed_in_user_who_is_not_staff_is_refused(client, outsider, url):
    add_run()
    client.force_login(outsider)
    response = client.get(url)
    assert response.status_code == 403
    assert "Staff only" in response.content.decode()


def test_an_unknown_run_is_not_found(reviewer):
    assert reviewer.get(detail_url(424242)).status_code == 404


# ---------------------------------------------------------------------------- runs list


def test_the_runs_list_shows_each_run_newest_first_with_its_summary(reviewer):
    ok = workflow_call(RunRequest(name="sum_to", arguments={"n": 3}, caller="key:ci"))
    bad = workflow_call(RunRequest(name="sum_to", arguments={"n": 1000}, caller="key:ci"))
    response = reviewer.get(RUNS)
    runs = response.context["page"].runs
    assert [run.pk for run in runs] == [bad.run_id, ok.run_id]
    page = response.content.decode()
    assert f'href="{detail_url(bad.run_id)}"' in page
    assert 'sum_to</a> <span class="muted">v1</span>' in page
    assert '<span class="badge failed">Failed</span>' in page
    assert '<td class="num">500</td>' in page
    assert "<code>more</code>: maxNodeExecutions (500) reached" in page


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"workflow": "sum_to"}, {"b"}),
        ({"status": "failed"}, {"c"}),
        ({"caller": "user:bob"}, {"b", "c"}),
        ({"since": "2026-11-02T00:00", "until": "2026-11-03T00:00"}, {"b"}),
        ({"workflow": "classify", "status": "failed", "caller": "user:bob"}, {"c"}),
    ],
)
def test_filters_narrow_the_runs(reviewer, query, expected):
    runs = {
        "a": add_run(caller="user:ann", created_at=T0),
        "b": add_run("sum_to", caller="user:bob", created_at=T0 + timedelta(days=1)),
        "c": add_run(caller="user:bob", status="failed", created_at=T0 + timedelta(days=2)),
    }
    shown = {run.pk for run in reviewer.get(RUNS, query).context["page"].runs}
    assert shown == {runs[key].pk for key in expected}


def test_a_run_id_finds_that_run(reviewer):
    wanted = add_run()
    add_run()
    assert [run.pk for run in reviewer.get(RUNS, {"run": wanted.pk}).context["page"].runs] == [
        wanted.pk
    ]


def test_keyset_pages_walk_every_run_once_each_way_even_with_equal_times():
    # Three runs share each instant, so the id decides the order within it.
    made = [add_run(created_at=T0 + timedelta(seconds=i // 3)) for i in range(10)]
    newest_first = sorted(made, key=lambda run: (run.created_at, run.pk), reverse=True)
    filters = RunFilters()
    seen, page = [], selectors.run_list(filters=filters, size=3)
    assert page.newer is None
    while True:
        seen.extend(run.pk for run in page.runs)
        if page.older is None:
            break
        page = selectors.run_list(filters=filters, before=page.older, size=3)
    assert seen == [run.pk for run in newest_first]
    back = []
    while page.newer is not None:
        page = selectors.run_list(filters=filters, after=page.newer, size=3)
        back = [run.pk for run in page.runs] + back
    assert back == [run.pk for run in newest_first[:9]]


def test_the_page_links_keep_the_filters_and_move_the_cursor(reviewer):
    for i in range(60):
        add_run(caller="user:bob", created_at=T0 + timedelta(minutes=i))
    first = reviewer.get(RUNS, {"caller": "user:bob"})
    older = first.context["older_link"]
    assert older.startswith("?caller=user%3Abob&before=")
    second = reviewer.get(RUNS + older)
    assert len(second.context["page"].runs) == 10
    assert second.context["newer_link"].startswith("?caller=user%3Abob&after=")
    assert second.context["older_link"] == ""


def test_a_mangled_cursor_says_how_to_start_again(reviewer):
    page = reviewer.get(RUNS, {"before": "yesterday"}).content.decode()
    assert "This page link is out of date or mangled" in page


def test_an_inverted_time_range_is_explained(reviewer):
    page = reviewer.get(RUNS, {"since": "2026-11-03T00:00", "until": "2026-11-02T00:00"})
    assert "Until must be after From" in page.content.decode()


def test_a_cursor_round_trips_to_the_microsecond():
    cursor = Cursor(datetime(2026, 11, 23, 1, 2, 3, 456789, tzinfo=UTC), 42)
    assert Cursor.parse(cursor.token()) == cursor


# ---------------------------------------------------------------------------- run detail


def test_each_step_shows_its_input_what_it_evaluated_and_its_output(reviewer):
    outcome = workflow_call(RunRequest(name="sum_to", arguments={"n": 2}))
    response = reviewer.get(detail_url(outcome.run_id))
    rows = response.context["rows"]
    assert [row.step.execution.node_id for row in rows] == [
        "entry", "step", "more", "step", "more", "result", "exit"
    ]  # fmt: skip
    # A node's input is the output of the execution before it; the entry's is the arguments.
    assert rows[0].step.input == {"n": 2}
    assert rows[3].step.input == rows[2].step.execution.output == "step"
    assert rows[4].step.input == {"i": 2, "sum": 3}
    page = response.content.decode()
    assert "iteration 2" in page
    assert "→ step (condition 1)" in page
    assert "→ result (default)" in page
    assert "$executionCount(&quot;step&quot;) = 0" in page
    assert 'id="out-6"' in page
    assert "&quot;sum&quot;: 3" in page


def test_a_run_is_created_no_later_than_it_starts_and_its_nodes_run_in_between(reviewer):
    # A run that starts as it is recorded, and one queued first then executed by a worker.
    direct = Run.objects.get(pk=workflow_call(RunRequest(name="sum_to", arguments={"n": 3})).run_id)
    queued = run_create(RunRequest(name="sum_to", arguments={"n": 3}))
    run_execute(run_id=queued.pk, arguments={"n": 3})
    queued.refresh_from_db()
    for run in (direct, queued):
        executions = list(run.node_executions.order_by("index"))
        assert run.created_at <= run.started_at <= executions[0].started_at
        assert executions[-1].started_at <= run.finished_at
        facts = reviewer.get(detail_url(run)).context["run"]
        assert facts.created_at <= facts.started_at <= facts.finished_at


def test_the_timeline_runs_from_the_first_node_to_the_end_of_the_last(reviewer):
    outcome = workflow_call(RunRequest(name="sum_to", arguments={"n": 4}))
    rows = reviewer.get(detail_url(outcome.run_id)).context["rows"]
    # The entry ran first: its mark starts the bar (the run's own recording time before it
    # once put it 60 % along), and each later node starts no earlier than the one before.
    assert rows[0].step.execution.node_id == "entry"
    assert rows[0].left == 0
    assert [row.left for row in rows] == sorted(row.left for row in rows)
    assert max(row.left + row.width for row in rows) == pytest.approx(100, abs=0.5)


@pytest.mark.parametrize(
    ("milliseconds", "shown"),
    [
        (None, "—"),
        (0.0022, "< 0.01 ms"),
        (0.04, "0.04 ms"),
        (12.34, "12.3 ms"),
        (80.81859099991107, "80.8 ms"),
        (1250.0, "1.25 s"),
        (80818.59099991107, "1 min 21 s"),
    ],
)
def test_durations_are_in_human_units(milliseconds, shown):
    assert display.duration(milliseconds) == shown


def test_a_failed_run_names_and_marks_its_failing_node(reviewer):
    run = add_run(
        status="failed",
        error="Tool call failed: the disk is full",
        error_node_id="medium",
        executions=[
            {"node_id": "entry", "node_type": "entry", "output": {"value": 42}},
            {"node_id": "size", "node_type": "switch",
             "detail": {"target": "medium", "matched": 1}},
            {"node_id": "medium", "node_type": "transform", "status": "failed",
             "detail": {"expr": '"medium"'}, "error": "Tool call failed: the disk is full"},
        ],
    )  # fmt: skip
    page = reviewer.get(detail_url(run)).content.decode()
    assert 'Error at node <a href="#step-2"><code>medium</code></a>' in page
    assert 'class="step status-failed" id="step-2"' in page
    assert '<g class="node failed" data-node-id="medium">' in page
    assert '<g class="node visited" data-node-id="size">' in page
    assert '<g class="node " data-node-id="small">' in page


def test_a_limit_breach_marks_the_node_it_stopped_before(reviewer):
    outcome = workflow_call(RunRequest(name="sum_to", arguments={"n": 1000}))
    page = reviewer.get(detail_url(outcome.run_id)).content.decode()
    assert f'<g class="node failed" data-node-id="{outcome.error_node_id}">' in page
    assert "maxNodeExecutions (500)" in page


def test_truncated_payloads_say_so(reviewer):
    preview = {"_truncated": True, "bytes": 300000, "preview": '{"entries": ["a.txt", '}
    run = add_run(
        truncated=True,
        executions=[{"node_id": "entry", "node_type": "entry", "output": preview,
                     "truncated": True}],
    )  # fmt: skip
    page = reviewer.get(detail_url(run)).content.decode()
    assert "Some payloads of this run were over the size cap" in page
    assert "truncated: 300000 bytes, only the start was kept" in page
    assert "{&quot;entries&quot;: [&quot;a.txt&quot;, " in page


def test_html_in_payloads_and_names_shows_as_text(reviewer):
    script = "<script>alert('x')</script>"
    run = add_run(
        arguments={"value": script},
        caller="<img src=x onerror=alert(1)>",
        status="failed",
        error=f"bad {script}",
        executions=[
            {"node_id": "entry", "node_type": "entry", "output": {"value": script}},
            {"node_id": "size", "node_type": "mcp", "status": "failed", "error": script,
             "detail": {"server": "<b>s</b>", "tool": script, "arguments": {"q": script}}},
            {"node_id": "small", "node_type": "transform", "detail": {"expr": script}},
        ],
    )  # fmt: skip
    for url in (detail_url(run), RUNS):
        page = reviewer.get(url).content.decode()
        assert "<script>alert" not in page
        assert "<img src=x" not in page
        assert "<b>s</b>" not in page
        assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    detail = reviewer.get(detail_url(run)).content.decode()
    assert "&lt;b&gt;s&lt;/b&gt;.&lt;script&gt;" in detail


def test_a_running_run_refreshes_itself_until_it_ends(reviewer):
    run = add_run(
        status="running",
        executions=[
            {"node_id": "entry", "node_type": "entry", "output": {"value": 1}},
            {"node_id": "size", "node_type": "mcp", "status": "running", "duration_ms": None,
             "detail": {"server": "s", "tool": "t", "arguments": {}}},
        ],
    )  # fmt: skip
    Run.objects.filter(pk=run.pk).update(node_count=0)  # written only when a run ends
    page = reviewer.get(detail_url(run)).content.decode()
    assert "<dt>Node executions</dt><dd>2 so far</dd>" in page
    assert 'data-refresh-seconds="2"' in page
    assert '<script src="/static/graphs/refresh.js" defer></script>' in page
    assert "s.t" in page
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    assert "data-refresh-seconds" not in reviewer.get(detail_url(run)).content.decode()


def test_a_node_still_running_says_so_and_its_bar_reaches_now(reviewer):
    # The recorder writes a running mcp row with the 0 duration it has as it starts.
    run = add_run(
        status="running",
        created_at=datetime.now(UTC) - timedelta(seconds=2),
        executions=[
            {"node_id": "entry", "node_type": "entry", "duration_ms": 0.002},
            {"node_id": "size", "node_type": "mcp", "status": "running", "duration_ms": 0.0},
        ],
    )
    response = reviewer.get(detail_url(run))
    _, call = response.context["rows"]
    assert call.left + call.width == pytest.approx(100, abs=0.5)
    assert call.width > 90
    page = response.content.decode()
    assert '<span class="took">running</span>' in page
    assert '<span class="took">&lt; 0.01 ms</span>' in page


def test_the_refresh_script_is_served_by_the_app(reviewer):
    response = reviewer.get("/static/graphs/refresh.js")
    assert response.status_code == 200
    assert b"data-refresh-seconds" in b"".join(response.streaming_content)


# ---------------------------------------------------------------------------- cancel


def cancel_url(run: Run) -> str:
    return reverse("graphs:run_cancel", args=[run.pk])


def test_a_queued_run_is_cancelled_from_its_page_naming_who_did_it(reviewer):
    run = run_create(RunRequest(name="sum_to", arguments={"n": 3}))
    page = reviewer.get(detail_url(run)).content.decode()
    assert f'<form class="cancel" method="post" action="{cancel_url(run)}">' in page
    assert 'name="csrfmiddlewaretoken"' in page

    response = reviewer.post(cancel_url(run), follow=True)

    assert response.redirect_chain == [(detail_url(run), 302)]
    page = response.content.decode()
    assert f"Run {run.pk} was cancelled." in page
    assert 'id="cancel-run"' not in page
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert run.cancel_reason == "Cancelled by rita from the run page"
    assert run.error == "Cancelled before it started: Cancelled by rita from the run page"


def test_a_running_run_asked_to_cancel_says_it_will_stop(reviewer):
    run = add_run(status="running")

    page = reviewer.post(cancel_url(run), follow=True).content.decode()

    assert f"Run {run.pk} will stop before its next node" in page
    assert "Cancel requested (Cancelled by rita from the run page)" in page
    assert 'id="cancel-run"' not in page
    run.refresh_from_db()
    assert (run.status, run.cancel_reason) == ("running", "Cancelled by rita from the run page")


def test_a_finished_run_has_no_cancel_button_and_is_left_as_it_ended(reviewer):
    run = add_run(status="succeeded", result={"sum": 6})
    assert 'id="cancel-run"' not in reviewer.get(detail_url(run)).content.decode()

    page = reviewer.post(cancel_url(run), follow=True).content.decode()

    assert f"Run {run.pk} already ended succeeded: not cancelled." in page
    run.refresh_from_db()
    assert (run.status, run.cancel_reason, run.result) == ("succeeded", "", {"sum": 6})


def test_cancelling_is_refused_to_a_get_an_outsider_and_a_forged_form(client, outsider):
    run = add_run(status="running")
    client.force_login(outsider)
    assert client.get(cancel_url(run)).status_code == 405
    assert client.post(cancel_url(run)).status_code == 403

    staff = type(outsider).objects.create_user("rita", password="x", is_staff=True)
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(staff)
    assert forged.post(cancel_url(run)).status_code == 403  # no CSRF token
    assert Client().post(cancel_url(run))["Location"].startswith("/admin/login/")
    run.refresh_from_db()
    assert (run.status, run.cancel_reason) == ("running", "")


def test_cancelling_an_unknown_run_is_not_found(reviewer):
    assert reviewer.post("/runs/424242/cancel/").status_code == 404


# ---------------------------------------------------------------------------- recovery


def test_a_retried_run_and_its_lost_attempt_link_to_each_other(reviewer):
    run = add_run("sum_to", retries=1, reaper_notes="2026-11-01 12:00:05 UTC: lost at node step.\n")
    attempt = add_run("sum_to", status="failed", error="Attempt 1 of run", attempt_of=run)

    page = reviewer.get(detail_url(run)).content.decode()
    assert "Recovered by the reaper" in page
    assert "lost at node step." in page
    assert f'Earlier attempts</dt><dd><a href="{detail_url(attempt)}">run #{attempt.pk}</a>' in page
    lost = reviewer.get(detail_url(attempt)).content.decode()
    assert f'Attempt of</dt><dd><a href="{detail_url(run)}">run #{run.pk}</a>' in lost


def test_a_resent_run_says_how_often(reviewer):
    run = add_run(resends=2, reaper_notes="sent again (2 of 2).\n")
    page = reviewer.get(detail_url(run)).content.decode()
    assert "Sent again</dt><dd>2 times: no worker had started it" in page


# ---------------------------------------------------------------------------- workflows


def test_the_workflows_page_draws_each_workflow_with_versions_and_figures(reviewer):
    for i in range(10):
        add_run(
            status="failed" if i < 2 else "succeeded",
            duration_ms=10.0 * (i + 1),
            created_at=T0 + timedelta(minutes=i),
        )
    add_run(status="running", created_at=T0 + timedelta(hours=1))
    response = reviewer.get(WORKFLOWS)
    classify = Workflow.objects.get(name="classify")
    figures = next(e for e in response.context["entries"] if e["workflow"] == classify)["figures"]
    assert (figures.runs, figures.finished, figures.succeeded) == (11, 10, 8)
    assert figures.success_rate == 0.8
    assert figures.p50_ms == pytest.approx(55.0)
    assert figures.p95_ms == pytest.approx(95.5)
    assert figures.since == T0
    page = response.content.decode()
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" class="graph"') == 3
    assert f'href="{RUNS}?workflow=classify"' in page
    assert "latest 1000 runs" in page
    assert '>v1</a> <span class="muted">current</span>' in page


def test_figures_cover_only_each_workflows_latest_runs():
    for i in range(5):
        add_run(duration_ms=1000.0 if i < 2 else 1.0, created_at=T0 + timedelta(minutes=i))
    classify = Workflow.objects.get(name="classify").pk
    figures = selectors.recent_run_figures(workflow_ids=[classify], window=3)[classify]
    assert (figures.runs, figures.p95_ms) == (3, 1.0)


# ---------------------------------------------------------------------------- query counts


@pytest.fixture
def many_runs():
    """250 runs over 250 minutes, of two workflows and two callers."""
    return [
        add_run(
            "sum_to" if i % 2 else "classify",
            caller=f"user:{i % 3}",
            status="failed" if i % 5 == 0 else "succeeded",
            created_at=T0 + timedelta(minutes=i),
        )
        for i in range(250)
    ]


# Each page: the session, the user and the header's Approvals link (one query whether or not
# the user may decide: graphs.history.selectors.approvals_nav), then its own reads.
@pytest.mark.parametrize(
    ("query", "queries"),
    [
        ({}, 5),
        ({"workflow": "sum_to", "status": "failed", "caller": "user:1"}, 5),
        ({"since": "2026-11-01T13:00", "status": "failed"}, 5),
        ({"run": "7"}, 5),
        ("deep", 5),
    ],
)
def test_a_runs_page_costs_the_same_queries_anywhere(
    reviewer, many_runs, django_assert_num_queries, query, queries
):
    if query == "deep":
        query = {"before": Cursor.of(many_runs[10]).token()}
    with django_assert_num_queries(queries):
        response = reviewer.get(RUNS, query)
    assert response.status_code == 200
    if "before" in query:
        assert [run.pk for run in response.context["page"].runs] == [
            run.pk for run in many_runs[9::-1]
        ]


def test_a_run_with_200_node_executions_costs_four_queries(reviewer, django_assert_num_queries):
    run = add_run(
        "sum_to",
        executions=[
            {"node_id": "step", "node_type": "transform", "iteration": i + 1,
             "detail": {"expr": "$"}, "output": {"i": i}}
            for i in range(200)
        ],
    )  # fmt: skip
    # The run with its version, the page of executions, the path's two.
    with django_assert_num_queries(3 + 4):
        response = reviewer.get(detail_url(run), {"from": 100})
    assert len(response.context["rows"]) == 100
    assert response.context["rows"][50].step.input == {"i": 149}


def test_the_workflows_page_costs_three_queries(reviewer, many_runs, django_assert_num_queries):
    with django_assert_num_queries(3 + 3):
        reviewer.get(WORKFLOWS)


# ---------------------------------------------------------------------------- admin links


def test_the_admin_links_to_the_history_pages(admin_client):
    run = add_run()
    assert 'href="/runs/"' in admin_client.get(reverse("admin:index")).content.decode()
    change = admin_client.get(reverse("admin:graphs_run_change", args=[run.pk]))
    # The admin's "View on site" goes through its shortcut view to the run's page.
    assert "viewsitelink" in change.content.decode()
    assert run.get_absolute_url() == detail_url(run)
    workflow = Workflow.objects.get(name="classify")
    assert workflow.get_absolute_url() == f"{WORKFLOWS}#workflow-{workflow.pk}"
