"""Reading a definition in the graph YAML format of seed 003, and checking all of it.

Everything that can be known before a run is checked here, and every problem is reported at
once (``DefinitionError.problems``), each naming the tool, node and field: unknown keys (with
the keys allowed), missing or duplicate entry and exit nodes, targets that do not exist,
unreachable nodes, unknown servers, JSONata that does not parse, JSON Logic rules that are
not objects or use unknown operators, unusable node ids, bad limits.

A switch may give its fallback as ``default: id`` or, as the reference implementation does,
as a last condition without a ``rule``; both read to ``Node.default``. Entry and exit nodes
may carry a ``tool`` key naming their own tool, as older files of the format do; such a file
may hold all its nodes in one top-level ``nodes`` list (flat_form.py).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection, Mapping
from typing import Any

from graphs.engine.checks import graph_problems
from graphs.engine.compiler import expression_problems
from graphs.engine.definition import (
    NODE_TYPES,
    Condition,
    ExecutionLimits,
    GraphDefinition,
    Node,
    RetryPolicy,
    ServerInfo,
    ToolGraph,
)
from graphs.engine.errors import DefinitionError, located
from graphs.engine.flat_form import nested_form
from graphs.engine.loading import load_yaml
from graphs.engine.regex import schema_pattern_problems
from graphs.engine.servers import parse_servers

_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_TOP_KEYS = ("version", "server", "executionLimits", "mcpServers", "tools")
_SERVER_INFO_KEYS = ("name", "version", "title", "instructions")
_LIMIT_KEYS = {
    "maxNodeExecutions": "max_node_executions",
    "maxExecutionTimeMs": "max_execution_time_ms",
}
_TOOL_KEYS = ("name", "description", "inputSchema", "outputSchema", "nodes")
_NODE_KEYS = {
    "entry": ("id", "type", "next", "tool"),
    "exit": ("id", "type", "tool"),
    "mcp": ("id", "type", "server", "tool", "args", "next", "timeout", "retry"),
    "transform": ("id", "type", "transform", "next"),
    "switch": ("id", "type", "conditions", "default"),
}


def parse_definition(source: str | Mapping[str, Any]) -> GraphDefinition:
    """A whole definition, from YAML text or an already-loaded mapping; DefinitionError if any
    part of it is wrong."""
    raw = load_yaml(source) if isinstance(source, str) else source
    if not isinstance(raw, Mapping):
        raise DefinitionError(
            "the definition must be a mapping with version, server and tools; "
            f"got {type(raw).__name__}"
        )
    raw, problems = nested_form(raw)
    problems += _unknown_keys(raw, _TOP_KEYS, "the definition")
    version = _text(raw, "version", "field 'version'", problems)
    server = _server_info(raw.get("server"), problems)
    limits = _limits(raw.get("executionLimits"), problems)
    servers = parse_servers(raw.get("mcpServers"), problems)
    declared = (
        list(map(str, raw["mcpServers"])) if isinstance(raw.get("mcpServers"), Mapping) else []
    )
    tools = []
    raw_tools = raw.get("tools")
    if not isinstance(raw_tools, list) or not raw_tools:
        problems.append("field 'tools': must be a list of at least one tool")
        raw_tools = []
    for position, raw_tool in enumerate(raw_tools):
        tool = _tool(raw_tool, declared, problems, f"#{position + 1}")
        if tool is not None:
            tools.append(tool)
    names = [tool.name for tool in tools]
    problems += [
        f"{located(name)}: {names.count(name)} tools have this name; tool names must be unique"
        for name in sorted(set(names))
        if names.count(name) > 1
    ]
    if problems:
        raise DefinitionError(problems)
    return GraphDefinition(version, server, limits, servers, tuple(tools))


def parse_tool(raw: Mapping[str, Any], *, server_names: Collection[str]) -> ToolGraph:
    """One tool mapping (name, description, inputSchema, outputSchema, nodes), checked as in
    a whole definition; ``server_names`` are the servers its mcp nodes may call."""
    problems: list[str] = []
    tool = _tool(raw, list(server_names), problems, "#1")
    if problems or tool is None:
        raise DefinitionError(problems)
    return tool


def _tool(raw: Any, servers: list[str], problems: list[str], label: str) -> ToolGraph | None:
    if not isinstance(raw, Mapping):
        problems.append(f"tool {label}: must be a mapping with {', '.join(_TOOL_KEYS)}")
        return None
    start = len(problems)
    name = raw.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        problems.append(
            f"tool {label}, field 'name': {name!r} is not a tool name; MCP tool names have 1 to "
            "128 letters, digits, underscores, hyphens and dots"
        )
        name = label
    problems += _unknown_keys(raw, _TOOL_KEYS, located(name))
    description = _text(raw, "description", located(name, field="description"), problems, "")
    input_schema = _schema(raw, "inputSchema", name, problems)
    output_schema = _schema(raw, "outputSchema", name, problems)
    raw_nodes = raw.get("nodes")
    if not isinstance(raw_nodes, list):
        problems.append(f"{located(name, field='nodes')}: must be a list of nodes")
        raw_nodes = []
    nodes = [_node(item, name, servers, problems, i) for i, item in enumerate(raw_nodes)]
    tool = ToolGraph(
        name,
        description,
        input_schema or {},
        output_schema,
        tuple(node for node in nodes if node is not None),
    )
    problems += graph_problems(tool) + expression_problems(tool)
    return tool if len(problems) == start else None


def _node(
    raw: Any, tool: str, servers: list[str], problems: list[str], position: int
) -> Node | None:
    """A node as written; the checks of its fields' values are ``graph_problems``'s."""
    node_id = raw.get("id") if isinstance(raw, Mapping) else None
    if not isinstance(node_id, str):
        problems.append(
            f"{located(tool, field=f'nodes[{position}]')}: a node must be a mapping with a "
            "string `id` and a `type`"
        )
        return None
    node_type = raw.get("type")
    if node_type in NODE_TYPES:
        problems += _unknown_keys(raw, _NODE_KEYS[node_type], located(tool, node_id), node_type)
    fields: dict[str, Any] = {"next": raw.get("next")}
    if node_type in ("entry", "exit") and raw.get("tool", tool) != tool:
        problems.append(
            f"{located(tool, node_id, 'tool')}: names tool {raw['tool']!r}, but the node is "
            f"in tool {tool!r}; remove the key or move the node"
        )
    elif node_type == "mcp":
        fields.update(_call_fields(raw, tool, node_id, servers, problems))
    elif node_type == "transform":
        transform = raw.get("transform")
        if isinstance(transform, Mapping):
            problems += _unknown_keys(transform, ("expr",), located(tool, node_id, "transform"))
            fields["expr"] = transform.get("expr")
        else:
            problems.append(
                f"{located(tool, node_id, 'transform')}: must be a mapping with `expr`, "
                "as in transform: {expr: '$.entry'}"
            )
    elif node_type == "switch":
        fields.update(_switch_fields(raw, tool, node_id, problems))
    return Node(node_id, node_type, **fields)


def _call_fields(
    raw: Mapping[str, Any], tool: str, node_id: str, servers: list[str], problems: list[str]
) -> dict[str, Any]:
    server = raw.get("server")
    if isinstance(server, str) and server not in servers:
        defined = f"defined servers: {', '.join(servers)}" if servers else "mcpServers is empty"
        problems.append(f"{located(tool, node_id, 'server')}: unknown server {server!r}; {defined}")
    retry = raw.get("retry", {})
    if isinstance(retry, Mapping):
        problems += _unknown_keys(retry, ("count", "backoff"), located(tool, node_id, "retry"))
        policy = RetryPolicy(retry.get("count", 0), retry.get("backoff", 0.5))
    else:
        problems.append(f"{located(tool, node_id, 'retry')}: must be a mapping of count, backoff")
        policy = RetryPolicy()
    return {
        "server": server,
        "tool": raw.get("tool"),
        "args": {} if raw.get("args") is None else copy.deepcopy(raw["args"]),
        "timeout_seconds": raw.get("timeout"),
        "retry": policy,
    }


def _switch_fields(
    raw: Mapping[str, Any], tool: str, node_id: str, problems: list[str]
) -> dict[str, Any]:
    raw_conditions = raw.get("conditions", [])
    default = raw.get("default")
    if not isinstance(raw_conditions, list):
        problems.append(
            f"{located(tool, node_id, 'conditions')}: must be a list of {{rule, target}}"
        )
        raw_conditions = []
    conditions = []
    for index, item in enumerate(raw_conditions):
        where = located(tool, node_id, f"conditions[{index}]")
        if not isinstance(item, Mapping):
            problems.append(f"{where}: must be a mapping with `rule` and `target`")
            continue
        problems += _unknown_keys(item, ("rule", "target"), where)
        if "rule" in item:
            target = item.get("target")
            if target is None:
                problems.append(
                    f"{where}: missing `target`; give the id of the node to go to when the "
                    "rule holds"
                )
                continue
            conditions.append(Condition(copy.deepcopy(item["rule"]), target))
        elif index == len(raw_conditions) - 1 and default is None:
            default = item.get("target")  # the reference implementation's fallback form
        else:
            problems.append(
                f"{where}: a condition without `rule` is the fallback, so it must come last "
                "and the switch must not also have `default`"
            )
    return {"conditions": tuple(conditions), "default": default}


def _server_info(raw: Any, problems: list[str]) -> ServerInfo:
    if not isinstance(raw, Mapping):
        problems.append("field 'server': must be a mapping with name and version")
        return ServerInfo("", "")
    problems += _unknown_keys(raw, _SERVER_INFO_KEYS, "field 'server'")
    texts = {
        key: _text(
            raw, key, f"field 'server.{key}'", problems, None if key in ("name", "version") else ""
        )
        for key in _SERVER_INFO_KEYS
    }
    return ServerInfo(**texts)


def _limits(raw: Any, problems: list[str]) -> ExecutionLimits:
    if raw is None:
        return ExecutionLimits()
    if not isinstance(raw, Mapping):
        problems.append("field 'executionLimits': must be a mapping")
        return ExecutionLimits()
    problems += _unknown_keys(raw, tuple(_LIMIT_KEYS), "field 'executionLimits'")
    values = {}
    for key, name in _LIMIT_KEYS.items():
        if key in raw:
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                problems.append(
                    f"field 'executionLimits.{key}': must be a whole number above 0, got {value!r}"
                )
            else:
                values[name] = value
    return ExecutionLimits(**values)


def _schema(
    raw: Mapping[str, Any], key: str, tool: str, problems: list[str]
) -> dict[str, Any] | None:
    """An input or output schema: a JSON Schema of an object (the MCP requirement)."""
    schema = raw.get(key)
    if schema is None and key == "outputSchema":
        return None
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        problems.append(
            f"{located(tool, field=key)}: must be a JSON Schema of an object, "
            "as in {type: object, properties: {...}}"
        )
        return None
    problems.extend(
        f"{located(tool, field=key)}: {problem}" for problem in schema_pattern_problems(schema)
    )
    return copy.deepcopy(dict(schema))


def _text(
    raw: Mapping[str, Any], key: str, where: str, problems: list[str], default: str | None = None
) -> str:
    """A string field; numbers are read as text (YAML reads version: 1.0 as a number)."""
    value = raw.get(key, default)
    if value is None:
        problems.append(f"{where}: missing")
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        problems.append(f"{where}: must be a string, got {value!r}")
        return ""
    return value


def _unknown_keys(
    raw: Mapping[str, Any], allowed: tuple[str, ...], where: str, kind: str | None = None
) -> list[str]:
    unknown = [str(key) for key in raw if key not in allowed]
    if not unknown:
        return []
    owner = f"a {kind} node" if kind else "it"
    return [f"{where}: unknown key(s) {', '.join(unknown)}; {owner} allows {', '.join(allowed)}"]
