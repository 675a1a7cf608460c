"""Every page fits a 1,280 px window (issue 14): nothing wider than the window, every graph
drawing whole on screen, durations in human units, times in order."""

from __future__ import annotations

import re
from io import StringIO

import pytest
import yaml
from django.core.management import call_command
from playwright.sync_api import expect

from graphs.authoring.files import graph_import
from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import Run, Workflow
from nodespecs.models import NodeSpec
from tests.graph_files import FILES, OPERATOR, import_file

pytestmark = pytest.mark.django_db(transaction=True)

WINDOW = 1280


# Sixteen nodes in a row: too wide to scale down to a readable size in any page.
CHAIN = [f"t{i}" for i in range(1, 15)]
LONG_CHAIN = yaml.safe_dump(
    {
        "version": "1.0",
        "server": {"name": "long", "version": "1.0.0", "title": "Long chain"},
        "tools": [
            {
                "name": "long_chain",
                "description": "Sixteen nodes in a row.",
                "inputSchema": {"type": "object"},
                "nodes": [
                    {"id": "entry", "type": "entry", "next": CHAIN[0]},
                    *(
                        {"id": node, "type": "transform", "transform": {"expr": "$"}, "next": after}
                        for node, after in zip(CHAIN, [*CHAIN[1:], "exit"], strict=True)
                    ),
                    {"id": "exit", "type": "exit"},
                ],
            }
        ],
    }
)


@pytest.fixture
def history():
    """The seeded history of docs/history.md, the loop workflows, a long chain, and the node
    catalog."""
    call_command("seed_history", runs=200, stdout=StringIO())
    import_file("loops.yaml")
    graph_import(text=LONG_CHAIN, base_dir=FILES, caller=OPERATOR)
    call_command("load_node_specs", stdout=StringIO())


def fits(page) -> None:
    """The page is no wider than the window, and each drawing is whole: inside its box
    (scaled down to fit), or in a box that scrolls to its end; never cut off at the edge."""
    assert page.evaluate("document.documentElement.scrollWidth") <= WINDOW, page.url
    cut_off = page.evaluate(
        """() => [...document.querySelectorAll('svg.graph')].filter(svg => {
            const box = svg.parentElement;
            const inside = svg.getBoundingClientRect().right
                           <= box.getBoundingClientRect().right + 1;
            const scrolls = ['auto', 'scroll'].includes(getComputedStyle(box).overflowX)
                            && box.scrollWidth >= svg.getBoundingClientRect().width;
            return !inside && !scrolls;
        }).length"""
    )
    assert cut_off == 0, page.url


def test_every_page_fits_a_1280_px_window(history, signed_in, live_server, screenshot):
    page = signed_in
    url = live_server.url
    # A loop: the run whose admin page was 2,750 px wide, with its raw float durations.
    run = Run.objects.get(pk=workflow_call(RunRequest(name="sum_to", arguments={"n": 6})).run_id)
    widest = Run.objects.filter(workflow_name="poll_report").order_by("-node_count").first()

    long_run = workflow_call(RunRequest(name="long_chain", arguments={})).run_id
    long_chain = Workflow.objects.get(name="long_chain")

    for path in (
        "/runs/",
        f"/runs/{widest.pk}/",
        f"/runs/{long_run}/",
        "/workflows/",
        f"/admin/graphs/workflow/{long_chain.pk}/change/",
        f"/admin/graphs/workflow/{long_chain.pk}/canvas/",
        "/admin/graphs/workflow/canvas/new/",
        f"/admin/graphs/run/{long_run}/change/",
    ):
        page.goto(url + path)
        fits(page)

    page.goto(f"{url}/runs/{run.pk}/")
    fits(page)
    # The entry ran first: its mark starts the timeline bar.
    entry_bar = page.locator("#step-0 .bar")
    expect(entry_bar).to_have_attribute("style", re.compile(r"margin-left: 0\.000%"))

    # The YAML editor shows the loop's multi-line expression as a block, and its drawing.
    workflow = Workflow.objects.get(name="sum_to")
    page.goto(f"{url}/admin/graphs/workflow/{workflow.pk}/change/")
    fits(page)
    assert 'expr: |\n      $executionCount("step") = 0\n' in page.input_value("#id_graph")
    screenshot("admin-workflow-yaml")

    page.goto(f"{url}/admin/graphs/run/{run.pk}/change/")
    fits(page)
    text = page.inner_text("#content")
    assert str(run.duration_ms) not in text
    assert re.search(r"Duration:\s+\d+(\.\d+)? ms", text)
    created, started, finished = (
        page.inner_text(f".field-{name} .readonly") for name in ("created", "started", "finished")
    )
    # Same format throughout, so text order is time order.
    assert created <= started <= finished
    screenshot("admin-run")

    page.goto(f"{url}/admin/graphs/run/")
    fits(page)

    page.goto(f"{url}/admin/nodespecs/nodespec/")
    fits(page)
    screenshot("admin-spec-list")

    # Last: this page is being redesigned (issue 14, item 6).
    spec = NodeSpec.objects.get(node_type="ACTION", subtype="HTTP_REQUEST")
    page.goto(f"{url}/admin/nodespecs/nodespec/{spec.pk}/change/")
    fits(page)
    screenshot("admin-spec-change")
