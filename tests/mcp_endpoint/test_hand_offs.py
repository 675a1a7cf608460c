"""A short workflow call's thread hand-offs through the ASGI app uvicorn serves (issue 31,
item 2): counted, so that a change adding one fails here. docs/architecture.md, "A short run's
hand-offs", says why each one is needed.

Counted, not timed: the work given to the run and the short threads, and the callbacks a
thread posts to the event loop (each wakes it). A 2026-07-28 call without a progress token,
its key remembered and the snapshots fresh (so it is admitted in the event loop), a result
small enough to be answered there.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connections

from bench.hops import post, tool_call_request
from graphs.execution.runs import RunOutcome, RunRequest
from graphs.execution.toolset import WorkflowTool
from mcp_endpoint.calls import workflow_calls
from mcp_endpoint.calls.workflow_calls import WorkflowCall
from mcp_endpoint.jsonrpc.results import Era
from mcp_endpoint.transports import asgi
from nodespecs import snapshots
from tests.mcp_endpoint.helpers import MODERN

pytestmark = [pytest.mark.timeout(60)]
TOOL = WorkflowTool(
    name="counts",
    description="",
    input_schema={},
    output_schema=None,
    workflow_id=1,
    version_id=1,
    digest="d",
    group="counts",
)


class CountingExecutor(ThreadPoolExecutor):
    """An executor that counts the work given to it."""

    def __init__(self, name: str) -> None:
        super().__init__(max_workers=1, thread_name_prefix=name)
        self.given = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        self.given += 1
        return super().submit(fn, *args, **kwargs)


@pytest.fixture
def executors(monkeypatch) -> Iterator[dict[str, CountingExecutor]]:
    counted = {kind: CountingExecutor(kind) for kind in ("run", "short")}
    monkeypatch.setattr(asgi, "_RUNS", counted["run"])
    monkeypatch.setattr(asgi, "_POOL", counted["short"])
    yield counted
    for executor in counted.values():
        executor.submit(connections.close_all).result(timeout=10)
        executor.shutdown()


def count_posts(loop: asyncio.AbstractEventLoop, posts: collections.Counter[str]) -> None:
    """Count the callbacks other threads post to `loop`, by the thread's executor."""
    original = loop.call_soon_threadsafe
    loop_thread = threading.get_ident()

    def call_soon_threadsafe(callback: Any, *args: Any, context: Any = None) -> Any:
        if threading.get_ident() != loop_thread:
            posts[threading.current_thread().name.split("_")[0]] += 1
        return original(callback, *args, context=context)

    loop.call_soon_threadsafe = call_soon_threadsafe  # type: ignore[method-assign]


async def call(key: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One `tools/call` POST through the ASGI app; its JSON-RPC answer."""
    body, headers = tool_call_request(key, name, arguments)
    return json.loads(await asyncio.wait_for(post(body, headers), 20))


@pytest.mark.django_db(transaction=True)
def test_a_short_run_is_three_hand_offs(key, loops, executors, monkeypatch):
    # Fresh for the whole test once read: a snapshot falling due would send one request's
    # admission to a thread, which is not the run's doing.
    monkeypatch.setattr(snapshots, "TABLE_CHECK_SECONDS", 3600.0)
    posts: collections.Counter[str] = collections.Counter()

    async def calls() -> tuple[dict[str, Any], dict[str, int]]:
        await call(key, "classify", {"value": 1})  # reads the snapshots, remembers the key
        given = {kind: executor.given for kind, executor in executors.items()}
        count_posts(asyncio.get_running_loop(), posts)
        answer = await call(key, "classify", {"value": 5})
        return answer, {kind: executor.given - given[kind] for kind, executor in executors.items()}

    answer, given = asyncio.run(calls())

    assert answer["result"]["isError"] is False, answer
    # To the run thread; back from it when the run has its id (the follower must know it
    # while the run goes on), and when it ends (its outcome with the thread's result).
    assert given == {"run": 1, "short": 0}
    assert dict(posts) == {"run": 2}


@pytest.mark.django_db(transaction=True)
def test_a_large_result_is_answered_on_a_short_thread(key, loops, executors, monkeypatch):
    monkeypatch.setattr(snapshots, "TABLE_CHECK_SECONDS", 3600.0)
    monkeypatch.setattr(workflow_calls, "SMALL_CHARS", 2)

    async def calls() -> tuple[dict[str, Any], int]:
        await call(key, "classify", {"value": 1})
        given = executors["short"].given
        answer = await call(key, "classify", {"value": 5})
        return answer, executors["short"].given - given

    answer, given = asyncio.run(calls())

    assert answer["result"]["isError"] is False, answer
    assert given == 1


@pytest.mark.parametrize(
    ("result", "in_loop"),
    [
        ({"count": 7}, True),
        ("small", True),
        (list(range(64)), False),  # with the list itself, 65 values
        (list(range(1_000_000)), False),
        ({"x": [[[1] * 30] * 30]}, False),
        ("x" * 5000, False),
        ({"k" * 5000: 1}, False),
    ],
)
def test_what_is_answered_in_the_loop_is_bounded(result, in_loop):
    call = WorkflowCall(
        tool=TOOL,
        request=RunRequest(name=TOOL.name, arguments={}),
        request_id=1,
        era=Era(MODERN),
        progress_token=None,
        may_become_task=False,
        cancel_on_disconnect=True,
    )
    outcome = RunOutcome(run_id=1, status="succeeded", result=result)

    assert workflow_calls._answers_in_loop(call, outcome) is in_loop


def test_a_test_runs_answer_reads_its_history_so_it_is_made_on_a_thread():
    call = WorkflowCall(
        tool=TOOL,
        request=RunRequest(name=TOOL.name, arguments={}, is_test=True),
        request_id=1,
        era=Era(MODERN),
        progress_token=None,
        may_become_task=False,
        cancel_on_disconnect=True,
    )

    assert not workflow_calls._answers_in_loop(call, RunOutcome(1, "succeeded", {"count": 7}))
