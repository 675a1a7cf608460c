"""Building blocks for the validation tests: definitions as data, the tools they call, and
the check every test makes of an offered fix: applied alone, it removes its problem."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from graphs.engine.checks.all_checks import ToolSchema, validate_document
from graphs.engine.checks.problems import Problem

# The filesystem server's tools as its provider's specs describe them (abridged).
FILESYSTEM = {
    "list_directory": ToolSchema(
        {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
        None,
    ),
    "read_text_file": ToolSchema(
        {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "head": {"type": "number", "description": "the first N lines"},
                "tail": {"type": "number"},
            },
            "required": ["path"],
        },
        None,
    ),
    "get_file_info": ToolSchema(
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        {
            "type": "object",
            "properties": {
                "size": {"type": "integer"},
                "modified": {"type": "string"},
                "isDirectory": {"type": "boolean"},
            },
        },
    ),
}


def tools_of(server: str) -> dict[str, ToolSchema] | None:
    """The servers of these tests: `filesystem` is known, anything else is not."""
    return FILESYSTEM if server == "filesystem" else None


COUNT = '{ "count": $count($split($.list_directory_node.content, "\\n")) }'


def count_files() -> dict[str, Any]:
    """Seed 003's count_files, nested form, as a fresh document."""
    return {
        "version": "1.0",
        "server": {"name": "fileUtils", "version": "1.0.0", "title": "File utilities"},
        "executionLimits": {"maxNodeExecutions": 1000, "maxExecutionTimeMs": 300000},
        "mcpServers": {
            "filesystem": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", "./tests/counting"],
            }
        },
        "tools": [
            {
                "name": "count_files",
                "description": "Counts the number of files in a directory",
                "inputSchema": {
                    "type": "object",
                    "properties": {"directory": {"type": "string"}},
                    "required": ["directory"],
                },
                "outputSchema": {"type": "object", "properties": {"count": {"type": "number"}}},
                "nodes": [
                    {"id": "entry", "type": "entry", "next": "list_directory_node"},
                    {
                        "id": "list_directory_node",
                        "type": "mcp",
                        "server": "filesystem",
                        "tool": "list_directory",
                        "args": {"path": "$.entry.directory"},
                        "next": "count_files_node",
                    },
                    {
                        "id": "count_files_node",
                        "type": "transform",
                        "transform": {"expr": COUNT},
                        "next": "exit",
                    },
                    {"id": "exit", "type": "exit"},
                ],
            }
        ],
    }


def flat(document: dict[str, Any]) -> dict[str, Any]:
    """The same definition in mcpGraph's earlier, flat file form: one top-level `nodes`,
    entry and exit nodes naming their tool."""
    document = copy.deepcopy(document)
    nodes = []
    for tool in document["tools"]:
        for node in tool.pop("nodes"):
            if node.get("type") in ("entry", "exit"):
                node = {**node, "tool": tool["name"]}
            nodes.append(node)
    document["nodes"] = nodes
    return document


def nodes(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The first tool's nodes (nested form)."""
    return document["tools"][0]["nodes"]


def node(document: dict[str, Any], node_id: str) -> dict[str, Any]:
    """The node with this id, in either form."""
    listed = document["nodes"] if "nodes" in document else nodes(document)
    return next(item for item in listed if item.get("id") == node_id)


def validate(document: Any, **options: Any) -> list[Problem]:
    """validate_document with the filesystem tools, unless told otherwise."""
    options.setdefault("tools_of", tools_of)
    return validate_document(document, **options)


def only(problems: list[Problem], code: str) -> Problem:
    """The one problem with this code (failing with all of them shown otherwise)."""
    found = [problem for problem in problems if problem.code == code]
    assert len(found) == 1, [problem.as_dict() for problem in problems]
    return found[0]


def codes(problems: list[Problem]) -> list[str]:
    return [problem.code for problem in problems]


def fixed(document: Any, problem: Problem, **options: Any) -> list[Problem]:
    """Apply the problem's fix alone to the submitted document, validate the result, and
    assert that the problem is gone (same code and path); returns the new problems."""
    assert problem.fix is not None, problem.as_dict()
    patched = jsonpatch.apply_patch(document, problem.fix)
    assert patched is not document
    after = validate(patched, **options)
    left = [p for p in after if (p.code, p.path) == (problem.code, problem.path)]
    assert not left, [p.as_dict() for p in left]
    return after
