"""The official `mcp` Python client against the live server, in both protocol eras."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.session import MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation

from mcp_endpoint.features.tools import TOOLS

pytestmark = pytest.mark.slow


@asynccontextmanager
async def connect(
    server,
    mode: str,
    key: str | None = None,
    timeout: float = 5,
    path: str = "/mcp",
    message_handler: MessageHandlerFnT | None = None,
) -> AsyncIterator[Client]:
    """The official client over Streamable HTTP at `path`, authenticated with an API key;
    `timeout` bounds each HTTP read; `message_handler` sees the server's notifications."""
    headers = {"Authorization": f"Bearer {key or server.key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(
            streamable_http_client(f"{server.url}{path}", http_client=http),
            mode=mode,
            client_info=Implementation(name="switchyard-tests", version="1"),
            message_handler=message_handler,
        ) as client,
    ):
        yield client


def run(scenario, *args):
    """Run an async scenario in its own thread: the browser tests' Playwright keeps an event
    loop running in the main thread for the whole session."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, scenario, *args).result()


@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_a_client_lists_and_calls_every_tool_and_reads_a_resource(live_mcp, mode, version):
    async def scenario():
        async with connect(live_mcp, mode) as client:
            assert client.protocol_version == version
            tools = await client.list_tools()
            assert [t.name for t in tools.tools] == list(TOOLS)
            # Every tool says whether it only reads: those that change workflows do not.
            read_only = {t.name: t.annotations.read_only_hint for t in tools.tools}
            assert read_only == {name: not tool.writes for name, tool in TOOLS.items()}

            types_result = await client.call_tool("get_node_types", {})
            assert not types_result.is_error
            assert len(types_result.structured_content) == 8

            details = await client.call_tool(
                "get_node_details",
                {"nodes": [{"node_type": "HUMAN_LOOP_NODE", "subtype": "HUMAN_SLACK"}]},
            )
            [node] = details.structured_content["nodes"]
            assert (node["node_type"], node["subtype"]) == (
                "HUMAN_IN_THE_LOOP",
                "SLACK_INTERACTION",
            )
            assert node["warning"].startswith("Auto-corrected")
            assert json.loads(details.content[0].text) == details.structured_content

            found = await client.call_tool(
                "search_nodes", {"query": "remember earlier conversation turns", "max_results": 3}
            )
            assert found.structured_content["results"][0]["subtype"] == "CONVERSATION_BUFFER"

            mistake = await client.call_tool("search_nodes", {"qeury": "email"})
            assert mistake.is_error
            assert "qeury" in mistake.content[0].text

            resources = await client.list_resources()
            assert len(resources.resources) >= 60
            read = await client.read_resource("nodespec://ACTION/HTTP_REQUEST")
            assert json.loads(read.contents[0].text)["subtype"] == "HTTP_REQUEST"

            with pytest.raises(MCPError) as missing:
                await client.read_resource("nodespec://ACTION/NOPE_NOPE")
            assert "ACTION/NOPE_NOPE" in str(missing.value)

            prompts = await client.list_prompts()
            assert {p.name for p in prompts.prompts} == {"design_workflow", "explain_node"}

    run(scenario)


def test_a_legacy_session_ends_with_delete(live_mcp):
    async def scenario():
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        headers = {"Accept": "application/json, text/event-stream"}
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {live_mcp.key}"})
        response = await http.post(f"{live_mcp.url}/mcp", json=initialize, headers=headers)
        assert response.status_code == 200
        session = response.headers["mcp-session-id"]
        headers.update({"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"})
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert (await http.post(f"{live_mcp.url}/mcp", json=ping, headers=headers)).json()[
            "result"
        ] == {}
        assert (await http.delete(f"{live_mcp.url}/mcp", headers=headers)).status_code == 200
        after = await http.post(f"{live_mcp.url}/mcp", json=ping, headers=headers)
        assert after.status_code == 404
        await http.aclose()

    run(scenario)


def test_a_key_without_the_execute_scope_lists_only_what_it_may_call_and_cannot_call_more(
    live_mcp,
):
    readable = [name for name, tool in TOOLS.items() if tool.scope == "tools:read"]

    async def scenario():
        async with connect(live_mcp, "auto", key=live_mcp.read_only_key) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == readable
            with pytest.raises(MCPError) as refused:
                await client.call_tool("get_node_types", {})
            assert "tools:execute" in str(refused.value)

    run(scenario)


def test_the_rest_api_and_its_openapi_schema_answer(live_mcp):
    async def scenario():
        async with httpx2.AsyncClient(headers={"X-API-Key": live_mcp.key}) as http:
            tools = (await http.get(f"{live_mcp.url}/api/v1/mcp/tools")).json()
            assert tools["result"]["tools"][0]["name"] == "get_node_types"
            invoked = await http.post(
                f"{live_mcp.url}/api/v1/mcp/invoke",
                json={"name": "search_nodes", "arguments": {"query": "send an email"}},
            )
            assert invoked.json()["result"]["isError"] is False
            schema = (await http.get(f"{live_mcp.url}/api/v1/openapi.json")).json()
            assert "/api/v1/mcp/invoke" in schema["paths"]

    run(scenario)
