"""Parsing definitions: the seed example unchanged, the accepted forms, and round trips."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from graphs.engine import (
    Condition,
    DefinitionError,
    ExecutionLimits,
    Node,
    RetryPolicy,
    ServerConfig,
    ServerInfo,
    definition_to_dict,
    parse_definition,
    parse_tool,
    server_to_dict,
    tool_to_dict,
)
from tests.graphs.engine.helpers import OBJECT, chain, tool, transform

COUNT_FILES = (Path(__file__).parent / "count_files.yaml").read_text()


def test_the_count_files_example_of_the_format_parses_unchanged():
    definition = parse_definition(COUNT_FILES)

    assert definition.version == "1.0"
    assert definition.server == ServerInfo(
        "fileUtils",
        "1.0.0",
        "File utilities",
        "This server provides file utility tools for counting files and calculating total "
        "file sizes in directories.",
    )
    assert definition.limits == ExecutionLimits(1000, 300000)
    assert definition.mcp_servers == {
        "filesystem": ServerConfig(
            "filesystem",
            "stdio",
            command="npx",
            args=("-y", "@modelcontextprotocol/server-filesystem", "./tests/counting"),
        )
    }
    count_files = definition.tool("count_files")
    assert count_files.entry == "entry"
    assert count_files.exit == "exit"
    assert count_files.output_schema["properties"]["count"]["type"] == "number"
    assert count_files.node("list_directory_node") == Node(
        "list_directory_node",
        "mcp",
        next="count_files_node",
        server="filesystem",
        tool="list_directory",
        args={"path": "$.entry.directory"},
    )
    assert count_files.node("count_files_node").expr == (
        '{ "count": $count($split($.list_directory_node.content, "\\n")) }'
    )


def test_defaults_apply_when_optional_sections_are_left_out():
    definition = parse_definition(
        {"version": 1.0, "server": {"name": "s", "version": "1"}, "tools": [chain()]}
    )

    assert definition.version == "1.0"  # YAML reads an unquoted 1.0 as a number
    assert definition.server.title == "s"
    assert definition.limits == ExecutionLimits()
    assert definition.mcp_servers == {}


@pytest.mark.parametrize(
    ("raw_server", "problem"),
    [
        (
            {"url": "https://h/mcp", "sse_read_timeout": 0},
            "server 's', field 'sse_read_timeout': must be a positive number of seconds",
        ),
        ({"command": "x", "sse_read_timeout": 60}, "server 's': unknown key(s) sse_read_timeout"),
    ],
)
def test_an_sse_read_timeout_is_for_http_servers_and_positive(raw_server, problem):
    with pytest.raises(DefinitionError) as refused:
        parse_definition(
            {
                "version": "1",
                "server": {"name": "n", "version": "1"},
                "mcpServers": {"s": raw_server},
                "tools": [chain()],
            }
        )
    assert problem in str(refused.value)


@pytest.mark.parametrize(
    ("raw_server", "expected"),
    [
        (
            {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
            ServerConfig("s", "stdio", command="uvx", args=("mcp-server-time",), env={"TZ": "UTC"}),
        ),
        ({"type": "stdio", "command": "x"}, ServerConfig("s", "stdio", command="x")),
        (
            {"command": "x", "cwd": "./servers"},
            ServerConfig("s", "stdio", command="x", cwd="./servers"),
        ),
        (
            {"url": "https://h/mcp", "headers": {"Authorization": "Bearer k"}, "timeout": 5},
            ServerConfig(
                "s",
                "streamable_http",
                url="https://h/mcp",
                headers={"Authorization": "Bearer k"},
                timeout_seconds=5,
            ),
        ),
        ({"url": "https://h/sse"}, ServerConfig("s", "sse", url="https://h/sse")),
        (
            {"type": "sse", "url": "https://h/sse", "sse_read_timeout": 60},
            ServerConfig("s", "sse", url="https://h/sse", sse_read_timeout=60),
        ),
        (
            {"type": "sse", "url": "https://h/events"},
            ServerConfig("s", "sse", url="https://h/events"),
        ),
        (
            {"type": "streamableHttp", "url": "http://h/"},
            ServerConfig("s", "streamable_http", url="http://h/"),
        ),
        (
            {"type": "streamable-http", "url": "http://h/"},
            ServerConfig("s", "streamable_http", url="http://h/"),
        ),
        (
            {"transport": "http", "url": "http://h/"},
            ServerConfig("s", "streamable_http", url="http://h/"),
        ),
    ],
)
def test_servers_are_read_in_every_accepted_form_and_written_back(raw_server, expected):
    definition = parse_definition(
        {
            "version": "1",
            "server": {"name": "n", "version": "1"},
            "mcpServers": {"s": raw_server},
            "tools": [chain()],
        }
    )

    assert definition.mcp_servers["s"] == expected
    reread = parse_definition({**definition_to_dict(definition)})
    assert reread.mcp_servers["s"] == expected
    assert server_to_dict(expected) == definition_to_dict(reread)["mcpServers"]["s"]


def test_a_rule_less_last_condition_is_the_switch_default_as_in_the_reference_format():
    raw = tool(
        {"id": "entry", "type": "entry", "next": "route"},
        {
            "id": "route",
            "type": "switch",
            "conditions": [
                {"rule": {"==": [1, 1]}, "target": "exit"},
                {"target": "exit"},
            ],
        },
        {"id": "exit", "type": "exit"},
    )

    route = parse_tool(raw, server_names=[]).node("route")

    assert route.conditions == (Condition({"==": [1, 1]}, "exit"),)
    assert route.default == "exit"


def test_entry_and_exit_may_name_their_own_tool_as_older_files_do():
    raw = tool(
        {"id": "entry", "type": "entry", "tool": "t", "next": "exit"},
        {"id": "exit", "type": "exit", "tool": "t"},
    )

    assert parse_tool(raw, server_names=[]).entry == "entry"


FULL = {
    "version": "2",
    "server": {"name": "full", "version": "0.1", "title": "Full", "instructions": "all of it"},
    "executionLimits": {"maxNodeExecutions": 50, "maxExecutionTimeMs": 2000},
    "mcpServers": {
        "local": {"command": "uvx", "args": ["srv"], "env": {"A": "1"}, "timeout": 2.5},
        "remote": {"type": "streamableHttp", "url": "https://x/mcp", "headers": {"K": "v"}},
        "events": {"type": "sse", "url": "https://x/sse"},
    },
    "tools": [
        {
            "name": "everything",
            "description": "uses every node type",
            "inputSchema": {"type": "object", "properties": {"n": {"type": "number"}}},
            "outputSchema": OBJECT,
            "nodes": [
                {"id": "entry", "type": "entry", "next": "call"},
                {
                    "id": "call",
                    "type": "mcp",
                    "server": "remote",
                    "tool": "do",
                    "args": {
                        "a": "$.entry.n",
                        "b": {"expr": "$count([1])"},
                        "c": {"literal": "$5"},
                        "d": [1, {"x": "$.entry"}],
                    },
                    "timeout": 3,
                    "retry": {"count": 2, "backoff": 0.1},
                    "next": "route",
                },
                {
                    "id": "route",
                    "type": "switch",
                    "conditions": [{"rule": {">": [{"var": "entry.n"}, 1]}, "target": "shape"}],
                    # Not the exit: a run would return the text "exit", no object.
                    "default": "shape",
                },
                transform("shape", "{'n': $.entry.n}", next="exit"),
                {"id": "exit", "type": "exit"},
            ],
        },
        chain(),
    ],
}


def test_a_definition_survives_a_round_trip_through_its_dict_form():
    definition = parse_definition(FULL)

    assert parse_definition(definition_to_dict(definition)) == definition
    assert parse_definition(definition_to_dict(parse_definition(COUNT_FILES))) == parse_definition(
        COUNT_FILES
    )
    call = definition.tool("everything").node("call")
    assert call.retry == RetryPolicy(2, 0.1)
    assert call.timeout_seconds == 3


def test_a_tool_survives_a_round_trip_on_its_own():
    everything = parse_definition(FULL).tool("everything")

    exported = tool_to_dict(everything)
    exported["nodes"][1]["args"]["a"] = "changed"  # the export is a copy

    assert everything.node("call").args["a"] == "$.entry.n"
    assert parse_tool(tool_to_dict(everything), server_names=["remote"]) == everything


def test_a_parsed_definition_does_not_share_data_with_its_source():
    source = copy.deepcopy(FULL)
    definition = parse_definition(source)

    source["tools"][0]["nodes"][1]["args"]["a"] = "$.changed"

    assert definition.tool("everything").node("call").args["a"] == "$.entry.n"


def test_yaml_errors_are_definition_errors():
    with pytest.raises(DefinitionError, match="not valid YAML"):
        parse_definition("tools: [")
    with pytest.raises(DefinitionError, match="must be a mapping"):
        parse_definition("- just a list")
