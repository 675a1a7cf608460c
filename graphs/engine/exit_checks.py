"""Validation's checks of how a run of a tool ends. Plain Python.

- paths: every node the entry reaches can reach an exit (else a run there loops until its
  limit or dead-ends: an error); a switch without a default (a warning: its conditions may
  cover every case, which cannot be proved here, and a run where none holds fails with a
  clear message naming the switch; a `default` pointing at the exit is offered where the
  exit is not already one of its targets);
- the exit's value (the output of the node before it) against the tool's `outputSchema`,
  where that node's output has a known shape (a warning: shapes are inferred).
"""

from __future__ import annotations

import difflib
from typing import Any

from graphs.engine.call_checks import required_names
from graphs.engine.compiler import CompiledNode
from graphs.engine.definition import Node
from graphs.engine.expression_reads import Inferred, schema_types, types_fit
from graphs.engine.expressions import Expression
from graphs.engine.flow_checks import ToolContext
from graphs.engine.graph_paths import reachable, reversed_edges
from graphs.engine.problems import Keys, Problem, error, op_add, op_replace, warning

#: How many open switches (without a default) are tried as the fix of a node that cannot
#: reach the exit: each costs a walk of the graph.
_SWITCHES_TRIED = 20


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
    required = required_names(declared)
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
