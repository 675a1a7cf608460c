"""The value a tool's exit returns, against the tool's `outputSchema`. Plain Python.

A run's result is the output of the node before its exit, and a result that breaks the
outputSchema fails its run (outputs.py). ``value_mismatches`` lists how a value of a known
shape can break the schema. Where the graph's own expressions decide that shape (a
constant, an operator, a function with one result type, an object constructor, a switch,
whose output is its target's id, or a path into such a value: ``DecidedShapes``), some
mismatches are certain to fail every run that ends there:

- a value that is not an object, where the schema declares no `result` property to hold it
  (or one of a type the value cannot be, null aside: an expression may give nothing);
- an object constructor, which gives its literal keys or fewer (a key whose value is
  undefined is left out), lacking a property the schema requires, or giving a required one
  of a type it cannot be.

Those are refused at import and save (``exit_findings``, read by graphs/engine/format/parsing.py;
validation shows them as errors). A shape learnt from a schema (the inputSchema, a downstream tool's
outputSchema) is never certain, since callers and servers may send what their schemas do not say:
graphs/engine/checks/exits.py warns about its mismatches.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graphs.engine.checks.problems import Finding, Keys, finding, op_replace
from graphs.engine.checks.structure import NodeLayout
from graphs.engine.compiler import CompiledNode
from graphs.engine.definition import Node, ToolGraph
from graphs.engine.errors import located
from graphs.engine.language.expression_reads import (
    Inferred,
    infer,
    required_names,
    schema_types,
    types_fit,
)
from graphs.engine.language.expressions import Expression
from graphs.engine.outputs import a_or_an, declares_result, not_an_object

#: How many nodes a decided shape is followed through (`$.a` reading `$.b` reading ...):
#: past that it is left undecided, which only makes the check say less.
_MOST_HOPS = 20


@dataclass(frozen=True)
class Mismatch:
    """One way the exit's value breaks the outputSchema: what is wrong and how to fix it
    (after the node's location), whether every run returning the value fails with it, and
    a sure fix where there is one."""

    message: str
    certain: bool
    fix: list[dict[str, Any]] | None = None


class DecidedShapes:
    """The shape of a node's output where the tool's expressions alone decide it (None
    elsewhere): the ``shape_of`` that ``infer`` takes, knowing no schema."""

    def __init__(self, nodes: Mapping[str, CompiledNode]) -> None:
        self.nodes = nodes
        self.known: dict[str, Inferred | None] = {}
        self.hops = 0

    def __call__(self, node_id: str) -> Inferred | None:
        if node_id in self.known:
            return self.known[node_id]
        compiled = self.nodes.get(node_id)
        if compiled is None or self.hops >= _MOST_HOPS:
            return None
        self.known[node_id] = None  # a transform reading itself in a loop: undecided
        self.hops += 1
        try:
            shape = self._decided(compiled)
        finally:
            self.hops -= 1
        self.known[node_id] = shape
        return shape

    def _decided(self, compiled: CompiledNode) -> Inferred | None:
        node = compiled.node
        if node.type == "switch":
            targets = [target for _, target in node.targets() if isinstance(target, str)]
            return Inferred({"type": "string", "enum": targets}, "expression")
        if node.type == "transform" and compiled.expression is not None:
            return infer(compiled.expression.ast, self)
        return None


def value_at(node: Node, layout: NodeLayout) -> Keys:
    """Where a problem of the value a node gives the exit points: a transform's expression,
    else the node."""
    return layout.keys("transform.expr") if node.type == "transform" else layout.at


def exit_findings(
    tool: ToolGraph,
    layouts: Sequence[NodeLayout],
    compiled: Sequence[CompiledNode | None],
) -> list[Finding]:
    """An `exit_output_mismatch` error for each node before the tool's exit whose value, as
    its expressions decide it, certainly breaks the outputSchema."""
    declared = tool.output_schema
    exits = [node.id for node in tool.nodes if node.type == "exit"]
    if declared is None or len(exits) != 1:
        return []
    shapes = DecidedShapes({each.node.id: each for each in compiled if each is not None})
    found = []
    for node, layout, each in zip(tool.nodes, layouts, compiled, strict=True):
        if not any(target == exits[0] for _, target in node.targets()):
            continue
        shape = shapes(node.id)
        if shape is None:
            continue
        at = value_at(node, layout)
        for mismatch in value_mismatches(shape, declared, each, at, decided=True):
            if mismatch.certain:
                where = f"{located(tool.name, node.id)}: every run that ends here fails"
                code = "exit_output_mismatch"
                found.append(
                    finding(code, where, mismatch.message, at, node=node.id, fix=mismatch.fix)
                )
    return found


def value_mismatches(
    shape: Inferred,
    declared: Mapping[str, Any],
    compiled: CompiledNode | None,
    at: Keys,
    *,
    decided: bool,
) -> list[Mismatch]:
    """How a value of ``shape``, which a node gives the exit, breaks the outputSchema
    ``declared``; ``decided`` when the expressions alone decide the shape (see the module
    docstring), ``compiled`` the node (for a fix renaming a key of its expression)."""
    properties = declared.get("properties")
    # Names as JSON reads them: a YAML key may be a number.
    properties = (
        {str(k): v for k, v in properties.items()} if isinstance(properties, Mapping) else {}
    )
    types = schema_types(shape.schema)
    if types and "object" not in types:
        return _not_an_object(types, declared, properties, decided=decided)
    produced = shape.schema.get("properties")
    if not isinstance(produced, dict):
        return []
    return _object_mismatches(
        produced,
        exact=shape.schema.get("additionalProperties") is False,
        declared=declared,
        properties=properties,
        expression=compiled.expression if compiled is not None else None,
        at=at,
        decided=decided,
    )


def _not_an_object(
    types: set[str],
    declared: Mapping[str, Any],
    properties: dict[str, Any],
    *,
    decided: bool,
) -> list[Mismatch]:
    if not declares_result(declared):
        return [
            Mismatch(
                "the exit returns this node's output, " + not_an_object("/".join(sorted(types))),
                certain=decided,
            )
        ]
    wanted = schema_types(properties.get("result"))
    if not wanted or types_fit(types, wanted):
        return []
    have, declared_type = a_or_an("/".join(sorted(types))), a_or_an("/".join(sorted(wanted)))
    return [
        Mismatch(
            f'the exit returns this node\'s output, {have}, given as {{"result": value}}, '
            f"but the tool's outputSchema declares `result` {declared_type}; convert it here, "
            "or change the outputSchema",
            certain=decided and "null" not in wanted,
        )
    ]


def _object_mismatches(
    produced: dict[str, Any],
    *,
    exact: bool,
    declared: Mapping[str, Any],
    properties: dict[str, Any],
    expression: Expression | None,
    at: Keys,
    decided: bool,
) -> list[Mismatch]:
    required = required_names(declared)
    # An object constructor gives its keys or fewer: lacking a required one is certain.
    lacking = decided and exact and any(name not in produced for name in required)
    extra = [name for name in produced if name not in properties]
    if exact and produced and properties and not set(produced) & set(properties):
        # Nothing the contract declares: when both have one property, it is surely the same.
        renamed = None
        if len(produced) == 1 and len(properties) == 1 and expression is not None:
            renamed = _rename_key(expression, next(iter(produced)), next(iter(properties)))
        return [
            Mismatch(
                f"the exit returns this node's output, with {', '.join(produced)}, none of "
                f"the properties the tool's outputSchema declares ({', '.join(properties)}); "
                "build those here, or change the outputSchema",
                certain=lacking,
                fix=[op_replace(at, renamed)] if renamed is not None else None,
            )
        ]
    mismatches = []
    for name in properties if exact else ():
        close = difflib.get_close_matches(name, extra, n=1)
        if name in produced or not (close or name in required):
            continue
        fix = None
        if close and expression is not None:
            fixed = _rename_key(expression, close[0], name)
            fix = [op_replace(at, fixed)] if fixed is not None else None
        hint = f"; it has {close[0]!r} instead, a misspelling?" if close else ""
        kind = "requires" if name in required else "declares"
        mismatches.append(
            Mismatch(
                f"the exit returns this node's output, which has no {name!r}, a property the "
                f"tool's outputSchema {kind}{hint} Build it here, or change the outputSchema",
                certain=decided and name in required,
                fix=fix,
            )
        )
    if declared.get("additionalProperties") is False:
        mismatches += [
            Mismatch(
                f"the exit returns this node's output, which has {name!r}, a property the "
                "tool's outputSchema does not allow (additionalProperties: false); remove it "
                "here, or declare it",
                certain=False,  # its value may be undefined, and the key left out
            )
            for name in extra
        ]
    for name, schema in produced.items():
        wanted = schema_types(properties.get(name))
        have = schema_types(schema)
        if wanted and have and not types_fit(have, wanted):
            mismatches.append(
                Mismatch(
                    f"the exit returns this node's output, whose {name!r} is "
                    f"{a_or_an('/'.join(sorted(have)))}, but the tool's outputSchema declares "
                    f"{'/'.join(sorted(wanted))}; convert it here, or change the outputSchema",
                    certain=decided and name in required,
                )
            )
    return mismatches


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
