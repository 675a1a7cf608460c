"""Each graph file is an MCP server of its own at `/mcp/<slug>`: the official `mcp` client, in
both protocol eras, against the live server — its tools, its `serverInfo` and instructions, a
call, and `notifications/tools/list_changed` when a workflow of that file changes (and not
when another file's does)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import types
from mcp.shared.subscriptions import ToolsListChanged

from tests.e2e.conftest import LiveServer, _manage, start_server
from tests.e2e.test_mcp_client import connect, run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

ALPHA = """
version: "1.0"
server:
  name: "Alpha Tools"
  version: "2.1.0"
  title: "Alpha, a graph file of its own"
  instructions: "Call alpha_double to double a number."
tools:
  - name: alpha_double
    description: Doubles n.
    inputSchema: {type: object, properties: {n: {type: number}}, required: [n]}
    outputSchema: {type: object, properties: {doubled: {type: number}}}
    nodes:
      - {id: entry, type: entry, next: twice}
      - {id: twice, type: transform, transform: {expr: '{"doubled": $.entry.n * 2}'}, next: exit}
      - {id: exit, type: exit}
  - name: alpha_greet
    description: GREETING
    inputSchema: {type: object, properties: {who: {type: string}}}
    nodes:
      - {id: entry, type: entry, next: greet}
      - {id: greet, type: transform, transform: {expr: '"Hello, " & $.entry.who'}, next: exit}
      - {id: exit, type: exit}
"""

BETA = """
version: "1.0"
server: {name: "beta", version: "1.0.0"}
tools:
  - name: beta_echo
    description: ECHO
    inputSchema: {type: object}
    nodes:
      - {id: entry, type: entry, next: exit}
      - {id: exit, type: exit}
"""

# How long a change takes to reach a listening client at most: the server compares the
# tables every second and the lists every two (mcp_endpoint/protocol/list_changes.py).
NOTICE_SECONDS = 10
QUIET_SECONDS = 4.5


@pytest.fixture(scope="module")
def group_server(tmp_path_factory) -> Iterator[tuple[LiveServer, Path]]:
    tmp = tmp_path_factory.mktemp("groups")
    commands = []
    for name, text in (("alpha", ALPHA), ("beta", BETA)):
        (tmp / f"{name}.yaml").write_text(text)
        commands.append(("import_graph", str(tmp / f"{name}.yaml")))
    for server in start_server(tmp, commands):
        yield server, tmp


def import_graph(server: LiveServer, folder: Path, name: str, text: str) -> None:
    path = folder / f"{name}.yaml"
    path.write_text(text)
    _manage(server.env, "import_graph", str(path))


def test_export_graph_lists_each_group_with_its_endpoint(group_server):
    server, _ = group_server
    listing = _manage(server.env, "export_graph", "--list")
    assert "Alpha Tools/alpha_double  at /mcp/alpha-tools" in listing
    assert "beta/beta_echo  at /mcp/beta" in listing
    exported = _manage(server.env, "export_graph", "Alpha Tools")
    assert exported.startswith("# The MCP server of this file is served at /mcp/alpha-tools\n")


@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_a_group_endpoint_is_the_graph_files_own_server(group_server, mode, version):
    server, _ = group_server

    async def scenario():
        async with connect(server, mode, path="/mcp/alpha-tools") as client:
            assert client.protocol_version == version
            info = client.server_info
            assert (info.name, info.title, info.version) == (
                "Alpha Tools",
                "Alpha, a graph file of its own",
                "2.1.0",
            )
            assert client.instructions == "Call alpha_double to double a number."
            tools = await client.list_tools()
            assert [tool.name for tool in tools.tools] == ["alpha_double", "alpha_greet"]

            doubled = await client.call_tool("alpha_double", {"n": 21})
            assert not doubled.is_error
            assert doubled.structured_content == {"doubled": 42}

            # Another file's workflow and the catalog's tools are not this server's.
            for other in ("beta_echo", "search_nodes"):
                refused = await client.call_tool(other, {})
                assert refused.is_error
                assert "this server's tools: alpha_double, alpha_greet" in (refused.content[0].text)

    run(scenario)


def test_an_unknown_slug_is_404_naming_where_to_look(group_server):
    import httpx2

    server, _ = group_server
    response = httpx2.post(
        f"{server.url}/mcp/no-such-file",
        headers={"Authorization": f"Bearer {server.key}", "Accept": "application/json"},
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        timeout=5,
    )
    assert response.status_code == 404
    assert "export_graph --list" in response.json()["error"]["message"]


def test_a_2025_session_hears_list_changed_for_its_own_file_only(group_server):
    server, folder = group_server
    heard: list[float] = []

    async def on_message(message) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.append(time.monotonic())

    async def scenario():
        # A read timeout longer than the test: the server sends a keep-alive only after 15 s
        # of quiet, and the SDK's client gives up its GET stream after two read timeouts, so
        # with the default 5 s a slow import (CI) made it miss the change it waits for.
        async with connect(
            server, "legacy", timeout=30, path="/mcp/alpha-tools", message_handler=on_message
        ) as client:
            capabilities = client.server_capabilities
            assert capabilities.tools is not None
            assert capabilities.tools.list_changed is True
            await anyio.sleep(1)  # the client opens its GET stream after initializing
            await anyio.to_thread.run_sync(
                import_graph, server, folder, "beta", BETA.replace("ECHO", "ECHO, 2025")
            )
            await anyio.sleep(QUIET_SECONDS)
            assert heard == [], "a change to another file's workflow was announced here"
            await anyio.to_thread.run_sync(
                import_graph, server, folder, "alpha", ALPHA.replace("GREETING", "Hi, 2025")
            )
            with anyio.fail_after(NOTICE_SECONDS):
                while not heard:
                    await anyio.sleep(0.1)
            tools = await client.list_tools()
            assert tools.tools[1].description == "Hi, 2025"

    run(scenario)


def test_a_2026_listener_hears_list_changed_for_its_own_file_only(group_server):
    server, folder = group_server
    heard: dict[str, list[object]] = {"/mcp/alpha-tools": [], "/mcp": []}

    async def listen(path: str, task_status=anyio.TASK_STATUS_IGNORED) -> None:
        async with (
            connect(server, "auto", path=path, timeout=30) as client,
            client.listen(tools_list_changed=True) as subscription,
        ):
            task_status.started()
            async for event in subscription:
                heard[path].append(event)

    async def scenario():
        async with anyio.create_task_group() as listeners:
            for path in heard:
                await listeners.start(listen, path)
            await anyio.to_thread.run_sync(
                import_graph, server, folder, "beta", BETA.replace("ECHO", "ECHO, 2026")
            )
            with anyio.fail_after(NOTICE_SECONDS):
                while not heard["/mcp"]:  # /mcp serves every file's workflows
                    await anyio.sleep(0.1)
            await anyio.sleep(QUIET_SECONDS - 2)
            assert heard["/mcp/alpha-tools"] == []
            await anyio.to_thread.run_sync(
                import_graph, server, folder, "alpha", ALPHA.replace("GREETING", "Hi, 2026")
            )
            with anyio.fail_after(NOTICE_SECONDS):
                while not heard["/mcp/alpha-tools"]:
                    await anyio.sleep(0.1)
            listeners.cancel_scope.cancel()
        assert all(isinstance(event, ToolsListChanged) for event in heard["/mcp/alpha-tools"])

    run(scenario)
