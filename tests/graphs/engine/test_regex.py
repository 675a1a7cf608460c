"""Regexes run on RE2: catastrophic patterns finish at once, constructs RE2 cannot run are
refused at import naming the node and the construct, and JSONata's regex functions give the
results they gave on Python's `re`."""

from __future__ import annotations

import re
import time

import pytest
from jsonata import Jsonata, datetimeutils

from graphs.engine import DefinitionError, GraphRunError, parse_tool
from graphs.engine.language.expressions import (
    Expression,
    ExpressionError,
    ExpressionTimeout,
    Guard,
    to_plain,
)
from tests.graphs.engine.helpers import chain, run, tool, transform

HOSTILE = "a" * 10_000 + "!"


def evaluate(source: str, data: object = None, seconds: float = 30) -> object:
    """An expression's value through the engine, bounded as a run's field is."""
    guard = Guard(time.monotonic() + seconds)
    guard.start()
    return Expression(source).evaluate(data, guard.bindings, guard)


def timed(source: str, data: object = None) -> tuple[object, float]:
    began = time.perf_counter()
    value = evaluate(source, data)
    return value, time.perf_counter() - began


# Each of these takes Python's re longer than the age of the universe on 10,000 characters
# (26 characters already cost seconds), and held the interpreter all that time.
# Linear matching takes about 3 ms here; the bound leaves room for a stall of a shared
# machine (CI once measured 0.33 s against an earlier 0.25 s bound).
LINEAR_SECONDS = 1.0


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("$contains($.x, /^(a+)+$/)", False),
        ("$match($.x, /(a+)+$/)", None),
        ("$match($.x, /(a|aa)+b/)", None),
        ("$replace($.x, /(a|a)*b/, 'x')", HOSTILE),
        ("$count($split($.x, /(a+)+b/))", 1),
        ("$contains($.x, /^(\\w+\\s?)*$/)", False),
        ("$contains($.x, /(a*)*$(?:b)/)", False),
        ("$toMillis($.x, '(a+)+')", None),
    ],
)
def test_a_catastrophic_pattern_over_ten_thousand_characters_is_linear(source, expected):
    value, seconds = timed(source, {"x": HOSTILE})

    assert value == expected
    assert seconds < LINEAR_SECONDS


def test_the_constant_pattern_that_froze_the_process_answers_at_once():
    value, seconds = timed(f'$match("{"a" * 36}!", /(a+)+$/)')

    assert value is None
    assert seconds < LINEAR_SECONDS


def test_a_hostile_transform_runs_through_the_whole_engine_within_its_bound():
    raw = chain(transform("check", "{'ok': $contains($.entry.x, /^(a+)+$/)}", next="exit"))
    began = time.perf_counter()

    assert run(raw, {"x": HOSTILE}) == {"ok": False}
    assert time.perf_counter() - began < 0.5


def test_many_matches_stop_at_the_time_bound_not_after_them():
    # Each match of /a(?:.*z)?/ scans to the end looking for a z: quadratic, about a minute
    # here, in a loop over the matches that the bound must interrupt.
    guard = Guard(time.monotonic() + 0.3)
    guard.start()
    began = time.perf_counter()

    with pytest.raises(ExpressionTimeout, match="time limit"):
        Expression("$count($match($.x, /a(?:.*z)?/))").evaluate(
            {"x": "a" * 200_000}, guard.bindings, guard
        )
    assert time.perf_counter() - began < 1.5


def problems(source: str) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        parse_tool(chain(transform("check", source)), server_names=())
    return caught.value.problems


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        ("(?=a)b", "lookahead `(?=`"),
        ("a(?!b)", "negative lookahead `(?!`"),
        ("(?<=a)b", "lookbehind `(?<=`"),
        ("(?<!a)b", "negative lookbehind `(?<!`"),
        ("(a)\\1", "backreference `\\1`"),
        ("(?<x>a)\\k<x>", "named backreference `\\k<…>`"),
        ("(?>a+)b", "atomic group `(?>`"),
        ("a++b", "possessive quantifier `++`"),
        ("\\u00e9", "escape `\\u`"),
        ("a{1001}", "a repetition count over 1000"),
    ],
)
def test_a_construct_re2_cannot_run_is_refused_at_import_naming_node_field_and_construct(
    pattern, construct
):
    [problem] = problems(f"$contains($.entry.x, /{pattern}/)")

    assert problem.startswith(
        f"tool 't', node 'check', field 'transform.expr': regex /{pattern}/: {construct} "
        "is not supported: "
    )


def test_lookaround_refusal_says_why_and_what_to_write_instead():
    [problem] = problems("$match($.entry.x, /^(?=.*\\d)\\w+$/)")

    assert "RE2 runs in linear time and has no lookaround" in problem
    assert "keep the part you need with a group" in problem


def test_a_refused_regex_in_mcp_args_names_the_field():
    raw = chain(
        {
            "id": "call",
            "type": "mcp",
            "server": "srv",
            "tool": "x",
            "args": {"name": {"expr": "$replace($.entry.x, /(\\w)\\1/, '')"}},
        }
    )
    with pytest.raises(DefinitionError) as caught:
        parse_tool(raw, server_names=["srv"])

    [problem] = caught.value.problems
    assert "node 'call', field 'args.name.expr': regex /(\\w)\\1/: backreference `\\1`" in problem


def switch(rule: dict) -> dict:
    """A tool whose switch goes to node `yes` when ``rule`` holds, else straight to exit."""
    return tool(
        {"id": "entry", "type": "entry", "next": "route"},
        {
            "id": "route",
            "type": "switch",
            "default": "exit",
            "conditions": [{"rule": rule, "target": "yes"}],
        },
        transform("yes", "'yes'", next="exit"),
        {"id": "exit", "type": "exit"},
    )


def test_a_switch_rule_path_runs_its_regex_on_re2():
    # JSON Logic has no regex operator; a rule's var path is JSONata and may hold one.
    began = time.perf_counter()

    rule = {"var": "$contains(entry.x, /^(a+)+$/)"}
    assert run(switch(rule), {"x": HOSTILE}) == "exit"  # the switch's choice: no match
    assert run(switch(rule), {"x": "aaaa"}) == "yes"
    assert time.perf_counter() - began < 0.5


def test_a_switch_rule_path_with_a_refused_regex_is_refused_at_import():
    with pytest.raises(DefinitionError) as caught:
        parse_tool(switch({"var": "$contains(entry.x, /(?!a)b/)"}), server_names=())

    [problem] = caught.value.problems
    assert "node 'route', field 'conditions[0].rule'" in problem
    assert "regex /(?!a)b/: negative lookahead `(?!` is not supported" in problem


def test_a_pattern_built_at_run_time_is_refused_when_it_runs_failing_the_node():
    # The literal is inside text given to $eval: it is only compiled while the node runs.
    raw = chain(transform("check", "$eval('$contains(\"ab\", /(?<=a)b/)')"))

    with pytest.raises(GraphRunError) as caught:
        run(raw)

    assert caught.value.kind == "expression"
    assert caught.value.node_id == "check"
    assert str(caught.value).startswith(
        "node 'check', field 'transform.expr': evaluation failed: regex /(?<=a)b/: "
        "lookbehind `(?<=` is not supported"
    )


def test_patterns_built_at_run_time_run_on_re2_too():
    pattern = "/^(a+)+$/"
    value, seconds = timed(f"$eval('$contains($.x, {pattern})', $)", {"x": HOSTILE})

    assert value is False
    assert seconds < LINEAR_SECONDS


def test_a_format_number_separator_must_be_one_character():
    # The option goes unescaped into a stdlib regex run over the picture.
    source = "$formatNumber(1, $.picture, {'exponent-separator': '(a+)+b'})"

    with pytest.raises(ExpressionError, match="exponent-separator must be one character"):
        evaluate(source, {"picture": "0" + "a" * 40})


# Results on Python's re (jsonata-python's default engine) and on RE2 are the same for
# what both can run.
EQUIVALENT = [
    "$match('ababbabbcc', /a(b+)/)",
    "$match('ababbabbcc', /a(b+)/, 2)",
    "$match('Hello World', /(?i)o\\s*W/)",
    "$match('Hello World', /o\\s*w/i)",
    "$match('one\\ntwo\\nthree', /^t\\w+$/m)",
    "$match('one\\ntwo', /^t\\w+$/)",
    "$match('héllo wörld', /ö(.)/)",
    "$match('a1b22c333', /(?P<digits>\\d+)/)",
    "$match('abc', /x*/)",
    "$match('2024-03-05', /(\\d+)-(\\d+)-(\\d+)/).groups",
    "$match('aaa', /(b)?a/)",
    "$contains('abracadabra', /bra/)",
    "$contains('abracadabra', /^bra/)",
    "$contains('ABC', /b/i)",
    "$replace('John Smith', /(\\w+)\\s(\\w+)/, '$2, $1')",
    "$replace('abcabc', /b/, 'x')",
    "$replace('abcabc', /b/, 'x', 1)",
    "$replace('abc', /(b)/, '[$12]')",
    "$replace('abc', /(b)/, '[$5]')",
    "$replace('abc', /b/, '$$')",
    "$replace('abc', /b/, '$0$0')",
    "$replace('265USD', /([0-9]+)USD/, '$$$1')",
    "$replace('abxd', /x*/, '-')",
    "$replace('a1b22', /\\d+/, function($m) { $string($number($m.match) * 2) })",
    "$replace('a1b22', /(\\d)(\\d)?/, function($m) { $m.groups[1] & $m.groups[0] })",
    "$split('a1b22c333d', /\\d+/)",
    "$split('a1b22c333d', /(\\d)\\d*/)",
    "$split('a1b22c333d', /\\d+/, 2)",
    "$split('axb', /x*/)",
    "$split('abc', /(x)|b/)",
    "/a(b)/('xabyab').match",
    "/a(b)/('xabyab').next().start",
    "$toMillis('2024-03-05', '[Y0001]-[M01]-[D01]')",
    "$toMillis('05 March 2024', '[D01] [MNn] [Y0001]')",
    "$toMillis('5/3/24 14:07', '[D]/[M]/[Y01] [H]:[m]')",
    "$toMillis('2024-03-05x', '[Y0001]-[M01]-[D01]')",
    "$formatNumber(1234.5678, '#,##0.00')",
    "$formatNumber(1234.5678, '#.##0,00', {'decimal-separator': ',', 'grouping-separator': '.'})",
    "$formatNumber(0.00012, '0.0e0')",
    "$formatNumber(12345, '0.0E0', {'exponent-separator': 'E'})",
]


@pytest.mark.parametrize("source", EQUIVALENT)
def test_results_are_those_of_pythons_re(source, monkeypatch):
    with monkeypatch.context() as stdlib:
        stdlib.setattr(datetimeutils, "re", re)  # as jsonata-python ships: pictures on re
        expected = to_plain(Jsonata(source).evaluate(None))  # its default engine: re

    assert evaluate(source) == expected
