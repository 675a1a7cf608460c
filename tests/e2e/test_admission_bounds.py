"""Issue 25, "Bounds at admission", as hostile callers played it against a live server on the
embedded default (one uvicorn process, SQLite, the cache in local memory):

- item 10: eight loops of validate_workflow on large definitions from one key held every
  request thread, and another key's get_node_details took 10 s;
- item 11: a key with only health:check sent 400 `initialize` requests, and another caller's
  five live sessions answered 404 after;
- item 13: arguments nested deep, or a result nested deep, left the caller waiting for
  GRAPHS_RUN_WAIT_SECONDS, and broke get_run and list_runs for every reader.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import httpx2
import pytest

from bench.hostile_inputs import (
    HOSTILE_FILE,
    initialize_text,
    many_nodes,
    nested_text,
    tool_call_text,
)
from tests.e2e.conftest import LiveServer, create_key, start_server

pytestmark = pytest.mark.timeout(240)

WAIT_SECONDS = 30


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("admission")
    # `burrow` nests its result a level deeper per turn of a loop: no request carries it.
    yield from start_server(
        tmp,
        [("import_graph", str(HOSTILE_FILE))],
        GRAPHS_RUN_WAIT_SECONDS=str(WAIT_SECONDS),
    )


def modern_headers(key: str, name: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }


async def call(http: httpx2.AsyncClient, server: LiveServer, key: str, name: str, arguments: str):
    """A modern tools/call, its arguments as JSON text: the JSON-RPC message answered."""
    response = await http.post(
        f"{server.url}/mcp",
        content=tool_call_text(name, arguments),
        headers=modern_headers(key, name),
    )
    return response.status_code, response.json()


def flood_answer(status: int, message: dict) -> str:
    """What validate_workflow answered: its first problem's code, or what went wrong."""
    if status != 200 or "result" not in message:
        return f"HTTP {status}: {json.dumps(message)[:200]}"
    problems = message["result"].get("structuredContent", {}).get("problems") or [{}]
    return problems[0].get("code", json.dumps(message)[:200])


def test_a_validation_flood_does_not_slow_another_keys_knowledge_calls(server):
    flooder = create_key(server, "flooder", "tools:read,workflows:write", "--rate-limit", "1000000")
    # 660 KB of 6,000 nodes (refused while read), and 1,990 nodes validated whole (0.6 s).
    documents = [json.dumps({"definition": many_nodes(count)}) for count in (6000, 1990)]
    details = json.dumps({"nodes": [{"node_type": "ACTION", "subtype": "HTTP_REQUEST"}]})

    async def scenario() -> tuple[list[float], list[str], int]:
        seconds: list[float] = []
        flood_answers: list[str] = []
        stop = asyncio.Event()
        async with httpx2.AsyncClient(timeout=120) as http:

            async def flood(index: int) -> None:
                while not stop.is_set():
                    document = documents[index % 2]
                    status, message = await call(
                        http, server, flooder, "validate_workflow", document
                    )
                    flood_answers.append(flood_answer(status, message))
                    index += 1

            async def reader() -> None:
                await asyncio.sleep(3)  # the flood fills every thread it can first
                until = time.monotonic() + 20
                while time.monotonic() < until:
                    started = time.monotonic()
                    status, message = await call(
                        http, server, server.key, "get_node_details", details
                    )
                    seconds.append(time.monotonic() - started)
                    assert status == 200, message
                    assert not message["result"].get("isError"), message
                    await asyncio.sleep(0.05)
                stop.set()

            flooding = [asyncio.create_task(flood(index)) for index in range(8)]
            await reader()
            await asyncio.gather(*flooding)
        return seconds, flood_answers, len(flood_answers)

    seconds, flood_answers, floods = asyncio.run(scenario())

    assert floods >= 8, flood_answers
    assert set(flood_answers) == {"definition_too_large", "unknown_key"}, flood_answers[:3]
    assert len(seconds) > 50
    assert max(seconds) < 1.0, f"get_node_details took up to {max(seconds):.2f} s"


def test_a_flood_of_sessions_leaves_another_callers_sessions_live(server):
    flooder = create_key(server, "sessions", "health:check", "--rate-limit", "1000000")

    async def scenario() -> tuple[list[int], list[int]]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        async with httpx2.AsyncClient(timeout=30) as http:

            async def open_session(key: str) -> str:
                response = await http.post(
                    f"{server.url}/mcp",
                    content=initialize_text(),
                    headers={**headers, "Authorization": f"Bearer {key}"},
                )
                assert response.status_code == 200, response.text
                return response.headers["Mcp-Session-Id"]

            async def ping(key: str, session_id: str) -> int:
                response = await http.post(
                    f"{server.url}/mcp",
                    content='{"jsonrpc":"2.0","id":1,"method":"ping"}',
                    headers={
                        **headers,
                        "Authorization": f"Bearer {key}",
                        "Mcp-Session-Id": session_id,
                    },
                )
                return response.status_code

            mine = [await open_session(server.read_only_key) for _ in range(5)]
            flood = [await open_session(flooder) for _ in range(400)]
            return (
                [await ping(server.read_only_key, session_id) for session_id in mine],
                [await ping(flooder, session_id) for session_id in flood],
            )

    mine, flood = asyncio.run(scenario())

    assert mine == [200] * 5
    # The flooder keeps its newest MCP_SESSIONS_PER_CALLER (100); its oldest ended.
    assert flood == [404] * 300 + [200] * 100


def test_nesting_is_refused_at_admission_and_a_result_too_deep_ends_its_call_at_once(server):
    async def scenario():
        async with httpx2.AsyncClient(timeout=WAIT_SECONDS + 30) as http:
            started = time.monotonic()
            arguments = '{"levels":1,"x":' + nested_text(1000) + "}"
            refused = await call(http, server, server.key, "burrow", arguments)
            refused_in = time.monotonic() - started
            started = time.monotonic()
            deep = await call(http, server, server.key, "burrow", '{"levels":300}')
            deep_in = time.monotonic() - started
            listed = await call(http, server, server.key, "list_runs", "{}")
            run_id = deep[1]["result"]["_meta"]["io.switchyard/runId"]
            detail = await call(http, server, server.key, "get_run", f'{{"run_id":{run_id}}}')
            return refused, refused_in, deep, deep_in, listed, detail

    refused, refused_in, deep, deep_in, listed, detail = asyncio.run(scenario())

    assert refused[0] == 400  # the 2026-07-28 era's status for invalid params
    assert refused[1]["error"]["code"] == -32602
    assert "MCP_MAX_JSON_DEPTH" in refused[1]["error"]["message"]
    assert refused_in < 2
    assert deep[1]["result"]["isError"] is True
    assert "its answer could not be made" in deep[1]["result"]["content"][0]["text"]
    assert deep_in < 10, f"answered after {deep_in:.1f} s"
    assert not listed[1]["result"].get("isError"), listed
    assert not detail[1]["result"].get("isError"), detail
    assert detail[1]["result"]["structuredContent"]["run"]["truncated"] is True
