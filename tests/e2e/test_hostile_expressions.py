"""Hostile regexes on the live server (uvicorn): a workflow that applies a catastrophic pattern
to the caller's input, and one with the constant pattern that froze the process, answer at once
while other callers' `get_node_types` keep answering in well under a second.

Before workflow regexes ran on RE2, 28 "a" and a "!" took 19.5 s and a concurrent
`get_node_types` waited 19.2 s; the constant froze the whole process for minutes."""

from __future__ import annotations

import time
from collections.abc import Iterator

import anyio
import pytest

from tests.e2e.conftest import LiveServer, start_server
from tests.e2e.test_mcp_client import connect, run

pytestmark = pytest.mark.slow

FROZEN = "a" * 36 + "!"
GRAPH = f"""
version: "1.0"
server: {{name: "hostileRegex", version: "1.0.0"}}
tools:
  - name: caller_pattern
    description: Tests the caller's text against a pattern that backtracks catastrophically.
    inputSchema: {{type: object, properties: {{x: {{type: string}}}}, required: [x]}}
    outputSchema: {{type: object, properties: {{ok: {{type: boolean}}}}}}
    nodes:
      - {{id: entry, type: entry, next: check}}
      - {{id: check, type: transform,
          transform: {{expr: "{{'ok': $contains($.entry.x, /^(a+)+$/)}}"}}, next: exit}}
      - {{id: exit, type: exit}}
  - name: constant_pattern
    description: The constant match that froze the process.
    inputSchema: {{type: object}}
    outputSchema: {{type: object, properties: {{found: {{type: boolean}}}}}}
    nodes:
      - {{id: entry, type: entry, next: check}}
      - {{id: check, type: transform,
          transform: {{expr: "{{'found': $exists($match('{FROZEN}', /(a+)+$/))}}"}}, next: exit}}
      - {{id: exit, type: exit}}
"""


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory) -> Iterator[LiveServer]:
    """A live server of its own with the two hostile workflows imported."""
    tmp = tmp_path_factory.mktemp("hostile")
    graph = tmp / "hostile.yaml"
    graph.write_text(GRAPH)
    (tmp / "server").mkdir()
    yield from start_server(tmp / "server", [("import_graph", str(graph))])


def while_others_ask(server: LiveServer, name: str, arguments: dict, calls: int = 5):
    """Call a workflow `calls` times while another client calls get_node_types without a
    pause; the workflow's results and durations, and each get_node_types latency."""

    async def scenario():
        results, durations, latencies = [], [], []
        done = anyio.Event()

        async def hostile():
            async with connect(server, "auto", timeout=60) as client:
                for _ in range(calls):
                    began = time.perf_counter()
                    results.append(await client.call_tool(name, arguments))
                    durations.append(time.perf_counter() - began)
            done.set()

        async def ordinary():
            async with connect(server, "auto", timeout=60) as client:
                while not done.is_set() or len(latencies) < 3:
                    began = time.perf_counter()
                    answer = await client.call_tool("get_node_types", {})
                    latencies.append(time.perf_counter() - began)
                    assert not answer.is_error, answer.content

        async with anyio.create_task_group() as group:
            group.start_soon(ordinary)
            group.start_soon(hostile)
        return results, durations, latencies

    return run(scenario)


def test_a_catastrophic_pattern_over_caller_input_leaves_others_answered(hostile_server):
    results, durations, latencies = while_others_ask(
        hostile_server, "caller_pattern", {"x": "a" * 10_000 + "!"}
    )

    assert [result.structured_content for result in results] == [{"ok": False}] * 5
    assert max(durations) < 1, durations  # the expression bound is 5 s; RE2 needs milliseconds
    assert max(latencies) < 1, latencies


def test_the_constant_pattern_that_froze_the_process_answers_at_once(hostile_server):
    results, durations, latencies = while_others_ask(hostile_server, "constant_pattern", {})

    assert [result.structured_content for result in results] == [{"found": False}] * 5
    assert max(durations) < 1, durations
    assert max(latencies) < 1, latencies
