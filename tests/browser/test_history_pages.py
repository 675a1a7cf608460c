"""A reviewer in a real browser: sign in, list runs, filter, open a failed run, read it."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from playwright.sync_api import expect

from graphs.models import NodeExecution, Run, Workflow
from tests.browser.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def history():
    """Realistic history (docs/history.md): 200 seeded runs of five workflows."""
    call_command("seed_history", runs=200, stdout=StringIO())


@pytest.fixture
def reviewer(page, live_server, django_user_model):
    """A staff user (not a superuser) signed in through the admin's login page."""
    django_user_model.objects.create_user("rita", password=PASSWORD, is_staff=True)
    page.goto(f"{live_server.url}/runs/")
    # Anonymous: sent to sign in, then back to the runs.
    expect(page).to_have_url(re.compile(r"/admin/login/\?next=/runs/"))
    page.fill("#id_username", "rita")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page).to_have_url(f"{live_server.url}/runs/")
    return page


def failed_run() -> Run:
    """The seeded failed run with the most node executions whose failing node has a row."""
    return (
        Run.objects.filter(status="failed", node_executions__status="failed")
        .order_by("-node_count", "-id")
        .first()
    )


def test_a_reviewer_finds_a_failed_run_and_reads_what_went_wrong(
    history, reviewer, live_server, screenshot
):
    page = reviewer
    expect(page.locator("table.runs tbody tr")).to_have_count(50)
    screenshot("history-runs")

    run = failed_run()
    page.select_option("select[name=workflow]", run.workflow_name)
    page.select_option("select[name=status]", "failed")
    page.click("form.filters button[type=submit]")
    rows = page.locator("table.runs tbody tr")
    expect(rows.first).to_be_visible()
    expected = Run.objects.filter(workflow_name=run.workflow_name, status="failed").count()
    expect(rows).to_have_count(expected)
    for status in rows.locator(".badge").all_inner_texts():
        assert status == "Failed"
    assert set(rows.locator("td:nth-child(2) a").all_inner_texts()) == {run.workflow_name}

    page.click(f"a[href='/runs/{run.pk}/']")
    expect(page.locator("h1")).to_contain_text(f"Run #{run.pk} of {run.workflow_name}")
    error = page.locator("#run-error")
    expect(error).to_contain_text(f"Error at node {run.error_node_id}")
    expect(error).to_contain_text(run.error)
    # The failing node is marked red in the drawing and in the timeline, with its error.
    node = page.locator(f"svg g.node.failed[data-node-id='{run.error_node_id}'] rect")
    expect(node).to_have_attribute("stroke", "#dc2626")
    failed_step = page.locator("li.step.status-failed")
    expect(failed_step).to_have_count(1)
    expect(failed_step.locator(".node")).to_have_text(run.error_node_id)
    expect(failed_step.locator(".step-error")).to_have_text(run.error)
    page.click(f"#run-error a[href='#{failed_step.get_attribute('id')}']")
    expect(page).to_have_url(re.compile(r"#step-\d+$"))

    # Outputs start folded; a click opens one, showing the JSON the node returned.
    output = page.locator("#out-0")
    expect(output.locator("pre")).to_be_hidden()
    output.locator("summary").click()
    expect(output.locator("pre")).to_be_visible()
    expect(output.locator("pre")).to_contain_text(next(iter(run.arguments)))
    screenshot("history-run-detail")

    page.click("header nav >> text=Workflows")
    expect(page.locator("section.workflow")).to_have_count(Workflow.objects.count())
    expect(page.locator("section.workflow svg.graph").first).to_be_visible()
    screenshot("history-workflows")
    page.click(f"#workflow-{run.workflow_id} >> text=Failed runs")
    expect(page.locator("select[name=status]")).to_have_value("failed")


def test_a_running_run_refreshes_until_it_ends_keeping_what_was_open(reviewer, live_server):
    call_command("seed_history", runs=1, stdout=StringIO())
    workflow = Workflow.objects.get(name="count_files")
    now = timezone.now()
    run = Run.objects.create(
        workflow=workflow,
        version=workflow.current_version,
        workflow_name=workflow.name,
        status=Run.Status.RUNNING,
        arguments={"directory": "/data/inbox"},
        started_at=now,
    )
    NodeExecution.objects.create(
        run=run, index=0, node_id="entry", node_type="entry", status="succeeded",
        output={"directory": "/data/inbox"}, started_at=now, duration_ms=0.01,
    )  # fmt: skip
    NodeExecution.objects.create(
        run=run, index=1, node_id="list", node_type="mcp", status="running",
        detail={"server": "files", "tool": "list_directory", "arguments": {}},
        started_at=now + timedelta(milliseconds=1),
    )  # fmt: skip
    page = reviewer
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    expect(page.locator(".live")).to_contain_text("refreshes every 2 s")
    page.locator("#out-0 summary").click()

    NodeExecution.objects.filter(run=run, index=1).update(
        status="succeeded", output={"entries": []}, duration_ms=900.0
    )
    Run.objects.filter(pk=run.pk).update(
        status="succeeded", result={"count": 0}, finished_at=timezone.now(), duration_ms=901.0
    )
    expect(page.locator("#run-status")).to_have_text("Succeeded", timeout=8000)
    expect(page.locator(".live")).to_have_count(0)
    expect(page.locator("#out-0")).to_have_attribute("open", "")


def test_a_signed_in_user_who_is_not_staff_is_refused(page, live_server, django_user_model):
    user = django_user_model.objects.create_user("mallory", password=PASSWORD)
    client = Client()
    client.force_login(user)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    response = page.goto(f"{live_server.url}/runs/")
    assert response.status == 403
    expect(page.locator("h1")).to_have_text("Staff only")
    expect(page.locator("table.runs")).to_have_count(0)
