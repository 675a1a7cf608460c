"""Definitions back to the YAML-format mapping that ``parse_definition`` reads.

``parse_definition(definition_to_dict(d)) == d`` and ``parse_tool(tool_to_dict(t), ...) == t``:
an exported workflow imports back to the same thing. Values are copied, so changing the
mapping cannot change the (immutable) definition. ``dump_yaml`` writes such a mapping as text
for people to read and edit.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from graphs.engine.definition import GraphDefinition, Node, RetryPolicy, ToolGraph
from graphs.engine.format.servers import server_to_dict

__all__ = ["definition_to_dict", "dump_yaml", "server_to_dict", "tool_to_dict"]


def definition_to_dict(definition: GraphDefinition) -> dict[str, Any]:
    """A whole definition in the YAML format."""
    server = definition.server
    return {
        "version": definition.version,
        "server": {
            "name": server.name,
            "version": server.version,
            "title": server.title,
            "instructions": server.instructions,
        },
        "executionLimits": {
            "maxNodeExecutions": definition.limits.max_node_executions,
            "maxExecutionTimeMs": definition.limits.max_execution_time_ms,
        },
        "mcpServers": {
            name: server_to_dict(config) for name, config in definition.mcp_servers.items()
        },
        "tools": [tool_to_dict(tool) for tool in definition.tools],
    }


def tool_to_dict(tool: ToolGraph) -> dict[str, Any]:
    """One tool in the YAML format."""
    result: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": copy.deepcopy(tool.input_schema),
    }
    if tool.output_schema is not None:
        result["outputSchema"] = copy.deepcopy(tool.output_schema)
    result["nodes"] = [_node_to_dict(node) for node in tool.nodes]
    return result


def _node_to_dict(node: Node) -> dict[str, Any]:
    result: dict[str, Any] = {"id": node.id, "type": node.type}
    if node.type == "mcp":
        result.update(server=node.server, tool=node.tool, args=copy.deepcopy(node.args))
        if node.timeout_seconds is not None:
            result["timeout"] = node.timeout_seconds
        if node.retry != RetryPolicy():
            result["retry"] = {"count": node.retry.count, "backoff": node.retry.backoff_seconds}
    elif node.type == "transform":
        result["transform"] = {"expr": node.expr}
    elif node.type == "switch":
        result["conditions"] = [
            {"rule": copy.deepcopy(condition.rule), "target": condition.target}
            for condition in node.conditions
        ]
        if node.default is not None:
            result["default"] = node.default
    elif node.type == "approval":
        # Who decides is always written: it is what a reader of the node most needs to know.
        result.update(message=node.message, approvers=node.approvers)
        if node.form is not None:
            result["form"] = copy.deepcopy(node.form)
        if node.timeout_ms is not None:
            result["timeoutMs"] = node.timeout_ms
        result["routes"] = dict(node.routes)
    if node.next is not None:
        result["next"] = node.next
    return result


class _BlockDumper(yaml.SafeDumper):
    """Safe YAML with multi-line strings as literal block scalars (`|`), the way an author
    writes a JSONata expression, instead of one quoted line of `\\n` escapes."""


# Line breaks other than \n: loading turns each one in a block or a single-quoted scalar
# into \n, so a string holding one is written double-quoted, where it is an escape.
_OTHER_BREAKS = frozenset("\r\x85\u2028\u2029")


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = None
    if _OTHER_BREAKS.intersection(value):
        style = '"'
    elif "\n" in value:
        # Only a request: the emitter still quotes a string that a block cannot hold exactly
        # (trailing spaces on a line, control characters).
        style = "|"
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)


def dump_yaml(document: Any) -> str:
    """`document` as YAML text in its own key order; `yaml.safe_load` reads back an equal
    value."""
    return yaml.dump(document, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=100)
