"""Tool handlers run as background tasks: the tasks of the tasks extension that are not
workflow runs (task_extension.py decides when a call becomes one, and speaks the protocol).

A task's record is kept in Django's cache (Redis in production), so that any instance
answers `tasks/get`, `tasks/update` and `tasks/cancel` for it. Its handler runs on a thread of
the instance that started it, and learns of the client's answers and of a cancellation
through the cache: at once when they reach the same instance, else within
`_POLL_SECONDS`. Once the task is created only that thread writes its record; the client's
answers and its cancel request are kept under keys of their own, so no write is ever lost to
another.

A handler is the same as an extra tool's (dispatch.ExtraTool): a function returning a
`CallToolResult`, or a generator that yields lists of `InputRequest`s and is sent the client's
answers by key (mcp_endpoint/jsonrpc/interaction.py). In a task, its requests are shown by
`tasks/get` (`status: input_required`, `inputRequests`) and answered by `tasks/update`. A handler
waits with `sleep`, which a cancellation interrupts. Tool tasks keep the times of workflow runs: a
finished task stays readable for GRAPHS_RESULT_KEEP_SECONDS, and one whose instance stopped (no
heartbeat for GRAPHS_RUN_STALE_SECONDS) is reported failed, never working for ever.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import threading
import time
from collections.abc import Callable, Generator
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from django.conf import settings
from django.core.cache import cache
from django.db import connections
from mcp import types

from mcp_endpoint.jsonrpc import interaction
from mcp_endpoint.jsonrpc.errors import RpcError
from mcp_endpoint.jsonrpc.interaction import InputRequest, Responses

logger = logging.getLogger(__name__)

# Tasks one instance runs at once (each holds a thread while it works or waits).
MAX_RUNNING = 32
# How long a task waits for the client's answers before giving up (as long as a
# requestState of the stateless rounds stays valid: long enough for a person).
INPUT_WAIT_SECONDS = interaction.REQUEST_STATE_TTL_SECONDS
# How often a waiting task reads the cache for what reached another instance.
_POLL_SECONDS = 0.5
_ID_PREFIX = "tool-"
_KEY_PREFIX = "mcp-tool-task:"

WORKING, INPUT_REQUIRED = "working", "input_required"
COMPLETED, FAILED, CANCELLED = "completed", "failed", "cancelled"
TERMINAL = frozenset({COMPLETED, FAILED, CANCELLED})


class _StartTask:
    def __repr__(self) -> str:
        return "START_TASK"


START_TASK: Final = _StartTask()
"""Yielded by a task tool's generator handler: what comes after it runs as the task, what
came before was answered in the request (task_extension.task_tool)."""


class TaskCancelled(Exception):
    """Raised in a task's handler (by `sleep`, or while it waits for answers) once the
    client cancelled the task; the task ends `cancelled`."""


class Busy(Exception):
    """This instance runs MAX_RUNNING tasks already."""


@dataclass
class TaskRecord:
    """A task as kept in the cache, written only by the thread that runs it."""

    task_id: str
    tool: str
    owner: str
    status: str
    message: str
    created_at: float
    updated_at: float
    # The requests the handler waits on (input_required), by key: {"method", "params"}.
    input_requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The CallToolResult (completed), or the JSON-RPC error (failed), as JSON.
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


def is_task_id(name: str) -> bool:
    """Whether `name` has the form of a tool task's id (it may still name no task)."""
    return name.startswith(_ID_PREFIX)


def _record_key(task_id: str) -> str:
    return f"{_KEY_PREFIX}{task_id}"


def _answer_key(task_id: str, key: str) -> str:
    return f"{_KEY_PREFIX}{task_id}:answer:{key}"


def _cancel_key(task_id: str) -> str:
    return f"{_KEY_PREFIX}{task_id}:cancel"


def _alive_key(task_id: str) -> str:
    return f"{_KEY_PREFIX}{task_id}:alive"


def _keep_seconds() -> float:
    return float(settings.GRAPHS_RESULT_KEEP_SECONDS)


def ttl_ms() -> int:
    """How long a task stays readable after its last change, in milliseconds."""
    return int(_keep_seconds() * 1000)


# The tasks this instance runs: each one's wake-up (set when an answer or a cancel request
# for it reaches this instance). Guarded by `_lock`, as is `_heart`.
_local: dict[str, threading.Event] = {}
_lock = threading.Lock()
_heart: threading.Thread | None = None
_slots = threading.BoundedSemaphore(MAX_RUNNING)
# The task the current thread runs (for `sleep`).
_current: ContextVar[str | None] = ContextVar("tool_task", default=None)


def _save(record: TaskRecord) -> None:
    record.updated_at = time.time()
    cache.set(_record_key(record.task_id), asdict(record), timeout=_keep_seconds())


def _load(task_id: str) -> TaskRecord | None:
    data = cache.get(_record_key(task_id))
    return TaskRecord(**data) if isinstance(data, dict) else None


def start(tool: str, owner: str, begin: Callable[[], Any]) -> TaskRecord:
    """Record a task of `tool` for `owner` and run `begin()` on a thread of its own: it
    returns the tool's result, or a generator to drive (resumed with `next`, so one
    suspended at `START_TASK` goes on from there). Once this returns, `tasks/get` finds
    the task from any instance. Raises `Busy` when MAX_RUNNING tasks run here already."""
    slots = _slots
    if not slots.acquire(blocking=False):
        raise Busy(f"This server runs {MAX_RUNNING} tasks already.")
    now = time.time()
    record = TaskRecord(
        task_id=_ID_PREFIX + secrets.token_urlsafe(18),
        tool=tool,
        owner=owner,
        status=WORKING,
        message="Running.",
        created_at=now,
        updated_at=now,
    )
    try:
        _save(record)
        cache.set(_alive_key(record.task_id), True, timeout=settings.GRAPHS_RUN_STALE_SECONDS)
        with _lock:
            _local[record.task_id] = threading.Event()
        _ensure_heartbeat()
        thread = threading.Thread(
            target=_run, args=(record, begin, slots), name=f"task {record.task_id}", daemon=True
        )
        thread.start()
    except BaseException:
        _forget(record.task_id)
        slots.release()
        raise
    return record


def _forget(task_id: str) -> None:
    with _lock:
        _local.pop(task_id, None)


def _run(record: TaskRecord, begin: Callable[[], Any], slots: threading.Semaphore) -> None:
    """The task's thread: drive the handler, then settle the task once, and give its slot
    back to `slots`."""
    _current.set(record.task_id)
    handler: Generator[Any, Responses, Any] | None = None
    try:
        outcome = begin()
        if isinstance(outcome, Generator):
            handler = outcome
            outcome = _drive(record, handler)
        if not isinstance(outcome, types.CallToolResult):
            raise TypeError(f"the handler returned {type(outcome).__name__}, not a tool result")
        if _cancel_requested(record.task_id):
            raise TaskCancelled
        record.status, record.message = COMPLETED, _ended_message(outcome)
        record.result = outcome.model_dump(by_alias=True, exclude_none=True, mode="json")
    except TaskCancelled:
        record.status, record.message = CANCELLED, "Cancelled by the client."
    except RpcError as exc:
        record.status, record.message = FAILED, f"Failed: {exc.message}"
        record.error = _error(exc.code, exc.message, exc.data)
    except Exception:
        logger.exception("Task %s of tool %s failed", record.task_id, record.tool)
        message = f"Tool {record.tool!r} failed on the server; the error is logged. Try again."
        record.status, record.message = FAILED, f"Failed: {message}"
        record.error = _error(types.INTERNAL_ERROR, message)
    finally:
        if handler is not None:
            handler.close()
        # Answers to what it still asked (it was cancelled or gave up), and the cancel
        # request, are of no use now. The alive mark expires by itself: deleted here, a
        # `find` that read the record just before the last save would think it orphaned.
        leftovers = [_answer_key(record.task_id, key) for key in record.input_requests]
        record.input_requests = {}
        try:
            _save(record)
        finally:
            _forget(record.task_id)
            cache.delete_many([*leftovers, _cancel_key(record.task_id)])
            slots.release()
            connections.close_all()


def _error(code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


def _ended_message(result: types.CallToolResult) -> str:
    return "Completed with a tool error." if result.is_error else "Completed."


def _drive(record: TaskRecord, handler: Generator[Any, Responses, Any]) -> Any:
    """Run a generator handler to its result, asking the client through the task."""
    try:
        asked = next(handler)
        while True:
            if asked is START_TASK:
                asked = next(handler)
                continue
            asked = handler.send(_answers(record, list(asked)))
    except StopIteration as finished:
        return finished.value


def _answers(record: TaskRecord, requests: list[InputRequest]) -> Responses:
    """Show `requests` on the task (input_required) and wait until the client has answered
    every one by `tasks/update`; raises TaskCancelled if it cancels the task instead."""
    record.status = INPUT_REQUIRED
    record.message = f"Waiting for the client's answer to {len(requests)} input request(s)."
    record.input_requests = {r.key: {"method": r.method, "params": r.params} for r in requests}
    _save(record)
    keys = {r.key: _answer_key(record.task_id, r.key) for r in requests}
    deadline = time.monotonic() + INPUT_WAIT_SECONDS
    while True:
        found = cache.get_many(list(keys.values()))
        if len(found) == len(keys):
            break
        if time.monotonic() >= deadline:
            minutes = INPUT_WAIT_SECONDS // 60
            raise RpcError(
                types.REQUEST_TIMEOUT,
                f"The client did not answer the input requests within {minutes} minutes; "
                "call the tool again.",
            )
        _wait(record.task_id, min(_POLL_SECONDS, deadline - time.monotonic()))
    cache.delete_many(list(keys.values()))
    record.status, record.message, record.input_requests = WORKING, "Running.", {}
    _save(record)
    return {key: found[cache_key] for key, cache_key in keys.items()}


def _wait(task_id: str, seconds: float) -> None:
    """Wait up to `seconds` for news of the task (sooner when it reaches this instance);
    raises TaskCancelled once the client has cancelled it."""
    with _lock:
        wake = _local[task_id]
    if wake.wait(max(seconds, 0)):
        wake.clear()
    # Read after the wake-up is cleared: news written meanwhile is seen now or next time.
    if _cancel_requested(task_id):
        raise TaskCancelled


def _cancel_requested(task_id: str) -> bool:
    return bool(cache.get(_cancel_key(task_id)))


def sleep(seconds: float) -> None:
    """Wait `seconds`: a handler's way to wait that a cancellation of its task interrupts
    (raising TaskCancelled). Outside a task it is a plain sleep."""
    task_id = _current.get()
    if task_id is None:
        time.sleep(seconds)
        return
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        _wait(task_id, min(left, _POLL_SECONDS))


def _ensure_heartbeat() -> None:
    """Start the thread that keeps this instance's running tasks alive in the cache."""
    global _heart
    with _lock:
        if _heart is not None and _heart.is_alive():
            return
        _heart = threading.Thread(target=_heartbeat, name="tool task heartbeat", daemon=True)
        _heart.start()


def _heartbeat() -> None:
    """While this instance runs tasks, mark each alive and keep its record from expiring."""
    global _heart
    while True:
        time.sleep(settings.GRAPHS_HEARTBEAT_SECONDS)
        with _lock:
            running = list(_local)
            if not running:
                _heart = None
                return
        for task_id in running:
            try:
                cache.set(_alive_key(task_id), True, timeout=settings.GRAPHS_RUN_STALE_SECONDS)
                cache.touch(_record_key(task_id), timeout=_keep_seconds())
            except Exception:
                logger.exception("The heartbeat of task %s failed", task_id)


def _wake(task_id: str) -> None:
    with _lock:
        wake = _local.get(task_id)
    if wake is not None:
        wake.set()


def find(task_id: str, owner: str) -> TaskRecord | None:
    """The task as the client should see it now, or None if `owner` has no such task.

    Answers already given are no longer asked (a task with all its answers is working
    again); a task whose instance stopped is failed."""
    record = _load(task_id)
    if record is None or not hmac.compare_digest(record.owner, owner):
        return None
    if record.status in TERMINAL:
        return record
    if cache.get(_alive_key(task_id)) is None:
        message = "The server instance that ran this task stopped; call the tool again."
        record.status, record.message = FAILED, f"Failed: {message}"
        record.error = _error(types.INTERNAL_ERROR, message)
        record.input_requests = {}
        return record
    if record.status == INPUT_REQUIRED:
        answered = cache.get_many([_answer_key(task_id, key) for key in record.input_requests])
        record.input_requests = {
            key: request
            for key, request in record.input_requests.items()
            if _answer_key(task_id, key) not in answered
        }
        if not record.input_requests:
            record.status, record.message = WORKING, "Running."
    return record


def answer(record: TaskRecord, responses: Any) -> None:
    """Keep the client's answers to the requests `record` waits on (found with `find`);
    answers to anything else are ignored. An answer of the wrong shape is refused
    (-32602) and none of the others is kept."""
    if not isinstance(responses, dict):
        raise RpcError(types.INVALID_PARAMS, "Invalid params: inputResponses must be an object.")
    kept: dict[str, Any] = {}
    for key, request in record.input_requests.items():
        if key not in responses:
            continue
        if not interaction.valid_answer(request["method"], responses[key]):
            raise RpcError(
                types.INVALID_PARAMS,
                f"Invalid params: inputResponses[{key!r}] is not a result of "
                f"{request['method']}; send one as that method's result.",
            )
        kept[_answer_key(record.task_id, key)] = responses[key]
    if kept:
        cache.set_many(kept, timeout=_keep_seconds())
        _wake(record.task_id)


def cancel(record: TaskRecord) -> None:
    """Ask the task (found with `find`) to stop; it ends `cancelled` at its next wait, or
    when its handler returns. A task already ended stays as it ended."""
    if record.status in TERMINAL:
        return
    cache.set(_cancel_key(record.task_id), True, timeout=_keep_seconds())
    _wake(record.task_id)
