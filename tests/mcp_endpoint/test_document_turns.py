"""Requests that read whole definitions have threads of their own, a few of one key's at a time
(issue 25, item 10): eight loops of validate_workflow from one key held all four request
threads, and another key's get_node_details waited 10 s (tests/e2e/test_admission_bounds.py
shows it against a live server)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from bench.hostile_inputs import many_nodes, tool_call_text
from mcp_endpoint.transports import asgi

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("body", "reads"),
    [
        (tool_call_text("get_node_details", '{"nodes":[{"node_type":"ACTION"}]}'), False),
        (tool_call_text("validate_workflow", '{"definition":"version: 1"}'), True),
        (tool_call_text("create_workflow", '{"definition":{}}'), True),
        (tool_call_text("update_workflow", '{"name":"a","patch":[]}'), True),
        (tool_call_text("publish_workflow", '{"name":"a","version":1}'), True),
        (tool_call_text("test_workflow", '{"name":"a"}'), True),
        # A large body is a document, whatever it calls.
        (tool_call_text("search_nodes", json.dumps({"query": "a" * 70_000})), True),
        # An escaped name cannot be read in the bytes: past 4 KB, it takes a document's turn.
        (
            tool_call_text("validate\\u005fworkflow", json.dumps({"definition": many_nodes(60)})),
            True,
        ),
        (tool_call_text("search_nodes", '{"query":"caf\\u00e9"}'), False),
        ('{"jsonrpc":"2.0","id":1,"method":"tools/list"}', False),
    ],
)
def test_what_reads_documents(body, reads):
    assert asgi._reads_documents(body.encode()) is reads


def test_one_keys_document_calls_take_turns_while_another_keys_start_at_once(settings):
    settings.MCP_DOCUMENT_CALLS_PER_CALLER = 1
    release = threading.Event()
    started: list[str] = []

    def work(name: str) -> str:
        started.append(name)
        if name == "a1":
            release.wait(10)
        return name

    async def scenario() -> list[str]:
        first = asyncio.create_task(asgi._in_document_turn("key:a", lambda: work("a1")))
        await asyncio.sleep(0.2)
        second = asyncio.create_task(asgi._in_document_turn("key:a", lambda: work("a2")))
        other = await asyncio.wait_for(
            asgi._in_document_turn("key:b", lambda: work("b1")), timeout=5
        )
        assert other == "b1"
        assert started == ["a1", "b1"]  # a2 waits for a1, holding no thread
        release.set()
        return [await first, await second]

    assert asyncio.run(scenario()) == ["a1", "a2"]
    assert started == ["a1", "b1", "a2"]
    assert asgi._DOCUMENT_TURNS.holding("key:a") == 0
