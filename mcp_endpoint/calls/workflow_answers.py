"""Workflows as MCP tools: their `tools/list` entries, and a call's run turned into a result.

A run's outcome maps onto the protocol as follows: the exit value as text (a string as it is,
anything else as JSON) and, when the workflow declares an output schema, as
`structuredContent` (given as `{"result": value}` when the value is not an object and the
schema declares `result`: graphs/engine/outputs.py); a failed run is an `isError` result
naming the node, the cause and the run id, so the agent can report or retry it. A result
that breaks the output schema has already failed its run, at its exit node, so the history
and the caller say the same.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from mcp import types

from graphs.engine.outputs import structured_output
from graphs.execution.control import run_cancel_request
from graphs.execution.mocks import report_of_test_run
from graphs.execution.resuming.pauses import pause_of
from graphs.execution.runs import RunOutcome, RunRequest
from graphs.execution.toolset import WorkflowTool, workflow_tools
from graphs.history.step_context import step_context
from graphs.models import Run
from mcp_endpoint.jsonrpc.encoding import json_text

RUN_ID_META = "io.switchyard/runId"

# By version: a version's name, description and schemas never change.
_entries: dict[tuple[int, str], types.Tool] = {}


def _tool_entry(tool: WorkflowTool) -> types.Tool:
    key = (tool.version_id, tool.digest)
    entry = _entries.get(key)
    if entry is None:
        if len(_entries) > 4096:
            _entries.clear()
        entry = _entries[key] = _new_entry(tool)
    return entry


def _new_entry(tool: WorkflowTool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema or {"type": "object"},
        output_schema=tool.output_schema,
        annotations=types.ToolAnnotations(
            # A workflow calls other servers whose effects are unknown here.
            read_only_hint=False,
            open_world_hint=True,
        ),
    )


def workflow_tool_list(group: str | None = None) -> list[types.Tool]:
    """The enabled workflows as tools, in name order: all, or those of one group (by its slug)."""
    return [_tool_entry(tool) for tool in workflow_tools(group).values()]


def error_result(message: str, run_id: int | None = None) -> types.CallToolResult:
    """A tool result with `isError`, naming the run when there is one."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"Error: {message}")],
        is_error=True,
        _meta={RUN_ID_META: run_id} if run_id is not None else None,
    )


def still_going(name: str, run_id: int, status: str) -> types.CallToolResult:
    """The answer to a call whose run (`queued`, `running` or `waiting`) outlasted
    GRAPHS_RUN_WAIT_SECONDS."""
    if status == Run.Status.WAITING:
        return error_result(
            f"Workflow {name!r} waits for a reviewer's approval (run {run_id}) after "
            f"{settings.GRAPHS_RUN_WAIT_SECONDS:g} s; it goes on when it is decided, so do not "
            f"call it again for the same work. Reviewers decide on the Approvals page or with "
            f"POST /api/v1/runs/{run_id}/decision; its outcome will be in the history as run "
            f"{run_id} (GET /api/v1/runs/{run_id}).",
            run_id=run_id,
        )
    return error_result(
        f"Workflow {name!r} is still {status} after {settings.GRAPHS_RUN_WAIT_SECONDS:g} s "
        f"(run {run_id}); it goes on in the background, so do not call it again for the same "
        f"work. Its outcome will be in the history as run {run_id}; cancel it with "
        f"POST /api/v1/runs/{run_id}/cancel.",
        run_id=run_id,
    )


def call_result(
    tool: WorkflowTool, outcome: RunOutcome, request: RunRequest
) -> types.CallToolResult:
    """The result of a call whose run has ended: the workflow's (`outcome_result`), or for a
    test run (test_workflow) what each node did (`test_run_result`). May query."""
    if request.is_test:
        return test_run_result(tool, outcome)
    return outcome_result(tool.name, tool.output_schema, outcome)


def test_run_result(tool: WorkflowTool, outcome: RunOutcome) -> types.CallToolResult:
    """A test run's result: what it returned and each node's output; for one paused at a
    breakpoint, where and the context there."""
    if outcome.status == Run.Status.PAUSED:
        return _paused_result(tool, outcome.run_id)
    if outcome.status in Run.ACTIVE:
        return still_going(tool.name, outcome.run_id, outcome.status)
    report = report_of_test_run(outcome.run_id)
    text = json_text(report)
    if outcome.succeeded:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=report
        )
    where = f" at node {outcome.error_node_id!r}" if outcome.error_node_id else ""
    message = f"Test run {outcome.run_id} of {tool.name!r} {outcome.status}{where}: {outcome.error}"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"Error: {message}\n{text}")],
        structured_content={"error": message, "error_node": outcome.error_node_id, **report},
        is_error=True,
    )


def _paused_result(tool: WorkflowTool, run_id: int) -> types.CallToolResult:
    report = report_of_test_run(run_id)
    pause = pause_of(run_id)
    if pause is not None:
        step = step_context(run_id=run_id, index=pause.index)
        report["paused"] = {**step.as_json(), "expires_at": pause.expires_at.isoformat()}
        del report["paused"]["run_id"]
    report["next"] = (
        f'Call test_workflow with name {tool.name!r} and paused_run {{"run_id": {run_id}, '
        '"action": "continue" | "step" | "stop"} to go on to the next breakpoint, run one '
        "node, or end the run; the run page shows the same."
    )
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json_text(report))],
        structured_content=report,
        _meta={RUN_ID_META: run_id},
    )


def outcome_result(
    name: str, output_schema: dict[str, Any] | None, outcome: RunOutcome
) -> types.CallToolResult:
    """A workflow run's outcome as a tool result: its exit value, or why it has none."""
    if outcome.status in Run.ACTIVE:
        return still_going(name, outcome.run_id, outcome.status)
    if not outcome.succeeded:
        where = f" at node {outcome.error_node_id!r}" if outcome.error_node_id else ""
        return error_result(
            f"Workflow {name!r} {outcome.status}{where}: {outcome.error} (run {outcome.run_id}).",
            run_id=outcome.run_id,
        )
    value = outcome.result
    structured = structured_output(value, output_schema)
    if output_schema is not None and structured is None:  # a run recorded before the check
        return error_result(
            f"Workflow {name!r} returned a value its outputSchema cannot hold (run "
            f"{outcome.run_id}); run it again.",
            run_id=outcome.run_id,
        )
    text = value if isinstance(value, str) else json_text(value)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        _meta={RUN_ID_META: outcome.run_id},
    )


def cancel_notification(params: Any, *, caller: str, session_id: str = "") -> None:
    """`notifications/cancelled`: stop the workflow run the named request started, if any."""
    if not isinstance(params, dict) or not isinstance(params.get("requestId"), (str, int)):
        return  # a malformed notification gets no answer either way
    reason = "The client cancelled the call"
    if params.get("reason"):
        reason += f": {params['reason']}"
    run_cancel_request(
        caller=caller,
        session_id=session_id,
        request_id=json.dumps(params["requestId"]),
        reason=reason,
    )
