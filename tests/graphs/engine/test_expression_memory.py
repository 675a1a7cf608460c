"""One step of an expression cannot build an unbounded value: a text doubled in a recursive
function reached 1 GB in 3 s, under the time bound, and a range of ten million numbers took
450 MB. Each step's text and array are bounded, and `$join` checks the size it would build."""

from __future__ import annotations

import time

import pytest

from graphs.engine.language.expressions import (
    VALUE_CHARACTERS_LIMIT,
    VALUE_ITEMS_LIMIT,
    Expression,
    ExpressionError,
    Guard,
)


def evaluate(source: str) -> object:
    guard = Guard(time.monotonic() + 30)
    guard.start()
    return Expression(source).evaluate(None, guard.bindings, guard)


@pytest.mark.parametrize(
    ("source", "words"),
    [
        (
            '($f := function($s, $n){ $n = 0 ? $s : $f($s & $s, $n - 1) }; $f("a", 40))',
            f"over the limit of {VALUE_CHARACTERS_LIMIT:,}",
        ),
        ('$pad("", 20000000)', f"over the limit of {VALUE_CHARACTERS_LIMIT:,}"),
        ("$count([1..10000000])", f"over the limit of {VALUE_ITEMS_LIMIT:,}"),
        (
            '($s := $pad("", 6000000); $join([$s, $s]))',
            "$join would build a text of 12,000,000 characters",
        ),
    ],
)
def test_a_step_that_builds_too_much_fails_naming_the_limit(source, words):
    started = time.monotonic()
    with pytest.raises(ExpressionError, match=words.replace("$", r"\$")):
        evaluate(source)
    assert time.monotonic() - started < 1


def test_values_under_the_limits_are_built():
    assert evaluate('$length($pad("", 1000000))') == 1_000_000
    assert evaluate("$count([1..100000])") == 100_000
    assert evaluate('$join(["a", "b", "c"], "-")') == "a-b-c"
