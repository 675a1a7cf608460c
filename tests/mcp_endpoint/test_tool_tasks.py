"""Extra tools run as tasks of the tasks extension (task_extension.task_tool, tool_tasks.py):
created at once for a 2026-07-28 client that declared the extension, followed with
tasks/get, answered with tasks/update, stopped with tasks/cancel; run in the request, or
refused with -32021, for a client that did not."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

import pytest
from mcp import types

from mcp_endpoint.calls import tool_tasks
from mcp_endpoint.calls.task_extension import EXTENSION, task_tool
from mcp_endpoint.calls.tool_tasks import START_TASK, TaskRecord
from mcp_endpoint.features import extensions
from mcp_endpoint.features.extensions import ExtraTool
from mcp_endpoint.jsonrpc.errors import RpcError
from mcp_endpoint.jsonrpc.interaction import InputRequest
from tests.mcp_endpoint.helpers import (
    CAPABILITIES_KEY,
    legacy,
    legacy_session,
    make_key,
    modern,
    result,
    rpc_error,
)

pytestmark = pytest.mark.timeout(60)

TASKS = {CAPABILITIES_KEY: {"extensions": {EXTENSION: {}}}}
TERMINAL = {"completed", "failed", "cancelled"}


def _text(value: str, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=value)], is_error=is_error
    )


def _ask(key: str, field: str) -> InputRequest:
    schema = {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}
    return InputRequest(key, "elicitation/create", {"message": key, "requestedSchema": schema})


def _accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


# The tools: what each does is in its name.


def _sleeps(arguments: dict[str, Any], context: Any) -> types.CallToolResult:
    tool_tasks.sleep(arguments.get("seconds", 0))
    return _text(f"slept {arguments.get('seconds', 0)}")


def _fails_in_band(arguments: dict[str, Any], context: Any) -> types.CallToolResult:
    return _text("it went wrong", is_error=True)


def _raises_rpc_error(arguments: dict[str, Any], context: Any) -> types.CallToolResult:
    raise RpcError(types.INTERNAL_ERROR, "the job broke down", {"why": "on purpose"})


def _crashes(arguments: dict[str, Any], context: Any) -> types.CallToolResult:
    raise ZeroDivisionError("a bug")


def _asks_two_in_the_task(arguments: dict[str, Any], context: Any):
    yield START_TASK
    answers = yield [_ask("city", "city"), _ask("name", "name")]
    city, name = answers["city"]["content"]["city"], answers["name"]["content"]["name"]
    return _text(f"{name} goes to {city}")


def _asks_then_becomes_a_task(arguments: dict[str, Any], context: Any):
    answers = yield [_ask("name", "name")]
    yield START_TASK
    tool_tasks.sleep(0.1)
    return _text(f"Hello, {answers['name']['content']['name']}!")


TOOLS: dict[str, tuple[Callable[..., Any], Literal["optional", "required"]]] = {
    "sleeps": (_sleeps, "optional"),
    "sleeps_required": (_sleeps, "required"),
    "fails_in_band": (_fails_in_band, "optional"),
    "raises_rpc_error": (_raises_rpc_error, "optional"),
    "crashes": (_crashes, "optional"),
    "asks_two_in_the_task": (_asks_two_in_the_task, "optional"),
    "asks_then_becomes_a_task": (_asks_then_becomes_a_task, "required"),
}


@pytest.fixture
def task_tools(monkeypatch):
    for name, (handler, support) in TOOLS.items():
        tool = types.Tool(name=name, input_schema={"type": "object"})
        extra = ExtraTool(tool, task_tool(name, handler, support))
        monkeypatch.setitem(extensions.installed().tools, name, extra)


def call(client, key: str, name: str, meta=TASKS, **params: Any) -> dict[str, Any]:
    return result(modern(client, "tools/call", {"name": name, **params}, key=key, meta=meta))


def tasks(client, key: str, method: str, task_id: str, **params: Any):
    return modern(client, method, {"taskId": task_id, **params}, key=key, meta=TASKS)


def until(client, key: str, task_id: str, done: Callable[[dict[str, Any]], bool]) -> dict:
    """tasks/get until `done(task)`, for at most 10 s."""
    deadline = time.monotonic() + 10
    while True:
        task = result(tasks(client, key, "tasks/get", task_id))
        if done(task) or time.monotonic() > deadline:
            return task
        time.sleep(0.05)


def ended(client, key: str, task_id: str) -> dict[str, Any]:
    return until(client, key, task_id, lambda task: task["status"] in TERMINAL)


def test_a_call_becomes_a_task_at_once_and_its_result_is_inlined(client, key, task_tools):
    created = call(client, key, "sleeps", arguments={"seconds": 0.3})
    assert created["resultType"] == "task"
    assert created["taskId"].startswith("tool-")
    assert created["status"] == "working"
    assert created["createdAt"].endswith("Z")
    assert created["lastUpdatedAt"].endswith("Z")
    assert isinstance(created["ttlMs"], int)
    assert created["ttlMs"] > 0
    assert isinstance(created["pollIntervalMs"], int)
    assert created["pollIntervalMs"] > 0
    assert not {"task", "result", "error", "inputRequests", "requestState"} & set(created)

    # Durable at once: the very next request finds it.
    working = result(tasks(client, key, "tasks/get", created["taskId"]))
    assert working["status"] == "working"
    assert working["resultType"] == "complete"
    assert "result" not in working

    done = ended(client, key, created["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "slept 0.3"}]
    assert "error" not in done


def test_without_the_extension_a_task_tool_runs_in_the_request_or_is_refused(
    client, key, task_tools
):
    plain = call(client, key, "sleeps", meta={}, arguments={"seconds": 0})
    assert plain["resultType"] == "complete"
    assert plain["content"][0]["text"] == "slept 0"

    error = rpc_error(
        modern(client, "tools/call", {"name": "sleeps_required", "arguments": {}}, key=key)
    )
    assert error["code"] == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error["data"] == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    assert "sleeps_required" in error["message"]
    assert EXTENSION in error["message"]

    # A generator handler asks in rounds instead, passing over START_TASK.
    first = call(client, key, "asks_two_in_the_task", meta={}, arguments={})
    assert first["resultType"] == "input_required"
    assert set(first["inputRequests"]) == {"city", "name"}
    answers = {"city": _accept(city="Oslo"), "name": _accept(name="Bo")}
    second = call(
        client, key, "asks_two_in_the_task", meta={}, arguments={},
        inputResponses=answers, requestState=first["requestState"],
    )  # fmt: skip
    assert second["resultType"] == "complete"
    assert second["content"][0]["text"] == "Bo goes to Oslo"

    # A 2025 session has no tasks extension at all.
    session = legacy_session(client, key)
    params = {"name": "sleeps", "arguments": {"seconds": 0}}
    answer = result(legacy(client, session, "tools/call", params, key=key))
    assert answer["content"][0]["text"] == "slept 0"
    params = {"name": "sleeps_required", "arguments": {}}
    error = rpc_error(legacy(client, session, "tools/call", params, key=key))
    assert error["code"] == types.MISSING_REQUIRED_CLIENT_CAPABILITY


def test_a_task_asks_through_tasks_get_and_takes_answers_one_at_a_time(client, key, task_tools):
    task_id = call(client, key, "asks_two_in_the_task", arguments={})["taskId"]
    asking = until(client, key, task_id, lambda task: task["status"] == "input_required")
    assert set(asking["inputRequests"]) == {"city", "name"}
    assert asking["inputRequests"]["city"]["method"] == "elicitation/create"

    # An answer of the wrong shape is refused, and keeps nothing.
    bad = tasks(
        client, key, "tasks/update", task_id,
        inputResponses={"name": _accept(name="Ada"), "city": {"nonsense": True}},
    )  # fmt: skip
    assert rpc_error(bad)["code"] == types.INVALID_PARAMS
    assert "city" in rpc_error(bad)["message"]

    ack = result(
        tasks(
            client, key, "tasks/update", task_id,
            inputResponses={"city": _accept(city="Lyon"), "not-asked": {"ignored": True}},
        )
    )  # fmt: skip
    assert ack == {"resultType": "complete", "_meta": ack["_meta"]}
    waiting = result(tasks(client, key, "tasks/get", task_id))
    assert waiting["status"] == "input_required"
    assert set(waiting["inputRequests"]) == {"name"}

    answer = {"name": _accept(name="Ada")}
    result(tasks(client, key, "tasks/update", task_id, inputResponses=answer))
    done = ended(client, key, task_id)
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Ada goes to Lyon"
    assert "inputRequests" not in done


def test_cancelling_stops_a_sleeping_task_at_once_and_an_ended_one_stays_ended(
    client, key, task_tools
):
    task_id = call(client, key, "sleeps", arguments={"seconds": 30})["taskId"]
    started = time.monotonic()
    ack = result(tasks(client, key, "tasks/cancel", task_id))
    assert not {"taskId", "status", "result", "error"} & set(ack)
    assert ack["resultType"] == "complete"
    cancelled = ended(client, key, task_id)
    assert cancelled["status"] == "cancelled"
    assert time.monotonic() - started < 5
    assert "result" not in cancelled

    quick = call(client, key, "sleeps", arguments={"seconds": 0})["taskId"]
    assert ended(client, key, quick)["status"] == "completed"
    assert result(tasks(client, key, "tasks/cancel", quick))["resultType"] == "complete"
    assert result(tasks(client, key, "tasks/get", quick))["status"] == "completed"


def test_a_task_waiting_for_input_can_be_cancelled(client, key, task_tools):
    task_id = call(client, key, "asks_two_in_the_task", arguments={})["taskId"]
    until(client, key, task_id, lambda task: task["status"] == "input_required")
    result(tasks(client, key, "tasks/cancel", task_id))
    cancelled = ended(client, key, task_id)
    assert cancelled["status"] == "cancelled"
    assert "inputRequests" not in cancelled


def test_a_tool_error_completes_and_a_protocol_error_or_crash_fails(
    client, key, task_tools, caplog
):
    in_band = ended(client, key, call(client, key, "fails_in_band", arguments={})["taskId"])
    assert in_band["status"] == "completed"
    assert in_band["result"]["isError"] is True

    broke = ended(client, key, call(client, key, "raises_rpc_error", arguments={})["taskId"])
    assert broke["status"] == "failed"
    assert broke["error"] == {
        "code": types.INTERNAL_ERROR,
        "message": "the job broke down",
        "data": {"why": "on purpose"},
    }
    assert "result" not in broke

    with caplog.at_level(logging.ERROR, logger="mcp_endpoint.calls.tool_tasks"):
        crashed = ended(client, key, call(client, key, "crashes", arguments={})["taskId"])
    assert crashed["status"] == "failed"
    assert crashed["error"]["code"] == types.INTERNAL_ERROR
    assert "'crashes' failed on the server" in crashed["error"]["message"]
    assert "a bug" not in crashed["error"]["message"]
    assert any("ZeroDivisionError" in (r.exc_text or "") for r in caplog.records)


def test_another_key_is_told_there_is_no_such_task(client, key, task_tools):
    task_id = call(client, key, "sleeps", arguments={"seconds": 0.2})["taskId"]
    other = make_key()
    for method, extra in (
        ("tasks/get", {}),
        ("tasks/update", {"inputResponses": {}}),
        ("tasks/cancel", {}),
    ):
        error = rpc_error(tasks(client, other, method, task_id, **extra))
        assert error["code"] == types.INVALID_PARAMS
        assert "no task" in error["message"]
    assert ended(client, key, task_id)["status"] == "completed"
    error = rpc_error(tasks(client, key, "tasks/get", "tool-no-such-task"))
    assert error["code"] == types.INVALID_PARAMS


def test_input_asked_before_start_task_is_gathered_in_the_request(client, key, task_tools):
    first = call(client, key, "asks_then_becomes_a_task", arguments={})
    assert first["resultType"] == "input_required"
    assert "taskId" not in first
    second = call(
        client, key, "asks_then_becomes_a_task", arguments={},
        inputResponses={"name": _accept(name="Alice")}, requestState=first["requestState"],
    )  # fmt: skip
    assert second["resultType"] == "task"
    assert "requestState" not in second
    assert "inputRequests" not in second
    done = ended(client, key, second["taskId"])
    assert done["result"]["content"][0]["text"] == "Hello, Alice!"


def test_a_busy_server_answers_with_a_tool_error(client, key, task_tools, monkeypatch):
    monkeypatch.setattr(tool_tasks, "_slots", threading.BoundedSemaphore(1))
    tool_tasks._slots.acquire()
    busy = call(client, key, "sleeps", arguments={"seconds": 0})
    assert busy["resultType"] == "complete"
    assert busy["isError"] is True
    assert "tasks already" in busy["content"][0]["text"]


def test_a_task_whose_instance_stopped_is_failed_not_working_for_ever():
    # As another instance left it: recorded working, and no heartbeat since.
    now = time.time()
    record = TaskRecord("tool-orphan", "sleeps", "key:1", "working", "Running.", now, now)
    tool_tasks._save(record)
    seen = tool_tasks.find("tool-orphan", "key:1")
    assert seen is not None
    assert seen.status == "failed"
    assert seen.error is not None
    assert "stopped" in seen.error["message"]
    assert tool_tasks.find("tool-orphan", "key:2") is None


def test_a_task_left_unanswered_gives_up_and_fails(client, key, task_tools, monkeypatch):
    monkeypatch.setattr(tool_tasks, "INPUT_WAIT_SECONDS", 0.3)
    task_id = call(client, key, "asks_two_in_the_task", arguments={})["taskId"]
    gave_up = ended(client, key, task_id)
    assert gave_up["status"] == "failed"
    assert gave_up["error"]["code"] == types.REQUEST_TIMEOUT
    assert "did not answer" in gave_up["error"]["message"]
    assert "inputRequests" not in gave_up
