"""Validation's checks of how a tool's nodes fit together. Plain Python.

- paths: every node the entry reaches can reach an exit (else a run there loops until its
  limit or dead-ends: an error); a switch without a default (a warning: its conditions may
  cover every case, which cannot be proved here, and a run where none holds fails with a
  clear message naming the switch; a `default` pointing at the exit is offered where the
  exit is not already one of its targets);
- expressions: `$.node` naming no node (an error: the context holds only node outputs, so
  it is always undefined), or a node that cannot have run before this one on any path (a
  warning: also always undefined there, but the workflow still runs); history functions
  naming no node (an error); a field an upstream output cannot have (a warning: schemas can
  be incomplete); JSON Logic operators given the wrong number of arguments (an error: the
  run would fail when the switch is evaluated);
- the exit's value against the tool's `outputSchema`, where the node before the exit has a
  known shape (a warning).

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
from graphs.engine.checks import NodeLayout
from graphs.engine.compiler import CompiledNode
from graphs.engine.definition import Node
from graphs.engine.errors import located
from graphs.engine.expression_reads import (
    Inferred,
    Read,
    infer,
    scan,
    schema_types,
)
from graphs.engine.expressions import Expression
from graphs.engine.graph_paths import Precedence, reachable, reversed_edges
from graphs.engine.jsonlogic import Array, Logic, Missing, Rule, Scoped, Value, Var, arity_problem
from graphs.engine.parsing import ToolReading
from graphs.engine.problems import Keys, Problem, error, op_add, op_replace, warning

#: How many open switches (without a default) are tried as the fix of a node that cannot
#: reach the exit: each costs a walk of the graph.
_SWITCHES_TRIED = 20
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
        self._shapes[node_id] = shape
        return shape

    def sites(self) -> Iterator[Site]:
        """Every expression of every node, with where it is written."""
        for node, layout, compiled in self.nodes:
            if compiled is None:
                continue
            if compiled.expression is not None:
                yield Site(
                    node,
                    compiled.expression,
                    layout.keys("transform.expr"),
                    "transform.expr",
                    True,
                )
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
                close = difflib.get_close_matches(call.node, ids, n=1)
                fixed = call.span.replaced(source, close[0]) if close else None
                hint = f"did you mean {close[0]!r}? " if close else ""
                problems.append(
                    error(
                        "history_node_unknown",
                        f"{where}: ${call.function}({call.node!r}) names no node of this tool; "
                        f"{hint}nodes: {', '.join(ids)}",
                        site.at,
                        node=site.node.id,
                        fix=[op_replace(site.at, fixed)] if fixed is not None else None,
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
    source = site.expression.source
    node = site.node.id
    if read.node not in context.index:
        close = difflib.get_close_matches(read.node, ids, n=1)
        fixed = read.span.replaced(source, close[0]) if close else None
        hint = f"did you mean {close[0]!r}? " if close else ""
        return error(
            "node_reference_unknown",
            f"{where}: reads the output of node {read.node!r}, but this tool has no such node "
            f"(the context holds only node outputs), so it is always undefined; {hint}"
            f"nodes: {', '.join(ids)}",
            site.at,
            node=node,
            fix=[op_replace(site.at, fixed)] if fixed is not None else None,
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
    close = difflib.get_close_matches(name, declared, n=1)
    fixed = span.replaced(source, close[0]) if close else None
    shown = ".".join([read.node, *(field for field, _ in read.fields[: position + 1])])
    hint = f"did you mean {close[0]!r}? " if close else ""
    return warning(
        "field_not_produced",
        f"{where}: reads `{shown}`, but {_described(context, read.node, shape)} has no field "
        f"{name!r} there (it declares {', '.join(declared)}), so it is always undefined; "
        f"{hint}read one of those fields",
        site.at,
        node=node,
        fix=[op_replace(site.at, fixed)] if fixed is not None else None,
    )


def _described(context: ToolContext, node_id: str, shape: Inferred) -> str:
    if shape.origin == "entry":
        return f"the entry {node_id!r} (the tool's inputSchema)"
    if shape.origin == "tool":
        return f"the output of {node_id!r} (its tool's outputSchema)"
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


def path_problems(context: ToolContext) -> list[Problem]:
    """Nodes the entry reaches that cannot reach an exit, and switches without a default."""
    if not context.exits:
        return []  # no exit at all: the structure check says so
    problems: list[Problem] = []
    exit_id = context.exits[0] if len(context.exits) == 1 else None
    # A node with an edge missing or naming no node is already an error; take it as able to
    # reach the exit, so that the nodes before it are not all reported too.
    broken = [
        node.id
        for node, _, _ in context.nodes
        if (node.type in ("entry", "mcp", "transform") and not _edge_ok(context, node.next))
        or any(not _edge_ok(context, target) for _, target in node.targets())
    ]
    backwards = reversed_edges(context.edges)
    can_exit = reachable([*context.exits, *broken], backwards)
    # A switch without a default on the way is where the exit is likely missing: the nodes
    # that lead to it (each found once per switch, for a bounded number of switches).
    open_switches = [
        node
        for node, _, _ in context.nodes
        if node.type == "switch"
        and node.id not in can_exit
        and node.default is None
        and _exit_fix(context, node)
    ][:_SWITCHES_TRIED]
    leading = {switch.id: reachable([switch.id], backwards) for switch in open_switches}
    for node, layout, _ in context.nodes:
        if node.id not in context.reached or node.id in can_exit:
            continue
        ahead = [switch for switch in open_switches if node.id in leading[switch.id]]
        fix = _exit_fix(context, ahead[0]) if len(ahead) == 1 else None
        problems.append(
            error(
                "no_path_to_exit",
                f"{context.where(node.id)}: no path from this node reaches the exit, so a run "
                "that gets here loops until maxNodeExecutions or stops without a result; give "
                "a switch on its way a branch (or a `default`) that leads to "
                f"{exit_id or 'an exit'!r}",
                layout.at,
                node=node.id,
                fix=fix,
            )
        )
    for node, layout, _ in context.nodes:
        if node.type == "switch" and node.default is None and node.conditions:
            problems.append(
                warning(
                    "switch_no_default",
                    f"{context.where(node.id, 'default')}: the switch has no `default`, so a "
                    "run in which none of its conditions holds fails at this node; add "
                    "`default: <node id>` (or a last condition without `rule`) unless the "
                    "conditions cover every case",
                    layout.at,
                    node=node.id,
                    fix=_exit_fix(context, node),
                )
            )
    return problems


def _edge_ok(context: ToolContext, target: Any) -> bool:
    return isinstance(target, str) and target in context.index


def _exit_fix(context: ToolContext, switch: Node) -> list[dict[str, Any]] | None:
    """A `default` to the tool's one exit, when the switch does not already go there."""
    if len(context.exits) != 1 or switch.default is not None:
        return None
    exit_id = context.exits[0]
    if any(target == exit_id for _, target in switch.targets()):
        return None
    return [op_add((*context.layout(switch.id).at, "default"), exit_id)]


def exit_problems(context: ToolContext) -> list[Problem]:
    """The exit's value (the output of the node before it) against the outputSchema."""
    declared = context.graph.output_schema
    if not isinstance(declared, dict) or len(context.exits) != 1:
        return []
    exit_id = context.exits[0]
    properties = declared.get("properties")
    # Names as JSON reads them: a YAML key may be a number.
    properties = {str(k): v for k, v in properties.items()} if isinstance(properties, dict) else {}
    listed = declared.get("required")
    required = (
        [name for name in listed if isinstance(name, str)] if isinstance(listed, list) else []
    )
    problems = []
    for node, layout, compiled in context.nodes:
        if exit_id not in context.edges[node.id] or node.id not in context.reached:
            continue
        shape = context.shape_of(node.id)
        if shape is None:
            continue
        types = schema_types(shape.schema)
        at = layout.keys("transform.expr") if node.type == "transform" else layout.at
        where = context.where(node.id)
        if types and "object" not in types:
            if "result" not in properties and properties:
                problems.append(
                    warning(
                        "exit_output_mismatch",
                        f"{where}: the exit returns this node's output, a "
                        f"{'/'.join(sorted(types))}, which callers get as "
                        '{"result": value}; the tool\'s outputSchema '
                        "declares no `result` property: return an object with the declared "
                        "properties, or declare `result`",
                        at,
                        node=node.id,
                    )
                )
            continue
        problems += _object_mismatch(
            context, node, compiled, at, shape, properties, required, declared
        )
    return problems


def _object_mismatch(
    context: ToolContext,
    node: Node,
    compiled: CompiledNode | None,
    at: Keys,
    shape: Inferred,
    properties: dict[str, Any],
    required: list[str],
    declared: dict[str, Any],
) -> list[Problem]:
    produced = shape.schema.get("properties")
    if not isinstance(produced, dict):
        return []
    exact = shape.schema.get("additionalProperties") is False
    where = context.where(node.id)
    problems = []
    extra = [name for name in produced if name not in properties]
    # A declared property the exact object lacks: an error of the caller's contract when it
    # is required, and a likely misspelling when the object has a name close to it.
    if exact and produced and properties and not set(produced) & set(properties):
        # Nothing the contract declares: when both have one property, it is surely the same.
        renamed = None
        if len(produced) == 1 and len(properties) == 1 and compiled and compiled.expression:
            renamed = _rename_key(compiled.expression, next(iter(produced)), next(iter(properties)))
        problems.append(
            warning(
                "exit_output_mismatch",
                f"{where}: the exit returns this node's output, with {', '.join(produced)}, "
                "none of the properties the tool's outputSchema declares "
                f"({', '.join(properties)}); build those here, or change the outputSchema",
                at,
                node=node.id,
                fix=[op_replace(at, renamed)] if renamed is not None else None,
            )
        )
        return problems
    for name in properties if exact else ():
        close = difflib.get_close_matches(name, extra, n=1)
        if name in produced or not (close or name in required):
            continue
        fix = None
        if close and compiled is not None and compiled.expression is not None:
            fixed = _rename_key(compiled.expression, close[0], name)
            fix = [op_replace(at, fixed)] if fixed is not None else None
        hint = f"; it has {close[0]!r} instead, a misspelling?" if close else ""
        kind = "requires" if name in required else "declares"
        problems.append(
            warning(
                "exit_output_mismatch",
                f"{where}: the exit returns this node's output, which has no {name!r}, a "
                f"property the tool's outputSchema {kind}{hint} Build it here, or change the "
                "outputSchema",
                at,
                node=node.id,
                fix=fix,
            )
        )
    if declared.get("additionalProperties") is False:
        for name in extra:
            problems.append(
                warning(
                    "exit_output_mismatch",
                    f"{where}: the exit returns this node's output, which has {name!r}, a "
                    "property the tool's outputSchema does not allow (additionalProperties: "
                    "false); remove it here, or declare it",
                    at,
                    node=node.id,
                )
            )
    for name, schema in produced.items():
        wanted = schema_types(properties.get(name))
        have = schema_types(schema)
        if wanted and have and not types_fit(have, wanted):
            problems.append(
                warning(
                    "exit_output_mismatch",
                    f"{where}: the exit returns this node's output, whose {name!r} is a "
                    f"{'/'.join(sorted(have))}, but the tool's outputSchema declares "
                    f"{'/'.join(sorted(wanted))}; convert it here, or change the outputSchema",
                    at,
                    node=node.id,
                )
            )
    return problems


def types_fit(have: set[str], wanted: set[str]) -> bool:
    """Whether a value of one of types ``have`` can be of one of ``wanted`` (a number may be
    an integer, so it is given the benefit of the doubt)."""
    widened = set(wanted)
    if "number" in wanted:
        widened.add("integer")
    if "integer" in wanted:
        widened.add("number")
    return bool(have & widened)


def _rename_key(expression: Expression, old: str, new: str) -> str | None:
    """The expression's text with object key ``old`` of its top-level constructor renamed."""
    ast = expression.ast
    source = expression.source
    if getattr(ast, "type", None) != "unary" or ast.value != "{":
        return None
    for key, _ in ast.lhs_object or []:
        if getattr(key, "type", None) == "string" and key.value == old:
            end = key.position
            if isinstance(end, int) and source[end - len(old) - 1 : end - 1] == old:
                return source[: end - len(old) - 1] + new + source[end - 1 :]
    return None
