"""The form of an approval node: what a person fills in besides the decision. Plain Python.

A form is a JSON Schema limited to what MCP elicitation (`elicitation/create`'s
`requestedSchema`) allows, so that one form is shown on the Approvals page, accepted over
REST and sent to a client as it is: a flat object whose properties are each

- a string: `minLength`, `maxLength`, `format` (email, uri, date, date-time), or a choice of
  values: `enum` (with `enumNames` to show them) or `oneOf` of `{const, title}`;
- a number or an integer: `minimum`, `maximum`;
- a boolean;

each with `title`, `description` and a `default`, plus a `required` list naming properties.
Nothing else: no nested objects, arrays, `$ref`, or other keywords. A form is bounded: at
most ``MAX_PROPERTIES`` properties, each string at most ``MAX_TEXT_LENGTH`` characters (a
`maxLength` may lower that, never raise it), each choice at most ``MAX_CHOICES`` values.

``form_problems`` says what is wrong with a form (the checks of a definition report each
problem at its place); ``form_value_problems`` says what is wrong with the values a person
submitted, naming the field (the runtime refuses such a decision, and so does a test run's
mock).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any, NamedTuple

from graphs.engine.checks.problems import Keys

__all__ = [
    "FORMATS",
    "MAX_CHOICES",
    "MAX_PROPERTIES",
    "MAX_TEXT_LENGTH",
    "FormProblem",
    "form_problems",
    "form_value_problems",
]

#: The most properties a form may have (an elicitation form is a handful of fields).
MAX_PROPERTIES = 20
#: The longest text a string field takes, and the highest `maxLength` a form may declare.
MAX_TEXT_LENGTH = 10_000
#: The most values one choice (`enum` or `oneOf`) may offer.
MAX_CHOICES = 100
#: The string formats elicitation knows.
FORMATS = ("email", "uri", "date", "date-time")
#: The types a property may have.
TYPES = ("string", "number", "integer", "boolean")

_TOP_KEYS = ("type", "properties", "required", "title", "description")
_COMMON = ("type", "title", "description", "default")
_KEYWORDS = {
    "string": (*_COMMON, "minLength", "maxLength", "format", "enum", "enumNames", "oneOf"),
    "number": (*_COMMON, "minimum", "maximum"),
    "integer": (*_COMMON, "minimum", "maximum"),
    "boolean": _COMMON,
}
_ALLOWED = (
    "a form is a flat object (type: object, properties, required, title, description) whose "
    "properties are each a string (minLength, maxLength, format, enum/enumNames or oneOf), a "
    "number or integer (minimum, maximum) or a boolean, with title, description and default"
)
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")


class FormProblem(NamedTuple):
    """One problem of a form: where it is (keys from the form's root) and what is wrong,
    saying what is allowed."""

    keys: Keys
    message: str


def form_problems(schema: Any) -> list[FormProblem]:
    """What is wrong with ``schema`` as an approval node's form; empty when it is usable."""
    if not isinstance(schema, Mapping):
        return [FormProblem((), f"must be a mapping; {_ALLOWED}")]
    problems = [
        FormProblem((str(key),), f"keyword {key!r} is not allowed here; {_ALLOWED}")
        for key in schema
        if key not in _TOP_KEYS
    ]
    if schema.get("type") != "object":
        problems.append(
            FormProblem(("type",) if "type" in schema else (), "must have `type: object`")
        )
    for key in ("title", "description"):
        if key in schema and not isinstance(schema[key], str):
            problems.append(FormProblem((key,), f"{key} must be a string"))
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        what = "missing" if properties is None else "not a mapping"
        at: Keys = ("properties",) if properties is not None else ()
        return [*problems, FormProblem(at, f"`properties` is {what}: give each field by name")]
    if len(properties) > MAX_PROPERTIES:
        problems.append(
            FormProblem(
                ("properties",),
                f"{len(properties)} properties, more than the {MAX_PROPERTIES} a form may have",
            )
        )
    for name, field in properties.items():
        problems += [
            FormProblem(("properties", str(name), *keys), f"property {name!r}: {message}")
            for keys, message in _property_problems(field)
        ]
    problems += _required_problems(schema.get("required"), properties)
    return problems


def _property_problems(field: Any) -> list[FormProblem]:
    if not isinstance(field, Mapping):
        return [FormProblem((), f"must be a mapping with a `type`; {_ALLOWED}")]
    kind = field.get("type")
    if kind not in TYPES:
        nested = (
            " (forms are flat: no nested objects or arrays)" if kind in ("object", "array") else ""
        )
        what = "has no `type`" if kind is None else f"type {kind!r} is not allowed{nested}"
        return [
            FormProblem(
                ("type",) if kind is not None else (),
                f"{what}; a property is one of {', '.join(TYPES)}",
            )
        ]
    allowed = _KEYWORDS[kind]
    problems = [
        FormProblem(
            (str(key),),
            f"keyword {key!r} is not allowed for a {kind}; it allows {', '.join(allowed)}",
        )
        for key in field
        if key not in allowed
    ]
    for key in ("title", "description"):
        if key in field and not isinstance(field[key], str):
            problems.append(FormProblem((key,), f"{key} must be a string"))
    if kind == "string":
        problems += _string_problems(field)
    elif kind in ("number", "integer"):
        problems += _number_problems(field, kind)
    if "default" in field and not problems:
        trouble = _value_problem(field, field["default"])
        if trouble is not None:
            problems.append(FormProblem(("default",), f"default {trouble}"))
    return problems


def _string_problems(field: Mapping[str, Any]) -> list[FormProblem]:
    problems = []
    for key in ("minLength", "maxLength"):
        if key in field and not (_whole(field[key]) and 0 <= field[key] <= MAX_TEXT_LENGTH):
            problems.append(
                FormProblem((key,), f"{key} must be a whole number from 0 to {MAX_TEXT_LENGTH}")
            )
    if not problems and field.get("minLength", 0) > field.get("maxLength", MAX_TEXT_LENGTH):
        problems.append(FormProblem(("minLength",), "minLength is above maxLength"))
    if "format" in field and field["format"] not in FORMATS:
        problems.append(
            FormProblem(
                ("format",),
                f"format {field['format']!r} is unknown; use one of {', '.join(FORMATS)}",
            )
        )
    if "enum" in field and "oneOf" in field:
        problems.append(FormProblem(("oneOf",), "give the choices as enum or as oneOf, not both"))
    if "enum" in field:
        problems += _choices(field["enum"], "enum")
        names = field.get("enumNames")
        if names is not None and not (
            isinstance(names, list)
            and all(isinstance(name, str) for name in names)
            and isinstance(field["enum"], list)
            and len(names) == len(field["enum"])
        ):
            problems.append(
                FormProblem(
                    ("enumNames",), "enumNames must be a list of strings, one per enum value"
                )
            )
    elif "enumNames" in field:
        problems.append(
            FormProblem(("enumNames",), "enumNames names the values of an enum: add `enum`")
        )
    if "oneOf" in field:
        options = field["oneOf"]
        shaped = isinstance(options, list) and all(
            isinstance(option, Mapping)
            and set(option) == {"const", "title"}
            and isinstance(option["title"], str)
            for option in options
        )
        if not shaped:
            problems.append(
                FormProblem(("oneOf",), "oneOf must be a list of {const: <value>, title: <label>}")
            )
        else:
            problems += _choices([option["const"] for option in options], "oneOf")
    return problems


def _choices(values: Any, key: str) -> list[FormProblem]:
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        return [FormProblem((key,), f"{key} must list at least one string value")]
    if len(values) > MAX_CHOICES:
        return [FormProblem((key,), f"{key} has {len(values)} values, more than {MAX_CHOICES}")]
    if len(set(values)) != len(values):
        return [FormProblem((key,), f"{key} lists a value twice")]
    return []


def _number_problems(field: Mapping[str, Any], kind: str) -> list[FormProblem]:
    problems = [
        FormProblem((key,), f"{key} must be a number")
        for key in ("minimum", "maximum")
        if key in field and not _number(field[key])
    ]
    if not problems and field.get("minimum", float("-inf")) > field.get("maximum", float("inf")):
        problems.append(FormProblem(("minimum",), "minimum is above maximum"))
    return problems


def _required_problems(required: Any, properties: Mapping[str, Any]) -> list[FormProblem]:
    if required is None:
        return []
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        return [FormProblem(("required",), "required must be a list of property names")]
    problems = []
    for index, name in enumerate(required):
        if name not in properties:
            known = ", ".join(map(str, properties)) or "none"
            problems.append(
                FormProblem(
                    ("required", index), f"required names {name!r}, which is no property ({known})"
                )
            )
    if len(set(required)) != len(required):
        problems.append(FormProblem(("required",), "required names a property twice"))
    return problems


def form_value_problems(schema: Mapping[str, Any] | None, values: Any) -> list[str]:
    """What is wrong with ``values``, a person's answers to the form ``schema`` (a form
    ``form_problems`` accepts; None when the node has none), each naming the field: not an
    object, an unknown field, a required field missing, a value of the wrong type or out of
    bounds. Empty when they fit."""
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        return [f"the form values must be an object of field: value, not {type(values).__name__}"]
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    properties = properties if isinstance(properties, Mapping) else {}
    known = ", ".join(map(str, properties)) or "none: this node has no form"
    problems = [
        f"field {name!r} is not in the form; its fields: {known}"
        for name in values
        if name not in properties
    ]
    required = schema.get("required") if isinstance(schema, Mapping) else None
    for name in required if isinstance(required, list) else ():
        if name not in values:
            problems.append(f"field {name!r} is required")
    for name, value in values.items():
        field = properties.get(name)
        if isinstance(field, Mapping):
            trouble = _value_problem(field, value)
            if trouble is not None:
                problems.append(f"field {name!r}: {trouble}")
    return problems


def _value_problem(field: Mapping[str, Any], value: Any) -> str | None:
    """What is wrong with one value of a property, or None."""
    kind = field.get("type")
    if kind == "boolean":
        return None if isinstance(value, bool) else f"must be true or false, not {value!r}"
    if kind in ("number", "integer"):
        fits = _whole(value) if kind == "integer" else _number(value)
        if not fits:
            return f"must be {'a whole number' if kind == 'integer' else 'a number'}, not {value!r}"
        if "minimum" in field and value < field["minimum"]:
            return f"{value} is below the minimum of {field['minimum']}"
        if "maximum" in field and value > field["maximum"]:
            return f"{value} is above the maximum of {field['maximum']}"
        return None
    if not isinstance(value, str):
        return f"must be a string, not {value!r}"
    choices = field.get("enum")
    if choices is None and isinstance(field.get("oneOf"), list):
        choices = [option.get("const") for option in field["oneOf"] if isinstance(option, Mapping)]
    if isinstance(choices, list) and value not in choices:
        return f"{value!r} is not one of {', '.join(map(repr, choices))}"
    longest = min(field.get("maxLength", MAX_TEXT_LENGTH), MAX_TEXT_LENGTH)
    if len(value) > longest:
        return f"is {len(value)} characters long, more than {longest}"
    if len(value) < field.get("minLength", 0):
        return f"is {len(value)} characters long, fewer than {field['minLength']}"
    form = field.get("format")
    if form is not None and not _formatted(value, form):
        return f"{value!r} is not a valid {form}"
    return None


def _formatted(value: str, form: str) -> bool:
    if form == "email":
        return _EMAIL.fullmatch(value) is not None
    if form == "uri":
        return _URI.fullmatch(value) is not None
    try:
        if form == "date":
            date.fromisoformat(value)
        elif form == "date-time":
            datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
            return "T" in value.upper()
    except ValueError:
        return False
    return True


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
