"""Staff pages render payloads within a size and depth budget (issue 25, item 14): 18 KB of
nested arrays in one call's arguments, pretty-printed in every step that saw them, made a
65 MB run page and a 33 MB admin run page. Past the budget a page shows a preview and a link
that downloads the whole JSON."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from graphs.pages import display
from tests.graphs.test_pages import add_run, detail_url

pytestmark = pytest.mark.usefixtures("loops")


def nested(depth: int, width: int) -> list:
    """Arrays `depth` levels deep, each holding `width` numbers and the next level."""
    value: list = list(range(width))
    for _ in range(depth - 1):
        value = [*range(width), value]
    return value


DEEP = nested(150, 40)


def deep_run(steps: int = 20):
    """A run whose arguments are DEEP, passed along by each of its node executions."""
    assert 15_000 < len(json.dumps(DEEP, separators=(",", ":"))) < 25_000
    executions = [
        {"node_id": f"step{index}", "node_type": "transform", "detail": {"expr": "$"},
         "output": DEEP}
        for index in range(steps)
    ]  # fmt: skip
    return add_run("sum_to", arguments={"rows": DEEP}, executions=executions)


@pytest.fixture
def staff(admin_client):
    return admin_client


def test_a_run_page_with_deeply_nested_payloads_stays_small_and_links_them_whole(staff):
    run = deep_run()

    response = staff.get(detail_url(run))

    assert response.status_code == 200
    page = response.content.decode()
    assert len(page) < 400_000  # 38 MB before
    links = re.findall(r'<a href="([^"]+)" download>Download the whole JSON</a>', page)
    assert len(links) == 41  # the arguments, and each step's input and output
    arguments = reverse("graphs:run_payload", args=[run.pk, "arguments"])
    assert links[0] == arguments
    assert links[1] == arguments  # the first step's input
    assert links[2] == reverse("graphs:run_payload", args=[run.pk, "output-0"])
    download = staff.get(links[2])
    assert download["Content-Type"] == "application/json; charset=utf-8"
    assert f'filename="run-{run.pk}-output-0.json"' in download["Content-Disposition"]
    assert json.loads(download.content) == DEEP
    assert json.loads(staff.get(arguments).content) == {"rows": DEEP}


def test_the_admin_run_page_bounds_deep_payloads_the_same_way(staff):
    run = deep_run()

    response = staff.get(reverse("admin:graphs_run_change", args=[run.pk]))

    assert response.status_code == 200
    page = response.content.decode()
    assert len(page) < 400_000  # 33 MB and more before
    assert page.count("Download the whole JSON") == 1 + 20  # arguments, a page of outputs
    assert reverse("graphs:run_payload", args=[run.pk, "output-3"]) in page


def test_many_long_payloads_share_one_budget_for_the_page(staff):
    rows = {"rows": ["x" * 90 for _ in range(150)]}  # about 14 KB: each alone is shown whole
    executions = [
        {"node_id": f"step{index}", "node_type": "transform", "detail": {"expr": "$"},
         "output": {**rows, "index": index}}
        for index in range(100)
    ]  # fmt: skip
    run = add_run("sum_to", executions=executions)

    page = staff.get(detail_url(run)).content.decode()

    assert len(page) < display.PAGE_CHARS + 201 * display.PREVIEW_CHARS + 200_000  # 3 MB before
    whole = page.count("&quot;index&quot;: ")
    assert 30 < whole < 100  # the first payloads whole, the later ones previewed
    assert page.count("Download the whole JSON") > 100


def test_an_unknown_payload_is_not_found_and_outsiders_are_refused(staff, client):
    run = add_run(arguments={"a": 1})

    def status(reader, run_id: int, part: str) -> int:
        return reader.get(reverse("graphs:run_payload", args=[run_id, part])).status_code

    assert status(staff, run.pk, "arguments") == 200
    assert status(staff, run.pk, "output-7") == 404
    assert status(staff, run.pk, "secrets") == 404
    assert status(staff, run.pk + 1, "arguments") == 404
    assert status(client, run.pk, "arguments") == 302  # to the admin's sign-in
