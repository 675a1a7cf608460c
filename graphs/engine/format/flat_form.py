"""The earlier file form of the graph format, read as the nested one.

mcpGraph's files first held one top-level `nodes` list for all of a file's tools, each entry
and exit node naming its tool with `tool:` (its repository's examples before the nested form).
The nested form gives each tool its own `nodes`. `nested_form` turns the first into the second:
each tool gets, in file order, the nodes reachable from its entry node. A node reachable
from several entries goes to each of those tools, and node ids stay as they are. What cannot
be split that way (a tool with no entry node or with two, a node no entry reaches, nodes given
both ways) is reported as a problem, in the words of the rest of the checks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from graphs.engine.checks.paths import reachable
from graphs.engine.checks.problems import Finding, finding
from graphs.engine.errors import located


def nested_form(raw: Mapping[str, Any]) -> tuple[Mapping[str, Any], list[str]]:
    """`raw` with its top-level `nodes` (if any) shared out among its tools, and the
    problems found doing so."""
    nested, found = nested_form_findings(raw)
    return nested, [each.text for each in found]


def nested_form_findings(raw: Mapping[str, Any]) -> tuple[Mapping[str, Any], list[Finding]]:
    """As `nested_form`, each problem a `Finding` pointing into the flat document. The
    nested tools hold the very node mappings of the top-level list (not copies), so a
    caller can tell where each came from."""
    if "nodes" not in raw:
        return raw, []
    flat = raw["nodes"]
    rest = {key: value for key, value in raw.items() if key != "nodes"}
    if not isinstance(flat, list):
        return rest, [
            finding(
                "invalid_field",
                "field 'nodes'",
                "must be a list of nodes (each entry and exit with tool:)",
                ("nodes",),
            )
        ]
    tools = raw.get("tools")
    if not isinstance(tools, list):
        return rest, []  # the nested form's own check says what tools must be
    if any(isinstance(tool, Mapping) and "nodes" in tool for tool in tools):
        return rest, [
            finding(
                "nodes_both_forms",
                "field 'nodes'",
                "give the nodes either at the top level (the earlier form, with tool: on each "
                "entry and exit node) or in each tool, not both",
                ("nodes",),
            )
        ]
    by_id = {
        node["id"]: node
        for node in flat
        if isinstance(node, Mapping) and isinstance(node.get("id"), str)
    }
    # Built once, so that sharing out takes time in proportion to the nodes each tool gets,
    # not to tools times nodes.
    position = {node_id: index for index, node_id in enumerate(by_id)}
    entries_of: dict[str, list[str]] = {}
    for node in by_id.values():
        # A tool is named by a string; anything else names none (and cannot be a dict key).
        if node.get("type") == "entry" and isinstance(node.get("tool"), str):
            entries_of.setdefault(node["tool"], []).append(node["id"])
    edges = {
        node_id: [target for target in _targets(node) if target in by_id]
        for node_id, node in by_id.items()
    }
    problems: list[Finding] = []
    reached: set[str] = set()
    nested_tools = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
            nested_tools.append(tool)
            continue
        name = tool["name"]
        entries = entries_of.get(name, [])
        if len(entries) != 1:
            problems.append(
                finding(
                    "entry_count",
                    located(name),
                    f"the top-level nodes hold {len(entries)} entry nodes with tool: {name}; "
                    "give it exactly one",
                    ("tools", index),
                )
            )
            nested_tools.append({**tool, "nodes": []})
            continue
        ids = reachable([entries[0]], edges)
        reached |= ids
        nodes = [by_id[node_id] for node_id in sorted(ids, key=position.__getitem__)]
        nested_tools.append({**tool, "nodes": nodes})
    written = {id(node): index for index, node in enumerate(flat)}
    for node_id in sorted(by_id.keys() - reached, key=position.__getitem__):
        problems.append(
            finding(
                "unreachable_node",
                f"field 'nodes', node {node_id!r}",
                "no tool's entry node leads to it; link it, or name its tool on the entry "
                "node that should",
                ("nodes", written[id(by_id[node_id])]),
                node=node_id,
            )
        )
    return {**rest, "tools": nested_tools}, problems


def _targets(node: Mapping[str, Any]) -> Iterator[str]:
    """The ids a node may go to next: `next`, each condition's `target`, `default`, an
    approval's `routes`."""
    for key in ("next", "default"):
        if isinstance(node.get(key), str):
            yield node[key]
    conditions = node.get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and isinstance(condition.get("target"), str):
            yield condition["target"]
    routes = node.get("routes")
    for target in routes.values() if isinstance(routes, Mapping) else ():
        if isinstance(target, str):
            yield target
