"""Compiling a tool: every expression parsed once, for all of the tool's runs.

A ``CompiledTool`` holds no run state, so one instance serves concurrent runs in any number
of threads (each thread parses its own copy of an expression the first time it evaluates it;
see ``expressions``). Build one per workflow version and keep it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from graphs.engine.arguments import compile_args
from graphs.engine.checks.problems import Finding, Keys, error, finding, op_move
from graphs.engine.checks.structure import NodeLayout, default_layouts, graph_problems
from graphs.engine.definition import Node, ToolGraph
from graphs.engine.errors import DefinitionError, located
from graphs.engine.language.expressions import (
    Expression,
    ExpressionSyntaxError,
    ExpressionTooLong,
    ParseBudget,
    RegexRefused,
)
from graphs.engine.language.jsonlogic import Rule, RuleError, closest_operator, compile_rule
from graphs.engine.outputs import OutputCheck


@dataclass(frozen=True)
class CompiledNode:
    """A node with its expressions compiled."""

    node: Node
    expression: Expression | None = None  # transform: its expr; approval: its message
    args: Any = None  # mcp: the args template (see ``arguments``)
    rules: tuple[Rule, ...] = ()  # switch: one per condition, in order


@dataclass(frozen=True)
class CompiledTool:
    """A tool ready to execute: its graph, its compiled nodes by id, and the check of its
    result against its outputSchema (None when it declares none)."""

    tool: ToolGraph
    nodes: Mapping[str, CompiledNode]
    output: OutputCheck | None = None


def compile_tool(tool: ToolGraph) -> CompiledTool:
    """Check the tool's graph and compile its expressions; DefinitionError lists all problems."""
    compiled, found = compile_nodes(tool)
    problems = graph_problems(tool) + [each.text for each in found]
    if problems:
        raise DefinitionError(problems)
    nodes = {node.node.id: node for node in compiled if node is not None}
    return CompiledTool(tool, MappingProxyType(nodes), OutputCheck.of(tool.output_schema))


def expression_problems(tool: ToolGraph) -> list[str]:
    """The problems of the tool's expressions: JSONata that does not parse, regexes RE2 cannot
    run, bad rules."""
    return [each.text for each in compile_nodes(tool)[1]]


def compile_nodes(
    tool: ToolGraph,
    layouts: Sequence[NodeLayout] | None = None,
    *,
    budget: ParseBudget | None = None,
) -> tuple[list[CompiledNode | None], list[Finding]]:
    """Each node of the tool compiled (None where a transform's expression failed), in the
    tool's order, and the problems of its expressions. ``layouts`` place them in the
    document; ``budget`` bounds the JSONata parsed (validation's)."""
    layouts = default_layouts(tool) if layouts is None else layouts
    nodes: list[CompiledNode | None] = []
    found: list[Finding] = []
    for node, layout in zip(tool.nodes, layouts, strict=True):
        where = functools.partial(located, tool.name, node.id)
        text, field = (
            (node.expr, "transform.expr") if node.type == "transform" else (node.message, "message")
        )
        if node.type in ("transform", "approval") and isinstance(text, str):
            at = layout.keys(field)
            try:
                nodes.append(CompiledNode(node, expression=Expression(text, budget=budget)))
                continue
            except RegexRefused as exc:  # parses, but names a construct RE2 cannot run
                code, message = "regex_refused", str(exc)
            except ExpressionTooLong as exc:
                code, message = "expression_too_long", str(exc)
            except ExpressionSyntaxError as exc:
                code, message = "expression_syntax", f"JSONata does not parse: {exc}"
            found.append(finding(code, where(field), message, at, node=node.id))
            nodes.append(None)
        elif node.type == "mcp":
            template, problems = compile_args(
                node.args if node.args is not None else {}, budget=budget
            )
            found += [
                finding(
                    problem.code,
                    where(problem.field),
                    problem.message,
                    (*layout.at, *problem.keys),
                    node=node.id,
                )
                for problem in problems
            ]
            nodes.append(CompiledNode(node, args=template))
        elif node.type == "switch":
            rules = []
            for index, condition in enumerate(node.conditions):
                try:
                    rules.append(compile_rule(condition.rule, budget=budget))
                except RuleError as exc:
                    field = f"conditions[{index}].rule"
                    found.append(_rule_finding(exc, where(field), layout.keys(field), node.id))
            nodes.append(CompiledNode(node, rules=tuple(rules)))
        else:
            nodes.append(CompiledNode(node))
    return nodes, found


def _rule_finding(exc: RuleError, where: str, rule_at: Keys, node: str) -> Finding:
    """A rule's problem; an unknown operator gets the one it most likely meant, as a fix
    renaming its key (the import's text stays as it was)."""
    found = finding(exc.code, where, str(exc), (*rule_at, *exc.at), node=node)
    if exc.code != "rule_unknown_operator" or not exc.at:
        return found
    operator = str(exc.at[-1])
    meant = closest_operator(operator)
    if meant is None:
        return found
    at = (*rule_at, *exc.at)
    message = f"{found.text}; did you mean {meant!r}?"
    fix = [op_move(at, (*at[:-1], meant))]
    return Finding(found.text, (error(exc.code, message, at, node=node, fix=fix),))
