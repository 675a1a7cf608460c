"""The structure of a tool's graph: ids, node types, required fields and edges.

These checks need nothing but the ``ToolGraph``, so they run both when a definition is parsed
and when a tool built some other way is compiled.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from typing import TypeGuard

from graphs.engine.definition import NODE_TYPES, Node, ToolGraph
from graphs.engine.errors import located

# Ids are read in expressions as $.id: letters, digits and underscores only, and not the
# JSONata literals, which cannot be a step of a path.
_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESERVED_IDS = ("true", "false", "null")
_REQUIRED = {
    "entry": ("next",),
    "mcp": ("server", "tool", "next"),
    "transform": ("expr", "next"),
    "switch": (),
    "exit": (),
}
_FIELD_NAMES = {"expr": "transform.expr"}  # where a Node field is written in YAML


def graph_problems(tool: ToolGraph) -> list[str]:
    """Every structural problem of the tool's graph, each naming tool, node and field."""
    problems: list[str] = []
    for node in tool.nodes:
        problems += _node_problems(tool.name, node)
    for node_id, count in Counter(node.id for node in tool.nodes).items():
        if count > 1:
            problems.append(
                f"{located(tool.name, node_id, 'id')}: {count} nodes have this id; "
                "ids must be unique within a tool"
            )
    entries = _ids_of_type(tool, "entry")
    for node_type, ids in (("entry", entries), ("exit", _ids_of_type(tool, "exit"))):
        if len(ids) != 1:
            found = (
                f"{len(ids)} {node_type} nodes ({', '.join(ids)})"
                if ids
                else f"no {node_type} node"
            )
            problems.append(
                f"{located(tool.name)}: {found}; a tool has exactly one node with "
                f"`type: {node_type}`"
            )
    problems += _target_problems(tool)
    if len(entries) == 1:
        problems += _unreachable_problems(tool, entries[0])
    return problems


def _node_problems(tool: str, node: Node) -> list[str]:
    problems = []
    if not _ID.fullmatch(node.id) or node.id in _RESERVED_IDS:
        suggestion = re.sub(r"\W", "_", node.id)
        if not _ID.fullmatch(suggestion) or suggestion in _RESERVED_IDS:
            suggestion = f"n_{suggestion}"
        problems.append(
            f"{located(tool, node.id, 'id')}: expressions read a node's output as $.id, so an "
            "id may hold only letters, digits and underscores, must not start with a digit "
            f"and must not be true, false or null; try {suggestion!r}"
        )
    if node.type not in NODE_TYPES:
        what = "missing" if node.type is None else f"unknown node type {node.type!r}"
        problems.append(
            f"{located(tool, node.id, 'type')}: {what}; use one of {', '.join(NODE_TYPES)}"
        )
        return problems
    for name in _REQUIRED[node.type]:
        if getattr(node, name) is None:
            problems.append(
                f"{located(tool, node.id, _FIELD_NAMES.get(name, name))}: missing; "
                f"a {node.type} node needs it"
            )
    for field, value in _strings(node):
        if not isinstance(value, str):
            problems.append(f"{located(tool, node.id, field)}: must be a string, got {value!r}")
    if node.type == "switch" and not node.conditions and node.default is None:
        problems.append(
            f"{located(tool, node.id, 'conditions')}: a switch needs at least one condition "
            "or a `default` target"
        )
    if node.type == "mcp":
        problems += _call_problems(tool, node)
    return problems


def _strings(node: Node) -> list[tuple[str, object]]:
    """The (field, value) pairs of a node that must be strings when they are set."""
    fields = [("next", node.next), ("server", node.server), ("tool", node.tool)]
    fields += [("transform.expr", node.expr), ("default", node.default)]
    fields += [(field, target) for field, target in node.targets() if field.startswith("cond")]
    return [(field, value) for field, value in fields if value is not None]


def _call_problems(tool: str, node: Node) -> list[str]:
    """Problems of an mcp node's args, timeout and retry."""
    problems = []
    args = node.args
    if not (isinstance(args, dict) or (isinstance(args, str) and args.startswith("$"))):
        problems.append(
            f"{located(tool, node.id, 'args')}: must be an object of the tool's arguments "
            f"(values may be expressions), or one expression giving that object; got {args!r}"
        )
    if node.timeout_seconds is not None and not _positive(node.timeout_seconds):
        problems.append(
            f"{located(tool, node.id, 'timeout')}: must be a positive number of seconds"
        )
    retry = node.retry
    if not (isinstance(retry.count, int) and _non_negative(retry.count)):
        problems.append(
            f"{located(tool, node.id, 'retry.count')}: must be a whole number, 0 or more"
        )
    if not _non_negative(retry.backoff_seconds):
        problems.append(
            f"{located(tool, node.id, 'retry.backoff')}: must be a number of seconds, 0 or more"
        )
    return problems


def _positive(value: object) -> bool:
    return _non_negative(value) and value > 0


def _non_negative(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _ids_of_type(tool: ToolGraph, node_type: str) -> list[str]:
    return [node.id for node in tool.nodes if node.type == node_type]


def _target_problems(tool: ToolGraph) -> list[str]:
    known = [node.id for node in tool.nodes]
    problems = []
    for node in tool.nodes:
        for field, target in node.targets():
            if isinstance(target, str) and target not in known:
                close = difflib.get_close_matches(target, known, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                problems.append(
                    f"{located(tool.name, node.id, field)}: no node {target!r} in this tool; "
                    f"{hint}nodes: {', '.join(known)}"
                )
    return problems


def _unreachable_problems(tool: ToolGraph, entry: str) -> list[str]:
    by_id = {node.id: node for node in tool.nodes}
    reached, pending = {entry}, [entry]
    while pending:
        for _, target in by_id[pending.pop()].targets():
            if isinstance(target, str) and target in by_id and target not in reached:
                reached.add(target)
                pending.append(target)
    return [
        f"{located(tool.name, node.id)}: unreachable from the entry node {entry!r}; point a "
        "`next`, a switch target or a `default` at it, or remove it"
        for node in tool.nodes
        if node.id not in reached
    ]
