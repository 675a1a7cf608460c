"""The structure of a tool's graph: ids, node types, required fields and edges.

These checks need nothing but the ``ToolGraph``, so they run both when a definition is parsed
and when a tool built some other way is compiled. Each problem is a ``Finding``: the text an
import reports, and the structured problem validation reports, with a JSON Pointer found
through the ``NodeLayout`` of each node (where parsing found it in the document).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from graphs.engine.checks.approval_nodes import approval_findings
from graphs.engine.checks.paths import reachable
from graphs.engine.checks.problems import Finding, Keys, error, finding, op_add, op_replace
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
    "approval": (),  # its message is approval_findings's: it says how to write one
    "exit": (),
}
_FIELD_NAMES = {"expr": "transform.expr"}  # where a Node field is written in YAML
_INDEXED = re.compile(r"(\w+)\[(\d+)\]")


@dataclass(frozen=True)
class NodeLayout:
    """Where a node is written in the (nested) document: ``at`` is its pointer's keys,
    ``conditions`` the index in the written list of each of its parsed conditions, and
    ``default`` where its default target is written (a last condition without `rule` is
    the reference implementation's way of giving it). ``unread`` are fields parsing could
    not read and has reported (an approval's `routes` that is not a mapping), which the
    checks of their contents then leave alone."""

    at: Keys
    conditions: tuple[int, ...] = ()
    default: Keys = ("default",)
    unread: frozenset[str] = frozenset()

    def keys(self, field: str | None) -> Keys:
        """The pointer keys of a field named as the messages name it: ``next``,
        ``transform.expr``, ``conditions[0].target``, ``retry.count``..."""
        if field is None:
            return self.at
        if field == "default":
            return (*self.at, *self.default)
        keys: list[str | int] = [*self.at]
        for part in field.split("."):
            indexed = _INDEXED.fullmatch(part)
            if indexed is None:
                keys.append(part)
                continue
            name, index = indexed.group(1), int(indexed.group(2))
            if name == "conditions" and index < len(self.conditions):
                index = self.conditions[index]
            keys += [name, index]
        return tuple(keys)


def default_layouts(tool: ToolGraph, at: Keys = ()) -> list[NodeLayout]:
    """Layouts for a tool built in code: its nodes in order, as written by tool_to_dict."""
    return [
        NodeLayout((*at, "nodes", index), tuple(range(len(node.conditions))))
        for index, node in enumerate(tool.nodes)
    ]


def graph_problems(tool: ToolGraph) -> list[str]:
    """Every structural problem of the tool's graph, each naming tool, node and field."""
    return [found.text for found in graph_findings(tool)]


def graph_findings(
    tool: ToolGraph, layouts: Sequence[NodeLayout] | None = None, at: Keys = ()
) -> list[Finding]:
    """The structural problems of the tool's graph; ``at`` is the tool's keys in the
    document and ``layouts`` where each of its nodes is written."""
    layouts = default_layouts(tool, at) if layouts is None else layouts
    found: list[Finding] = []
    for node, layout in zip(tool.nodes, layouts, strict=True):
        found += _node_findings(tool, node, layout, layouts)
    written: dict[str, list[NodeLayout]] = {}
    for node, layout in zip(tool.nodes, layouts, strict=True):
        written.setdefault(node.id, []).append(layout)
    for node_id, same in written.items():
        if len(same) > 1:
            where = located(tool.name, node_id, "id")
            text = f"{where}: {len(same)} nodes have this id; ids must be unique within a tool"
            # One problem for each node after the first: that is the one to rename.
            again = [
                error(
                    "duplicate_node_id",
                    f"{text}; rename this one and the targets meant for it",
                    layout.keys("id"),
                    node=node_id,
                )
                for layout in same[1:]
            ]
            found.append(Finding(text, tuple(again)))
    entries = _ids_of_type(tool, "entry")
    for node_type, ids in (("entry", entries), ("exit", _ids_of_type(tool, "exit"))):
        if len(ids) != 1:
            how_many = (
                f"{len(ids)} {node_type} nodes ({', '.join(ids)})"
                if ids
                else f"no {node_type} node"
            )
            found.append(
                finding(
                    f"{node_type}_count",
                    located(tool.name),
                    f"{how_many}; a tool has exactly one node with `type: {node_type}`",
                    (*at, "nodes"),
                    fix=_add_exit(tool, at) if node_type == "exit" and not ids else None,
                )
            )
    found += _target_findings(tool, layouts)
    if len(entries) == 1:
        found += _unreachable_findings(tool, entries[0], layouts)
    return found


def _add_exit(tool: ToolGraph, at: Keys) -> list[dict[str, Any]] | None:
    """A tool without an exit whose edges already name one missing node: add that node as
    the exit (likely what was meant: `next: exit` written, the node forgotten)."""
    known = {node.id for node in tool.nodes}
    missing = {
        target
        for node in tool.nodes
        for _, target in node.targets()
        if isinstance(target, str) and target not in known and _ID.fullmatch(target)
    }
    if len(missing) != 1:
        return None
    return [op_add((*at, "nodes", "-"), {"id": missing.pop(), "type": "exit"})]


def _node_findings(
    tool: ToolGraph, node: Node, layout: NodeLayout, layouts: Sequence[NodeLayout]
) -> list[Finding]:
    name = tool.name
    found = []
    if not _ID.fullmatch(node.id) or node.id in _RESERVED_IDS:
        suggestion = _usable_id(node.id, {other.id for other in tool.nodes})
        found.append(
            finding(
                "invalid_node_id",
                located(name, node.id, "id"),
                "expressions read a node's output as $.id, so an id may hold only letters, "
                "digits and underscores, must not start with a digit and must not be true, "
                f"false or null; try {suggestion!r}",
                layout.keys("id"),
                node=node.id,
                fix=_rename(tool, node.id, suggestion, layout, layouts),
            )
        )
    if node.type not in NODE_TYPES:
        what = "missing" if node.type is None else f"unknown node type {node.type!r}"
        close = (
            difflib.get_close_matches(node.type, NODE_TYPES, n=1)
            if isinstance(node.type, str)
            else []
        )
        found.append(
            finding(
                "unknown_node_type",
                located(name, node.id, "type"),
                f"{what}; use one of {', '.join(NODE_TYPES)}",
                layout.keys("type") if node.type is not None else layout.at,
                node=node.id,
                fix=[op_replace(layout.keys("type"), close[0])] if close else None,
            )
        )
        return found
    for field in _REQUIRED[node.type]:
        if getattr(node, field) is None:
            written = _FIELD_NAMES.get(field, field)
            found.append(
                finding(
                    "missing_field",
                    located(name, node.id, written),
                    f"missing; a {node.type} node needs it",
                    layout.at,
                    node=node.id,
                )
            )
    found += [
        _invalid(name, node, layout, field, f"must be a string, got {value!r}")
        for field, value in _strings(node)
        if not isinstance(value, str)
    ]
    if node.type == "switch" and not node.conditions and node.default is None:
        found.append(
            finding(
                "switch_empty",
                located(name, node.id, "conditions"),
                "a switch needs at least one condition or a `default` target",
                layout.at,
                node=node.id,
            )
        )
    if node.type == "mcp":
        found += _call_findings(name, node, layout)
    if node.type == "approval":
        found += approval_findings(name, node, layout.keys, layout.unread)
    return found


def _usable_id(node_id: str, taken: set[str]) -> str:
    suggestion = re.sub(r"\W", "_", node_id)
    if not _ID.fullmatch(suggestion) or suggestion in _RESERVED_IDS:
        suggestion = f"n_{suggestion}"
    candidate, number = suggestion, 1
    while candidate in taken:  # the rename must not make a duplicate
        number += 1
        candidate = f"{suggestion}_{number}"
    return candidate


def _rename(
    tool: ToolGraph, old: str, new: str, layout: NodeLayout, layouts: Sequence[NodeLayout]
) -> list[dict[str, Any]] | None:
    """Rename a node and every edge pointing at it: all in one patch, so that it does not
    trade the bad id for targets naming no node. None when two nodes share the id."""
    if sum(node.id == old for node in tool.nodes) != 1:
        return None
    fix = [op_replace(layout.keys("id"), new)]
    for node, where in zip(tool.nodes, layouts, strict=True):
        fix += [
            op_replace(where.keys(field), new) for field, target in node.targets() if target == old
        ]
    return fix


def _strings(node: Node) -> list[tuple[str, object]]:
    """The (field, value) pairs of a node that must be strings when they are set."""
    fields = [("next", node.next), ("server", node.server), ("tool", node.tool)]
    fields += [("transform.expr", node.expr), ("default", node.default)]
    fields += [
        (field, target) for field, target in node.targets() if field.startswith(("cond", "routes."))
    ]
    return [(field, value) for field, value in fields if value is not None]


def _call_findings(tool: str, node: Node, layout: NodeLayout) -> list[Finding]:
    """Problems of an mcp node's args, timeout and retry."""
    found = []
    args = node.args
    if not (isinstance(args, dict) or (isinstance(args, str) and args.startswith("$"))):
        found.append(
            _invalid(
                tool,
                node,
                layout,
                "args",
                "must be an object of the tool's arguments (values may be expressions), or "
                f"one expression giving that object; got {args!r}",
            )
        )
    if node.timeout_seconds is not None and not _positive(node.timeout_seconds):
        found.append(
            _invalid(tool, node, layout, "timeout", "must be a positive number of seconds")
        )
    retry = node.retry
    if not (isinstance(retry.count, int) and _non_negative(retry.count)):
        found.append(
            _invalid(tool, node, layout, "retry.count", "must be a whole number, 0 or more")
        )
    if not _non_negative(retry.backoff_seconds):
        found.append(
            _invalid(tool, node, layout, "retry.backoff", "must be a number of seconds, 0 or more")
        )
    return found


def _invalid(tool: str, node: Node, layout: NodeLayout, field: str, message: str) -> Finding:
    """An ``invalid_field`` finding: the field named once, for both the text and the pointer."""
    return finding(
        "invalid_field",
        located(tool, node.id, field),
        message,
        layout.keys(field),
        node=node.id,
    )


def _positive(value: object) -> bool:
    return _non_negative(value) and value > 0


def _non_negative(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _ids_of_type(tool: ToolGraph, node_type: str) -> list[str]:
    return [node.id for node in tool.nodes if node.type == node_type]


def _target_findings(tool: ToolGraph, layouts: Sequence[NodeLayout]) -> list[Finding]:
    known = [node.id for node in tool.nodes]
    ids = set(known)  # membership in a list would make a long tool quadratic
    found = []
    for node, layout in zip(tool.nodes, layouts, strict=True):
        for field, target in node.targets():
            if isinstance(target, str) and target not in ids:
                close = difflib.get_close_matches(target, known, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                found.append(
                    finding(
                        "unknown_target",
                        located(tool.name, node.id, field),
                        f"no node {target!r} in this tool; {hint}nodes: {', '.join(known)}",
                        layout.keys(field),
                        node=node.id,
                        fix=[op_replace(layout.keys(field), close[0])] if close else None,
                    )
                )
    return found


def _unreachable_findings(
    tool: ToolGraph, entry: str, layouts: Sequence[NodeLayout]
) -> list[Finding]:
    edges = {
        node.id: [target for _, target in node.targets() if isinstance(target, str)]
        for node in tool.nodes
    }
    reached = reachable([entry], edges)
    return [
        finding(
            "unreachable_node",
            located(tool.name, node.id),
            f"unreachable from the entry node {entry!r}; point a `next`, a switch target, a "
            "`default` or an approval's route at it, or remove it",
            layout.at,
            node=node.id,
        )
        for node, layout in zip(tool.nodes, layouts, strict=True)
        if node.id not in reached
    ]
