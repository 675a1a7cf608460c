"""`$replace` in time linear in its text: jsonata-python's own copied the rest of the text at
every literal match and rescanned the whole text for each replacement under a limit, inside
one step where no time bound fires. Results are jsonata-python's, except a regex with a limit,
which replaces its first matches in one pass as JSONata's reference implementation does."""

from __future__ import annotations

import time

import pytest
from jsonata import Jsonata

from graphs.engine.language.expressions import Expression, Guard

MEGABYTE = "a" * 1_000_000


def evaluate(source: str, data: object = None) -> object:
    guard = Guard(time.monotonic() + 30)
    guard.start()
    return Expression(source).evaluate(data, guard.bindings, guard)


@pytest.mark.parametrize(
    "source",
    [
        '$replace("hello world", "o", "0")',
        '$replace("hello world", "o", "[$0]")',
        '$replace("hello world", "o", "$$1$1")',
        '$replace("aaa", "a", "b", 2)',
        '$replace("aaa", "a", "b", 2.5)',
        '$replace("aaa", "a", "b", 0)',
        '$replace("abc abc", /(b)(c)/, "$2$1")',
        '$replace("aaaa", /a/, "b", 2)',
        '$replace("John Smith", /(\\w+)\\s(\\w+)/, "$2, $1")',
        '$replace("a.b.c", ".", "")',
    ],
)
def test_it_gives_jsonata_pythons_results(source):
    assert evaluate(source) == Jsonata(source).evaluate(None)


def test_a_regex_with_a_limit_replaces_its_first_matches_in_one_pass():
    # jsonata-python rescanned after each replacement and replaced the "a" it had just put in.
    assert evaluate('$replace("ab", /a/, "ba", 2)') == "bab"


def test_a_literal_replacement_over_a_megabyte_takes_milliseconds():
    started = time.monotonic()
    replaced = evaluate('$replace($.x, "a", "b")', {"x": MEGABYTE})
    assert time.monotonic() - started < 0.5
    assert replaced == "b" * 1_000_000


def test_a_regex_replacement_with_a_large_limit_is_linear():
    started = time.monotonic()
    replaced = evaluate('$replace($.x, /a/, "b", 50000)', {"x": MEGABYTE})
    assert time.monotonic() - started < 2
    assert replaced == "b" * 50_000 + "a" * 950_000
