"""A workflow's JSON Schemas match `pattern` and `patternProperties` on RE2: an author's
catastrophic pattern over a caller's argument is checked at once, and a pattern RE2 cannot run
is refused at import naming the tool, the field and the construct."""

from __future__ import annotations

import time

import jsonschema
import pytest

from graphs.engine import DefinitionError, parse_tool
from graphs.engine.language.regex import schema_pattern_problems
from tests.graphs.engine.helpers import chain

HOSTILE = "a" * 10_000 + "!"


def validator(schema: dict) -> jsonschema.protocols.Validator:
    return jsonschema.validators.validator_for(schema)(schema)


def with_input_schema(schema: dict) -> dict:
    return {**chain(), "inputSchema": schema}


@pytest.mark.parametrize(
    ("schema", "instance", "refused"),
    [
        ({"type": "string", "pattern": "^(a+)+$"}, HOSTILE, True),
        # The key does not match, so its schema (a number) does not apply.
        ({"type": "object", "patternProperties": {"^(a+)+$": {"type": "number"}}},
         {HOSTILE: "text"}, False),
        (
            {"type": "object", "properties": {}, "patternProperties": {"^(a+)+$": {}},
             "additionalProperties": False},
            {HOSTILE: 1},
            True,
        ),
    ],
)  # fmt: skip
def test_a_catastrophic_schema_pattern_is_checked_at_once(schema, instance, refused):
    started = time.monotonic()
    errors = list(validator(schema).iter_errors(instance))
    assert time.monotonic() - started < 0.25
    assert bool(errors) is refused


def test_schema_patterns_match_as_before():
    schema = {
        "type": "object",
        "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}(-[0-9]{4})?$"}},
        "patternProperties": {"^x-": {"type": "string"}},
    }
    assert not list(validator(schema).iter_errors({"zip": "12345-6789", "x-note": "ok"}))
    problems = [e.message for e in validator(schema).iter_errors({"zip": "1234", "x-a": 1})]
    assert sorted(problems) == [
        "'1234' does not match '^[0-9]{5}(-[0-9]{4})?$'",
        "1 is not of type 'string'",
    ]


def test_an_input_schema_pattern_re2_cannot_run_is_refused_at_import_naming_the_construct():
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "(?=a)b"}}}
    with pytest.raises(DefinitionError) as refused:
        parse_tool(with_input_schema(schema), server_names=())
    assert any(
        "inputSchema" in problem and "lookahead `(?=` is not supported" in problem
        for problem in refused.value.problems
    ), refused.value.problems


def test_pattern_properties_keys_are_checked_and_property_names_are_not_patterns():
    schema = {
        "type": "object",
        "properties": {"pattern": {"type": "string"}},  # a property called "pattern"
        "patternProperties": {"(a)\\1": {}},
    }
    problems = schema_pattern_problems(schema)
    assert len(problems) == 1
    assert "backreference `\\1` is not supported" in problems[0]
