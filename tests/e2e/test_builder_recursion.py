"""Issue 24, "No recursion", as the hostile agent plays it: with a real key it builds a draft
whose mcp node calls this server's own /mcp (`test_workflow` of the draft itself) and tests
it. Before, that chain filled every run thread (the caller gave up after 8 s, queued calls
kept it going) and another caller's short workflow took 7.5 s a call instead of 0.03 s.

Now the call back carries the run's lineage and is refused at once, naming the chain; while
a hostile agent loops such calls, another caller's 3-node workflow keeps answering fast; and
one key holds at most its share of the run threads (GRAPHS_RUN_THREADS_PER_CALLER) however
many slow calls it makes, so other callers' runs start at once. The database shows what ran.

The egress policy (issue 24, part 3) would refuse the loopback servers these drafts declare:
EGRESS_ALLOWED_NETWORKS opens 127.0.0.0/8 so that these tests exercise the lineage.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from tests.e2e.conftest import LiveServer, _manage, create_key, start_server
from tests.e2e.test_mcp_client import connect, run
from tests.peers import echo_http_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

THREADS = 4
SHARE = 2

SHORT_GRAPH = """
version: "1.0"
server: {name: "victimTools", version: "1.0.0"}
tools:
  - name: "greet"
    description: "Three nodes: entry, a transform, exit."
    inputSchema: {type: object, properties: {name: {type: string}}, required: [name]}
    outputSchema: {type: object, properties: {hello: {type: string}}}
    nodes:
      - {id: entry, type: entry, next: shape}
      - {id: shape, type: transform, next: exit, transform: {expr: '{"hello": $.entry.name}'}}
      - {id: exit, type: exit}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("recursion")
    graph = tmp / "victim.yaml"
    graph.write_text(SHORT_GRAPH)
    (tmp / "server").mkdir()
    yield from start_server(
        tmp / "server",
        [("import_graph", str(graph))],
        EGRESS_ALLOWED_NETWORKS="127.0.0.0/8",
        GRAPHS_DIRECT_RUN_THREADS=str(THREADS),
        GRAPHS_RUN_THREADS_PER_CALLER=str(SHARE),
    )


# A builder's key: drafts and tests, no publishing.
AGENT_SCOPES = "tools:read,tools:execute,workflows:write"


def calling_itself(server: LiveServer, name: str, key: str) -> dict[str, Any]:
    """A draft whose mcp node has this server test the draft itself, with the agent's key."""
    return {
        "version": "1.0",
        "server": {"name": f"{name}Group", "version": "1.0.0"},
        "mcpServers": {
            "self": {
                "type": "streamableHttp",
                "url": f"{server.url}/mcp",
                "headers": {"Authorization": f"Bearer {key}"},
                "timeout": 8,
            }
        },
        "tools": [
            {
                "name": name,
                "description": "Tests itself through the server's own /mcp.",
                "inputSchema": {"type": "object"},
                "nodes": [
                    {"id": "entry", "type": "entry", "next": "again"},
                    {
                        "id": "again",
                        "type": "mcp",
                        "server": "self",
                        "tool": "test_workflow",
                        "args": {"name": name, "arguments": {}},
                        "next": "exit",
                    },
                    {"id": "exit", "type": "exit"},
                ],
            }
        ],
    }


def sleeping(name: str, echo_url: str, seconds: float) -> dict[str, Any]:
    """A draft whose one mcp node waits `seconds` at a slow server (the echo peer)."""
    return {
        "version": "1.0",
        "server": {"name": f"{name}Group", "version": "1.0.0"},
        "mcpServers": {"slow": {"type": "streamableHttp", "url": echo_url, "timeout": 30}},
        "tools": [
            {
                "name": name,
                "description": "Waits at a slow server.",
                "inputSchema": {"type": "object"},
                "nodes": [
                    {"id": "entry", "type": "entry", "next": "wait"},
                    {
                        "id": "wait",
                        "type": "mcp",
                        "server": "slow",
                        "tool": "sleep",
                        "args": {"seconds": seconds},
                        "next": "exit",
                    },
                    {"id": "exit", "type": "exit"},
                ],
            }
        ],
    }


def runs_of(server: LiveServer, workflow: str) -> list[dict[str, Any]]:
    """The workflow's runs, from the server's database."""
    code = (
        "import json; from graphs.models import Run; print(json.dumps(["
        "{'status': r.status, 'lineage': getattr(r, 'lineage', None), 'error': r.error, "
        "'started': r.started_at.timestamp() if r.started_at else None, "
        "'finished': r.finished_at.timestamp() if r.finished_at else None} "
        f"for r in Run.objects.filter(workflow_name={workflow!r}).order_by('pk')]))"
    )
    return json.loads(_manage(server.env, "shell", "-c", code).strip().splitlines()[-1])


async def create(server: LiveServer, key: str, definition: dict[str, Any]) -> None:
    async with connect(server, "auto", key=key, timeout=30) as client:
        created = await client.call_tool("create_workflow", {"definition": definition})
        assert not created.is_error, created.content


def test_a_draft_that_tests_itself_through_the_server_is_refused_at_once_naming_the_chain(
    server,
):
    key = create_key(server, "recursive-agent", AGENT_SCOPES, "--rate-limit", "100000")

    async def scenario() -> tuple[float, Any]:
        await create(server, key, calling_itself(server, "self_tester", key))
        async with connect(server, "auto", key=key, timeout=30) as client:
            began = time.perf_counter()
            answer = await client.call_tool("test_workflow", {"name": "self_tester"})
            return time.perf_counter() - began, answer

    elapsed, answer = run(scenario)

    text = answer.content[0].text
    print(f"test_workflow of a self-calling draft answered in {elapsed:.3f} s")
    assert elapsed < 2.0, text
    assert answer.is_error
    assert "workflow self_tester → workflow self_tester" in text
    assert "GRAPHS_MAX_CALL_DEPTH" in text
    # The outer test run ran and failed at its mcp node; the call back started nothing.
    [outer] = runs_of(server, "self_tester")
    assert outer["status"] == "failed"
    assert outer["lineage"] == []
    assert "workflow self_tester → workflow self_tester" in outer["error"]


def test_while_an_agent_loops_self_calls_another_callers_short_workflow_stays_fast(server):
    key = create_key(server, "looping-agent", AGENT_SCOPES, "--rate-limit", "100000")
    busy_seconds = 8.0

    async def scenario() -> tuple[list[float], list[str]]:
        await create(server, key, calling_itself(server, "self_looper", key))
        latencies: list[float] = []
        greeted: list[bool] = []
        hostile_answers: list[str] = []
        until = time.monotonic() + busy_seconds

        async def hostile() -> None:
            async with connect(server, "auto", key=key, timeout=30) as client:
                while time.monotonic() < until:
                    answer = await client.call_tool("test_workflow", {"name": "self_looper"})
                    hostile_answers.append(answer.content[0].text)

        async def ordinary() -> None:
            async with connect(server, "auto", timeout=30) as client:
                await anyio.sleep(1)  # the hostile loops are under way
                while time.monotonic() < until:
                    began = time.perf_counter()
                    answer = await client.call_tool("greet", {"name": "Ada"})
                    latencies.append(time.perf_counter() - began)
                    greeted.append(answer.structured_content == {"hello": "Ada"})
                    await anyio.sleep(0.05)

        async with anyio.create_task_group() as group:
            for _ in range(8):
                group.start_soon(hostile)
            group.start_soon(ordinary)
        assert all(greeted)
        return latencies, hostile_answers

    latencies, hostile_answers = run(scenario)
    hostile_calls = len(hostile_answers)
    latencies.sort()
    p50, worst = latencies[len(latencies) // 2], latencies[-1]
    print(f"{len(latencies)} greet calls beside {hostile_calls} self-calling test runs: "
          f"p50 {p50:.3f} s, max {worst:.3f} s")  # fmt: skip
    # Margins for a shared 2-core box: before, every call waited for the chain's threads.
    assert p50 < 0.5, latencies
    assert worst < 2.0, latencies
    assert hostile_calls >= 16
    assert all("workflow self_looper → workflow self_looper" in t for t in hostile_answers)
    # Every hostile call started one run; none of its calls back started another.
    runs = runs_of(server, "self_looper")
    assert len(runs) == hostile_calls
    assert all(run["lineage"] == [] for run in runs)


def most_at_once(runs: list[dict[str, Any]]) -> int:
    """The most runs that were running at the same moment, from their start and end times."""
    moments = [(run["started"], 1) for run in runs] + [(run["finished"], -1) for run in runs]
    running = most = 0
    for _, change in sorted(moments):  # at a tie an end comes first: -1 sorts before 1
        running += change
        most = max(most, running)
    return most


def test_one_key_holds_at_most_its_share_of_the_run_threads_and_others_start_at_once(
    server, monkeypatch
):
    key = create_key(server, "greedy-agent", AGENT_SCOPES, "--rate-limit", "100000")
    monkeypatch.setenv("ECHO_SERVER_TOOLS", "echo,sleep")
    hostile_calls = 6

    with echo_http_server() as echo_url:

        async def scenario() -> tuple[list[float], list[Any]]:
            await create(server, key, sleeping("slow_greedy", echo_url, 1.5))
            answers: list[Any] = []
            latencies: list[float] = []

            async def greedy() -> None:
                async with connect(server, "auto", key=key, timeout=60) as client:
                    answers.append(await client.call_tool("test_workflow", {"name": "slow_greedy"}))

            async def ordinary() -> None:
                async with connect(server, "auto", timeout=30) as client:
                    await anyio.sleep(0.5)  # the greedy key's calls are all in
                    for _ in range(10):
                        began = time.perf_counter()
                        answer = await client.call_tool("greet", {"name": "Bo"})
                        latencies.append(time.perf_counter() - began)
                        assert answer.structured_content == {"hello": "Bo"}
                        await anyio.sleep(0.2)

            async with anyio.create_task_group() as group:
                for _ in range(hostile_calls):
                    group.start_soon(greedy)
                group.start_soon(ordinary)
            return latencies, answers

        latencies, answers = run(scenario)

    # Every greedy call ran in the end, in turn: none was refused, none lost.
    assert len(answers) == hostile_calls
    assert not any(answer.is_error for answer in answers), [a.content for a in answers]
    runs = runs_of(server, "slow_greedy")
    assert [run["status"] for run in runs] == ["succeeded"] * hostile_calls
    print(f"greedy runs at once: {most_at_once(runs)}; greet beside them: max "
          f"{max(latencies):.3f} s")  # fmt: skip
    assert most_at_once(runs) == SHARE
    # The other threads stayed free: an ordinary call never waited for a greedy run (1.5 s).
    assert max(latencies) < 1.0, latencies


def test_the_refusal_tells_a_deep_chain_from_a_cycle(server):
    """Two drafts calling each other through the server: the second call back is the cycle."""
    key = create_key(server, "pair-agent", AGENT_SCOPES, "--rate-limit", "100000")

    def calling(name: str, other: str) -> dict[str, Any]:
        definition = calling_itself(server, name, key)
        definition["tools"][0]["nodes"][1]["args"] = {"name": other, "arguments": {}}
        return definition

    async def scenario() -> Any:
        await create(server, key, calling("ping_flow", "pong_flow"))
        await create(server, key, calling("pong_flow", "ping_flow"))
        async with connect(server, "auto", key=key, timeout=30) as client:
            return await client.call_tool("test_workflow", {"name": "ping_flow"})

    answer = run(scenario)

    text = answer.content[0].text
    assert answer.is_error
    assert "workflow ping_flow → workflow pong_flow → workflow ping_flow" in text
    [pong] = runs_of(server, "pong_flow")
    assert pong["lineage"][0].startswith("ping_flow/")
    assert len(runs_of(server, "ping_flow")) == 1
