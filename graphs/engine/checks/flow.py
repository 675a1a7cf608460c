"""Validation's checks of how a tool's nodes fit together. Plain Python.

- expressions: `$.node` naming no node (an error: the context holds only node outputs, so
  it is always undefined), or a node that cannot have run before this one on any path (a
  warning: also always undefined there, but the workflow still runs); history functions
  naming no node (an error); a field an upstream output cannot have (a warning: schemas can
  be incomplete); JSON Logic operators given the wrong number of arguments (an error: the
  run would fail when the switch is evaluated).

How a run ends (paths to the exit, its value) is graphs/engine/checks/exits.py's.

``ToolContext`` holds what the checks share: the graph, where each node is written, its
compiled expressions, the edges, the tool schema each `mcp` node calls (set by
call_checks), and the shape of each node's output, inferred once.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from graphs.engine.arguments import Evaluated
from graphs.engine.checks.approval_nodes import approval_output_schema
from graphs.engine.checks.paths import Precedence, reachable
from graphs.engine.checks.problems import Keys, Problem, error, op_replace, warning
from graphs.engine.checks.structure import NodeLayout
from graphs.engine.definition import Node
from graphs.engine.errors import located
from graphs.engine.format.parsing import ToolReading
from graphs.engine.language.expression_reads import (
    Inferred,
    Read,
    Span,
    infer,
    scan,
    schema_types,
)
from graphs.engine.language.expressions import Expression
from graphs.engine.language.jsonlogic import (
    Array,
    Logic,
    Missing,
    Rule,
    Scoped,
    Value,
    Var,
    arity_problem,
)

_PENDING = Inferred({}, "pending")  # a shape being inferred: a cycle reads it as unknown


@dataclass(frozen=True)
class ToolSchema:
    """What validation knows of a downstream tool: its input and output JSON Schemas."""

    input_schema: Mapping[str, Any] | None
    output_schema: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Site:
    """An expression of a node: where its text is written and whether it is evaluated
    against the run's context (False inside a JSON Logic `map`, `filter`...)."""

    node: Node
    expression: Expression
    at: Keys
    field: str
    at_root: bool


class ToolContext:
    """One tool under validation; see the module docstring."""

    def __init__(self, reading: ToolReading) -> None:
        self.graph = reading.graph
        self.at: Keys = ("tools", reading.position)
        self.nodes = list(zip(reading.graph.nodes, reading.layouts, reading.compiled, strict=True))
        # The engine looks nodes up by id with the last of duplicates winning; so do we.
        self.index = {node.id: i for i, (node, _, _) in enumerate(self.nodes)}
        self.edges: dict[str, list[str]] = {node_id: [] for node_id in self.index}
        for node, _, _ in self.nodes:
            self.edges[node.id] += [
                target
                for _, target in node.targets()
                if isinstance(target, str) and target in self.index
            ]
        self.calls: dict[str, ToolSchema] = {}  # mcp node id -> the tool it calls, if known
        self._shapes: dict[str, Inferred | None] = {}
        entries = [node.id for node, _, _ in self.nodes if node.type == "entry"]
        self.entry = entries[0] if len(entries) == 1 else None
        self.exits = [node.id for node, _, _ in self.nodes if node.type == "exit"]
        self.reached = reachable([self.entry], self.edges) if self.entry else set(self.index)
        # Its bitsets grow with the square of the nodes: validation reads at most MAX_NODES
        # (2,000 nodes: 0.5 MB).
        self.precedence = Precedence(self.edges)

    def where(self, node: str, field: str | None = None) -> str:
        """A problem's location in words, as import's messages start."""
        return located(self.graph.name, node, field)

    def layout(self, node_id: str) -> NodeLayout:
        """Where the node with this id is written."""
        return self.nodes[self.index[node_id]][1]

    def shape_of(self, node_id: str) -> Inferred | None:
        """The schema of a node's output, where it is known."""
        if node_id not in self.index:
            return None
        if node_id in self._shapes:
            known = self._shapes[node_id]
            return None if known is _PENDING else known
        self._shapes[node_id] = _PENDING  # a transform reading itself in a loop
        node, _, compiled = self.nodes[self.index[node_id]]
        shape = None
        if node.type == "entry":
            shape = Inferred(dict(self.graph.input_schema), "entry")
        elif node.type == "mcp":
            called = self.calls.get(node_id)
            if called is not None and isinstance(called.output_schema, Mapping):
                shape = Inferred(dict(called.output_schema), "tool")
        elif node.type == "transform" and compiled is not None and compiled.expression:
            inferred = infer(compiled.expression.ast, self.shape_of)
            shape = None if inferred is None else Inferred(inferred.schema, "transform")
        elif node.type == "switch":
            targets = [target for _, target in node.targets() if isinstance(target, str)]
            shape = Inferred({"type": "string", "enum": targets}, "transform")
        elif node.type == "approval":
            shape = Inferred(approval_output_schema(node), "approval")
        self._shapes[node_id] = shape
        return shape

    def sites(self) -> Iterator[Site]:
        """Every expression of every node, with where it is written."""
        for node, layout, compiled in self.nodes:
            if compiled is None:
                continue
            if compiled.expression is not None:
                field = "message" if node.type == "approval" else "transform.expr"
                yield Site(node, compiled.expression, layout.keys(field), field, True)
            yield from _args_sites(node, layout, compiled.args)
            for index, rule in enumerate(compiled.rules):
                base = layout.keys(f"conditions[{index}].rule")
                yield from _rule_sites(node, rule, base, f"conditions[{index}].rule", True)


def _args_sites(node: Node, layout: NodeLayout, template: Any) -> Iterator[Site]:
    pending = [template]
    while pending:
        part = pending.pop()
        if isinstance(part, Evaluated):
            yield Site(node, part.expression, (*layout.at, *part.keys), part.field, True)
        elif isinstance(part, dict):
            pending.extend(reversed(list(part.values())))
        elif isinstance(part, list):
            pending.extend(reversed(part))


def _rule_sites(node: Node, rule: Rule, base: Keys, field: str, at_root: bool) -> Iterator[Site]:
    if isinstance(rule, Var):
        if rule.path is not None:
            yield Site(node, rule.path, (*base, *rule.at), field, at_root)
        if rule.default is not None:
            yield from _rule_sites(node, rule.default, base, field, at_root)
    elif isinstance(rule, Missing):
        for path, at in zip(rule.paths, rule.at, strict=False):
            yield Site(node, path, (*base, *at), field, at_root)
    elif isinstance(rule, Array):
        for item in rule.items:
            yield from _rule_sites(node, item, base, field, at_root)
    elif isinstance(rule, Value | Logic):
        for arg in rule.args:
            yield from _rule_sites(node, arg, base, field, at_root)
    elif isinstance(rule, Scoped):
        yield from _rule_sites(node, rule.items, base, field, at_root)
        # The rule run over each item reads the item (or {accumulator, current}), not the
        # run's context.
        yield from _rule_sites(node, rule.logic, base, field, False)
        if rule.initial is not None:
            yield from _rule_sites(node, rule.initial, base, field, at_root)


def rule_problems(context: ToolContext) -> list[Problem]:
    """Value operators given a number of arguments they cannot take."""
    problems = []
    for node, layout, compiled in context.nodes:
        if compiled is None:
            continue
        for index, rule in enumerate(compiled.rules):
            base = layout.keys(f"conditions[{index}].rule")
            for value in _values(rule):
                problem = arity_problem(value.operator, len(value.args))
                if problem is not None:
                    where = context.where(node.id, f"conditions[{index}].rule")
                    problems.append(
                        error(
                            "rule_wrong_arity",
                            f"{where}: {problem}; give it as {{{value.operator!r}: [...]}} "
                            "with that many arguments",
                            (*base, *value.at),
                            node=node.id,
                        )
                    )
    return problems


def _values(rule: Rule) -> Iterator[Value]:
    pending = [rule]
    while pending:
        part = pending.pop()
        if isinstance(part, Value):
            yield part
            pending.extend(part.args)
        elif isinstance(part, Logic):
            pending.extend(part.args)
        elif isinstance(part, Array):
            pending.extend(part.items)
        elif isinstance(part, Scoped):
            pending += [part.items, part.logic] + ([part.initial] if part.initial else [])
        elif isinstance(part, Var) and part.default is not None:
            pending.append(part.default)


def expression_problems(context: ToolContext) -> list[Problem]:
    """What the tool's expressions read that cannot be there; see the module docstring."""
    problems: list[Problem] = []
    ids = list(context.index)
    for site in context.sites():
        source = site.expression.source
        ast = site.expression.ast
        where = context.where(site.node.id, site.field)
        found, calls = scan(ast, source)
        for call in calls:
            if call.node not in context.index:
                hint, fix = _respelt(site, call.node, ids, call.span)
                problems.append(
                    error(
                        "history_node_unknown",
                        f"{where}: ${call.function}({call.node!r}) names no node of this tool; "
                        f"{hint}nodes: {', '.join(ids)}",
                        site.at,
                        node=site.node.id,
                        fix=fix,
                    )
                )
        if not site.at_root:
            continue
        for read in found:
            problem = _read_problem(context, site, read, where, ids)
            if problem is not None:
                problems.append(problem)
    return problems


def _read_problem(
    context: ToolContext, site: Site, read: Read, where: str, ids: list[str]
) -> Problem | None:
    node = site.node.id
    if read.node not in context.index:
        hint, fix = _respelt(site, read.node, ids, read.span)
        return error(
            "node_reference_unknown",
            f"{where}: reads the output of node {read.node!r}, but this tool has no such node "
            f"(the context holds only node outputs), so it is always undefined; {hint}"
            f"nodes: {', '.join(ids)}",
            site.at,
            node=node,
            fix=fix,
        )
    if node in context.reached and not context.precedence.can_precede(read.node, node):
        return warning(
            "node_not_run_before",
            f"{where}: reads the output of node {read.node!r}, which cannot have run before "
            f"{node!r} on any path from the entry, so it is always undefined here; read a "
            f"node that runs before {node!r}, or change the edges so that {read.node!r} does",
            site.at,
            node=node,
        )
    shape = context.shape_of(read.node)
    if shape is None:
        return None
    missing = _missing_field(shape.schema, [name for name, _ in read.fields])
    if missing is None:
        return None
    position, declared = missing
    name, span = read.fields[position]
    hint, fix = _respelt(site, name, declared, span)
    shown = ".".join([read.node, *(field for field, _ in read.fields[: position + 1])])
    return warning(
        "field_not_produced",
        f"{where}: reads `{shown}`, but {_described(context, read.node, shape)} has no field "
        f"{name!r} there (it declares {', '.join(declared)}), so it is always undefined; "
        f"{hint}read one of those fields",
        site.at,
        node=node,
        fix=fix,
    )


def _respelt(
    site: Site, name: str, known: list[str], span: Span
) -> tuple[str, list[dict[str, Any]] | None]:
    """For a name an expression misspells: the hint naming the closest of ``known`` (empty
    when none is close), and the fix writing it at ``span`` (None when the span is unsure)."""
    close = difflib.get_close_matches(name, known, n=1)
    if not close:
        return "", None
    fixed = span.replaced(site.expression.source, close[0])
    return f"did you mean {close[0]!r}? ", None if fixed is None else [op_replace(site.at, fixed)]


def _described(context: ToolContext, node_id: str, shape: Inferred) -> str:
    if shape.origin == "entry":
        return f"the entry {node_id!r} (the tool's inputSchema)"
    if shape.origin == "tool":
        return f"the output of {node_id!r} (its tool's outputSchema)"
    if shape.origin == "approval":
        return f"the output of approval {node_id!r}"
    return f"the value node {node_id!r} builds"


def _missing_field(schema: Any, fields: list[str]) -> tuple[int, list[str]] | None:
    """The first field a value of ``schema`` cannot have along ``fields``, and the fields it
    declares there; None when all can be there or the schema does not say."""
    for position, name in enumerate(fields):
        # JSONata maps a path over an array: the next field is read on each item.
        while isinstance(schema, dict) and schema_types(schema) == {"array"}:
            schema = schema.get("items")
        if not isinstance(schema, dict):
            return None
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            return None
        if name in properties:
            schema = properties[name]
            continue
        more = schema.get("additionalProperties")
        if more is True or isinstance(more, dict) or schema.get("patternProperties"):
            return None
        return position, [str(key) for key in properties]
    return None
