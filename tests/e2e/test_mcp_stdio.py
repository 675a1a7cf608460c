"""`manage.py mcp_stdio` driven by the official client, as a desktop client would."""

import sys

import pytest
from mcp import Client, StdioServerParameters

from mcp_endpoint.features.tools import TOOLS
from tests.e2e.conftest import ROOT
from tests.e2e.test_mcp_client import run

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_a_desktop_client_uses_the_tools_over_stdio(live_mcp, mode, version):
    server = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp_stdio"], cwd=str(ROOT), env=live_mcp.env
    )

    async def scenario():
        async with Client(server, mode=mode) as client:
            assert client.protocol_version == version
            assert len((await client.list_tools()).tools) == len(TOOLS)
            found = await client.call_tool("search_nodes", {"query": "pause for ten minutes"})
            assert found.structured_content["results"][0]["subtype"] == "DELAY"
            details = await client.call_tool(
                "get_node_details", {"nodes": [{"node_type": "FLOW", "subtype": "IFF"}]}
            )
            assert details.structured_content["nodes"][0]["subtype"] == "IF"

    run(scenario)
