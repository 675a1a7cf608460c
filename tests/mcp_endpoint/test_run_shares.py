"""A caller past its share of the run threads (issue 24, "No recursion"): its call waits its
turn, and one that cannot start within GRAPHS_RUN_WAIT_SECONDS is answered so, naming the
share and the setting, and never runs. The runs are stand-ins that hold their thread."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from graphs.execution import follow as follow_module
from graphs.execution.follow import Threads
from graphs.execution.runs import RunRequest
from graphs.execution.toolset import WorkflowTool
from mcp_endpoint.calls.workflow_calls import WorkflowCall, follow
from mcp_endpoint.jsonrpc.results import Era
from tests.graphs.test_direct_turns import StandIns

pytestmark = [pytest.mark.timeout(30)]

TOOL = WorkflowTool(
    name="slow",
    description="",
    input_schema={},
    output_schema=None,
    workflow_id=1,
    version_id=1,
    digest="d",
    group="slow",
)


def call_of(caller: str) -> WorkflowCall:
    return WorkflowCall(
        tool=TOOL,
        request=RunRequest(name="slow", arguments={}, caller=caller),
        request_id=1,
        era=Era("2025-11-25"),
        progress_token=None,
        may_become_task=False,
        cancel_on_disconnect=True,
    )


def test_a_call_past_its_callers_share_is_told_it_could_not_start_and_why(settings, monkeypatch):
    settings.GRAPHS_RUN_WAIT_SECONDS = 0.5
    runs = StandIns()
    monkeypatch.setattr(follow_module, "workflow_call", runs.workflow_call)
    pool = ThreadPoolExecutor(4)

    def run(work):
        return asyncio.get_running_loop().run_in_executor(pool, work)

    threads = Threads(short=run, run=run, run_share=1)

    async def answer(caller: str) -> dict:
        messages = [message async for message in follow(call_of(caller), threads)]
        return messages[-1]["result"]

    async def scenario() -> tuple[dict, dict, dict]:
        first = asyncio.ensure_future(answer("greedy"))
        await asyncio.sleep(0.1)  # its run holds the greedy caller's one place
        second, other = await asyncio.gather(answer("greedy"), answer("other"))
        runs.released.set()
        return await first, second, other

    try:
        first, second, other = asyncio.run(scenario())
    finally:
        runs.released.set()
        pool.shutdown(wait=True)

    assert second["isError"] is True
    text = second["content"][0]["text"]
    assert "could not start within 0.5 s" in text
    assert "GRAPHS_RUN_THREADS_PER_CALLER" in text
    assert "Nothing ran" in text
    # The other caller's run started at once (and was still going after 0.5 s).
    assert "is still running" in other["content"][0]["text"]
    assert "is still running" in first["content"][0]["text"]
    assert runs.started == ["greedy", "other"]  # the greedy caller's second never started
