"""test_workflow with breakpoints over MCP: the call answers where the run paused and the
context there; `paused_run` steps, continues or stops it, each call following the run to its
next pause or its end; unknown breakpoints and someone else's run are refused."""

from __future__ import annotations

import pytest
from django.db import connection

from graphs.models import Run
from tests.mcp_endpoint.helpers import make_key, modern, result

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def sum_to(key):
    from tests.graph_files import import_file

    import_file("loops.yaml")


def _call(client, key, arguments):
    return result(
        modern(client, "tools/call", {"name": "test_workflow", "arguments": arguments}, key=key)
    )


def test_a_breakpoint_session_over_mcp(client, key, sum_to):
    paused = _call(client, key, {"name": "sum_to", "arguments": {"n": 2}, "breakpoints": ["more"]})
    assert paused.get("isError") is not True, paused
    report = paused["structuredContent"]
    run_id = report["run_id"]
    assert report["paused"]["node"] == "more"
    assert report["paused"]["context"]["$"] == {"entry": {"n": 2}, "step": {"i": 1, "sum": 1}}
    assert "paused_run" in report["next"]
    assert Run.objects.get(pk=run_id).status == Run.Status.PAUSED
    if connection.vendor == "sqlite":
        # The call follows the run in the database while it goes on in a thread here.
        pytest.skip("the in-memory test SQLite refuses concurrent writers; CI steps on PostgreSQL")

    stepped = _call(
        client, key, {"name": "sum_to", "paused_run": {"run_id": run_id, "action": "step"}}
    )
    assert stepped["structuredContent"]["paused"]["node"] == "step"
    continued = _call(
        client, key, {"name": "sum_to", "paused_run": {"run_id": run_id, "action": "continue"}}
    )
    assert continued["structuredContent"]["paused"]["index"] == 4
    done = _call(
        client, key, {"name": "sum_to", "paused_run": {"run_id": run_id, "action": "continue"}}
    )
    assert done.get("isError") is not True, done
    assert done["structuredContent"]["result"] == {"sum": 3, "steps": 2}


def test_stop_ends_the_run_and_refusals_say_why(client, key, sum_to):
    paused = _call(
        client, key, {"name": "sum_to", "arguments": {"n": 2}, "breakpoints": ["result"]}
    )
    run_id = paused["structuredContent"]["run_id"]
    other = make_key()
    refused = _call(
        client, other, {"name": "sum_to", "paused_run": {"run_id": run_id, "action": "stop"}}
    )
    assert refused["isError"] is True
    assert "started with your key" in refused["content"][0]["text"]
    stopped = _call(
        client, key, {"name": "sum_to", "paused_run": {"run_id": run_id, "action": "stop"}}
    )
    assert stopped["isError"] is True
    assert "cancelled" in stopped["content"][0]["text"]
    again = _call(
        client, key, {"name": "sum_to", "paused_run": {"run_id": run_id, "action": "stop"}}
    )
    assert "not paused at a breakpoint" in again["content"][0]["text"]
    unknown = _call(
        client, key, {"name": "sum_to", "arguments": {"n": 1}, "breakpoints": ["nowhere"]}
    )
    assert unknown["isError"] is True
    assert "'nowhere' name no node" in unknown["content"][0]["text"]
