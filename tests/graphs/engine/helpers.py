"""Building blocks for engine tests: tools written as Python data, fake tool calls, observers."""

from __future__ import annotations

import itertools
from typing import Any

from mcp.types import CallToolResult, TextContent

from graphs.engine import (
    CompiledTool,
    NodeRecord,
    NullObserver,
    compile_tool,
    execute,
    parse_tool,
)

OBJECT = {"type": "object"}


def tool(*nodes: dict[str, Any], name: str = "t") -> dict[str, Any]:
    """A tool mapping in the YAML format, with these nodes."""
    return {"name": name, "description": "test tool", "inputSchema": OBJECT, "nodes": list(nodes)}


def chain(*middle: dict[str, Any]) -> dict[str, Any]:
    """A tool running entry, then the given nodes in order (their `next` filled in), then exit."""
    nodes = [{"id": "entry", "type": "entry"}, *middle, {"id": "exit", "type": "exit"}]
    for node, following in itertools.pairwise(nodes):
        node.setdefault("next", following["id"])
    return tool(*nodes)


def transform(node_id: str, expr: str, **extra: Any) -> dict[str, Any]:
    return {"id": node_id, "type": "transform", "transform": {"expr": expr}, **extra}


def compiled(raw_tool: dict[str, Any], servers: tuple[str, ...] = ("srv",)) -> CompiledTool:
    return compile_tool(parse_tool(raw_tool, server_names=servers))


def run(raw_tool: dict[str, Any], arguments: dict[str, Any] | None = None, **options: Any) -> Any:
    """Parse, compile and execute a tool mapping; a call_tool that fails unless given."""
    options.setdefault("call_tool", no_calls)
    return execute(compiled(raw_tool), arguments or {}, **options)


def no_calls(server: str, tool_name: str, arguments: dict, timeout: float | None) -> Any:
    raise AssertionError(f"unexpected call of {server}/{tool_name}")


def text_result(text: str, *, is_error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


class Calls:
    """A fake call_tool: answers from a function of the arguments and remembers each call."""

    def __init__(self, answer: Any = None) -> None:
        self.answer = answer or (lambda arguments: text_result("{}"))
        self.calls: list[tuple[str, str, dict, float | None]] = []

    def __call__(self, server: str, tool_name: str, arguments: dict, timeout: float | None):
        self.calls.append((server, tool_name, arguments, timeout))
        answer = self.answer(arguments)
        if isinstance(answer, Exception):
            raise answer
        return answer


class Recorder(NullObserver):
    """Keeps every event, in order, as (event name, payload)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def run_started(self, tool_name: str, arguments: dict[str, Any]) -> None:
        self.events.append(("run_started", (tool_name, arguments)))

    def node_started(self, record: NodeRecord) -> None:
        self.events.append(("node_started", record))

    def node_finished(self, record: NodeRecord) -> None:
        self.events.append(("node_finished", record))

    def node_failed(self, record: NodeRecord) -> None:
        self.events.append(("node_failed", record))

    def run_finished(self, result: Any, error: Any) -> None:
        self.events.append(("run_finished", (result, error)))

    def records(self, event: str) -> list[NodeRecord]:
        return [payload for name, payload in self.events if name == event]
