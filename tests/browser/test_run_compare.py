"""A reviewer compares two runs in a real browser (issue 28, item 3): from a run's page, types
another run's number in "Compare with run #", and reads on the compare page where a switch sent
the two runs different ways, how their arguments differ, each node's output and the result; a
bad number is named on the run page. The page is saved as docs/screenshots/run-compare.png
(SCREENSHOTS_DIR=docs/screenshots)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from graphs.execution.runs import RunRequest, workflow_call
from tests.graph_files import import_file

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def two_runs() -> tuple[int, int]:
    """Two runs of classify: 3 goes the small way, 50 the medium way."""
    import_file("loops.yaml")
    a = workflow_call(RunRequest(name="classify", arguments={"value": 3}, caller="key:shop"))
    b = workflow_call(RunRequest(name="classify", arguments={"value": 50}, caller="key:shop"))
    return a.run_id, b.run_id


def test_a_reviewer_compares_two_runs_from_a_run_page(two_runs, signed_in, live_server, screenshot):
    a, b = two_runs
    page = signed_in
    page.goto(f"{live_server.url}/runs/{a}/")

    # The box takes only digits (its pattern); 0 passes it, and the server names it.
    page.fill("#compare-with", "0")
    page.click("#compare-form button")
    expect(page).to_have_url(f"{live_server.url}/runs/{a}/")
    expect(page.locator(".messages")).to_contain_text("'0' is not a run id")

    page.fill("#compare-with", str(b))
    page.click("#compare-form button")

    expect(page).to_have_url(f"{live_server.url}/runs/{a}/compare/{b}/")
    expect(page.locator("h1")).to_have_text(f"Run #{a} and run #{b} of classify both v1")
    expect(page.locator("#divergence")).to_have_text(
        "The paths part at execution 2: A went to small, B went to medium."
    )
    expect(page.locator("#side-a .badge")).to_have_text("succeeded")
    expect(page.locator("#side-b pre")).to_have_text('"medium"')
    arguments = page.locator("#compare-arguments tbody tr")
    expect(arguments).to_have_count(1)
    expect(arguments.locator("td")).to_have_text(["/value", "3", "50"])
    rows = page.locator("#compare-executions table.executions > tbody > tr")
    expect(rows).to_have_count(5)
    expect(page.locator("#node-small-1")).to_contain_text("only in A")
    expect(page.locator("#node-medium-1")).to_contain_text("only in B")
    expect(page.locator("#compare-result td")).to_have_text(
        ["(the whole value)", '"small"', '"medium"']
    )
    screenshot("run-compare")

    page.click("#swap-sides")
    expect(page).to_have_url(f"{live_server.url}/runs/{b}/compare/{a}/")
    expect(page.locator("#node-medium-1")).to_contain_text("only in A")
