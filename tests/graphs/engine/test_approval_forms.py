"""An approval node's form (graphs/engine/stops/approval_forms.py): the JSON Schema subset MCP
elicitation allows, bounded, and the values a person submits checked against it."""

from __future__ import annotations

import pytest

from graphs.engine.stops.approval_forms import (
    MAX_PROPERTIES,
    MAX_TEXT_LENGTH,
    FormProblem,
    form_problems,
    form_value_problems,
)

pytestmark = pytest.mark.timeout(10)

FORM = {
    "type": "object",
    "title": "Refund",
    "description": "Tell us why",
    "properties": {
        "reason": {"type": "string", "maxLength": 500, "title": "Reason"},
        "email": {"type": "string", "format": "email"},
        "when": {"type": "string", "format": "date"},
        "priority": {"type": "string", "enum": ["low", "high"], "enumNames": ["Low", "High"]},
        "team": {
            "type": "string",
            "oneOf": [{"const": "a", "title": "Team A"}, {"const": "b", "title": "Team B"}],
        },
        "amount": {"type": "number", "minimum": 0, "maximum": 1000, "default": 10},
        "count": {"type": "integer", "minimum": 1},
        "notify": {"type": "boolean", "default": False},
    },
    "required": ["reason"],
}


def test_every_kind_of_field_elicitation_allows_is_accepted():
    assert form_problems(FORM) == []


@pytest.mark.parametrize(
    ("form", "keys", "said"),
    [
        ("reason", (), "must be a mapping"),
        ({"properties": {}}, (), "must have `type: object`"),
        ({"type": "object"}, (), "`properties` is missing"),
        ({"type": "object", "properties": {}, "$defs": {}}, ("$defs",), "keyword '$defs'"),
        (
            {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}},
            ("properties", "a", "type"),
            "property 'a': type 'object' is not allowed (forms are flat",
        ),
        (
            {"type": "object", "properties": {"tags": {"type": "array", "items": {}}}},
            ("properties", "tags", "type"),
            "no nested objects or arrays",
        ),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}},
            ("properties", "a"),
            "property 'a': has no `type`; a property is one of string, number, integer, boolean",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}},
            ("properties", "a", "pattern"),
            "keyword 'pattern' is not allowed for a string; it allows type, title",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "format": "ipv4"}}},
            ("properties", "a", "format"),
            "use one of email, uri, date, date-time",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "maxLength": 10**6}}},
            ("properties", "a", "maxLength"),
            f"from 0 to {MAX_TEXT_LENGTH}",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "enum": []}}},
            ("properties", "a", "enum"),
            "at least one string value",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "number", "minimum": 5, "maximum": 1}}},
            ("properties", "a", "minimum"),
            "minimum is above maximum",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "boolean", "default": "yes"}}},
            ("properties", "a", "default"),
            "default must be true or false",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]},
            ("required", 0),
            "required names 'b', which is no property (a)",
        ),
    ],
)
def test_what_elicitation_cannot_show_is_refused_at_its_place(form, keys, said):
    problems = form_problems(form)

    assert any(problem.keys == keys and said in problem.message for problem in problems), problems


def test_a_form_is_bounded_in_its_fields():
    form = {
        "type": "object",
        "properties": {f"f{index}": {"type": "boolean"} for index in range(MAX_PROPERTIES + 1)},
    }

    assert form_problems(form) == [
        FormProblem(
            ("properties",),
            f"{MAX_PROPERTIES + 1} properties, more than the {MAX_PROPERTIES} a form may have",
        )
    ]


def test_values_that_fit_the_form_have_no_problem():
    values = {
        "reason": "duplicate charge",
        "email": "ann@example.com",
        "when": "2026-11-26",
        "priority": "high",
        "team": "b",
        "amount": 12.5,
        "count": 3,
        "notify": True,
    }

    assert form_value_problems(FORM, values) == []


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({}, "field 'reason' is required"),
        ({"reason": "x", "colour": "red"}, "field 'colour' is not in the form; its fields: reason"),
        ({"reason": 3}, "field 'reason': must be a string, not 3"),
        ({"reason": "x" * 501}, "field 'reason': is 501 characters long, more than 500"),
        ({"reason": "x", "email": "nope"}, "field 'email': 'nope' is not a valid email"),
        ({"reason": "x", "when": "26/11/2026"}, "field 'when': '26/11/2026' is not a valid date"),
        ({"reason": "x", "priority": "urgent"}, "field 'priority': 'urgent' is not one of 'low'"),
        ({"reason": "x", "team": "c"}, "field 'team': 'c' is not one of 'a', 'b'"),
        ({"reason": "x", "amount": 1001}, "field 'amount': 1001 is above the maximum of 1000"),
        ({"reason": "x", "count": 1.5}, "field 'count': must be a whole number, not 1.5"),
        ({"reason": "x", "notify": "yes"}, "field 'notify': must be true or false"),
        (["reason"], "the form values must be an object"),
    ],
)
def test_values_that_do_not_fit_are_refused_naming_the_field(values, said):
    problems = form_value_problems(FORM, values)

    assert any(said in problem for problem in problems), problems


def test_a_string_without_max_length_is_still_bounded():
    form = {"type": "object", "properties": {"note": {"type": "string"}}}

    [problem] = form_value_problems(form, {"note": "x" * (MAX_TEXT_LENGTH + 1)})

    assert f"more than {MAX_TEXT_LENGTH}" in problem


def test_a_node_without_a_form_takes_no_values():
    assert form_value_problems(None, {}) == []
    assert form_value_problems(None, None) == []
    assert form_value_problems(None, {"reason": "x"}) == [
        "field 'reason' is not in the form; its fields: none: this node has no form"
    ]
