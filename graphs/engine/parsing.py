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
import difflib
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from graphs.engine.checks import NodeLayout, graph_findings
from graphs.engine.compiler import CompiledNode, compile_nodes
from graphs.engine.definition import (
    NODE_TYPES,
    Condition,
    ExecutionLimits,
    GraphDefinition,
    Node,
    RetryPolicy,
    ServerConfig,
    ServerInfo,
    ToolGraph,
)
from graphs.engine.errors import DefinitionError, located
from graphs.engine.expressions import ParseBudget
from graphs.engine.flat_form import nested_form_findings
from graphs.engine.loading import load_yaml
from graphs.engine.problems import (
    Finding,
    Keys,
    error,
    finding,
    op_add,
    op_move,
    op_remove,
    op_replace,
)
from graphs.engine.regex import schema_pattern_problems
from graphs.engine.servers import parse_server, parse_servers

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


@dataclass
class ToolReading:
    """One tool as read, problems or not: its graph (the nodes that could be read), where
    each node is written, and each node compiled (None where its expression failed)."""

    position: int
    graph: ToolGraph
    layouts: list[NodeLayout]
    compiled: list[CompiledNode | None]
    ok: bool  # no problem found in this tool


@dataclass
class DefinitionReading:
    """A whole definition as read: what parse_definition builds, every problem found, and
    each tool's reading (validation goes on from there). ``document`` is the definition in
    the nested form."""

    document: Mapping[str, Any]
    findings: list[Finding] = field(default_factory=list)
    version: str = ""
    server: ServerInfo = field(default_factory=lambda: ServerInfo("", ""))
    limits: ExecutionLimits = field(default_factory=ExecutionLimits)
    servers: dict[str, ServerConfig] = field(default_factory=dict)
    tools: list[ToolReading] = field(default_factory=list)

    def definition(self) -> GraphDefinition:
        """The definition, when no problem was found."""
        if self.findings:
            raise DefinitionError([each.text for each in self.findings])
        graphs = tuple(tool.graph for tool in self.tools if tool.ok)
        return GraphDefinition(self.version, self.server, self.limits, self.servers, graphs)


def parse_definition(source: str | Mapping[str, Any]) -> GraphDefinition:
    """A whole definition, from YAML text or an already-loaded mapping; DefinitionError if any
    part of it is wrong."""
    raw = load_yaml(source) if isinstance(source, str) else source
    return read_definition(raw).definition()


def read_definition(raw: Any, *, budget: ParseBudget | None = None) -> DefinitionReading:
    """Read a loaded definition (either file form) and check all of it, without raising:
    parse_definition's work, kept for validation. ``budget`` bounds the JSONata parsed."""
    if not isinstance(raw, Mapping):
        text = (
            "the definition must be a mapping with version, server and tools; "
            f"got {type(raw).__name__}"
        )
        return DefinitionReading({}, [Finding(text, (error("not_a_mapping", text, ()),))])
    nested, found = nested_form_findings(raw)
    reading = DefinitionReading(nested, found)
    found += _unknown_keys(nested, _TOP_KEYS, "the definition", ())
    reading.version = _text(nested, "version", "field 'version'", found, ("version",))
    reading.server = _server_info(nested.get("server"), found)
    reading.limits = _limits(nested.get("executionLimits"), found)
    reading.servers = _servers(nested.get("mcpServers"), found)
    declared = (
        list(map(str, nested["mcpServers"]))
        if isinstance(nested.get("mcpServers"), Mapping)
        else []
    )
    raw_tools = nested.get("tools")
    if not isinstance(raw_tools, list) or not raw_tools:
        found.append(
            finding(
                "missing_field" if raw_tools is None else "invalid_field",
                "field 'tools'",
                "must be a list of at least one tool",
                ("tools",) if raw_tools is not None else (),
            )
        )
        raw_tools = []
    for position, raw_tool in enumerate(raw_tools):
        tool = _tool(raw_tool, declared, found, f"#{position + 1}", position, budget)
        if tool is not None:
            reading.tools.append(tool)
    names = [tool.graph.name for tool in reading.tools if tool.ok]
    for name in sorted(set(names)):
        if names.count(name) > 1:
            text = (
                f"{located(name)}: {names.count(name)} tools have this name; tool names must "
                "be unique"
            )
            again = [tool.position for tool in reading.tools if tool.ok and tool.graph.name == name]
            found.append(
                Finding(
                    text,
                    tuple(
                        error("duplicate_tool_name", text, ("tools", at, "name"))
                        for at in again[1:]
                    ),
                )
            )
    return reading


def parse_tool(raw: Mapping[str, Any], *, server_names: Collection[str]) -> ToolGraph:
    """One tool mapping (name, description, inputSchema, outputSchema, nodes), checked as in
    a whole definition; ``server_names`` are the servers its mcp nodes may call."""
    found: list[Finding] = []
    tool = _tool(raw, list(server_names), found, "#1", None, None)
    if found or tool is None:
        raise DefinitionError([each.text for each in found])
    return tool.graph


def _tool(
    raw: Any,
    servers: list[str],
    found: list[Finding],
    label: str,
    position: int | None,
    budget: ParseBudget | None,
) -> ToolReading | None:
    at: Keys = () if position is None else ("tools", position)
    if not isinstance(raw, Mapping):
        found.append(
            finding(
                "invalid_tool",
                f"tool {label}",
                f"must be a mapping with {', '.join(_TOOL_KEYS)}",
                at,
            )
        )
        return None
    start = len(found)
    name = raw.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        found.append(
            finding(
                "invalid_tool_name" if name is not None else "missing_field",
                f"tool {label}, field 'name'",
                f"{name!r} is not a tool name; MCP tool names have 1 to 128 letters, digits, "
                "underscores, hyphens and dots",
                (*at, "name") if name is not None else at,
                fix=_tool_name_fix(name, at),
            )
        )
        name = label
    found += _unknown_keys(raw, _TOOL_KEYS, located(name), at)
    description = _text(
        raw, "description", located(name, field="description"), found, (*at, "description"), ""
    )
    input_schema = _schema(raw, "inputSchema", name, found, at)
    output_schema = _schema(raw, "outputSchema", name, found, at)
    raw_nodes = raw.get("nodes")
    if not isinstance(raw_nodes, list):
        found.append(
            finding(
                "missing_field" if raw_nodes is None else "invalid_field",
                located(name, field="nodes"),
                "must be a list of nodes",
                (*at, "nodes") if raw_nodes is not None else at,
            )
        )
        raw_nodes = []
    nodes: list[Node] = []
    layouts: list[NodeLayout] = []
    for index, item in enumerate(raw_nodes):
        read = _node(item, name, servers, found, (*at, "nodes", index), index)
        if read is not None:
            nodes.append(read[0])
            layouts.append(read[1])
    tool = ToolGraph(name, description, input_schema or {}, output_schema, tuple(nodes))
    found += graph_findings(tool, layouts, at)
    compiled, problems = compile_nodes(tool, layouts, budget=budget)
    found += problems
    return ToolReading(position or 0, tool, layouts, compiled, len(found) == start)


def _tool_name_fix(name: Any, at: Keys) -> list[dict[str, Any]] | None:
    if not isinstance(name, str) or not name.strip():
        return None
    usable = re.sub(r"[^A-Za-z0-9_.-]+", "_", name.strip())[:128]
    return [op_replace((*at, "name"), usable)]


def _node(
    raw: Any, tool: str, servers: list[str], found: list[Finding], at: Keys, position: int
) -> tuple[Node, NodeLayout] | None:
    """A node as written; the checks of its fields' values are ``graph_findings``'s."""
    node_id = raw.get("id") if isinstance(raw, Mapping) else None
    if not isinstance(node_id, str):
        found.append(
            finding(
                "invalid_node",
                located(tool, field=f"nodes[{position}]"),
                "a node must be a mapping with a string `id` and a `type`",
                at,
            )
        )
        return None
    node_type = raw.get("type")
    if node_type in NODE_TYPES:
        found += _unknown_keys(
            raw, _NODE_KEYS[node_type], located(tool, node_id), at, node_type, node_id
        )
    fields: dict[str, Any] = {"next": raw.get("next")}
    layout = NodeLayout(at)
    if node_type in ("entry", "exit") and raw.get("tool", tool) != tool:
        found.append(
            finding(
                "node_tool_mismatch",
                located(tool, node_id, "tool"),
                f"names tool {raw['tool']!r}, but the node is in tool {tool!r}; remove the key "
                "or move the node",
                (*at, "tool"),
                node=node_id,
            )
        )
    elif node_type == "mcp":
        fields.update(_call_fields(raw, tool, node_id, servers, found, at))
    elif node_type == "transform":
        transform = raw.get("transform")
        if isinstance(transform, Mapping):
            found += _unknown_keys(
                transform,
                ("expr",),
                located(tool, node_id, "transform"),
                (*at, "transform"),
                node=node_id,
            )
            fields["expr"] = transform.get("expr")
        else:
            found.append(
                finding(
                    "missing_field" if transform is None else "invalid_field",
                    located(tool, node_id, "transform"),
                    "must be a mapping with `expr`, as in transform: {expr: '$.entry'}",
                    (*at, "transform") if transform is not None else at,
                    node=node_id,
                )
            )
    elif node_type == "switch":
        switch_fields, layout = _switch_fields(raw, tool, node_id, found, at)
        fields.update(switch_fields)
    return Node(node_id, node_type, **fields), layout


def _call_fields(
    raw: Mapping[str, Any],
    tool: str,
    node_id: str,
    servers: list[str],
    found: list[Finding],
    at: Keys,
) -> dict[str, Any]:
    server = raw.get("server")
    if isinstance(server, str) and server not in servers:
        defined = f"defined servers: {', '.join(servers)}" if servers else "mcpServers is empty"
        close = difflib.get_close_matches(server, servers, n=1)
        found.append(
            finding(
                "unknown_server",
                located(tool, node_id, "server"),
                f"unknown server {server!r}; {defined}",
                (*at, "server"),
                node=node_id,
                fix=[op_replace((*at, "server"), close[0])] if close else None,
            )
        )
    retry = raw.get("retry", {})
    if isinstance(retry, Mapping):
        found += _unknown_keys(
            retry,
            ("count", "backoff"),
            located(tool, node_id, "retry"),
            (*at, "retry"),
            node=node_id,
        )
        policy = RetryPolicy(retry.get("count", 0), retry.get("backoff", 0.5))
    else:
        found.append(
            finding(
                "invalid_field",
                located(tool, node_id, "retry"),
                "must be a mapping of count, backoff",
                (*at, "retry"),
                node=node_id,
            )
        )
        policy = RetryPolicy()
    return {
        "server": server,
        "tool": raw.get("tool"),
        "args": {} if raw.get("args") is None else copy.deepcopy(raw["args"]),
        "timeout_seconds": raw.get("timeout"),
        "retry": policy,
    }


def _switch_fields(
    raw: Mapping[str, Any], tool: str, node_id: str, found: list[Finding], at: Keys
) -> tuple[dict[str, Any], NodeLayout]:
    raw_conditions = raw.get("conditions", [])
    default = raw.get("default")
    default_at: Keys = ("default",)
    if not isinstance(raw_conditions, list):
        found.append(
            finding(
                "invalid_field",
                located(tool, node_id, "conditions"),
                "must be a list of {rule, target}",
                (*at, "conditions"),
                node=node_id,
            )
        )
        raw_conditions = []
    conditions = []
    positions = []
    for index, item in enumerate(raw_conditions):
        where = located(tool, node_id, f"conditions[{index}]")
        item_at = (*at, "conditions", index)
        if not isinstance(item, Mapping):
            found.append(
                finding(
                    "invalid_condition",
                    where,
                    "must be a mapping with `rule` and `target`",
                    item_at,
                    node=node_id,
                )
            )
            continue
        found += _unknown_keys(item, ("rule", "target"), where, item_at, node=node_id)
        if "rule" in item:
            target = item.get("target")
            if target is None:
                found.append(
                    finding(
                        "missing_field",
                        where,
                        "missing `target`; give the id of the node to go to when the rule holds",
                        item_at,
                        node=node_id,
                    )
                )
                continue
            conditions.append(Condition(copy.deepcopy(item["rule"]), target))
            positions.append(index)
        elif index == len(raw_conditions) - 1 and default is None:
            default = item.get("target")  # the reference implementation's fallback form
            default_at = ("conditions", index, "target")
        else:
            found.append(
                finding(
                    "invalid_condition",
                    where,
                    "a condition without `rule` is the fallback, so it must come last and the "
                    "switch must not also have `default`",
                    item_at,
                    node=node_id,
                )
            )
    layout = NodeLayout(at, tuple(positions), default_at)
    return {"conditions": tuple(conditions), "default": default}, layout


def _server_info(raw: Any, found: list[Finding]) -> ServerInfo:
    if not isinstance(raw, Mapping):
        found.append(
            finding(
                "missing_field" if raw is None else "invalid_field",
                "field 'server'",
                "must be a mapping with name and version",
                ("server",) if raw is not None else (),
            )
        )
        return ServerInfo("", "")
    found += _unknown_keys(raw, _SERVER_INFO_KEYS, "field 'server'", ("server",))
    texts = {
        key: _text(
            raw,
            key,
            f"field 'server.{key}'",
            found,
            ("server", key),
            None if key in ("name", "version") else "",
        )
        for key in _SERVER_INFO_KEYS
    }
    return ServerInfo(**texts)


def _limits(raw: Any, found: list[Finding]) -> ExecutionLimits:
    if raw is None:
        return ExecutionLimits()
    if not isinstance(raw, Mapping):
        found.append(
            finding(
                "invalid_field",
                "field 'executionLimits'",
                "must be a mapping",
                ("executionLimits",),
            )
        )
        return ExecutionLimits()
    found += _unknown_keys(raw, tuple(_LIMIT_KEYS), "field 'executionLimits'", ("executionLimits",))
    values = {}
    for key, name in _LIMIT_KEYS.items():
        if key in raw:
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                found.append(
                    finding(
                        "invalid_limit",
                        f"field 'executionLimits.{key}'",
                        f"must be a whole number above 0, got {value!r}",
                        ("executionLimits", key),
                    )
                )
            else:
                values[name] = value
    return ExecutionLimits(**values)


def _servers(raw: Any, found: list[Finding]) -> dict[str, ServerConfig]:
    """``mcpServers`` as parse_servers reads it, each problem pointing at its server."""
    if not isinstance(raw, Mapping):
        texts: list[str] = []
        servers = parse_servers(raw, texts)
        found += [Finding(text, (error("invalid_field", text, ("mcpServers",)),)) for text in texts]
        return servers
    servers = {}
    for name, settings in raw.items():
        texts = []
        server = parse_server(str(name), settings, texts)
        at = ("mcpServers", str(name))
        found += [Finding(text, (error("invalid_server", text, at),)) for text in texts]
        if server is not None:
            servers[server.name] = server
    return servers


def _schema(
    raw: Mapping[str, Any], key: str, tool: str, found: list[Finding], at: Keys
) -> dict[str, Any] | None:
    """An input or output schema: a JSON Schema of an object (the MCP requirement)."""
    schema = raw.get(key)
    if schema is None and key == "outputSchema":
        return None
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        fix = None
        if schema is None:
            fix = [op_add((*at, key), {"type": "object", "properties": {}})]
        elif (
            isinstance(schema, Mapping)
            and "type" not in schema
            and set(schema)
            <= {
                "properties",
                "required",
                "additionalProperties",
                "description",
                "title",
            }
        ):
            fix = [op_add((*at, key, "type"), "object")]
        found.append(
            finding(
                "invalid_schema",
                located(tool, field=key),
                "must be a JSON Schema of an object, as in {type: object, properties: {...}}",
                (*at, key) if schema is not None else at,
                fix=fix,
            )
        )
        return None
    found += [
        finding("regex_refused", located(tool, field=key), problem, (*at, key))
        for problem in schema_pattern_problems(schema)
    ]
    return copy.deepcopy(dict(schema))


def _text(
    raw: Mapping[str, Any],
    key: str,
    where: str,
    found: list[Finding],
    at: Keys,
    default: str | None = None,
) -> str:
    """A string field; numbers are read as text (YAML reads version: 1.0 as a number)."""
    value = raw.get(key, default)
    if value is None:
        fix = None
        if at == ("version",):
            fix = [op_add(at, "1.0")]
        elif at == ("server", "version"):
            fix = [op_add(at, "1.0.0")]
        found.append(finding("missing_field", where, "missing", at[:-1], fix=fix))
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        found.append(finding("invalid_field", where, f"must be a string, got {value!r}", at))
        return ""
    return value


def _unknown_keys(
    raw: Mapping[str, Any],
    allowed: tuple[str, ...],
    where: str,
    at: Keys,
    kind: str | None = None,
    node: str | None = None,
) -> list[Finding]:
    """One finding for the unknown keys of a mapping (as imports have always said it), with
    a problem for each key: moved to the allowed key it is close to, else removed."""
    unknown = [str(key) for key in raw if key not in allowed]
    if not unknown:
        return []
    owner = f"a {kind} node" if kind else "it"
    text = f"{where}: unknown key(s) {', '.join(unknown)}; {owner} allows {', '.join(allowed)}"
    problems = []
    for key in unknown:
        close = [
            name
            for name in difflib.get_close_matches(key, allowed, n=1, cutoff=0.7)
            if name not in raw
        ]
        if close:
            hint = f"did you mean {close[0]!r}? "
            fix = [op_move((*at, key), (*at, close[0]))]
        else:
            hint = "remove it; "
            fix = [op_remove((*at, key))]
        message = f"{where}: unknown key {key!r}; {hint}{owner} allows {', '.join(allowed)}"
        problems.append(error("unknown_key", message, (*at, key), node=node, fix=fix))
    return [Finding(text, tuple(problems))]
