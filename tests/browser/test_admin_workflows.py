"""A workflow author in a real browser: see the graph, make a mistake, fix it, test-run it."""

import pytest
from playwright.sync_api import expect

from graphs.models import Run, Workflow
from tests.graph_files import import_file

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _workflows(transactional_db):
    import_file("loops.yaml")


def test_an_author_edits_a_graph_and_test_runs_it(signed_in, live_server, screenshot):
    page = signed_in
    workflow = Workflow.objects.get(name="classify")
    page.goto(f"{live_server.url}/admin/graphs/workflow/{workflow.pk}/change/")
    expect(page.locator("svg.graph g.node")).to_have_count(6)
    screenshot("admin-workflow-graph")

    # A mistake: a switch target that does not exist. The error names the node and field.
    graph = page.input_value("#id_graph")
    page.fill("#id_graph", graph.replace("target: medium", "target: mediun"))
    page.click("input[name=_continue]")
    error = page.locator(".errorlist").first
    expect(error).to_contain_text("node 'size'")
    expect(error).to_contain_text("mediun")
    screenshot("admin-workflow-validation-error")

    # Fixed: a new version is saved.
    page.fill("#id_graph", graph.replace("'\"small\"'", "'\"tiny\"'"))
    page.click("input[name=_continue]")
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    workflow.refresh_from_db()
    assert workflow.current_version.number == 2

    # A test run lands on the run, with the path it took drawn.
    page.click("text=Test run")
    page.fill("#id_arguments", '{"value": 3}')
    page.click("input[type=submit]")
    expect(page.locator(".messagelist")).to_contain_text("succeeded")
    run = Run.objects.get()
    assert run.result == "tiny"
    expect(page.locator('svg.graph g.node.visited[data-node-id="small"]')).to_have_count(1)
    expect(page.locator('svg.graph g.node.visited[data-node-id="medium"]')).to_have_count(0)
    screenshot("admin-workflow-test-run")
