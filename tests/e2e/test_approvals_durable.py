"""A waiting run holds nothing but rows, so it goes on wherever its decision lands: in queued
mode the call enters one web instance, the decision lands on the other, and a Celery worker
finishes the run; and a waiting run outlives its server: decided after a restart it finishes,
and its timeout, due while the server was down, fires once it is back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e.conftest import (
    LiveServer,
    _database_url,
    create_key,
    last_line,
    needs_redis,
    start_server,
    start_together,
)
from tests.e2e.test_approvals import _rest, _value, _waiting_run, connect
from tests.e2e.test_mcp_client import run
from tests.e2e.test_queued_runs import _celery, _running

pytestmark = [pytest.mark.slow, needs_redis, pytest.mark.timeout(240)]

FILES = Path(__file__).parent.parent / "graphs" / "files"
BROKER = "redis://127.0.0.1:6379/12"


def _graph(tmp: Path, timeout_ms: int = 60000) -> Path:
    path = tmp / "approvals.yaml"
    text = (
        (FILES / "approvals.yaml")
        .read_text()
        .replace("timeoutMs: 60000", f"timeoutMs: {timeout_ms}")
    )
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def two_instances(tmp_path_factory) -> Iterator[tuple[LiveServer, LiveServer, Path]]:
    """Two web instances in queued mode and one worker, on one database and broker."""
    import redis

    redis.Redis.from_url(BROKER).flushdb()
    tmp = tmp_path_factory.mktemp("approvals_queued")
    (tmp / "a").mkdir()
    (tmp / "b").mkdir()
    common = {
        "EXECUTION_MODE": "queued",
        "CELERY_BROKER_URL": BROKER,
        "DATABASE_URL": _database_url(tmp, "approvals_queued"),
        "GRAPHS_RUN_WAIT_SECONDS": "40",
    }
    with ExitStack() as stack:
        first, second = start_together(
            stack,
            (tmp / "a", [("import_graph", str(_graph(tmp)))], common),
            (tmp / "b", [], common),
        )
        worker_log = tmp / "worker.log"
        worker_args = ["worker", "--concurrency", "1", "--hostname", "approvals@%h",
                       "--without-gossip", "--without-mingle"]  # fmt: skip
        stack.enter_context(_running(_celery(first.env, worker_log, *worker_args, ready="ready.")))
        yield first, second, worker_log


def test_the_call_enters_one_instance_the_decision_the_other_and_the_worker_finishes(two_instances):
    first, second, worker_log = two_instances
    reviewer = create_key(second, "reviewer", "runs:decide,runs:read")

    async def scenario():
        decided: dict[str, Any] = {}

        async def decide() -> None:
            waiting = await _waiting_run(second, reviewer, "queued")
            status, body = await anyio.to_thread.run_sync(
                _rest, second, reviewer, "POST", f"/runs/{waiting['id']}/decision",
                {"decision": "approved", "form": {"reason": "two instances"}},
            )  # fmt: skip
            assert status == 200, body
            decided.update(body)

        async with connect(first, "legacy") as client, anyio.create_task_group() as group:
            group.start_soon(decide)
            result = await client.call_tool("refund", {"amount": 9, "customer": "queued"})
        return result, decided

    result, decided = run(scenario)
    assert not result.is_error, result
    assert _value(result)["reason"] == "two instances"
    run_id = decided["run_id"]
    # The worker executed the run twice: up to the wait, then from the decision to the end.
    log = worker_log.read_text(errors="replace")
    assert log.count(f"[run-{run_id}] received") == 2, log[-3000:]
    assert log.count(f"[run-{run_id}] succeeded") == 1, log[-3000:]
    _, detail = _rest(second, reviewer, "GET", f"/runs/{run_id}")
    assert [each["node_id"] for each in detail["node_executions"]] == [
        "entry", "approve", "refunded", "done",
    ]  # fmt: skip
    assert detail["run"]["status"] == "succeeded"


def test_a_waiting_run_survives_a_restart_decided_after_it_and_timed_out_across_it(tmp_path):
    settings = {
        "DATABASE_URL": _database_url(tmp_path, "approvals_restart"),
        "GRAPHS_RUN_WAIT_SECONDS": "1",
    }
    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    due_in = 4.0
    soon = _graph(tmp_path / "before", timeout_ms=int(due_in * 1000))
    soon.write_text(
        soon.read_text()
        .replace("name: approvals", "name: approvals_soon")
        .replace("name: refund\n", "name: refund_soon\n")
        .split("  - name: ask_caller")[0]
    )
    commands = [
        ("import_graph", str(_graph(tmp_path))),
        ("import_graph", str(soon)),
        ("create_api_key", "--name", "reviewer", "--scopes", "runs:decide,runs:read"),
    ]
    with contextmanager(start_server)(tmp_path / "before", commands, **settings) as before:
        reviewer = last_line(before.printed[2])

        async def start(name: str, customer: str) -> Any:
            async with connect(before, "legacy") as client:
                return await client.call_tool(name, {"amount": 3, "customer": customer})

        decided_later = run(start, "refund", "restart")
        timed_out = run(start, "refund_soon", "restart-soon")
        started = time.monotonic()
        for answer in (decided_later, timed_out):
            assert "waits for a reviewer's approval" in answer.content[0].text, answer
    # The server is down; the second run's timeout falls due meanwhile.
    time.sleep(max(due_in + 0.5 - (time.monotonic() - started), 0))
    with contextmanager(start_server)(tmp_path / "after", **settings) as after:
        timed_out_id = timed_out.meta["io.switchyard/runId"]
        deadline = time.monotonic() + 10
        while (
            _rest(after, reviewer, "GET", f"/runs/{timed_out_id}")[1]["run"]["status"]
            != "succeeded"
        ):
            assert time.monotonic() < deadline, "the timeout did not fire after the restart"
            time.sleep(0.1)
        _, detail = _rest(after, reviewer, "GET", f"/runs/{timed_out_id}")
        assert detail["run"]["result"] == {"refunded": 0, "decision": "timeout"}
        decided_id = decided_later.meta["io.switchyard/runId"]
        status, body = _rest(
            after,
            reviewer,
            "POST",
            f"/runs/{decided_id}/decision",
            {"decision": "rejected", "comment": "after the restart"},
        )
        assert status == 200, body
        deadline = time.monotonic() + 10
        while (detail := _rest(after, reviewer, "GET", f"/runs/{decided_id}")[1])["run"][
            "status"
        ] != "succeeded":
            assert time.monotonic() < deadline, detail
            time.sleep(0.1)
        assert detail["run"]["result"] == {"refunded": 0, "decision": "rejected"}
        assert detail["approvals"][0]["comment"] == "after the restart"
