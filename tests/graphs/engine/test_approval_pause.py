"""The engine at an approval node: it returns a `Paused` holding what the run had done, and a
`Resume` goes on along the decision's route in a fresh run of `execute`, the history functions
seeing the whole run, the wait not counted toward maxExecutionTimeMs."""

from __future__ import annotations

import time
from typing import Any

import pytest

from graphs.engine import ExecutionLimits, GraphRunError, Paused, Resume, compile_tool, execute
from graphs.engine.format.parsing import parse_tool
from graphs.engine.observer import NodeRecord, NullObserver
from graphs.engine.stops.approvals import MAX_MESSAGE_CHARS

TOOL = {
    "name": "refund",
    "description": "Refund after approval",
    "inputSchema": {"type": "object"},
    "nodes": [
        {"id": "entry", "type": "entry", "next": "double"},
        {
            "id": "double",
            "type": "transform",
            "transform": {"expr": "$.entry.amount * 2"},
            "next": "approve",
        },
        {
            "id": "approve",
            "type": "approval",
            "message": '"Refund " & $string($.double) & "?"',
            "timeoutMs": 1000,
            "routes": {"approved": "paid", "rejected": "held", "timeout": "held"},
        },
        {
            "id": "paid",
            "type": "transform",
            "transform": {
                "expr": '{"paid": $.double, "runs": $executionCount("double"), '
                '"by": $.approve.by.name}'
            },
            "next": "exit",
        },
        {"id": "held", "type": "transform", "transform": {"expr": '{"paid": 0}'}, "next": "exit"},
        {"id": "exit", "type": "exit"},
    ],
}


class Recorded(NullObserver):
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def node_finished(self, record: NodeRecord) -> None:
        self.events.append(("finished", record.node_id))

    def node_waiting(self, record: NodeRecord) -> None:
        self.events.append(("waiting", record.node_id))


def _no_calls(*_: Any) -> Any:
    raise AssertionError("no mcp node here")


COMPILED = compile_tool(parse_tool(TOOL, server_names=()))
DEFAULT = ExecutionLimits()


def _paused(limits: ExecutionLimits = DEFAULT) -> tuple[Paused, Recorded]:
    observer = Recorded()
    paused = execute(
        COMPILED, {"amount": 21}, call_tool=_no_calls, limits=limits, observer=observer
    )
    assert isinstance(paused, Paused)
    return paused, observer


def _resume(paused: Paused, decision: str, limits: ExecutionLimits = DEFAULT) -> Any:
    observer = Recorded()
    output = {"decision": decision, "by": {"kind": "user", "id": "1", "name": "rita"}}
    resume = Resume(
        paused.node_id,
        paused.executions,
        paused.elapsed_ms,
        decision=output,
        waited_since=paused.waited_since,
    )
    return execute(
        COMPILED,
        {"amount": 21},
        call_tool=_no_calls,
        limits=limits,
        observer=observer,
        resume=resume,
    ), observer


def test_the_run_pauses_at_the_node_with_everything_it_needs_to_go_on():
    paused, observer = _paused()
    assert paused.node_id == "approve"
    assert paused.index == 2
    assert paused.iteration == 1
    assert paused.message == "Refund 42?"
    assert paused.timeout_ms == 1000
    assert paused.executions == (("entry", {"amount": 21}), ("double", 42))
    assert observer.events == [
        ("finished", "entry"),
        ("finished", "double"),
        ("waiting", "approve"),
    ]


@pytest.mark.parametrize(
    ("decision", "result"),
    [
        ("approved", {"paid": 42, "runs": 1, "by": "rita"}),
        ("rejected", {"paid": 0}),
        ("timeout", {"paid": 0}),
    ],
)
def test_a_resumed_run_goes_on_along_the_decisions_route(decision, result):
    paused, _ = _paused()
    value, observer = _resume(paused, decision)
    assert value == result
    assert observer.events[0] == ("finished", "approve")


def test_the_wait_does_not_count_toward_max_execution_time():
    limits = ExecutionLimits(max_execution_time_ms=200)
    paused, _ = _paused(limits)
    time.sleep(0.3)  # longer than the run may take
    value, _ = _resume(paused, "approved", limits)
    assert value["paid"] == 42


def test_a_decision_without_a_route_fails_the_run_naming_it():
    paused, _ = _paused()
    with pytest.raises(GraphRunError, match="decision 'maybe' has no route"):
        _resume(paused, "maybe")


def test_a_huge_message_is_cut_for_the_person_who_reads_it():
    tool = {**TOOL, "nodes": [dict(node) for node in TOOL["nodes"]]}
    tool["nodes"][2]["message"] = '$pad("", 100000, "x")'
    compiled = compile_tool(parse_tool(tool, server_names=()))
    paused = execute(compiled, {"amount": 1}, call_tool=_no_calls)
    assert len(paused.message) == MAX_MESSAGE_CHARS
    assert paused.message.endswith("…")
