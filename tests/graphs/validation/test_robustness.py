"""Whatever is sent, validation answers with problems, never an exception, and every fix it
offers applies to the definition as sent, read as JSON (in either file form)."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphs.engine.checks.problems import keys_of
from tests.graphs.validation.helpers import count_files, flat, validate

pytestmark = pytest.mark.timeout(30)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from(
        [
            "",
            "exit",
            "exti",
            "entry",
            "list_directory_node",
            "mcp",
            "switch",
            "transform",
            "filesystem",
            "list_directory",
            "$.entry.directory",
            "$.nope.x",
            "$executionCount('nope')",
            "{ 'count': 1 }",
            "$.",
            "(",
            "count-files",
        ]
    ),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            # YAML keys may be numbers, which JSON reads as text.
            st.one_of(
                st.sampled_from(
                    [
                        *("id", "type", "next", "rule", "var", "==", "eq", "target", "x"),
                        *("expr", "literal", "tool", "server", "args", "default"),
                        *("conditions", "nodes", "properties", "required"),
                    ]
                ),
                st.integers(0, 2),
            ),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=6,
)


def _places(document: Any, at: tuple = ()) -> list[tuple]:
    """Every path into the document."""
    found = [at]
    if isinstance(document, dict):
        for key, value in document.items():
            found += _places(value, (*at, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += _places(value, (*at, index))
    return found


@st.composite
def mutated(draw: st.DrawFn) -> dict:
    document = count_files()
    if draw(st.booleans()):
        document = flat(document)
    for _ in range(draw(st.integers(1, 3))):
        place = draw(st.sampled_from(_places(document)[1:]))
        parent = document
        for key in place[:-1]:
            parent = parent[key]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[place[-1]]
        else:
            parent[place[-1]] = draw(VALUES)
    return document


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_any_definition_gets_problems_and_every_fix_applies(document):
    sent = copy.deepcopy(document)

    problems = validate(document)

    assert document == sent  # validation changes nothing it is given
    as_json = json.loads(json.dumps(document))  # what pointers and fixes are into
    for problem in problems:
        assert problem.severity in ("error", "warning")
        assert problem.message
        if problem.path:  # a pointer into the document as sent, or to where a key is missing
            parent = keys_of(problem.path)[:-1]
            value: Any = as_json
            for key in parent:
                value = value[int(key)] if isinstance(value, list) else value[key]
        if problem.fix is not None:
            jsonpatch.apply_patch(as_json, problem.fix)  # raises if it does not apply
