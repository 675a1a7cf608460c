"""Running graphs: node semantics, loops, switches, args, history functions and limits."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from mcp.types import CallToolResult, TextContent

from graphs.engine import (
    ExecutionLimits,
    GraphRunError,
    compile_tool,
    execute,
    parse_definition,
)
from tests.graphs.engine.helpers import Calls, chain, compiled, run, text_result, tool, transform

COUNT_FILES = (Path(__file__).parent / "count_files.yaml").read_text()
LISTING = "[FILE] a.txt\n[FILE] b.txt\n[DIR] sub"


def test_count_files_runs_against_a_fake_filesystem():
    definition = parse_definition(COUNT_FILES)
    calls = Calls(
        lambda arguments: CallToolResult(
            content=[TextContent(type="text", text=LISTING)],
            structured_content={"content": LISTING},
        )
    )

    result = execute(
        compile_tool(definition.tool("count_files")),
        {"directory": "/data"},
        call_tool=calls,
        limits=definition.limits,
    )

    assert result == {"count": 3}
    assert calls.calls == [("filesystem", "list_directory", {"path": "/data"}, None)]


# A counter as in seed 003: each pass through `increment` adds the next number to the sum.
COUNTER = tool(
    {"id": "entry", "type": "entry", "next": "increment"},
    transform(
        "increment",
        """$executionCount("increment") = 0
            ? {"counter": 1, "sum": 1, "target": $.entry.n}
            : {"counter": $nodeExecution("increment", -1).counter + 1,
               "sum": $nodeExecution("increment", -1).sum
                      + $nodeExecution("increment", -1).counter + 1,
               "target": $.entry.n}""",
        next="check",
    ),
    {
        "id": "check",
        "type": "switch",
        "conditions": [
            {
                "rule": {"<": [{"var": "increment.counter"}, {"var": "entry.n"}]},
                "target": "increment",
            }
        ],
        "default": "done",
    },
    transform("done", "$.increment.sum", next="exit"),
    {"id": "exit", "type": "exit"},
)


@pytest.mark.parametrize(("n", "total"), [(1, 1), (5, 15), (100, 5050)])
def test_a_cyclic_counter_ends_with_the_right_sum(n, total):
    assert run(COUNTER, {"n": n}) == total


ROUTER = tool(
    {"id": "entry", "type": "entry", "next": "route"},
    {
        "id": "route",
        "type": "switch",
        "conditions": [
            {"rule": {">": [{"var": "entry.price"}, 100]}, "target": "expensive"},
            {"rule": {"==": [{"var": "entry.status"}, "active"]}, "target": "active"},
        ],
        "default": "other",
    },
    transform("expensive", '"expensive"', next="exit"),
    transform("active", '"active"', next="exit"),
    transform("other", '"other: " & $previousNode()', next="exit"),
    {"id": "exit", "type": "exit"},
)


@pytest.mark.parametrize(
    ("arguments", "result"),
    [
        ({"price": 150, "status": "active"}, "expensive"),  # first condition wins
        ({"price": 50, "status": "active"}, "active"),
        ({"price": 50, "status": "closed"}, "other: other"),  # a switch's output is its target
        ({}, "other: other"),
    ],
)
def test_a_switch_takes_each_branch_and_its_default(arguments, result):
    assert run(ROUTER, arguments) == result


def test_a_switch_with_no_match_and_no_default_fails_saying_so():
    raw = tool(
        {"id": "entry", "type": "entry", "next": "route"},
        {
            "id": "route",
            "type": "switch",
            "conditions": [{"rule": {"var": "entry.go"}, "target": "exit"}],
        },
        {"id": "exit", "type": "exit"},
    )

    assert run(raw, {"go": True}) == "exit"
    with pytest.raises(GraphRunError) as caught:
        run(raw, {"go": False})
    assert caught.value.kind == "definition"
    assert caught.value.node_id == "route"
    assert "no condition held and the switch has no `default`" in str(caught.value)


@pytest.mark.parametrize("falsy", ["0", "false", '""', "null", "[]", "{}"])
def test_an_exit_returns_falsy_outputs_unchanged(falsy):
    expected = {"0": 0, "false": False, '""': "", "null": None, "[]": [], "{}": {}}[falsy]

    result = run(chain(transform("value", falsy)))

    assert result == expected
    assert type(result) is type(expected)


def test_an_exit_right_after_the_entry_returns_the_arguments():
    assert run(chain(), {"a": 1}) == {"a": 1}


def test_args_are_evaluated_in_both_forms_at_any_depth_with_a_literal_escape():
    calls = Calls(lambda arguments: text_result('{"ok": true}'))
    args = {
        "path": "$.entry.dir",
        "options": {
            "depth": {"expr": "$.entry.depth * 2"},
            "names": ["$uppercase($.entry.dir)", {"expr": "$.entry.missing"}, "plain"],
            "nested": [{"deeper": {"expr": "$count($.entry.list)"}}],
        },
        "price": {"literal": "$5"},
        "verbatim": {"literal": {"expr": "$.not.evaluated"}},
        "optional": "$.entry.missing",
        "number": 3,
    }
    raw = chain({"id": "call", "type": "mcp", "server": "srv", "tool": "go", "args": args})

    result = run(raw, {"dir": "/tmp", "depth": 2, "list": [1, 2, 3]}, call_tool=calls)

    assert result == {"ok": True}
    assert calls.calls[0][2] == {
        "path": "/tmp",
        "options": {"depth": 4, "names": ["/TMP", None, "plain"], "nested": [{"deeper": 3}]},
        "price": "$5",
        "verbatim": {"expr": "$.not.evaluated"},
        "number": 3,  # and "optional", undefined, is left out
    }


def test_a_tool_that_changes_its_arguments_does_not_change_the_next_call():
    def mutating(arguments):
        arguments["list"].append("x")
        arguments["fixed"]["k"] = "changed"
        return text_result("{}")

    calls = Calls(mutating)
    args = {"list": [1], "fixed": {"literal": {"k": "v"}}}
    call = compiled(
        chain({"id": "call", "type": "mcp", "server": "srv", "tool": "go", "args": args})
    )

    execute(call, {}, call_tool=calls)
    execute(call, {}, call_tool=calls)

    assert calls.calls[1][2] == {"list": [1, "x"], "fixed": {"k": "changed"}}  # after the call
    assert call.tool.node("call").args == {"list": [1], "fixed": {"literal": {"k": "v"}}}


def test_args_given_as_one_expression_must_give_an_object():
    calls = Calls()
    raw = chain({"id": "call", "type": "mcp", "server": "srv", "tool": "go", "args": "$.entry"})

    run(raw, {"a": 1}, call_tool=calls)
    assert calls.calls[0][2] == {"a": 1}

    with pytest.raises(GraphRunError, match="field 'args': gave list, not an object"):
        run(chain(raw["nodes"][1] | {"args": "$.entry.items", "next": "exit"}), {"items": [1, 2]})


def test_history_functions_look_back_through_the_run():
    raw = chain(
        transform("first", '"a"'),
        transform("second", '"b"'),
        transform(
            "look",
            """{
              "previous": $previousNode(),
              "two_back": $previousNode(2),
              "too_far": $previousNode(99),
              "count_first": $executionCount("first"),
              "count_unknown": $executionCount("nope"),
              "first_of_first": $nodeExecution("first", 0),
              "last_of_first": $nodeExecution("first", -1),
              "out_of_range": $nodeExecution("first", 1),
              "out_of_range_back": $nodeExecution("first", -2),
              "all_second": $nodeExecutions("second"),
              "entry": $nodeExecution("entry", 0).x
            }""",
        ),
    )

    assert run(raw, {"x": 7}) == {
        "previous": "b",
        "two_back": "a",
        "count_first": 1,
        "count_unknown": 0,
        "first_of_first": "a",
        "last_of_first": "a",
        "all_second": ["b"],
        "entry": 7,
        # too_far, out_of_range and out_of_range_back are null, so JSONata leaves them out
    }


def test_history_functions_in_a_loop_see_every_execution():
    raw = tool(
        {"id": "entry", "type": "entry", "next": "step"},
        transform("step", "$executionCount('step') + 1", next="again"),
        {
            "id": "again",
            "type": "switch",
            "conditions": [
                {"rule": {"<": [{"var": "$executionCount('step')"}, 4]}, "target": "step"}
            ],
            "default": "report",
        },
        transform(
            "report",
            "{'all': $nodeExecutions('step'), 'third': $nodeExecution('step', 2),"
            " 'second_last': $nodeExecution('step', -2), 'back3': $previousNode(3)}",
            next="exit",
        ),
        {"id": "exit", "type": "exit"},
    )

    assert run(raw) == {"all": [1, 2, 3, 4], "third": 3, "second_last": 3, "back3": "step"}


def test_a_bad_history_function_call_is_an_expression_error():
    with pytest.raises(GraphRunError) as caught:
        run(chain(transform("look", "$nodeExecution('x', 'first')")))

    assert caught.value.kind == "expression"
    assert "$nodeExecution(id, index) needs a whole number; got 'first'" in str(caught.value)


def test_an_expression_error_names_the_node_field_and_reason():
    with pytest.raises(GraphRunError) as caught:
        run(chain(transform("shape", '$.entry.n + "x"')), {"n": 1})

    error = caught.value
    assert (error.kind, error.node_id) == ("expression", "shape")
    assert str(error).startswith("node 'shape', field 'transform.expr': evaluation failed:")
    assert "nodes that have run (entry)" in str(error)


def test_an_args_expression_error_names_the_nested_field():
    raw = chain(
        {
            "id": "call",
            "type": "mcp",
            "server": "srv",
            "tool": "t",
            "args": {"a": [{"b": "$number('x')"}]},
        }
    )

    with pytest.raises(GraphRunError, match=r"node 'call', field 'args.a\[0\].b': evaluation"):
        run(raw)


LOOP_FOREVER = tool(
    {"id": "entry", "type": "entry", "next": "increment"},
    transform("increment", "$executionCount('increment')", next="check"),
    {
        "id": "check",
        "type": "switch",
        "conditions": [{"rule": {"<": [{"var": "increment"}, 0]}, "target": "exit"}],
        "default": "increment",
    },
    {"id": "exit", "type": "exit"},
)


def test_max_node_executions_stops_a_loop_naming_the_limit_and_node():
    with pytest.raises(GraphRunError) as caught:
        run(LOOP_FOREVER, limits=ExecutionLimits(10, 60000))

    assert caught.value.kind == "limit"
    assert caught.value.limit == "maxNodeExecutions"
    assert caught.value.node_id == "check"  # entry + 4.5 loops = 10 nodes, then check
    assert str(caught.value) == (
        "maxNodeExecutions (10) reached before node 'check' ran: the graph loops without "
        "reaching its exit; raise executionLimits.maxNodeExecutions or fix the loop condition"
    )


def test_max_execution_time_stops_the_run_before_the_next_node():
    def slow(arguments):
        time.sleep(0.03)
        return text_result("{}")

    raw = chain(
        {"id": "call", "type": "mcp", "server": "srv", "tool": "t", "args": {}},
        transform("after", "1"),
    )

    with pytest.raises(GraphRunError) as caught:
        run(raw, call_tool=Calls(slow), limits=ExecutionLimits(1000, 20))

    assert (caught.value.kind, caught.value.limit) == ("limit", "maxExecutionTimeMs")
    assert caught.value.node_id == "after"
    assert str(caught.value).startswith("maxExecutionTimeMs (20) reached before node 'after' ran (")


def test_an_expression_that_never_ends_is_stopped_by_the_run_time_limit():
    forever = "($loop := function($n){ $loop($n + 1) }; $loop(0))"  # a tail call: no depth growth
    started = time.perf_counter()

    with pytest.raises(GraphRunError) as caught:
        run(chain(transform("spin", forever)), limits=ExecutionLimits(1000, 100))

    assert time.perf_counter() - started < 1
    assert (caught.value.kind, caught.value.limit) == ("limit", "maxExecutionTimeMs")
    assert caught.value.node_id == "spin"
    assert (
        "maxExecutionTimeMs (100) reached while node 'spin' evaluated field 'transform.expr'"
        in (str(caught.value))
    )


def test_an_expression_has_its_own_time_bound_within_a_long_run(monkeypatch):
    monkeypatch.setattr("graphs.engine.language.expressions.TIME_LIMIT_MS", 50)
    forever = "($loop := function($n){ $loop($n + 1) }; $loop(0))"

    with pytest.raises(GraphRunError) as caught:
        run(chain(transform("spin", forever)))

    assert (caught.value.kind, caught.value.node_id) == ("expression", "spin")
    assert "the expression ran longer than 50 ms" in str(caught.value)


def test_runaway_recursion_is_stopped_by_the_depth_bound():
    deep = "($f := function($n){ $n = 0 ? 0 : 1 + $f($n - 1) }; $f(100000))"

    with pytest.raises(GraphRunError) as caught:
        run(chain(transform("deep", deep)))

    assert caught.value.kind == "expression"
    assert "nests deeper than 1000 steps" in str(caught.value)


def test_the_depth_bound_does_not_drift_over_a_long_evaluation():
    # jsonata-python's own bound miscounts after array constructors; ours must not.
    result = run(chain(transform("pairs", "$count($map([1..3000], function($v){ [$v, $v] }))")))

    assert result == 3000


def test_now_and_millis_give_the_time_of_the_evaluation():
    when = compiled(chain(transform("when", "$millis()")))
    compiled(chain(transform("other", "1")))  # becomes the library's "current" expression
    time.sleep(0.05)  # the library would answer with the time "other" was parsed

    result = execute(when, {}, call_tool=Calls())

    assert abs(result - time.time() * 1000) < 30


def test_a_transform_that_returns_a_function_fails_clearly():
    with pytest.raises(GraphRunError, match=r"returned a Symbol \(a function\?\), not JSON data"):
        run(chain(transform("f", "function($x){ $x }")))


def test_the_bounds_hold_inside_eval_which_wraps_every_error():
    forever = """$eval("($loop := function($n){ $loop($n + 1) }; $loop(0))")"""

    with pytest.raises(GraphRunError) as caught:
        run(chain(transform("spin", forever)), limits=ExecutionLimits(1000, 50))

    assert caught.value.kind == "limit"
    assert "maxExecutionTimeMs (50) reached while node 'spin'" in str(caught.value)
