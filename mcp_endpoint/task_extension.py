"""The tasks extension of MCP 2026-07-28 (`io.modelcontextprotocol/tasks`): a long workflow
call answered with a task handle, which the client follows with `tasks/get` and may stop with
`tasks/cancel`, instead of holding a connection for minutes.

A task is a workflow run: its id names the run (`run-17`), and it is the caller's alone (another
API key is told that no such task exists). The run's statuses map onto the task's: queued and
running are `working`; succeeded, failed and timed out are `completed` (a failed run is a tool
result with `isError`, as the extension asks; `failed` is kept for JSON-RPC errors, which a run
does not raise); cancelled is `cancelled`. The whole result stays readable for
GRAPHS_RESULT_KEEP_SECONDS, the task's `ttlMs`; after that `tasks/get` answers with the
history's copy (secrets masked, perhaps truncated). Runs never ask the client for input, so a
task is never `input_required` and `tasks/update` has nothing to deliver.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.conf import settings
from mcp import types
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY

from graphs.control import RunNotFound, RunState, run_cancel, run_result, run_state
from graphs.models import Run
from graphs.runs import RunOutcome
from mcp_endpoint import workflow_answers
from mcp_endpoint.errors import RpcError

EXTENSION = "io.modelcontextprotocol/tasks"
POLL_INTERVAL_MS = 1000
_TASK_ID = re.compile(r"run-([1-9][0-9]{0,17})")

_STATUS: dict[str, str] = {
    Run.Status.QUEUED: "working",
    Run.Status.RUNNING: "working",
    Run.Status.SUCCEEDED: "completed",
    Run.Status.FAILED: "completed",
    Run.Status.TIMED_OUT: "completed",
    Run.Status.CANCELLED: "cancelled",
}


def declared(capabilities: Any) -> bool:
    """Whether a request's client capabilities declare the tasks extension."""
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and EXTENSION in extensions


def require(capabilities: Any, what: str) -> None:
    """Refuse `what` (a tasks method, or task notifications) to a client that did not
    declare the extension on this request, as the extension requires."""
    if not declared(capabilities):
        raise RpcError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"{what} belongs to the tasks extension: declare it in this request's "
            f'_meta["{types.CLIENT_CAPABILITIES_META_KEY}"].extensions["{EXTENSION}"] = {{}}.',
            {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
        )


def task_id(run_id: int) -> str:
    return f"run-{run_id}"


def _timestamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _task(state: RunState) -> dict[str, Any]:
    messages: dict[str, str] = {
        Run.Status.QUEUED: "Queued: waiting for a worker.",
        Run.Status.RUNNING: "Running.",
    }
    message = messages.get(state.status, f"The run ended {state.status}.")
    return {
        "taskId": task_id(state.run_id),
        "status": _STATUS[state.status],
        "statusMessage": f"Workflow {state.workflow_name!r}, run {state.run_id}: {message}",
        "createdAt": _timestamp(state.created_at),
        "lastUpdatedAt": _timestamp(state.updated_at),
        "ttlMs": int(settings.GRAPHS_RESULT_KEEP_SECONDS * 1000),
        "pollIntervalMs": POLL_INTERVAL_MS,
    }


def created(run_id: int, caller: str) -> dict[str, Any]:
    """The `CreateTaskResult` that answers a call whose run goes on."""
    return {"resultType": "task", **_task(run_state(run_id=run_id, caller=caller))}


def _state_of(params: Any, caller: str) -> RunState:
    """The run a tasks method names, checked; an unknown or foreign one is refused."""
    named = params.get("taskId") if isinstance(params, dict) else None
    if not isinstance(named, str):
        raise RpcError(types.INVALID_PARAMS, "Invalid params: taskId must be a string.")
    match = _TASK_ID.fullmatch(named)
    try:
        if match is None:
            raise RunNotFound
        return run_state(run_id=int(match.group(1)), caller=caller)
    except RunNotFound:
        raise RpcError(
            types.INVALID_PARAMS,
            f"Failed to retrieve task: no task {named[:80]!r} was created for this API key "
            "(task ids come from a tools/call answered with resultType task).",
        ) from None


def get(params: Any, capabilities: dict[str, Any], caller: str) -> dict[str, Any]:
    """`tasks/get`: the task as it stands, with the tool result once it has completed."""
    require(capabilities, "tasks/get")
    state = _state_of(params, caller)
    task = _task(state)
    if task["status"] == "completed":
        result = run_result(state.run_id) if state.status == Run.Status.SUCCEEDED else None
        outcome = RunOutcome(state.run_id, state.status, result, state.error, state.error_node_id)
        tool_result = workflow_answers.outcome_result(
            state.workflow_name, state.output_schema, outcome
        )
        task["result"] = tool_result.model_dump(by_alias=True, exclude_none=True, mode="json")
    return task


def cancel(params: Any, capabilities: dict[str, Any], caller: str) -> dict[str, Any]:
    """`tasks/cancel`: ask the run to stop (it ends `cancelled` before its next node)."""
    require(capabilities, "tasks/cancel")
    state = _state_of(params, caller)
    run_cancel(run_id=state.run_id, reason="The client cancelled the task", caller=caller)
    return {}


def update(params: Any, capabilities: dict[str, Any], caller: str) -> dict[str, Any]:
    """`tasks/update`: acknowledged; a run never asks for input, so no response is awaited
    and any sent are ignored, as the extension says of keys that are not outstanding."""
    require(capabilities, "tasks/update")
    _state_of(params, caller)
    return {}


METHODS = {"tasks/get": get, "tasks/cancel": cancel, "tasks/update": update}
