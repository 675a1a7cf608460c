"""The engine going on from any node: a re-run from a node with the executions before it
given (none of them run again, an mcp node's arguments may be given instead of evaluated),
and breakpoints: the run stops before a breakpoint, or before every node when stepping, and
a `Resume` at that node goes on without stopping there again."""

from __future__ import annotations

from typing import Any

from mcp.types import CallToolResult, TextContent

from graphs.engine import AtBreakpoint, Resume, compile_tool, execute
from graphs.engine.format.parsing import parse_tool
from graphs.engine.observer import NodeRecord, NullObserver

TOOL = {
    "name": "sum_loop",
    "description": "Adds up to n, then asks a tool to format the sum",
    "inputSchema": {"type": "object"},
    "nodes": [
        {"id": "entry", "type": "entry", "next": "add"},
        {
            "id": "add",
            "type": "transform",
            "transform": {"expr": "($exists($.add) ? $.add : 0) + 1"},
            "next": "more",
        },
        {
            "id": "more",
            "type": "switch",
            "conditions": [{"rule": {"<": [{"var": "add"}, {"var": "entry.n"}]}, "target": "add"}],
            "default": "show",
        },
        {
            "id": "show",
            "type": "mcp",
            "server": "fmt",
            "tool": "format",
            "args": {"value": "$.add"},
            "next": "exit",
        },
        {"id": "exit", "type": "exit"},
    ],
}
COMPILED = compile_tool(parse_tool(TOOL, server_names=("fmt",)))


class Calls:
    """The downstream server: counts its calls, answers the value it was sent, formatted."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def __call__(self, server: str, tool: str, arguments: dict[str, Any], _t: Any) -> Any:
        self.sent.append(arguments)
        text = f"sum={arguments['value']}"
        return CallToolResult(content=[TextContent(type="text", text=text)])


class Ran(NullObserver):
    def __init__(self) -> None:
        self.nodes: list[str] = []

    def node_finished(self, record: NodeRecord) -> None:
        self.nodes.append(record.node_id)


def test_a_run_from_a_node_runs_only_from_there_with_the_history_given():
    calls, observer = Calls(), Ran()
    first = execute(COMPILED, {"n": 3}, call_tool=calls)
    assert first == "sum=3"  # 1, 2, 3: add ran 3 times, more 3 times
    executions = [("entry", {"n": 3}), ("add", 1), ("more", "add"), ("add", 2), ("more", "add")]
    again = execute(
        COMPILED,
        {"n": 3},
        call_tool=calls,
        observer=observer,
        resume=Resume("add", executions, 0.0),
    )
    # `add` reads its own latest output, as given, so it picks up where the loop was.
    assert again == "sum=3"
    assert observer.nodes == ["add", "more", "show", "exit"]


def test_an_mcp_node_takes_the_arguments_given_instead_of_evaluating_its_args():
    calls = Calls()
    executions = [("entry", {"n": 1}), ("add", 1), ("more", "show")]
    result = execute(
        COMPILED,
        {"n": 1},
        call_tool=calls,
        resume=Resume("show", executions, 0.0, tool_arguments={"value": 41}),
    )
    assert result == "sum=41"
    assert calls.sent == [{"value": 41}]


def test_the_run_stops_before_a_breakpoint_each_time_it_comes_to_it():
    calls = Calls()
    stopped = execute(COMPILED, {"n": 2}, call_tool=calls, breakpoints=["more"])
    assert isinstance(stopped, AtBreakpoint)
    assert (stopped.node_id, stopped.index, stopped.iteration) == ("more", 2, 1)
    assert [node for node, _ in stopped.executions] == ["entry", "add"]
    resume = Resume(stopped.node_id, stopped.executions, stopped.elapsed_ms)
    # Going on runs `more` (not stopping there again), and stops when the loop comes back.
    again = execute(COMPILED, {"n": 2}, call_tool=calls, breakpoints=["more"], resume=resume)
    assert isinstance(again, AtBreakpoint)
    assert (again.node_id, again.index, again.iteration) == ("more", 4, 2)
    done = execute(
        COMPILED,
        {"n": 2},
        call_tool=calls,
        breakpoints=["more"],
        resume=Resume(again.node_id, again.executions, again.elapsed_ms),
    )
    assert done == "sum=2"
    assert len(calls.sent) == 1


def test_stepping_stops_before_every_next_node_and_a_breakpoint_on_entry_before_anything():
    calls = Calls()
    at_entry = execute(COMPILED, {"n": 1}, call_tool=calls, breakpoints=["entry"])
    assert isinstance(at_entry, AtBreakpoint)
    assert (at_entry.node_id, at_entry.index, at_entry.executions) == ("entry", 0, ())
    seen = []
    stopped: Any = at_entry
    while isinstance(stopped, AtBreakpoint):
        seen.append(stopped.node_id)
        stopped = execute(
            COMPILED,
            {"n": 1},
            call_tool=calls,
            step=True,
            resume=Resume(stopped.node_id, stopped.executions, stopped.elapsed_ms),
        )
    assert seen == ["entry", "add", "more", "show", "exit"]
    assert stopped == "sum=1"
