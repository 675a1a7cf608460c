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

from graphs.engine.expressions import (
    Expression,
    ExpressionError,
    ExpressionSyntaxError,
    Guard,
    RegexRefused,
)

_OMIT = object()  # the value of an expression that is undefined


@dataclass(frozen=True)
class _Evaluated:
    expression: Expression
    field: str


@dataclass(frozen=True)
class _Literal:
    value: Any


def compile_args(raw: Any, field: str = "args") -> tuple[Any, list[tuple[str, str]]]:
    """The args as a template ``fill`` can evaluate, and the (field, problem) pairs found."""
    problems: list[tuple[str, str]] = []
    return _compile(raw, field, problems), problems


def fill(template: Any, data: Any, bindings: Mapping[str, Any], guard: Guard) -> Any:
    """Evaluate a template's expressions against the context; ExpressionError names the field.

    Every container is new, so a tool that changes its arguments cannot change the template.
    """
    if isinstance(template, _Evaluated):
        try:
            return template.expression.evaluate(data, bindings, guard, undefined=_OMIT)
        except ExpressionError as exc:
            exc.field = template.field
            raise
    if isinstance(template, _Literal):
        return copy.deepcopy(template.value)
    if isinstance(template, dict):
        filled = ((key, fill(value, data, bindings, guard)) for key, value in template.items())
        return {key: value for key, value in filled if value is not _OMIT}
    if isinstance(template, list):
        values = (fill(item, data, bindings, guard) for item in template)
        return [None if value is _OMIT else value for value in values]
    return template


def _compile(raw: Any, field: str, problems: list[tuple[str, str]]) -> Any:
    if isinstance(raw, str) and raw.startswith("$"):
        return _expression(raw, field, problems)
    if isinstance(raw, Mapping):
        if "expr" in raw or "literal" in raw:
            return _special(raw, field, problems)
        return {key: _compile(value, f"{field}.{key}", problems) for key, value in raw.items()}
    if isinstance(raw, list):
        return [_compile(item, f"{field}[{index}]", problems) for index, item in enumerate(raw)]
    return raw


def _special(raw: Mapping[str, Any], field: str, problems: list[tuple[str, str]]) -> Any:
    """An ``{expr: ...}`` or ``{literal: ...}`` object."""
    if len(raw) != 1:
        problems.append(
            (
                field,
                f"an object with an `expr` or `literal` key must have no other key, found "
                f"{', '.join(map(str, raw))}; to pass such an object to the tool, wrap it: "
                "{literal: {...}}",
            )
        )
        return None
    if "literal" in raw:
        return _Literal(raw["literal"])
    if not isinstance(raw["expr"], str):
        problems.append((f"{field}.expr", "must be a string holding a JSONata expression"))
        return None
    return _expression(raw["expr"], f"{field}.expr", problems)


def _expression(source: str, field: str, problems: list[tuple[str, str]]) -> Any:
    try:
        return _Evaluated(Expression(source), field)
    except RegexRefused as exc:  # parses, but names a construct RE2 cannot run
        problems.append((field, str(exc)))
        return None
    except ExpressionSyntaxError as exc:
        hint = (
            f"; if you meant the text {source!r} itself, write it as {{literal: {source!r}}}"
            if source.startswith("$")
            else ""
        )
        problems.append((field, f"JSONata does not parse: {exc}{hint}"))
        return None
