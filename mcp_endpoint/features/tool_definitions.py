"""How an MCP tool of this server is defined: a strict argument model, an output schema and a
handler, with the scope a caller needs to call it.

Handlers take the parsed arguments and who calls (a `nodespecs.audit.Caller`: its `actor` is
the caller's identity, as run history records it) and return plain data; the protocol layer
turns it into `structuredContent` plus a text block, and turns a `ToolError` into a result
with `isError: true`. The tools themselves are in `knowledge_tools.py` and the modules
`tools.py` gathers.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from graphs.execution.toolset import WorkflowTool
from nodespecs.callers import Caller
from nodespecs.knowledge import service as knowledge


class ToolError(Exception):
    """A tool could not do what was asked; the message tells the caller how to fix the call,
    and `details` (e.g. `{"problems": [...]}`), when given, says it so a program can act."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details


@dataclass(frozen=True)
class StartRun:
    """A tool's answer that is a test run of a workflow version to follow (test_workflow): the
    core follows it as it follows a workflow's call, progress and cancellation included; its
    result says what each node did (mcp_endpoint/calls/workflow_answers.test_run_result)."""

    tool: WorkflowTool
    arguments: dict[str, Any]
    # A test run's mocked nodes' answers (graphs/execution/mocks.py).
    mocks: dict[str, Any] | None = None
    # The node ids the test run pauses before (graphs/execution/resuming/breakpoints.py).
    breakpoints: tuple[str, ...] = ()
    # A paused test run sent on by this call: the core follows it from where it stands
    # (to its next pause or its end) instead of starting a run.
    continues: int | None = None


class StrictArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


@cache
def _input_schema(arguments: type[StrictArguments]) -> dict[str, Any]:
    """The JSON Schema of an argument model, built once (pydantic's is not cheap)."""
    schema = arguments.model_json_schema()
    # Optional arguments read as their type alone (null is the same as leaving them out); an
    # argument of several types keeps them all (a definition: text or an object).
    for prop in schema.get("properties", {}).values():
        variants = prop.pop("anyOf", None)
        if variants:
            kept = [v for v in variants if v.get("type") != "null"]
            if len(kept) == 1:
                prop.update(kept[0])
            else:
                prop["anyOf"] = kept
            if prop.get("default", "") is None:
                del prop["default"]
    return schema


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    title: str
    description: str
    arguments: type[StrictArguments]
    output_schema: dict[str, Any]
    # Its answer as plain data, or a run to follow (`StartRun`).
    handler: Callable[[Any, Caller], dict[str, Any] | StartRun]
    # The same small work whatever the arguments say: such a call may be answered in the
    # event loop (mcp_endpoint/transports/asgi.py); any other waits for a thread.
    fixed_cost: bool = False
    # The scope a caller needs to call it (mcp_endpoint.models.Scope).
    scope: str = "tools:execute"
    # Changes something (a workflow), rather than only reading: for the tool's annotations.
    writes: bool = False
    # Reads a whole workflow definition, whose work grows with it: its calls run on threads of
    # their own, a few of one key's at a time (mcp_endpoint/transports/asgi.py).
    reads_documents: bool = False
    # Its answer depends on its arguments and what this returns alone, the same for every
    # caller: the core keeps it and answers the same call again from it until the stamp
    # changes (mcp_endpoint/protocol/tool_answers.py).
    answer_stamp: Callable[[], Hashable] | None = None

    def input_schema(self) -> dict[str, Any]:
        return _input_schema(self.arguments)

    def parse(self, raw: dict[str, Any] | None) -> StrictArguments:
        """Validate the arguments; a `ToolError` names each bad field and what is wrong."""
        try:
            return self.arguments.model_validate(raw or {})
        except ValidationError as exc:
            problems = []
            for error in exc.errors():
                field = ".".join(str(part) for part in error["loc"]) or "arguments"
                message = error["msg"]
                if error["type"] == "extra_forbidden":
                    message = "unknown argument; check its spelling against the tool's inputSchema"
                problems.append(f"{field}: {message}")
            raise ToolError(f"Invalid arguments for {self.name}: " + "; ".join(problems)) from None

    def call(self, raw: dict[str, Any] | None, caller: Caller) -> dict[str, Any] | StartRun:
        """Parse the arguments and run the handler for `caller`."""
        arguments = self.parse(raw)
        try:
            return self.handler(arguments, caller)
        except knowledge.KnowledgeError as exc:
            raise ToolError(str(exc)) from None
