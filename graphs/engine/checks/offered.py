"""The values an expression of one node can read: what an editor offers an author as they
write a field. Plain Python.

A node's expressions read the outputs of nodes that can have run before it (``$.node``, and
the fields its output has). What each output holds is what validation already infers
(graphs/engine/checks/flow.py ``ToolContext.shape_of``): the entry's inputSchema, an `mcp`
node's tool outputSchema, a transform's inferred value, a switch's target, an approval's
decision. This module lists them as ready-to-write JSONata paths, bounded, so that a graph of
thousands of nodes or a schema of thousands of properties answers a short list.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from graphs.engine.checks.flow import ToolContext
from graphs.engine.language.expression_reads import Inferred, schema_types

#: The most values offered for one node, and how deep into an output's fields they go.
MAX_OFFERED = 200
MAX_FIELD_DEPTH = 3

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Plain names that JSONata reads as its literals: `$.node.true` does not parse.
_LITERALS = frozenset({"true", "false", "null"})
_ORIGINS = {
    "entry": "the workflow's arguments (its inputSchema)",
    "tool": "the tool's outputSchema",
    "transform": "the value the transform builds",
    "approval": "the approval's decision",
}


@dataclass(frozen=True)
class Offered:
    """One value a node's expression can read: the path to write, its JSON type(s) as the
    schema says ("" when it does not), its description, the node it comes from and where
    that node's shape was learnt."""

    path: str
    type: str
    description: str
    node: str
    origin: str

    def as_dict(self) -> dict[str, str]:
        """The value as JSON, for an editor."""
        return {
            "path": self.path,
            "type": self.type,
            "description": self.description,
            "node": self.node,
            "origin": self.origin,
        }


def path_step(name: str) -> str:
    """``name`` as one step of a JSONata path: bare when it is a plain name, else quoted in
    backticks (a node id or field with a dash or a space, or named like a literal). JSONata
    cannot quote a backtick: a field whose name holds one is not offered (``_fields``)."""
    if _NAME.match(name) and name not in _LITERALS:
        return name
    return "`" + name.replace("`", "") + "`"


def offered_values(context: ToolContext, node_id: str) -> list[Offered]:
    """What the expressions of node ``node_id`` can read, nodes in the order they are
    written, at most MAX_OFFERED; empty for a node the tool does not have."""
    if node_id not in context.index:
        return []
    offered: list[Offered] = []
    for earlier, _, _ in context.nodes:
        if not context.precedence.can_precede(earlier.id, node_id):
            continue
        shape = context.shape_of(earlier.id)
        for item in _values_of(earlier.id, shape):
            offered.append(item)
            if len(offered) >= MAX_OFFERED:
                return offered
    return offered


def _values_of(node_id: str, shape: Inferred | None) -> Iterator[Offered]:
    """The node's whole output, then its fields as far as its shape says."""
    origin = _ORIGINS.get(shape.origin, "") if shape is not None else "not known"
    schema = shape.schema if shape is not None else {}
    described = str(schema.get("description") or f"the output of {node_id!r}: {origin}")
    root = "$." + path_step(node_id)
    yield Offered(root, _types(schema), described, node_id, origin)
    yield from _fields(root, schema, node_id, origin, depth=1)


def _fields(
    prefix: str, schema: Mapping[str, Any], node_id: str, origin: str, *, depth: int
) -> Iterator[Offered]:
    # JSONata maps a path over an array: a field of the items is read as a field of it.
    while isinstance(schema, Mapping) and schema_types(schema) == {"array"}:
        items = schema.get("items")
        schema = items if isinstance(items, Mapping) else {}
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping) or depth > MAX_FIELD_DEPTH:
        return
    for name, field_schema in properties.items():
        if "`" in str(name):
            continue  # no path reaches it; stripping the backtick would read another field
        field_schema = field_schema if isinstance(field_schema, Mapping) else {}
        path = f"{prefix}.{path_step(str(name))}"
        description = str(field_schema.get("description") or field_schema.get("title") or "")
        yield Offered(path, _types(field_schema), description, node_id, origin)
        yield from _fields(path, field_schema, node_id, origin, depth=depth + 1)


def _types(schema: Mapping[str, Any]) -> str:
    return " | ".join(sorted(schema_types(schema)))
