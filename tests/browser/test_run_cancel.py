"""A staff reviewer cancels a run from its page in a real browser: a queued run no worker has
taken, and a run executing a loop of slow downstream calls (started from the admin's test run)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from graphs.authoring.files import graph_import
from graphs.execution.runs import RunRequest, run_create
from graphs.models import Run, Workflow
from nodespecs.downstream import client
from tests.graph_files import OPERATOR
from tests.peers import ECHO_SERVER

pytestmark = pytest.mark.django_db(transaction=True)

GRAPH = """
version: "1.0"
server: {{name: "cancelTests", version: "1.0.0"}}
executionLimits: {{maxNodeExecutions: 400, maxExecutionTimeMs: 60000}}
mcpServers:
  echo:
    command: {python}
    args: [{server}]
tools:
  - name: nap_loop
    description: Naps on the echo server again and again, for up to a minute.
    inputSchema: {{type: object, properties: {{seconds: {{type: number}}}}}}
    nodes:
      - {{id: entry, type: entry, next: nap}}
      - {{id: nap, type: mcp, server: echo, tool: sleep, args: {{seconds: "$.entry.seconds"}},
          next: again}}
      - {{id: again, type: switch, conditions: [{{rule: {{"<": [1, 2]}}, target: nap}},
          {{target: exit}}]}}
      - {{id: exit, type: exit}}
"""


@pytest.fixture
def nap_loop() -> Iterator[None]:
    graph_import(
        text=GRAPH.format(python=json.dumps(sys.executable), server=json.dumps(str(ECHO_SERVER))),
        caller=OPERATOR,
    )
    yield
    client.close_all()  # the echo server this test started


def wait_for_run(workflow: str) -> int:
    """The id of the first run of `workflow`, once it exists."""
    deadline = time.monotonic() + 15
    while (run_id := Run.objects.filter(workflow_name=workflow).values("pk").first()) is None:
        assert time.monotonic() < deadline, f"no run of {workflow} started within 15 s"
        time.sleep(0.1)
    return run_id["pk"]


def test_a_reviewer_cancels_a_queued_run_from_its_page(signed_in, live_server, loops):
    run = run_create(RunRequest(name="sum_to", arguments={"n": 3}, caller="key:ci"))
    page = signed_in
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    expect(page.locator("#run-status")).to_have_text("Queued")

    page.click("#cancel-run")

    expect(page).to_have_url(f"{live_server.url}/runs/{run.pk}/")
    expect(page.locator(".messages")).to_have_text(f"Run {run.pk} was cancelled.")
    expect(page.locator("#run-status")).to_have_text("Cancelled")
    expect(page.locator("#cancel-run")).to_have_count(0)
    expect(page.locator("#run-error")).to_contain_text("Cancelled by author from the run page")
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert not run.node_executions.exists()


def test_a_reviewer_cancels_a_running_run_and_watches_it_end(
    signed_in, live_server, nap_loop, settings, screenshot
):
    # Heartbeats write from a thread of their own, which the in-memory SQLite test database
    # would refuse while the server writes; the cancel reaches the run in this process at once.
    settings.GRAPHS_HEARTBEAT_SECONDS = 120
    workflow = Workflow.objects.get(name="nap_loop")
    # A workflow author starts the run from the admin in another tab: it runs in that
    # request, a second at a time, for up to a minute.
    author = signed_in.context.new_page()
    author.goto(f"{live_server.url}/admin/graphs/workflow/{workflow.pk}/test-run/")
    author.fill("#id_arguments", '{"seconds": 0.3}')
    author.evaluate("document.querySelector('#content form').submit()")

    run_id = wait_for_run("nap_loop")

    page = signed_in
    page.goto(f"{live_server.url}/runs/{run_id}/")
    expect(page.locator("#run-status")).to_have_text("Running")
    # A few naps in (the echo server's start takes seconds on a busy machine).
    expect(page.locator("li.step").nth(3)).to_be_visible(timeout=30_000)
    screenshot("history-run-cancel")

    page.click("#cancel-run")

    expect(page.locator(".messages")).to_contain_text(
        f"Run {run_id} will stop before its next node"
    )
    expect(page.locator("#run-status")).to_have_text("Cancelled", timeout=10_000)
    expect(page.locator("#run-error")).to_contain_text("Cancelled by author from the run page")
    expect(page.locator("#cancel-run")).to_have_count(0)
    screenshot("history-run-cancelled")
    # The author's test run came back with the run's outcome.
    expect(author.locator("ul.messagelist")).to_contain_text(f"Run {run_id} cancelled.")
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.CANCELLED
    assert run.cancel_reason == "Cancelled by author from the run page"
    # Stopped between nodes: every node that ran finished.
    assert not run.node_executions.filter(status="running").exists()
    assert run.node_executions.count() < 100
