"""An agent builds a workflow over MCP, with the official client against the live server, in
both protocol eras: it searches the catalog, validates a broken draft of seed 003's
count_files, applies the fixes it is offered, creates the draft, tests it with a mock and
once for real against the filesystem server, publishes it and calls the new tool.

The filesystem server is a registered provider (an operator imported a file using it and
refreshed its tools), as an agent with an API key may not start processes itself.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import jsonpatch
import pytest

from tests.e2e.conftest import LiveServer, start_server
from tests.e2e.test_mcp_client import connect, run
from tests.peers import FILESYSTEM_PROVIDER_GRAPH, npx_offline_env, require_npm_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def broken_count_files(name: str) -> dict:
    """Seed 003's count_files as an agent might first write it: the server named as the
    catalog showed it, but the tool's name, an argument and a node reference misspelt."""
    return {
        "version": "1.0",
        "server": {"name": "agentFiles", "version": "1.0.0"},
        "tools": [
            {
                "name": name,
                "description": "Counts the number of files in a directory",
                "inputSchema": {
                    "type": "object",
                    "properties": {"directory": {"type": "string"}},
                    "required": ["directory"],
                },
                "outputSchema": {
                    "type": "object",
                    "properties": {"count": {"type": "number"}},
                },
                "nodes": [
                    {"id": "entry", "type": "entry", "next": "list_directory_node"},
                    {
                        "id": "list_directory_node",
                        "type": "mcp",
                        "server": "filesystem",
                        "tool": "list_directry",
                        "args": {"pth": "$.entry.directory"},
                        "next": "count_files_node",
                    },
                    {
                        "id": "count_files_node",
                        "type": "transform",
                        "transform": {
                            "expr": '{ "count": $count($split($.list_directory_nod.content, '
                            '"\\n")) }'
                        },
                        "next": "exit",
                    },
                    {"id": "exit", "type": "exit"},
                ],
            }
        ],
    }


@pytest.fixture(scope="module")
def builder_server(tmp_path_factory) -> Iterator[tuple[LiveServer, Path]]:
    require_npm_server("@modelcontextprotocol/server-filesystem")
    tmp = tmp_path_factory.mktemp("builder")
    counting = tmp / "counting"
    counting.mkdir()
    for name in ("a.txt", "b.txt", "c.md"):
        (counting / name).write_text(name)
    (counting / "nested").mkdir()
    graph = tmp / "provider.yaml"
    graph.write_text(FILESYSTEM_PROVIDER_GRAPH.format(folder=json.dumps(str(counting))))
    for name, value in npx_offline_env().items():
        os.environ.setdefault(name, value)
    (tmp / "server").mkdir()
    commands = [("import_graph", str(graph)), ("refresh_providers", "filesystem")]
    for server in start_server(tmp / "server", commands, **npx_offline_env()):
        yield server, counting


@pytest.mark.parametrize(("mode", "name"), [("auto", "count_files"), ("legacy", "count_files_25")])
def test_an_agent_builds_tests_and_publishes_count_files(builder_server, mode, name):
    server, counting = builder_server

    async def scenario():
        async with connect(server, mode, timeout=60) as client:
            found = await client.call_tool(
                "search_nodes", {"query": "list the files in a directory", "max_results": 5}
            )
            subtypes = [hit["subtype"] for hit in found.structured_content["results"]]
            assert "MCP_FILESYSTEM_LIST_DIRECTORY" in subtypes
            details = await client.call_tool(
                "get_node_details",
                {"nodes": [{"node_type": "TOOL", "subtype": "MCP_FILESYSTEM_LIST_DIRECTORY"}]},
            )
            assert not details.is_error

            # The agent's loop: validate, apply the first fix offered, validate again, until
            # valid. Each fix is made for the definition as sent, so two may touch the same
            # place; and a node's arguments are checked once its tool is known.
            draft = broken_count_files(name)
            codes: list[str] = []
            for _ in range(10):
                checked = await client.call_tool("validate_workflow", {"definition": draft})
                report = checked.structured_content
                if report["valid"]:
                    break
                problem = next(p for p in report["problems"] if p["severity"] == "error")
                assert problem.get("fix"), report["problems"]  # each comes with its fix here
                codes.append(problem["code"])
                draft = jsonpatch.apply_patch(draft, problem["fix"])
            assert report["valid"] is True, report

            created = await client.call_tool("create_workflow", {"definition": draft})
            assert not created.is_error, created.content
            assert created.structured_content["status"] == "draft"
            listed = [tool.name for tool in (await client.list_tools()).tools]
            assert name not in listed  # a draft is not served

            mocked = await client.call_tool(
                "test_workflow",
                {
                    "name": name,
                    "arguments": {"directory": "/nowhere"},
                    "mocks": {"list_directory_node": {"content": "[FILE] a\n[FILE] b"}},
                },
            )
            assert not mocked.is_error, mocked.content
            assert mocked.structured_content["result"] == {"count": 2}
            real = await client.call_tool(
                "test_workflow", {"name": name, "arguments": {"directory": str(counting)}}
            )
            assert not real.is_error, real.content
            assert real.structured_content["result"] == {"count": 4}
            assert [node["id"] for node in real.structured_content["nodes"]] == [
                "entry",
                "list_directory_node",
                "count_files_node",
                "exit",
            ]

            published = await client.call_tool("publish_workflow", {"name": name, "version": 1})
            assert published.structured_content["status"] == "published"
            # The builder's next list shows its new tool (the client caches lists as told).
            listed = [tool.name for tool in (await client.list_tools()).tools]
            assert name in listed
            called = await client.call_tool(name, {"directory": str(counting)})
            assert not called.is_error, called.content
            assert called.structured_content == {"count": 4}
            return codes

    codes = run(scenario)
    assert sorted(codes) == ["arg_unknown", "node_reference_unknown", "unknown_tool"], codes
