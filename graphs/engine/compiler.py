"""Compiling a tool: every expression parsed once, for all of the tool's runs.

A ``CompiledTool`` holds no run state, so one instance serves concurrent runs in any number
of threads (each thread parses its own copy of an expression the first time it evaluates it;
see ``expressions``). Build one per workflow version and keep it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from graphs.engine.arguments import compile_args
from graphs.engine.checks import graph_problems
from graphs.engine.definition import Node, ToolGraph
from graphs.engine.errors import DefinitionError, located
from graphs.engine.expressions import Expression, ExpressionSyntaxError, RegexRefused
from graphs.engine.jsonlogic import Rule, RuleError, compile_rule


@dataclass(frozen=True)
class CompiledNode:
    """A node with its expressions compiled."""

    node: Node
    expression: Expression | None = None  # transform
    args: Any = None  # mcp: the args template (see ``arguments``)
    rules: tuple[Rule, ...] = ()  # switch: one per condition, in order


@dataclass(frozen=True)
class CompiledTool:
    """A tool ready to execute: its graph and its compiled nodes by id."""

    tool: ToolGraph
    nodes: Mapping[str, CompiledNode]


def compile_tool(tool: ToolGraph) -> CompiledTool:
    """Check the tool's graph and compile its expressions; DefinitionError lists all problems."""
    nodes, problems = _compile_nodes(tool)
    problems = graph_problems(tool) + problems
    if problems:
        raise DefinitionError(problems)
    return CompiledTool(tool, MappingProxyType(nodes))


def expression_problems(tool: ToolGraph) -> list[str]:
    """The problems of the tool's expressions: JSONata that does not parse, regexes RE2 cannot
    run, bad rules."""
    return _compile_nodes(tool)[1]


def _compile_nodes(tool: ToolGraph) -> tuple[dict[str, CompiledNode], list[str]]:
    nodes: dict[str, CompiledNode] = {}
    problems: list[tuple[str, str, str]] = []  # (node, field, message)
    for node in tool.nodes:
        if node.type == "transform" and isinstance(node.expr, str):
            try:
                nodes[node.id] = CompiledNode(node, expression=Expression(node.expr))
            except RegexRefused as exc:  # parses, but names a construct RE2 cannot run
                problems.append((node.id, "transform.expr", str(exc)))
            except ExpressionSyntaxError as exc:
                problems.append((node.id, "transform.expr", f"JSONata does not parse: {exc}"))
        elif node.type == "mcp":
            template, found = compile_args(node.args if node.args is not None else {})
            problems += [(node.id, field, message) for field, message in found]
            nodes[node.id] = CompiledNode(node, args=template)
        elif node.type == "switch":
            rules = []
            for index, condition in enumerate(node.conditions):
                try:
                    rules.append(compile_rule(condition.rule))
                except RuleError as exc:
                    problems.append((node.id, f"conditions[{index}].rule", str(exc)))
            nodes[node.id] = CompiledNode(node, rules=tuple(rules))
        else:
            nodes[node.id] = CompiledNode(node)
    return nodes, [
        f"{located(tool.name, node, field)}: {message}" for node, field, message in problems
    ]
