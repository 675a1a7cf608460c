"""/metrics stays bounded whatever callers create (issue 25, item 15): each server an agent
declared added about 24 series under its own `provider` label, and each published workflow
its own `tool` and `workflow` labels."""

from __future__ import annotations

import pytest

from graphs.models import Workflow
from nodespecs.downstream import client as mcp_client
from nodespecs.downstream.client import Connection, DownstreamError
from tests.mcp_endpoint.helpers import auth_headers, make_key
from tests.mcp_endpoint.test_metrics import delta, requests_of, scrape

pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db(transaction=True)]

CALLS = "switchyard_downstream_call_seconds_count"
ERRORS = "switchyard_downstream_errors_total"


def test_the_servers_agents_declare_share_one_provider_label(client):
    scraper = make_key(scopes=["metrics:read"])
    declared = [
        # As an agent's workflow declares them: egress-checked, here refused (loopback).
        Connection(
            name=f"agents-server-{number}",
            transport="streamable_http",
            url=f"http://127.0.0.1:9/{number}/mcp",
            timeout_seconds=5,
            egress_checked=True,
        )
        for number in range(3)
    ]
    before = scrape(client, scraper)
    for connection in declared:
        with pytest.raises(DownstreamError):
            mcp_client.call_tool(connection, "echo", {})
    after = scrape(client, scraper)

    assert delta(before, after, CALLS, provider="declared", request="tools/call") == 3
    assert delta(before, after, ERRORS, provider="declared", error="DownstreamError") == 3
    assert not any("agents-server" in str(labels) for _, labels in after)


def test_only_the_oldest_published_workflows_keep_their_names_as_labels(client, loops, settings):
    settings.METRICS_WORKFLOW_LABELS = 1
    oldest, *newer = Workflow.objects.order_by("pk").values_list("name", flat=True)
    arguments = {"sum_to": {"n": 2}, "classify": {"value": 5}, "is_zero": {"value": 0}}
    key, scraper = make_key(), make_key(scopes=["metrics:read"])
    before = scrape(client, scraper)
    for name in (oldest, *newer):
        response = client.post(
            "/api/v1/mcp/invoke",
            {"name": name, "arguments": arguments[name]},
            content_type="application/json",
            headers=auth_headers(key),
        )
        assert response.status_code == 200, response.content
    after = scrape(client, scraper)

    invoke = "POST /api/v1/mcp/invoke"
    count = "switchyard_requests_total"
    named = requests_of(invoke, oldest, "ok", transport="rest")
    assert delta(before, after, count, **named) == 1
    other = requests_of(invoke, "other", "ok", transport="rest")
    assert delta(before, after, count, **other) == len(newer)
    runs = "switchyard_runs_total"
    assert delta(before, after, runs, workflow=oldest, status="succeeded") == 1
    assert delta(before, after, runs, workflow="other", status="succeeded") == len(newer)
    # Nothing was counted under the newer workflows' own names (series of that name may exist
    # from earlier tests in this process, before the setting: counters live as long as it).
    for name in newer:
        mine = requests_of(invoke, name, "ok", transport="rest")
        assert delta(before, after, count, **mine) == 0
        assert delta(before, after, runs, workflow=name, status="succeeded") == 0
