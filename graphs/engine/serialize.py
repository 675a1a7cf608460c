"""Definitions back to the YAML-format mapping that ``parse_definition`` reads.

``parse_definition(definition_to_dict(d)) == d`` and ``parse_tool(tool_to_dict(t), ...) == t``:
an exported workflow imports back to the same thing. Values are copied, so changing the
mapping cannot change the (immutable) definition.
"""

from __future__ import annotations

import copy
from typing import Any

from graphs.engine.definition import GraphDefinition, Node, RetryPolicy, ToolGraph
from graphs.engine.servers import server_to_dict

__all__ = ["definition_to_dict", "server_to_dict", "tool_to_dict"]


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
    if node.next is not None:
        result["next"] = node.next
    return result
