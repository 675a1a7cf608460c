"""The observer sees every run and node, in order, with records it may keep."""

from __future__ import annotations

import time

import pytest

from graphs.engine import ExecutionLimits, GraphRunError
from tests.graphs.engine.helpers import Calls, Recorder, run, text_result, tool, transform

GRAPH = tool(
    {"id": "entry", "type": "entry", "next": "call"},
    {
        "id": "call",
        "type": "mcp",
        "server": "srv",
        "tool": "double",
        "args": {"n": "$.entry.n"},
        "next": "again",
    },
    {
        "id": "again",
        "type": "switch",
        "default": "shape",
        "conditions": [{"rule": {"<": [{"var": "$executionCount('call')"}, 2]}, "target": "call"}],
    },
    transform("shape", "{'n': $.call}", next="exit"),
    {"id": "exit", "type": "exit"},
)


def test_the_observer_sees_each_node_start_and_finish_in_order():
    recorder = Recorder()
    before = time.time()

    result = run(
        GRAPH, {"n": 2}, call_tool=Calls(lambda a: text_result(str(a["n"] * 2))), observer=recorder
    )

    assert result == {"n": 4}
    names = [name for name, _ in recorder.events]
    assert names == ["run_started", *["node_started", "node_finished"] * 7, "run_finished"]
    assert recorder.events[0] == ("run_started", ("t", {"n": 2}))
    assert recorder.events[-1] == ("run_finished", ({"n": 4}, None))
    finished = recorder.records("node_finished")
    assert [(r.index, r.node_id, r.node_type, r.iteration) for r in finished] == [
        (0, "entry", "entry", 1),
        (1, "call", "mcp", 1),
        (2, "again", "switch", 1),
        (3, "call", "mcp", 2),
        (4, "again", "switch", 2),
        (5, "shape", "transform", 1),
        (6, "exit", "exit", 1),
    ]
    assert [r.input for r in finished] == [{"n": 2}, {"n": 2}, 4, "call", 4, "shape", {"n": 4}]
    assert [r.output for r in finished] == [{"n": 2}, 4, "call", 4, "shape", {"n": 4}, {"n": 4}]
    assert [r.detail for r in finished] == [
        None,
        {"server": "srv", "tool": "double", "arguments": {"n": 2}},
        {"target": "call", "matched": 0},
        {"server": "srv", "tool": "double", "arguments": {"n": 2}},
        {"target": "shape", "matched": "default"},
        {"expr": "{'n': $.call}"},
        None,
    ]
    assert all(r.error is None and r.attempts == 1 for r in finished)
    assert all(before <= r.started_at <= time.time() and r.duration_ms >= 0 for r in finished)


def test_started_records_are_not_changed_when_the_node_finishes():
    recorder = Recorder()

    run(GRAPH, {"n": 1}, call_tool=Calls(lambda a: text_result("1")), observer=recorder)

    started = recorder.records("node_started")
    assert [r.node_id for r in started] == [
        "entry",
        "call",
        "again",
        "call",
        "again",
        "shape",
        "exit",
    ]
    assert all(r.output is None and r.attempts == 0 and r.duration_ms == 0 for r in started)
    assert started[1].detail == {"server": "srv", "tool": "double"}  # arguments not yet known
    assert started[2].detail is None
    assert started[5].detail == {"expr": "{'n': $.call}"}


def test_a_failing_node_is_reported_then_the_run():
    recorder = Recorder()
    calls = Calls(lambda a: text_result("quota exceeded", is_error=True))

    with pytest.raises(GraphRunError) as caught:
        run(GRAPH, {"n": 1}, call_tool=calls, observer=recorder)

    names = [name for name, _ in recorder.events]
    assert names == [
        "run_started",
        "node_started",
        "node_finished",
        "node_started",
        "node_failed",
        "run_finished",
    ]
    [failed] = recorder.records("node_failed")
    assert (failed.node_id, failed.index, failed.output, failed.attempts) == ("call", 1, None, 1)
    assert failed.error == str(caught.value)
    assert failed.detail == {"server": "srv", "tool": "double", "arguments": {"n": 1}}
    assert recorder.events[-1] == ("run_finished", (None, caught.value))


def test_a_limit_breach_is_reported_with_the_run_only():
    recorder = Recorder()

    with pytest.raises(GraphRunError) as caught:
        run(
            GRAPH,
            {"n": 1},
            call_tool=Calls(lambda a: text_result("1")),
            observer=recorder,
            limits=ExecutionLimits(max_node_executions=3),
        )

    assert caught.value.kind == "limit"
    assert recorder.records("node_failed") == []  # the node that would have run never started
    assert [r.node_id for r in recorder.records("node_started")] == ["entry", "call", "again"]
    assert recorder.events[-1] == ("run_finished", (None, caught.value))


def test_a_failing_transform_counts_one_attempt_and_an_mcp_node_its_calls():
    recorder = Recorder()
    bad_args = tool(
        {"id": "entry", "type": "entry", "next": "call"},
        {
            "id": "call",
            "type": "mcp",
            "server": "srv",
            "tool": "t",
            "args": {"n": "$number('x')"},
            "next": "exit",
        },
        {"id": "exit", "type": "exit"},
    )

    with pytest.raises(GraphRunError):
        run(
            tool(
                {"id": "entry", "type": "entry", "next": "shape"},
                transform("shape", "$number('x')", next="exit"),
                {"id": "exit", "type": "exit"},
            ),
            observer=recorder,
        )
    with pytest.raises(GraphRunError):
        run(bad_args, observer=recorder)

    assert [(r.node_id, r.attempts) for r in recorder.records("node_failed")] == [
        ("shape", 1),
        ("call", 0),  # its arguments failed, so no call was made
    ]
