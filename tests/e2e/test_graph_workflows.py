"""Graph workflows through the live server, driven by the official `mcp` client: seed 003's
`count_files` against the real filesystem server, a downstream server killed mid-run, and
twenty concurrent calls of one looping workflow."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.e2e.conftest import ROOT, LiveServer, _manage, start_server
from tests.e2e.test_mcp_client import connect, run
from tests.peers import ECHO_SERVER, npx_offline_env, require_npm_server

pytestmark = pytest.mark.slow

COUNT_FILES = ROOT / "tests" / "graphs" / "engine" / "count_files.yaml"
LOOPS = ROOT / "tests" / "graphs" / "files" / "loops.yaml"

# Two workflows on the echo peer: which process serves it, and a slow call to kill it in.
ECHO_GRAPH = """
version: "1.0"
server: {{name: "echoTests", version: "1.0.0"}}
mcpServers:
  echo:
    command: {python}
    args: [{server}]
tools:
  - name: echo_pid
    description: The process id of the echo server.
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: ask}}
      - {{id: ask, type: mcp, server: echo, tool: pid, args: {{}}, next: exit}}
      - {{id: exit, type: exit}}
  - name: echo_slowly
    description: Waits on the echo server, then echoes.
    inputSchema: {{type: object, properties: {{seconds: {{type: number}}}}}}
    nodes:
      - {{id: entry, type: entry, next: nap}}
      - {{id: nap, type: mcp, server: echo, tool: sleep, args: {{seconds: "$.entry.seconds"}},
          next: exit}}
      - {{id: exit, type: exit}}
"""


@pytest.fixture(scope="module")
def graph_server(tmp_path_factory) -> Iterator[tuple[LiveServer, Path]]:
    """The live server with count_files (unchanged, beside its own tests/counting folder),
    the loop workflows and the echo workflows imported."""
    require_npm_server("@modelcontextprotocol/server-filesystem")
    tmp = tmp_path_factory.mktemp("graphs")
    files = tmp / "files"
    counting = files / "tests" / "counting"
    counting.mkdir(parents=True)
    for name in ("a.txt", "b.txt", "c.md"):
        (counting / name).write_text(name)
    (counting / "nested").mkdir()
    shutil.copy(COUNT_FILES, files / "count_files.yaml")
    (files / "echo.yaml").write_text(
        ECHO_GRAPH.format(python=json.dumps(sys.executable), server=json.dumps(str(ECHO_SERVER)))
    )
    for name, value in npx_offline_env().items():
        os.environ.setdefault(name, value)
    (tmp / "server").mkdir()
    commands = [
        ("import_graph", str(graph))
        for graph in (files / "count_files.yaml", LOOPS, files / "echo.yaml")
    ]
    for server in start_server(tmp / "server", commands, **npx_offline_env()):
        yield server, counting


def call(server: LiveServer, name: str, arguments: dict, mode: str = "auto"):
    async def scenario():
        async with connect(server, mode) as client:
            return await client.call_tool(name, arguments)

    return run(scenario)


def run_records(server: LiveServer, run_ids: list[int]) -> list[dict]:
    """Runs and their node executions, read from the server's database, in the order of
    `run_ids`: one `manage.py shell` for all of them (each start of Django costs 1 to 3 s)."""
    script = (
        "import json; from graphs.models import Run; "
        f"runs = [Run.objects.get(pk=pk) for pk in {list(map(int, run_ids))!r}]; "
        "print(json.dumps([{'status': r.status, 'error': r.error, 'node': r.error_node_id, "
        "'nodes': list(r.node_executions.order_by('index').values_list('node_id', 'status', "
        "'error'))} for r in runs]))"
    )
    return json.loads(_manage(server.env, "shell", "-c", script).strip().splitlines()[-1])


def run_record(server: LiveServer, run_id: int) -> dict:
    """A run and its node executions, read from the server's database."""
    return run_records(server, [run_id])[0]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_count_files_runs_unchanged_against_the_real_filesystem_server(graph_server, mode):
    server, counting = graph_server
    result = call(server, "count_files", {"directory": str(counting)}, mode)
    assert not result.is_error, result.content
    assert result.structured_content == {"count": 4}
    record = run_record(server, result.meta["io.switchyard/runId"])
    assert record["status"] == "succeeded"
    assert [node for node, _, _ in record["nodes"]] == [
        "entry",
        "list_directory_node",
        "count_files_node",
        "exit",
    ]


def test_count_files_lists_with_its_input_and_output_schemas(graph_server):
    server, _ = graph_server

    async def scenario():
        async with connect(server, "auto") as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = run(scenario)
    assert tools["count_files"].input_schema["required"] == ["directory"]
    assert tools["count_files"].output_schema["properties"]["count"]["type"] == "number"
    assert {"sum_to", "classify", "echo_pid", "echo_slowly"} <= set(tools)


def test_a_server_killed_mid_run_fails_that_run_and_the_next_run_restarts_it(graph_server):
    server, _ = graph_server
    # The SDK server wraps a returned int as structured content {"result": pid}.
    first_pid = json.loads(call(server, "echo_pid", {}).content[0].text)["result"]

    async def slow_call_while_killing():
        async with anyio.create_task_group() as group:
            outcome = {}

            async def slow():
                async with connect(server, "auto") as client:
                    outcome["result"] = await client.call_tool("echo_slowly", {"seconds": 10})

            group.start_soon(slow)
            await anyio.sleep(1.5)
            os.kill(first_pid, signal.SIGKILL)
        return outcome["result"]

    started = time.monotonic()
    result = run(slow_call_while_killing)
    assert time.monotonic() - started < 9, "the run waited for the dead server's answer"
    assert result.is_error
    text = result.content[0].text
    assert "at node 'nap'" in text
    run_id = int(text.rsplit("(run ", 1)[1].split(")")[0])
    record = run_record(server, run_id)
    assert record["status"] == "failed"
    assert record["node"] == "nap"
    assert record["nodes"][-1][:2] == ["nap", "failed"]
    assert record["nodes"][-1][2]

    second = call(server, "echo_pid", {})
    assert not second.is_error, second.content
    assert json.loads(second.content[0].text)["result"] != first_pid


def test_twenty_concurrent_calls_each_get_their_own_answer_and_history(graph_server):
    server, _ = graph_server

    async def scenario():
        results: dict[int, object] = {}

        async def one(n: int):
            async with connect(server, "auto") as client:
                results[n] = await client.call_tool("sum_to", {"n": n})

        async with anyio.create_task_group() as group:
            for n in range(1, 21):
                group.start_soon(one, n)
        return results

    results = run(scenario)
    assert sorted(results) == list(range(1, 21))
    records = run_records(
        server, [result.meta["io.switchyard/runId"] for result in results.values()]
    )
    for (n, result), record in zip(results.items(), records, strict=True):
        assert result.structured_content == {"sum": n * (n + 1) // 2, "steps": n}
        assert record["status"] == "succeeded"
        steps = [node for node, _, _ in record["nodes"] if node == "step"]
        assert len(steps) == n
        assert len(record["nodes"]) == 2 * n + 3
