"""A workflow call that becomes a task before its run's row is written (a direct run is written
with its first write of history, graphs/execution/recorder.py): the handle waits for the row,
so that any instance finds the task it names. Followed as the ASGI app follows a call: its run
on a thread of one pool, the short work on another."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing
from typing import Any

import pytest
from django.db import connection

from graphs.authoring.files import graph_import
from graphs.execution import liveness
from graphs.execution.follow import Threads
from graphs.execution.runs import RunRequest
from graphs.execution.toolset import workflow_tools
from graphs.models import Run
from mcp_endpoint.calls.workflow_calls import WorkflowCall, follow
from mcp_endpoint.jsonrpc.results import Era
from tests.graph_files import OPERATOR
from tests.graphs.test_run_writes import SPIN_GRAPH
from tests.mcp_endpoint.helpers import MODERN

pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db(transaction=True)]


def on(pool: ThreadPoolExecutor) -> Callable[[Callable[[], Any]], Any]:
    """Work sent to `pool` from the running loop, each thread's connection closed after it."""
    loop = asyncio.get_running_loop()

    def closing(work: Callable[[], Any]) -> Any:
        try:
            return work()
        finally:
            connection.close()

    return lambda work: loop.run_in_executor(pool, closing, work)


async def first_answer(call: WorkflowCall) -> tuple[dict[str, Any], bool]:
    """The call's response, and whether its run had a row when the response came; the run is
    cancelled then (so that none outlives the test)."""
    with ThreadPoolExecutor(2) as runs, ThreadPoolExecutor(2) as short:
        threads = Threads(short=on(short), run=on(runs))
        async with aclosing(follow(call, threads)) as messages:
            response = await anext(message async for message in messages if "id" in message)
        run_id = int(response["result"]["taskId"].removeprefix("run-"))
        written = await threads.short(Run.objects.filter(pk=run_id, status="running").exists)
        assert liveness.registry.cancel(run_id, "the test is over")
    return response, written


def test_a_task_due_before_the_runs_first_write_is_handed_out_once_the_row_exists(settings):
    graph_import(text=SPIN_GRAPH, caller=OPERATOR)
    # Due long before the run's first write: its window (0.2 s) closes after a slow node.
    settings.MCP_TASK_AFTER_SECONDS = 0.01
    call = WorkflowCall(
        tool=workflow_tools()["spin_on"],
        request=RunRequest(name="spin_on", arguments={}, caller="key:tests"),
        request_id=1,
        era=Era(MODERN),
        progress_token=None,
        may_become_task=True,
        cancel_on_disconnect=False,
    )

    response, written = asyncio.run(first_answer(call))

    assert response["result"]["resultType"] == "task"
    assert response["result"]["status"] == "working"
    assert written
    run = Run.objects.get(pk=int(response["result"]["taskId"].removeprefix("run-")))
    assert run.status == "cancelled"
    assert "the test is over" in run.error
