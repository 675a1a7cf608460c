"""Validation's checks of how a run of a tool ends. Plain Python.

- paths: every node the entry reaches can reach an exit (else a run there loops until its
  limit or dead-ends: an error); a switch without a default (a warning: its conditions may
  cover every case, which cannot be proved here, and a run where none holds fails with a
  clear message naming the switch; a `default` pointing at the exit is offered where the
  exit is not already one of its targets);
- the exit's value (the output of the node before it) against the tool's `outputSchema`,
  where that node's output has a known shape (a warning: shapes are inferred), unless its
  mismatch is certain: that is an error, found by graphs/engine/exit_values.py as import does.
"""

from __future__ import annotations

from typing import Any

from graphs.engine.checks.flow import ToolContext
from graphs.engine.checks.paths import reachable, reversed_edges
from graphs.engine.checks.problems import Problem, error, op_add, warning
from graphs.engine.checks.structure import NodeLayout
from graphs.engine.compiler import CompiledNode
from graphs.engine.definition import Node
from graphs.engine.exit_values import exit_findings, value_at, value_mismatches
from graphs.engine.language.expression_reads import Inferred

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
    """A `default` to the tool's one exit, when the switch does not already go there and
    the value a run then returns, the exit's id (a switch's output is its target's id),
    fits the tool's outputSchema: a fix must not make another problem."""
    if len(context.exits) != 1 or switch.default is not None:
        return None
    exit_id = context.exits[0]
    if any(target == exit_id for _, target in switch.targets()):
        return None
    declared = context.graph.output_schema
    returned = Inferred({"type": "string", "const": exit_id}, "expression")
    if declared is not None and value_mismatches(returned, declared, None, (), decided=True):
        return None
    return [op_add((*context.layout(switch.id).at, "default"), exit_id)]


def exit_problems(context: ToolContext) -> list[Problem]:
    """The exit's value (the output of the node before it) against the outputSchema, where
    its shape is known: warnings, for a node whose value's mismatch is not certain (one that
    is, import refuses: graphs/engine/exit_values.py, whose errors validation shows as they are)."""
    declared = context.graph.output_schema
    if not isinstance(declared, dict) or len(context.exits) != 1:
        return []
    exit_id = context.exits[0]
    refused = {
        problem.node
        for found in exit_findings(context.graph, *_written(context))
        for problem in found.problems
    }
    problems = []
    for node, layout, compiled in context.nodes:
        if exit_id not in context.edges[node.id] or node.id not in context.reached:
            continue
        shape = context.shape_of(node.id)
        if shape is None or node.id in refused:
            continue
        at = value_at(node, layout)
        problems += [
            warning(
                "exit_output_mismatch",
                f"{context.where(node.id)}: {mismatch.message}",
                at,
                node=node.id,
                fix=mismatch.fix,
            )
            for mismatch in value_mismatches(shape, declared, compiled, at, decided=False)
        ]
    return problems


def _written(context: ToolContext) -> tuple[list[NodeLayout], list[CompiledNode | None]]:
    """The tool's node layouts and compiled nodes, in its order."""
    return [layout for _, layout, _ in context.nodes], [each for _, _, each in context.nodes]
