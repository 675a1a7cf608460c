"""The official TypeScript SDK's client against the live server, over Streamable HTTP and the
legacy SSE transport (tests/peers/ts_client.mjs), as a Node agent would connect."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mcp_endpoint.features.tools import TOOLS
from tests.e2e.conftest import LiveServer
from tests.peers import PEERS_HOME, npm_package_dir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SCRIPT = Path(__file__).parents[1] / "peers" / "ts_client.mjs"
SDK = "@modelcontextprotocol/sdk"
TRANSPORTS = {"streamable_http", "sse"}


def ts_client(server: LiveServer, key: str) -> dict[str, Any]:
    """What the TypeScript client saw with `key` on each transport (see ts_client.mjs)."""
    npm_package_dir(SDK)  # fails the test, saying how to install it, when it is missing
    node = shutil.which("node")
    assert node, "Node.js is not installed (the TypeScript client runs on it)"
    finished = subprocess.run(
        [node, str(SCRIPT), server.url],
        env={**server.env, "MCP_KEY": key, "MCP_PEERS_HOME": str(PEERS_HOME)},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert finished.returncode == 0, finished.stderr
    return json.loads(finished.stdout)


def test_the_typescript_client_lists_and_calls_tools_over_streamable_http_and_sse(live_mcp):
    answers = ts_client(live_mcp, live_mcp.key)

    assert set(answers) == TRANSPORTS
    for transport, answer in answers.items():
        assert answer["server"] == "switchyard", transport
        assert answer["tools"][: len(TOOLS)] == list(TOOLS), transport
        assert answer["isError"] is False, transport
        assert len(answer["nodeTypes"]) == 8, transport


def test_the_typescript_client_of_a_read_only_key_lists_only_what_it_may_call(live_mcp):
    readable = [name for name, tool in TOOLS.items() if tool.scope == "tools:read"]

    answers = ts_client(live_mcp, live_mcp.read_only_key)

    assert set(answers) == TRANSPORTS
    for transport, answer in answers.items():
        assert answer["tools"] == readable, transport
        assert "tools:execute" in answer["refused"], transport
