"""Plain object paths are read without JSONata, and give exactly what JSONata gives."""

from __future__ import annotations

import time

import pytest

from graphs.engine.language import expressions
from graphs.engine.language.expressions import Expression, Guard

UNDEFINED = object()

DATA = [
    {"a": None},
    {"a": 1, "b": {"c": 2.5, "d": [1, 2], "e": {"f": "x"}}},
    {"a": [1]},
    {"a": [{"b": 1}, {"b": 2}]},
    {"a": {"b": [{"c": 1}]}},
    {"a": True, "and": 3},
    {},
    {"a": 5},
    {"a": {"b": None}},
]
PATHS = ["$.a", "a", "$.b.c", "b.d", "$.b.e", "b.e.f", "$.a.b", "a.b.c", "$.and", "$.missing.x"]


def evaluate(source: str, data: dict) -> object:
    guard = Guard(time.monotonic() + 60)
    guard.start()
    return Expression(source).evaluate(data, guard.bindings, guard, undefined=UNDEFINED)


@pytest.mark.parametrize("source", PATHS)
@pytest.mark.parametrize("data", DATA)
def test_a_plain_path_reads_what_jsonata_reads(monkeypatch, source, data):
    fast = evaluate(source, data)
    monkeypatch.setattr(expressions, "_read_path", lambda *args: expressions._NOT_PLAIN)
    assert fast == evaluate(source, data)
    assert type(fast) is type(evaluate(source, data))


@pytest.mark.parametrize(
    ("source", "keys"),
    [
        ("$.step.count", ("step", "count")),
        (" entry.n ", ("entry", "n")),
        ("$.and", None),
        ("$", None),
        ("$.a[0]", None),
        ("$count($.a)", None),
        ("a.b.`c d`", None),
    ],
)
def test_only_plain_paths_take_the_short_way(source, keys):
    assert expressions._plain_path(source) == keys


def test_a_plain_path_result_is_a_copy_not_the_context_itself():
    data = {"a": {"b": {"c": 1}}}
    result = evaluate("$.a", data)
    result["b"]["c"] = 2
    assert data["a"]["b"]["c"] == 1
