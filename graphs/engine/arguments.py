"""The ``args`` of an mcp node: JSON in which expressions are evaluated, at any depth.

- A string that starts with ``$`` is a JSONata expression: ``path: "$.entry.directory"``
  (the form of seed 003).
- An object whose only key is ``expr`` is a JSONata expression:
  ``count: {expr: "$count($.list.items)"}`` (the form of the reference implementation).
- An object whose only key is ``literal`` is its value as written, never evaluated. This is
  the escape for a string that starts with ``$`` (``price: {literal: "$5"}``) and for an
  object that is meant to have a single ``expr`` or ``literal`` key.
- Anything else is literal; objects and arrays are walked.

An expression whose value is undefined (a field that is not there) leaves its key out of the
object, so an optional tool parameter stays unset; in an array it becomes null.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from graphs.engine.language.expressions import (
    Expression,
    ExpressionError,
    ExpressionSyntaxError,
    ExpressionTooLong,
    Guard,
    ParseBudget,
    RegexRefused,
)

_OMIT = object()  # the value of an expression that is undefined
Keys = tuple[str | int, ...]


@dataclass(frozen=True)
class Evaluated:
    """An expression of the args: evaluated when the node runs. ``keys`` say where it is
    written, from the node (``("args", "path")``, ``("args", "count", "expr")``)."""

    expression: Expression
    field: str
    keys: Keys = ()


@dataclass(frozen=True)
class Literal:
    """A ``{literal: ...}`` value of the args: passed as written."""

    value: Any


@dataclass(frozen=True)
class ArgProblem:
    """A problem of the args: its kind, the field in words, its keys from the node, what."""

    code: str
    field: str
    keys: Keys
    message: str


def compile_args(
    raw: Any, field: str = "args", *, budget: ParseBudget | None = None
) -> tuple[Any, list[ArgProblem]]:
    """The args as a template ``fill`` can evaluate, and the problems found. In the template
    an expression is an ``Evaluated``, a ``{literal: ...}`` a ``Literal``, anything else
    itself."""
    problems: list[ArgProblem] = []
    return _compile(raw, field, ("args",), problems, budget), problems


def fill(template: Any, data: Any, bindings: Mapping[str, Any], guard: Guard) -> Any:
    """Evaluate a template's expressions against the context; ExpressionError names the field.

    Every container is new, so a tool that changes its arguments cannot change the template.
    """
    if isinstance(template, Evaluated):
        try:
            return template.expression.evaluate(data, bindings, guard, undefined=_OMIT)
        except ExpressionError as exc:
            exc.field = template.field
            raise
    if isinstance(template, Literal):
        return copy.deepcopy(template.value)
    if isinstance(template, dict):
        filled = ((key, fill(value, data, bindings, guard)) for key, value in template.items())
        return {key: value for key, value in filled if value is not _OMIT}
    if isinstance(template, list):
        values = (fill(item, data, bindings, guard) for item in template)
        return [None if value is _OMIT else value for value in values]
    return template


def _compile(
    raw: Any, field: str, keys: Keys, problems: list[ArgProblem], budget: ParseBudget | None
) -> Any:
    if isinstance(raw, str) and raw.startswith("$"):
        return _expression(raw, field, keys, problems, budget)
    if isinstance(raw, Mapping):
        if "expr" in raw or "literal" in raw:
            return _special(raw, field, keys, problems, budget)
        return {
            key: _compile(value, f"{field}.{key}", (*keys, key), problems, budget)
            for key, value in raw.items()
        }
    if isinstance(raw, list):
        return [
            _compile(item, f"{field}[{index}]", (*keys, index), problems, budget)
            for index, item in enumerate(raw)
        ]
    return raw


def _special(
    raw: Mapping[str, Any],
    field: str,
    keys: Keys,
    problems: list[ArgProblem],
    budget: ParseBudget | None,
) -> Any:
    """An ``{expr: ...}`` or ``{literal: ...}`` object."""
    if len(raw) != 1:
        problems.append(
            ArgProblem(
                "invalid_expression_object",
                field,
                keys,
                f"an object with an `expr` or `literal` key must have no other key, found "
                f"{', '.join(map(str, raw))}; to pass such an object to the tool, wrap it: "
                "{literal: {...}}",
            )
        )
        return None
    if "literal" in raw:
        return Literal(raw["literal"])
    if not isinstance(raw["expr"], str):
        problems.append(
            ArgProblem(
                "invalid_field",
                f"{field}.expr",
                (*keys, "expr"),
                "must be a string holding a JSONata expression",
            )
        )
        return None
    return _expression(raw["expr"], f"{field}.expr", (*keys, "expr"), problems, budget)


def _expression(
    source: str, field: str, keys: Keys, problems: list[ArgProblem], budget: ParseBudget | None
) -> Any:
    try:
        return Evaluated(Expression(source, budget=budget), field, keys)
    except RegexRefused as exc:  # parses, but names a construct RE2 cannot run
        problems.append(ArgProblem("regex_refused", field, keys, str(exc)))
        return None
    except ExpressionTooLong as exc:
        problems.append(ArgProblem("expression_too_long", field, keys, str(exc)))
        return None
    except ExpressionSyntaxError as exc:
        hint = (
            f"; if you meant the text {source!r} itself, write it as {{literal: {source!r}}}"
            if source.startswith("$")
            else ""
        )
        problems.append(
            ArgProblem("expression_syntax", field, keys, f"JSONata does not parse: {exc}{hint}")
        )
        return None
