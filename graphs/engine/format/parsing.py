"""Reading a definition in the graph YAML format of seed 003, and checking all of it.

Everything that can be known before a run is checked here, and every problem is reported at
once (``DefinitionError.problems``), each naming the tool, node and field: unknown keys (with
the keys allowed), missing or duplicate entry and exit nodes, targets that do not exist,
unreachable nodes, unknown servers, JSONata that does not parse, JSON Logic rules that are
not objects or use unknown operators, unusable node ids, bad limits, an exit whose value
certainly breaks the outputSchema (graphs/engine/exit_values.py).

A switch may give its fallback as ``default: id`` or, as the reference implementation does,
as a last condition without a ``rule``; both read to ``Node.default``. Entry and exit nodes
may carry a ``tool`` key naming their own tool, as older files of the format do; such a file
may hold all its nodes in one top-level ``nodes`` list (flat_form.py).

``read_definition`` does the work without raising: each problem is a ``Finding``, its text what
``DefinitionError`` lists and its structured problems what validation answers
(graphs/engine/checks/all_checks.py goes on from the reading). The sections around the tools are
sections.py's; a graph's structure is graphs/engine/checks/structure.py's, its expressions
graphs/engine/compiler.py's.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from graphs.engine.checks.problems import (
    Finding,
    Keys,
    error,
    finding,
    op_replace,
)
from graphs.engine.checks.structure import NodeLayout, graph_findings
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
from graphs.engine.exit_values import exit_findings
from graphs.engine.format.approval_reading import read_approval
from graphs.engine.format.flat_form import nested_form_findings
from graphs.engine.format.loading import load_yaml
from graphs.engine.format.sections import (
    read_limits,
    read_schema,
    read_server_info,
    read_servers,
    read_text,
    unknown_keys,
)
from graphs.engine.language.expressions import ParseBudget

_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_TOP_KEYS = ("version", "server", "executionLimits", "mcpServers", "tools")
_TOOL_KEYS = ("name", "description", "inputSchema", "outputSchema", "nodes")
_NODE_KEYS = {
    "entry": ("id", "type", "next", "tool"),
    "exit": ("id", "type", "tool"),
    "mcp": ("id", "type", "server", "tool", "args", "next", "timeout", "retry"),
    "transform": ("id", "type", "transform", "next"),
    "switch": ("id", "type", "conditions", "default"),
    "approval": ("id", "type", "message", "approvers", "form", "timeoutMs", "routes"),
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
    found += unknown_keys(nested, _TOP_KEYS, "the definition", ())
    reading.version = read_text(nested, "version", "field 'version'", found, ("version",))
    reading.server = read_server_info(nested.get("server"), found)
    reading.limits = read_limits(nested.get("executionLimits"), found)
    reading.servers = read_servers(nested.get("mcpServers"), found)
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
    named: dict[str, list[int]] = {}  # each tool name -> the positions of its tools
    for tool in reading.tools:
        if tool.ok:
            named.setdefault(tool.graph.name, []).append(tool.position)
    for name, positions in sorted(named.items()):
        if len(positions) > 1:
            text = (
                f"{located(name)}: {len(positions)} tools have this name; tool names must be unique"
            )
            # One problem for each tool after the first: that is the one to rename.
            again = (
                error("duplicate_tool_name", text, ("tools", at, "name")) for at in positions[1:]
            )
            found.append(Finding(text, tuple(again)))
    return reading


def parse_tool(
    raw: Mapping[str, Any], *, server_names: Collection[str], exit_value_checked: bool = True
) -> ToolGraph:
    """One tool mapping (name, description, inputSchema, outputSchema, nodes), checked as in
    a whole definition; ``server_names`` are the servers its mcp nodes may call.

    ``exit_value_checked`` False leaves out the refusal of an exit value certainly breaking
    the outputSchema, for a version saved before that refusal: it still runs, each of its
    results checked at its exit (a branch that never returns such a value keeps working)."""
    found: list[Finding] = []
    tool = _tool(raw, list(server_names), found, "#1", None, None, exit_value_checked)
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
    exit_value_checked: bool = True,
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
    found += unknown_keys(raw, _TOOL_KEYS, located(name), at)
    description = read_text(
        raw, "description", located(name, field="description"), found, (*at, "description"), ""
    )
    input_schema = read_schema(raw, "inputSchema", name, found, at)
    output_schema = read_schema(raw, "outputSchema", name, found, at)
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
    if exit_value_checked:
        found += exit_findings(tool, layouts, compiled)
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
        found += unknown_keys(
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
            found += unknown_keys(
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
    elif node_type == "approval":
        approval_fields, unread = read_approval(raw, tool, node_id, found, at)
        fields.update(approval_fields)
        layout = NodeLayout(at, unread=unread)
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
        found += unknown_keys(
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
        found += unknown_keys(item, ("rule", "target"), where, item_at, node=node_id)
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
