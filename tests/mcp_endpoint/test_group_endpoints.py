"""A workflow group's endpoint, `/mcp/<slug>`: the graph file's own server, in both eras, with
the keys, scopes and limits of `/mcp` (tests/e2e/test_group_endpoints.py drives it with the
official client over a live server)."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from graphs.execution.follow import Threads
from graphs.models import WorkflowGroup
from mcp_endpoint.protocol import list_changes
from tests.graph_files import import_file
from tests.mcp_endpoint.helpers import (
    BOTH,
    LATEST_LEGACY,
    initialize,
    legacy,
    legacy_session,
    make_key,
    modern,
    result,
    rpc_error,
    sse_messages,
)

pytestmark = pytest.mark.timeout(30)

LOOPS = "/mcp/loops"
LOOPS_TOOLS = ["classify", "is_zero", "sum_to"]


@pytest.fixture
def groups(loops):
    """Two groups: loops (slug `loops`) and flatForm (slug `flatform`)."""
    import_file("flat_form.yaml")
    return loops


def _names(listed: dict) -> list[str]:
    return sorted(tool["name"] for tool in listed["tools"])


def test_the_slug_is_chosen_from_the_name(groups):
    assert dict(WorkflowGroup.objects.values_list("name", "slug")) == {
        "loops": "loops",
        "flatForm": "flatform",
    }


def test_initialize_answers_as_the_graph_file(client, key, groups):
    answer = result(initialize(client, key, url=LOOPS))
    assert answer["serverInfo"] == {"name": "loops", "title": "Loop tests", "version": "1.0.0"}
    assert "instructions" not in answer  # the file has none
    assert answer["capabilities"] == {"tools": {"listChanged": True}, "logging": {}}


def test_every_endpoint_declares_that_its_tool_list_changes(client, key, groups):
    answer = result(initialize(client, key))
    assert answer["capabilities"]["tools"] == {"listChanged": True}


@pytest.mark.parametrize("era", ["2025", "2026"])
def test_a_group_endpoint_lists_its_own_workflows_only(client, key, groups, era):
    if era == "2026":
        listed = result(modern(client, "tools/list", key=key, url=LOOPS))
        assert listed["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "loops"
    else:
        session = legacy_session(client, key, url=LOOPS)
        listed = result(legacy(client, session, "tools/list", key=key, accept=BOTH, url=LOOPS))
    assert _names(listed) == LOOPS_TOOLS
    flat = result(modern(client, "tools/list", key=key, url="/mcp/flatform"))
    assert _names(flat) == ["double", "sign_of"]
    everything = result(modern(client, "tools/list", key=key))
    assert {*LOOPS_TOOLS, "double", "search_nodes"} <= set(_names(everything))


def test_a_group_endpoint_calls_its_workflows_and_no_others(client, key, groups):
    called = modern(
        client,
        "tools/call",
        {"name": "double", "arguments": {"x": 4}},
        key=key,
        url="/mcp/flatform",
    )
    assert json.loads(result(called)["content"][0]["text"]) == {"x": 8}
    for other in ("sum_to", "search_nodes"):
        refused = result(
            modern(
                client, "tools/call", {"name": other, "arguments": {}}, key=key, url="/mcp/flatform"
            )
        )
        assert refused["isError"] is True
        assert "this server's tools: double, sign_of" in refused["content"][0]["text"]


def test_server_discover_answers_as_the_graph_file(client, key, groups):
    WorkflowGroup.objects.filter(slug="loops").update(instructions="Loop with care.")
    from graphs.authoring.services import group_save

    group_save(WorkflowGroup.objects.get(slug="loops"))
    discovered = result(modern(client, "server/discover", key=key, url=LOOPS))
    assert discovered["instructions"] == "Loop with care."
    assert set(discovered["capabilities"]) == {"tools", "logging", "extensions"}


def test_a_group_endpoint_serves_no_catalog_methods(client, key, groups):
    error = rpc_error(modern(client, "resources/list", key=key, url=LOOPS))
    assert error["code"] == -32601
    assert "The catalog's resources, prompts and completions are at /mcp" in error["message"]


def test_an_unknown_slug_is_404(client, key, groups):
    response = modern(client, "tools/list", key=key, url="/mcp/nope")
    assert response.status_code == 404
    assert "no workflow group has that slug" in rpc_error(response)["message"]


def test_the_endpoint_takes_the_same_keys_and_scopes(client, groups):
    assert modern(client, "tools/list", url=LOOPS).status_code == 401
    reader = make_key(["tools:read"])
    assert modern(client, "tools/list", key=reader, url=LOOPS).status_code == 200
    call = {"name": "is_zero", "arguments": {"n": 0}}
    assert modern(client, "tools/call", call, key=reader, url=LOOPS).status_code == 403


def test_a_session_belongs_to_the_endpoint_that_opened_it(client, key, groups):
    session = legacy_session(client, key, url=LOOPS)
    elsewhere = legacy(client, session, "tools/list", key=key, version=LATEST_LEGACY)
    assert elsewhere.status_code == 404
    assert "another endpoint opened it" in rpc_error(elsewhere)["message"]
    other_group = legacy(client, session, "tools/list", key=key, url="/mcp/flatform")
    assert other_group.status_code == 404


def test_listen_at_a_group_endpoint_grants_tool_changes_alone(client, key, groups, settings):
    settings.MCP_LISTEN_SECONDS = 0
    asked = {"toolsListChanged": True, "resourcesListChanged": True, "promptsListChanged": True}
    response = modern(
        client, "subscriptions/listen", {"notifications": asked}, key=key, accept=BOTH, url=LOOPS
    )
    acknowledged = sse_messages(response)[0]
    assert acknowledged["params"]["notifications"] == {"toolsListChanged": True}


def test_streams_granted_together_count_before_any_is_sent(client, key, groups, settings):
    """The place is taken when a stream is granted, not when its body starts: requests that
    arrive together cannot all pass the check."""
    settings.MCP_STREAMS_PER_CALLER = 2
    params = {"notifications": {"toolsListChanged": True}}

    granted = [
        modern(client, "subscriptions/listen", params, key=key, accept=BOTH, url=LOOPS)
        for _ in range(3)
    ]

    # None of the three streams has sent a byte yet.
    assert [response.status_code for response in granted] == [200, 200, 429]
    settings.MCP_LISTEN_SECONDS = 0
    sse_messages(granted[0])  # read to its end: its place is given back
    again = modern(client, "subscriptions/listen", params, key=key, accept=BOTH, url=LOOPS)
    assert again.status_code == 200
    for response in (granted[1], again):
        sse_messages(response)


def test_a_lease_never_started_gives_its_place_back_in_time(monkeypatch, settings):
    settings.MCP_STREAMS_PER_CALLER = 1
    clock = [1000.0]
    monkeypatch.setattr(list_changes.time, "monotonic", lambda: clock[0])

    first = list_changes.lease_stream("key:lease-test")
    assert isinstance(first, list_changes.StreamLease)
    assert isinstance(list_changes.lease_stream("key:lease-test"), str)
    clock[0] += list_changes.STREAM_LEASE_SECONDS - 1
    first.renew()  # a running stream keeps its place
    clock[0] += list_changes.STREAM_LEASE_SECONDS - 1
    assert isinstance(list_changes.lease_stream("key:lease-test"), str)
    clock[0] += 2  # never renewed again: its client is gone
    second = list_changes.lease_stream("key:lease-test")
    assert isinstance(second, list_changes.StreamLease)
    second.release()
    second.release()  # twice is harmless


def test_notification_streams_need_the_scope_that_lists_what_they_carry(client, groups, settings):
    settings.MCP_LISTEN_SECONDS = 60  # a stream that watched anything would not end here
    scraper = make_key(["metrics:read"])
    asked = {"toolsListChanged": True, "resourcesListChanged": True}

    listen = modern(client, "subscriptions/listen", {"notifications": asked}, key=scraper,
                    accept=BOTH)  # fmt: skip

    # Nothing granted: acknowledged and answered at once, holding no place.
    acknowledged, answered = sse_messages(listen)
    assert acknowledged["params"]["notifications"] == {}
    assert answered["result"]["resultType"] == "complete"
    # A 2025 session's GET stream carries tool-list changes alone: refused without tools:read.
    session = legacy_session(client, scraper)
    headers = {"Mcp-Session-Id": session, "Authorization": f"Bearer {scraper}"}
    stream = client.get("/mcp", headers={**headers, "Accept": "text/event-stream"})
    assert stream.status_code == 403
    assert "tools:read" in rpc_error(stream)["message"]


def test_a_caller_holds_a_bounded_number_of_notification_streams(client, key, groups, settings):
    settings.MCP_STREAMS_PER_CALLER = 0
    params = {"notifications": {"toolsListChanged": True}}
    refused = modern(client, "subscriptions/listen", params, key=key, accept=BOTH, url=LOOPS)
    assert refused.status_code == 429
    assert "MCP_STREAMS_PER_CALLER" in rpc_error(refused)["message"]
    session = legacy_session(client, key)
    headers = {"Mcp-Session-Id": session, "Authorization": f"Bearer {key}"}
    stream = client.get("/mcp", headers={**headers, "Accept": "text/event-stream"})
    assert stream.status_code == 429


def test_streams_starting_together_share_one_read_of_the_lists(monkeypatch):
    reads = []

    def counted(server):
        reads.append(server)
        time.sleep(0.05)  # a read takes a while: the other streams arrive meanwhile
        return "fingerprint"

    monkeypatch.setattr(list_changes.toolset, "tool_list_fingerprint", counted)

    async def scenario() -> None:
        pool = ThreadPoolExecutor(max_workers=4)
        loop = asyncio.get_running_loop()
        threads = Threads(
            short=lambda work: loop.run_in_executor(pool, work),
            run=lambda work: loop.run_in_executor(pool, work),
        )
        watchers = [
            list_changes.ListWatcher(list_changes.Watch("loops"), threads) for _ in range(200)
        ]
        await asyncio.gather(*(watcher.start() for watcher in watchers))
        await asyncio.gather(*(watcher.poll() for watcher in watchers))
        pool.shutdown()

    asyncio.run(scenario())

    # 200 streams starting at once, then polling at once: one read, then one reuse of it.
    assert reads == ["loops"]
