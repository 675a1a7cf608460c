"""One compiled tool shared by many threads, and loops whose cost grows linearly."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from graphs.engine import ExecutionLimits, execute
from graphs.engine.language.expressions import Expression, Guard
from tests.graphs.engine.helpers import Calls, Recorder, compiled, text_result, tool, transform

# A loop that sums 1..n; it also uses partial application, which makes jsonata-python parse
# during evaluation (the step that breaks when threads share one parsed expression).
SUMMER = tool(
    {"id": "entry", "type": "entry", "next": "add"},
    transform(
        "add",
        "($first := $substring(?, 0, 1);"
        " {'i': $executionCount('add') + 1,"
        "  'sum': ($executionCount('add') = 0 ? 0 : $nodeExecution('add', -1).sum)"
        "         + $executionCount('add') + 1,"
        "  'tag': $first($.entry.tag)})",
        next="call",
    ),
    {
        "id": "call",
        "type": "mcp",
        "server": "srv",
        "tool": "echo",
        "args": {"i": "$.add.i"},
        "next": "more",
    },
    {
        "id": "more",
        "type": "switch",
        "default": "result",
        "conditions": [{"rule": {"<": [{"var": "add.i"}, {"var": "entry.n"}]}, "target": "add"}],
    },
    transform("result", "$.add", next="exit"),
    {"id": "exit", "type": "exit"},
)


def test_twenty_threads_running_one_compiled_tool_each_get_their_own_answer():
    shared = compiled(SUMMER)
    start = threading.Barrier(20)

    def one_run(n: int):
        recorder = Recorder()
        calls = Calls(lambda arguments: text_result(str(arguments["i"])))
        start.wait()
        result = execute(shared, {"n": n, "tag": f"t{n}"}, call_tool=calls, observer=recorder)
        return n, result, calls.calls, recorder

    with ThreadPoolExecutor(20) as pool:
        outcomes = list(pool.map(one_run, range(5, 25)))

    for n, result, calls, recorder in outcomes:
        assert result == {"i": n, "sum": n * (n + 1) // 2, "tag": "t"}
        assert [arguments["i"] for _, _, arguments, _ in calls] == list(range(1, n + 1))
        assert len(recorder.records("node_finished")) == 3 + 3 * n


def test_each_thread_evaluates_its_own_parse_of_an_expression():
    expression = Expression("$map($.words, $substring(?, 0, 3))")
    failures = []

    def evaluate_many(i: int) -> None:
        guard = Guard(time.monotonic() + 10)
        words = [f"abcdef{i}"] * 20
        for _ in range(5):
            guard.start()
            try:
                assert expression.evaluate({"words": words}, guard.bindings, guard) == ["abc"] * 20
            except Exception as exc:  # collected: an assertion in a thread would be lost
                failures.append(exc)
                return

    threads = [threading.Thread(target=evaluate_many, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []


LOOP = tool(
    {"id": "entry", "type": "entry", "next": "step"},
    transform("step", "$sum([$executionCount('step') + 1, $previousNode(2)])", next="check"),
    {
        "id": "check",
        "type": "switch",
        "default": "exit",
        "conditions": [
            {
                "rule": {"<": [{"var": "$executionCount('step')"}, {"var": "entry.n"}]},
                "target": "step",
            }
        ],
    },
    {"id": "exit", "type": "exit"},
)


def test_a_loop_costs_linear_time_in_its_iterations():
    loop = compiled(LOOP)
    limits = ExecutionLimits(max_node_executions=10_000)

    def seconds(n: int) -> float:
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            execute(loop, {"n": n}, call_tool=Calls(), limits=limits)
            best = min(best, time.perf_counter() - started)
        return best

    # Quadratic growth would make the ratio about 100; linear about 10.
    assert seconds(500) / seconds(50) < 25


def test_expressions_read_the_one_context_the_run_keeps_up_to_date(monkeypatch):
    seen = []
    evaluate = Expression.evaluate

    def spy(self, data, *args, **kwargs):
        seen.append(data)
        return evaluate(self, data, *args, **kwargs)

    monkeypatch.setattr(Expression, "evaluate", spy)

    assert execute(compiled(LOOP), {"n": 50}, call_tool=Calls()) == "exit"  # the switch's output

    assert len(seen) == 150  # per iteration: the transform and the rule's two vars
    assert all(data is seen[0] for data in seen)  # never copied or rebuilt
    assert seen[0]["step"] == 50 * 51 // 2
