"""The tasks extension of MCP 2026-07-28 (`io.modelcontextprotocol/tasks`): a long tool call
answered with a task handle, which the client follows with `tasks/get`, answers with
`tasks/update` and may stop with `tasks/cancel`, instead of holding a connection for minutes.
Every task is the caller's alone (another API key is told that no such task exists).

Two kinds of call become tasks:

- A workflow call still running after MCP_TASK_AFTER_SECONDS (workflow_calls.py). Its id names
  the run (`run-17`). The run's statuses map onto the task's: queued and running are
  `working`; succeeded, failed and timed out are `completed` (a failed run is a tool result
  with `isError`, as the extension asks; `failed` is kept for JSON-RPC errors, which a run
  does not raise); cancelled is `cancelled`. The whole result stays readable for
  GRAPHS_RESULT_KEEP_SECONDS, the task's `ttlMs`; after that `tasks/get` answers with the
  history's copy (secrets masked, perhaps truncated). Runs never ask the client for input, so
  such a task is never `input_required` and `tasks/update` has nothing to deliver.
- A call of an extra tool whose handler is wrapped by `task_tool` (extension modules' tools,
  such as the conformance fixtures): the server makes it a task at once, or after the input
  its handler asks first (`tool_tasks.START_TASK`); ids `tool-…`. It runs on a thread
  (tool_tasks.py), may ask the client for input (`input_required`, answered by
  `tasks/update`), and ends `completed` (its result, perhaps with `isError`), `failed` (a
  JSON-RPC error: it raised one, or crashed) or `cancelled`.

A client that did not declare the extension on the request never gets a task: a tool that
may run as one runs in the request instead, and one that must is refused with -32021.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Generator
from datetime import UTC, datetime
from typing import Any, Literal

from django.conf import settings
from mcp import types
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY

from graphs.execution.control import RunNotFound, RunState, run_cancel, run_result, run_state
from graphs.execution.runs import RunOutcome
from graphs.models import Run
from mcp_endpoint.calls import tool_tasks, workflow_answers
from mcp_endpoint.calls.caller_approvals import INPUT_KEY, client_answered, task_input_requests
from mcp_endpoint.calls.tool_tasks import START_TASK, TaskRecord
from mcp_endpoint.jsonrpc.errors import RpcError

# An extra tool's handler: (arguments, context) → a result, or a generator asking for input.
Handler = Callable[[dict[str, Any], Any], Any]

EXTENSION = "io.modelcontextprotocol/tasks"
POLL_INTERVAL_MS = 1000
_TASK_ID = re.compile(r"run-([1-9][0-9]{0,17})")

_STATUS: dict[str, str] = {
    Run.Status.QUEUED: "working",
    Run.Status.RUNNING: "working",
    Run.Status.WAITING: "working",
    # A test run at a breakpoint: the call's answer (where, and the context there) is ready;
    # test_workflow's paused_run sends it on in a call of its own.
    Run.Status.PAUSED: "completed",
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


class CreateTaskResult(types.Result):
    """SEP-2663's `CreateTaskResult`, a flat `Result & Task` (the SDK's is the nested shape
    of the earlier tasks); the protocol core sends it as it is (core._serialize)."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str
    created_at: str
    last_updated_at: str
    ttl_ms: int
    poll_interval_ms: int


def _task(state: RunState) -> dict[str, Any]:
    messages: dict[str, str] = {
        Run.Status.QUEUED: "Queued: waiting for a worker.",
        Run.Status.RUNNING: "Running.",
        Run.Status.WAITING: "Waiting for approval.",
        Run.Status.PAUSED: "Paused at a breakpoint.",
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


def _tool_task(record: TaskRecord) -> dict[str, Any]:
    """A tool task as `tasks/get` shows it: the task, and what it asks, returned or raised."""
    task: dict[str, Any] = {
        "taskId": record.task_id,
        "status": record.status,
        "statusMessage": f"Tool {record.tool!r}: {record.message}",
        "createdAt": _timestamp(datetime.fromtimestamp(record.created_at, UTC)),
        "lastUpdatedAt": _timestamp(datetime.fromtimestamp(record.updated_at, UTC)),
        "ttlMs": tool_tasks.ttl_ms(),
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    if record.input_requests:
        task["inputRequests"] = record.input_requests
    if record.result is not None:
        task["result"] = record.result
    if record.error is not None:
        task["error"] = record.error
    return task


def _unknown(named: str) -> RpcError:
    return RpcError(
        types.INVALID_PARAMS,
        f"Failed to retrieve task: no task {named[:80]!r} was created for this API key "
        "(task ids come from a tools/call answered with resultType task).",
    )


def _named(params: Any) -> str:
    named = params.get("taskId") if isinstance(params, dict) else None
    if not isinstance(named, str):
        raise RpcError(types.INVALID_PARAMS, "Invalid params: taskId must be a string.")
    return named


def _state_of(named: str, caller: str) -> RunState:
    """The run a tasks method names, checked; an unknown or foreign one is refused."""
    match = _TASK_ID.fullmatch(named)
    try:
        if match is None:
            raise RunNotFound
        return run_state(run_id=int(match.group(1)), caller=caller)
    except RunNotFound:
        raise _unknown(named) from None


def _record_of(named: str, caller: str) -> TaskRecord:
    """The tool task a tasks method names, as it stands; an unknown or foreign one is
    refused."""
    record = tool_tasks.find(named, caller)
    if record is None:
        raise _unknown(named)
    return record


def get(params: Any, capabilities: dict[str, Any], caller: str) -> dict[str, Any]:
    """`tasks/get`: the task as it stands, with the tool result once it has completed."""
    require(capabilities, "tasks/get")
    named = _named(params)
    if tool_tasks.is_task_id(named):
        return _tool_task(_record_of(named, caller))
    state = _state_of(named, caller)
    task = _task(state)
    if state.status == Run.Status.WAITING:
        asked = task_input_requests(state.run_id)
        if asked is not None:
            task["status"] = "input_required"
            task["inputRequests"] = asked
    if task["status"] == "completed":
        result = run_result(state.run_id) if state.status == Run.Status.SUCCEEDED else None
        outcome = RunOutcome(state.run_id, state.status, result, state.error, state.error_node_id)
        tool_result = workflow_answers.outcome_result(
            state.workflow_name, state.output_schema, outcome
        )
        task["result"] = tool_result.model_dump(by_alias=True, exclude_none=True, mode="json")
    return task


def cancel(params: Any, capabilities: dict[str, Any], caller: str) -> dict[str, Any]:
    """`tasks/cancel`: ask the task to stop (a run ends `cancelled` before its next node; a
    tool task at its next wait). A task already ended is left as it ended."""
    require(capabilities, "tasks/cancel")
    named = _named(params)
    if tool_tasks.is_task_id(named):
        tool_tasks.cancel(_record_of(named, caller))
        return {}
    state = _state_of(named, caller)
    run_cancel(run_id=state.run_id, reason="The client cancelled the task", caller=caller)
    return {}


def update(params: Any, capabilities: dict[str, Any], caller: str) -> dict[str, Any]:
    """`tasks/update`: the client's answers to what a task asks (`inputResponses`): a tool
    task's, or a run's waiting at an approval node that asks its caller; answers to requests
    that are not outstanding are ignored, as the extension says."""
    require(capabilities, "tasks/update")
    named = _named(params)
    responses = params.get("inputResponses", {})
    if tool_tasks.is_task_id(named):
        tool_tasks.answer(_record_of(named, caller), responses)
        return {}
    state = _state_of(named, caller)
    answer = responses.get(INPUT_KEY) if isinstance(responses, dict) else None
    asks = state.status == Run.Status.WAITING and task_input_requests(state.run_id) is not None
    if asks and answer is not None:
        problem = client_answered(state.run_id, caller, answer)
        if problem is not None:
            raise RpcError(types.INVALID_PARAMS, f"The answer was not taken: {problem}")
    return {}


METHODS = {"tasks/get": get, "tasks/cancel": cancel, "tasks/update": update}


def _task_required(name: str) -> RpcError:
    return RpcError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"Tool {name!r} runs only as a task of the tasks extension (protocol 2026-07-28): "
        f'declare it in this request\'s _meta["{types.CLIENT_CAPABILITIES_META_KEY}"]'
        f'.extensions["{EXTENSION}"] = {{}} and follow the task with tasks/get.',
        {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


def task_tool(
    name: str, handler: Handler, support: Literal["optional", "required"] = "optional"
) -> Handler:
    """An extra tool's handler (dispatch.ExtraTool) that runs as a task when the client
    declared the extension on a 2026-07-28 request; the task's id answers the call at once.

    A handler that is a plain function runs all of it as the task. A generator handler asks
    for input in the request (InputRequiredResult rounds) until it yields `START_TASK`; the
    rest runs as the task, which asks through `tasks/get` and `tasks/update`. A client
    without the extension gets the tool run in the request, `START_TASK` passed over; or,
    when `support` is "required", a -32021 error naming the extension. Progress and log
    messages a handler makes once it runs as a task are not sent: the task has no stream,
    and the client follows it with `tasks/get`."""
    generator = inspect.isgeneratorfunction(handler)

    def run(arguments: dict[str, Any], context: Any) -> Any:
        as_task = context.stateless and declared(context.client_capabilities)
        if not as_task and support == "required":
            raise _task_required(name)
        if as_task and not generator:
            return _start(name, context.caller.actor, lambda: handler(arguments, context))
        outcome = handler(arguments, context)
        if not isinstance(outcome, Generator):
            return outcome
        return _until_task(name, outcome, context.caller.actor if as_task else None)

    return run


def _start(name: str, caller: str, begin: Callable[[], Any]) -> types.Result:
    """Start a tool task: its CreateTaskResult, or a tool error when the server is busy."""
    try:
        record = tool_tasks.start(name, caller, begin)
    except tool_tasks.Busy as exc:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"Error: {exc} Try again later.")],
            is_error=True,
        )
    return CreateTaskResult.model_validate({"resultType": "task", **_tool_task(record)})


def _until_task(
    name: str, handler: Generator[Any, Any, Any], caller: str | None
) -> Generator[Any, Any, Any]:
    """Pass a generator handler's input requests through to the request's era until it
    yields START_TASK; then, for a `caller` whose call may become a task, hand the rest of
    it to a new task and return the task's CreateTaskResult (else go on in the request)."""
    handed_over = False
    try:
        asked = next(handler)
        while True:
            if asked is START_TASK:
                if caller is not None:
                    answer = _start(name, caller, lambda: handler)
                    handed_over = isinstance(answer, CreateTaskResult)
                    return answer
                asked = next(handler)
                continue
            asked = handler.send((yield asked))
    except StopIteration as finished:
        return finished.value
    finally:
        if not handed_over:
            handler.close()
