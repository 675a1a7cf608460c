"""A run's result against its tool's `outputSchema`: what a caller is given as structured
content, and why a result breaks the contract. Plain Python.

The result is the exit's value. Under an outputSchema (always an object's, as MCP asks) an
object is given as it is; a value of another type is given as ``{"result": value}`` only
when the schema declares a `result` property, and is otherwise no result the schema can
hold: a number never vanishes into ``{"result": 42}`` that a schema without `required`
would accept while the caller reads no field of it. The executor checks the result at the
exit node (``OutputCheck``), so a result that breaks the schema fails its run, recorded so,
and the caller is told the same, whichever way the run was made.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema.protocols import Validator

from graphs.engine.language.regex import RegexNotSupported
from graphs.engine.schemas import SchemaUnresolvable, schema_errors, schema_validator

#: The most characters of a schema error quoted in a run's error (it may quote the value).
_QUOTED = 300
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def declares_result(schema: Mapping[str, Any]) -> bool:
    """Whether an outputSchema declares a `result` property: the one place where a result
    that is not an object is given, as ``{"result": value}``."""
    properties = schema.get("properties")
    return isinstance(properties, Mapping) and "result" in properties


def structured_output(value: Any, schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The structured content of a result under the tool's outputSchema: the value itself
    when it is an object, ``{"result": value}`` when it is not and the schema declares
    `result`; None without a schema, or when the value has no place in it."""
    if schema is None:
        return None
    if isinstance(value, dict):
        return value
    return {"result": value} if declares_result(schema) else None


def json_path(keys: Iterable[str | int]) -> str:
    """A JSONPath naming a place in a value: ``$``, ``$.count``, ``$.files[0]``."""
    path = "$"
    for key in keys:
        if isinstance(key, int):
            path += f"[{key}]"
        elif _NAME.fullmatch(key):
            path += f".{key}"
        else:
            path += f"[{key!r}]"
    return path


def a_or_an(word: str) -> str:
    """The word after its indefinite article: "an integer", "a number"."""
    return f"{'an' if word[:1] in ('a', 'e', 'i', 'o', 'u') else 'a'} {word}"


def not_an_object(value_type: str) -> str:
    """Why a value of ``value_type`` has no place under an outputSchema that declares no
    `result`, and how to fix that: "an integer, not an object as ..."."""
    return (
        f"{a_or_an(value_type)}, not an object as the tool's outputSchema asks, and the "
        "outputSchema declares no `result` property to hold it (a value that is not an object "
        'is given as {"result": value} only then); return an object with the declared '
        "properties, or declare `result`"
    )


def json_type(value: Any) -> str:
    """The JSON type of a value, as JSON Schema names it (a whole float is an integer)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


@dataclass(frozen=True)
class OutputCheck:
    """A tool's outputSchema, compiled once for all its runs."""

    schema: Mapping[str, Any]
    validator: Validator

    @classmethod
    def of(cls, schema: Mapping[str, Any] | None) -> OutputCheck | None:
        """The check of a tool's outputSchema; None when it declares none."""
        return None if schema is None else cls(schema, schema_validator(schema))

    def failure(self, value: Any) -> str | None:
        """Why ``value``, a run's result, breaks the outputSchema, naming the JSON path that
        fails and how to fix it; None when it fits."""
        structured = structured_output(value, self.schema)
        if structured is None:
            return f"the result is {not_an_object(json_type(value))}"
        try:
            error = next(schema_errors(self.validator, structured), None)
        except (SchemaUnresolvable, RegexNotSupported) as exc:
            return f"the tool's outputSchema cannot be checked: {exc}; fix it and save again"
        if error is None:
            return None
        message = error.message
        if len(message) > _QUOTED:
            message = message[:_QUOTED] + "…"
        return (
            f"the result does not match the tool's outputSchema at "
            f"{json_path(error.absolute_path)}: {message}; change what the exit returns (the "
            "output of the node before it), or the outputSchema"
        )
