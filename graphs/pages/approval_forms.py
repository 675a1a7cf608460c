"""An approval node's form on the pages: its JSON Schema (graphs/engine/stops/approval_forms.py, a
flat object of strings, numbers, integers, booleans and choices) as HTML fields, and what a
reviewer submitted as the values `decide` checks, typed as the schema says.

Only the shape is translated here; whether the values fit (required, bounds, formats) is
`decide`'s to say, naming the field, so the page and REST refuse the same things with the
same words. The browser's own checks (required, min, max, maxlength) come from the same
schema and only save a round trip.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.http import QueryDict

# Submitted fields are named with this prefix, so a form field can never be taken for the
# decision, the comment or the CSRF token.
PREFIX = "field-"
# A string longer than this, with no format or choices, gets a text area.
LONG_TEXT = 120
_INPUT_TYPES = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime-local"}
_WHOLE = re.compile(r"[+-]?\d+")
# What a datetime-local input sends: a time without a zone, which the pages read as UTC.
_LOCAL_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?")


@dataclass(frozen=True)
class FormField:
    """One property of a form as an HTML control. `widget`: input, textarea, select or
    checkbox; `attrs`: the input's type and the schema's bounds as HTML attributes."""

    name: str
    label: str
    description: str
    required: bool
    widget: str
    attrs: dict[str, str] = field(default_factory=dict)
    choices: list[tuple[str, str]] = field(default_factory=list)
    initial: Any = None

    @property
    def html_name(self) -> str:
        return PREFIX + self.name


def _properties(schema: Any) -> Mapping[str, Any]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return properties if isinstance(properties, Mapping) else {}


def _required(schema: Any) -> set[str]:
    required = schema.get("required") if isinstance(schema, Mapping) else None
    return (
        {name for name in required if isinstance(name, str)}
        if isinstance(required, list)
        else set()
    )


def _number_text(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _choices(prop: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    values = prop.get("enum")
    if isinstance(values, list):
        names = prop.get("enumNames")
        shown = names if isinstance(names, list) and len(names) == len(values) else values
        return [(str(value), str(name)) for value, name in zip(values, shown, strict=True)]
    options = prop.get("oneOf")
    if isinstance(options, list):
        return [
            (str(option.get("const")), str(option.get("title") or option.get("const")))
            for option in options
            if isinstance(option, Mapping)
        ]
    return None


def form_fields(schema: Any) -> list[FormField]:
    """The form's properties as HTML fields, in the schema's order; none for no form."""
    required = _required(schema)
    fields = []
    for name, prop in _properties(schema).items():
        if not isinstance(prop, Mapping):
            continue
        kind = prop.get("type")
        label = str(prop.get("title") or name)
        description = str(prop.get("description") or "")
        is_required = name in required
        initial = prop.get("default")
        attrs: dict[str, str] = {}
        choices: list[tuple[str, str]] = []
        if kind == "boolean":
            widget = "checkbox"
            is_required = False  # unticked is an answer: false
        elif kind in ("number", "integer"):
            widget = "input"
            attrs["type"] = "number"
            attrs["step"] = "1" if kind == "integer" else "any"
            for keyword, attribute in (("minimum", "min"), ("maximum", "max")):
                if isinstance(prop.get(keyword), int | float):
                    attrs[attribute] = _number_text(prop[keyword])
        elif (found := _choices(prop)) is not None:
            widget, choices = "select", found
        else:
            fmt = prop.get("format")
            longest = prop.get("maxLength")
            if fmt is None and (not isinstance(longest, int) or longest > LONG_TEXT):
                widget = "textarea"
            else:
                widget = "input"
                attrs["type"] = _INPUT_TYPES.get(str(fmt), "text")
            if isinstance(longest, int):
                attrs["maxlength"] = str(longest)
            if isinstance(prop.get("minLength"), int):
                attrs["minlength"] = str(prop["minLength"])
        if initial is not None and kind != "boolean":
            initial = _number_text(initial) if kind in ("number", "integer") else str(initial)
        fields.append(
            FormField(name, label, description, is_required, widget, attrs, choices, initial)
        )
    return fields


def _typed(kind: Any, text: str) -> Any:
    """A submitted text as the schema's type; a text that is not one stays as it is, for
    `decide` to refuse naming the field."""
    if kind == "integer" and _WHOLE.fullmatch(text):
        return int(text)
    if kind == "number":
        if _WHOLE.fullmatch(text):
            return int(text)
        try:
            number = float(text)
        except ValueError:
            return text
        return number if math.isfinite(number) else text
    return text


def submitted_values(schema: Any, data: QueryDict) -> dict[str, Any]:
    """What a reviewer filled in, as the form's values: a checkbox is true or false, numbers
    are numbers, a field left empty is left out (a required one is then reported missing),
    a date-time without a zone is UTC (what the pages show)."""
    values: dict[str, Any] = {}
    for name, prop in _properties(schema).items():
        kind = prop.get("type") if isinstance(prop, Mapping) else None
        if kind == "boolean":
            values[name] = data.get(PREFIX + name) is not None
            continue
        text = data.get(PREFIX + name, "")
        if kind in ("number", "integer"):
            text = text.strip()
        if text == "":
            continue
        if (
            isinstance(prop, Mapping)
            and prop.get("format") == "date-time"
            and _LOCAL_TIME.fullmatch(text)
        ):
            text += ":00Z" if text.count(":") == 1 else "Z"
        values[name] = _typed(kind, text)
    return values
