"""Execution modes on real processes: a web server in queued mode with a Celery worker and
beat on the local Redis (database 13, or QUEUED_TESTS_BROKER), and a web server in direct
mode, sharing one database. Driven by the official `mcp` client; the run rows are read
straight from the database."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.e2e.conftest import (
    ROOT,
    LiveServer,
    _database_url,
    _manage,
    needs_redis,
    start_server,
    start_together,
)
from tests.e2e.test_mcp_client import connect, run
from tests.peers import ECHO_SERVER

pytestmark = [pytest.mark.slow, needs_redis]

BROKER = os.environ.get("QUEUED_TESTS_BROKER", "redis://127.0.0.1:6379/13")
# Short intervals so that a lost worker is reaped, and a lost message sent again, within seconds.
SETTINGS = {
    "CELERY_BROKER_URL": BROKER,
    "GRAPHS_RUN_WAIT_SECONDS": "6",
    "GRAPHS_HEARTBEAT_SECONDS": "0.3",
    "GRAPHS_RUN_STALE_SECONDS": "3",
    "GRAPHS_REAP_INTERVAL_SECONDS": "1",
    "GRAPHS_QUEUED_STALE_SECONDS": "4",
    "GRAPHS_QUEUED_RESENDS": "1",
    "GRAPHS_RUN_RETRIES": "1",
}
NAP_TWICE = """
    inputSchema: {type: object, properties: {seconds: {type: number}}}
    nodes:
      - {id: entry, type: entry, next: nap1}
      - {id: nap1, type: mcp, server: echo, tool: sleep, args: {seconds: "$.entry.seconds"},
          next: nap2}
      - {id: nap2, type: mcp, server: echo, tool: sleep, args: {seconds: "$.entry.seconds"},
          next: exit}
      - {id: exit, type: exit}
"""

GRAPH = """
version: "1.0"
server: {{name: "queuedTests", version: "1.0.0"}}
mcpServers:
  echo:
    command: {python}
    args: [{server}]
tools:
  - name: shout
    description: Echoes a value on the echo server, then upper-cases it.
    inputSchema: {{type: object, properties: {{value: {{type: string}}}}, required: [value]}}
    nodes:
      - {{id: entry, type: entry, next: say}}
      - {{id: say, type: mcp, server: echo, tool: echo, args: {{value: "$.entry.value"}},
          next: loud}}
      - {{id: loud, type: transform, next: exit,
          transform: {{expr: '$uppercase($type($.say) = "string" ? $.say : $.say.result)'}}}}
      - {{id: exit, type: exit}}
  - name: nap_twice
    description: Sleeps twice on the echo server.{nap_twice}
  - name: nap_retried
    description: Sleeps twice on the echo server; safe to retry.{nap_twice}
"""


@dataclass(frozen=True)
class Stack:
    queued: LiveServer
    direct: LiveServer
    worker: subprocess.Popen
    database_url: str


def _celery(env: dict[str, str], log: Path, *args: str, ready: str) -> subprocess.Popen:
    """Start `celery -A config ARGS` and wait until its log shows `ready`."""
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", *args, "--loglevel", "INFO"],
            cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
        )  # fmt: skip
    deadline = time.monotonic() + 60
    while ready not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            _stop(process)
            pytest.fail(f"celery {args[0]} did not start: {log.read_text(errors='replace')}")
        time.sleep(0.2)
    return process


def _stop(process: subprocess.Popen) -> None:
    """Cold shutdown (a warm one would wait for the running task), then kill."""
    if process.poll() is None:
        process.send_signal(signal.SIGQUIT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextmanager
def _running(process: subprocess.Popen) -> Iterator[subprocess.Popen]:
    try:
        yield process
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def stack(queued_stack: Stack) -> Stack:
    """The stack, started once for this module and test_long_calls.py (tests/e2e/conftest.py):
    its four processes take 8 to 10 s to start."""
    return queued_stack


def start_stack(tmp_path_factory) -> Iterator[Stack]:
    """The queued server with its worker and beat, and the direct server beside it (the two
    started at the same time), on one database; stopped afterwards."""
    import redis

    redis.Redis.from_url(BROKER).flushdb()  # no task left over from an earlier session
    tmp = tmp_path_factory.mktemp("queued")
    (tmp / "queued").mkdir()
    (tmp / "direct").mkdir()
    graph = tmp / "queued.yaml"
    graph.write_text(
        GRAPH.format(
            python=json.dumps(sys.executable),
            server=json.dumps(str(ECHO_SERVER)),
            nap_twice=NAP_TWICE.rstrip(),
        )
    )
    database_url = _database_url(tmp, "queued")
    common = {**SETTINGS, "DATABASE_URL": database_url}
    with ExitStack() as stack:
        # One key's twelve runs at once (test_long_calls) may hold every run thread on the
        # direct server: a key's share of them is tested in test_builder_recursion.
        queued, direct = start_together(
            stack,
            (
                tmp / "queued",
                [("import_graph", str(graph))],
                {"EXECUTION_MODE": "queued", **common},
            ),
            (
                tmp / "direct",
                [],
                {"EXECUTION_MODE": "direct", "GRAPHS_RUN_THREADS_PER_CALLER": "16", **common},
            ),
        )
        _execute(
            database_url,
            "UPDATE graphs_workflow SET retry_on_worker_loss = %s WHERE name = %s",
            True,
            "nap_retried",
        )
        worker_args = ["worker", "--concurrency", "1", "--hostname", "queued-tests@%h",
                       "--without-gossip", "--without-mingle"]  # fmt: skip
        beat_args = ["beat", "--schedule", str(tmp / "beat-schedule"), "--max-interval", "1"]
        # The worker and beat start at the same time (each takes seconds).
        with ThreadPoolExecutor(max_workers=2) as pool:
            started = [
                pool.submit(_celery, queued.env, tmp / "worker.log", *worker_args, ready="ready."),
                pool.submit(
                    _celery, queued.env, tmp / "beat.log", *beat_args, ready="beat: Starting"
                ),
            ]
        for process in started:
            if process.exception() is None:  # stopped with the stack, even if the other failed
                stack.enter_context(_running(process.result()))
        worker, _ = (process.result() for process in started)
        yield Stack(queued, direct, worker, database_url)


def _query(database_url: str, sql: str, *params: Any) -> list[tuple]:
    """Rows from the servers' database (`%s` placeholders)."""
    if database_url.startswith("sqlite"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as connection:
            return connection.execute(sql.replace("%s", "?"), params).fetchall()
    import psycopg

    with psycopg.connect(database_url) as connection:
        return connection.execute(sql, params).fetchall()


def _execute(database_url: str, sql: str, *params: Any) -> None:
    """Change rows of the servers' database (`%s` placeholders)."""
    if database_url.startswith("sqlite"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as connection:
            connection.execute(sql.replace("%s", "?"), params)
        return
    import psycopg

    with psycopg.connect(database_url) as connection:
        connection.execute(sql, params)


def run_with_nodes(database_url: str, run_id: int, columns: dict[str, str]) -> dict[str, Any]:
    """A run's `columns` (column: key) and, under "nodes", its node executions' (node id,
    status) in order."""
    [row] = _query(
        database_url, f"SELECT {', '.join(columns)} FROM graphs_run WHERE id = %s", run_id
    )
    nodes = _query(
        database_url,
        'SELECT node_id, status FROM graphs_nodeexecution WHERE run_id = %s ORDER BY "index"',
        run_id,
    )
    return dict(zip(columns.values(), row, strict=True)) | {
        "nodes": [tuple(node) for node in nodes]
    }


def run_row(stack: Stack, run_id: int) -> dict[str, Any]:
    columns = {"status": "status", "error": "error", "error_node_id": "node", "worker": "worker"}
    return run_with_nodes(stack.database_url, run_id, columns)


def latest_run(stack: Stack, workflow: str) -> int | None:
    rows = _query(
        stack.database_url,
        "SELECT max(id) FROM graphs_run WHERE workflow_name = %s",
        workflow,
    )
    return rows[0][0]


def wait_for(condition, seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while not (value := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {seconds} s")
        time.sleep(0.1)
    return value


def _parent_pid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_queued_run_succeeds_on_the_worker_with_its_full_history(stack):
    messages: list[str] = []

    async def scenario():
        async def progress(done: float, total: float | None, message: str | None) -> None:
            messages.append(message)

        async with connect(stack.queued, "legacy", timeout=30) as client:
            return await client.call_tool("shout", {"value": "hello"}, progress_callback=progress)

    result = run(scenario)

    assert not result.is_error, result.content
    assert result.content[0].text == "HELLO"
    record = run_row(stack, result.meta["io.switchyard/runId"])
    assert record["status"] == "succeeded"
    assert record["nodes"] == [
        ("entry", "succeeded"),
        ("say", "succeeded"),
        ("loud", "succeeded"),
        ("exit", "succeeded"),
    ]
    # Executed by the worker's pool process, not the web process.
    assert _parent_pid(int(record["worker"].rsplit(":", 1)[1])) == stack.worker.pid
    assert messages == ["entry succeeded", "say succeeded", "loud succeeded", "exit succeeded"]


def test_a_worker_killed_mid_run_leaves_it_failed_with_the_reason_never_running(stack):
    started = time.monotonic()
    result = run(_call, stack.queued, "nap_twice", {"seconds": 30})

    # The web side gave up waiting after GRAPHS_RUN_WAIT_SECONDS and named the run.
    assert time.monotonic() - started < 20
    assert result.is_error
    run_id = result.meta["io.switchyard/runId"]
    text = result.content[0].text
    assert f"is still running after 6 s (run {run_id})" in text
    assert f"/api/v1/runs/{run_id}/cancel" in text
    record = run_row(stack, run_id)
    assert record["status"] == "running"
    assert record["nodes"] == [("entry", "succeeded"), ("nap1", "running")]

    os.kill(int(record["worker"].rsplit(":", 1)[1]), signal.SIGKILL)
    killed = time.monotonic()
    # Stale after 3 s without a heartbeat, reaped within the next 1 s interval (and the pool's
    # new process starting).
    record = wait_for(
        lambda: (row := run_row(stack, run_id))["status"] != "running" and row,
        15,
        "the killed worker's run was not reaped",
    )
    assert time.monotonic() - killed >= 2.5
    assert record["status"] == "failed"
    assert "stopped: no heartbeat" in record["error"]
    assert record["node"] == "nap1"
    assert record["nodes"] == [("entry", "succeeded"), ("nap1", "failed")]


async def _call(server: LiveServer, name: str, arguments: dict, mode: str = "legacy"):
    async with connect(server, mode, timeout=30) as client:
        return await client.call_tool(name, arguments)


@pytest.mark.parametrize("mode", ["queued", "direct"])
def test_a_client_cancelling_its_call_ends_the_run_cancelled_with_its_history(stack, mode):
    server = stack.queued if mode == "queued" else stack.direct
    before = latest_run(stack, "nap_twice") or 0

    def nap1_running() -> int | None:
        run_id = latest_run(stack, "nap_twice")
        if run_id is None or run_id == before:
            return None
        return run_id if ("nap1", "running") in run_row(stack, run_id)["nodes"] else None

    async def scenario():
        async with connect(server, "legacy", timeout=30) as client:
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(client.call_tool, "nap_twice", {"seconds": 1.5})
                    run_id = await anyio.to_thread.run_sync(
                        wait_for, nap1_running, 15, "nap1 did not start"
                    )
                    # Leaving the scope abandons the call: the SDK sends notifications/cancelled.
                    scope.cancel()
            await anyio.sleep(0.5)  # the notification is sent before the session closes
            return run_id

    run_id = run(scenario)

    record = wait_for(
        lambda: (row := run_row(stack, run_id))["status"] != "running" and row,
        15,
        "the cancelled run did not end",
    )
    assert record["status"] == "cancelled"
    assert "before node 'nap2' ran: The client cancelled the call" in record["error"]
    assert record["nodes"] == [("entry", "succeeded"), ("nap1", "succeeded")]


def test_the_rest_api_cancels_a_queued_run_and_a_running_one(stack):
    server = stack.queued
    before = latest_run(stack, "nap_twice") or 0
    headers = {"Authorization": f"Bearer {server.key}"}

    async def scenario():
        results: dict[str, Any] = {}

        async def call(label: str, name: str, arguments: dict) -> None:
            results[label] = await _call(server, name, arguments)

        async with anyio.create_task_group() as group:
            group.start_soon(call, "running", "nap_twice", {"seconds": 2})
            running = await anyio.to_thread.run_sync(
                wait_for,
                lambda: (
                    (latest_run(stack, "nap_twice") or 0) > before
                    and run_row(stack, latest_run(stack, "nap_twice"))["status"] == "running"
                ),
                15,
                "nap_twice did not start",
            )
            assert running
            running_id = latest_run(stack, "nap_twice")
            group.start_soon(call, "queued", "shout", {"value": "never"})
            # The only pool process is busy: the second run waits in the queue.
            queued_id = await anyio.to_thread.run_sync(
                wait_for,
                lambda: (
                    (run_id := latest_run(stack, "shout"))
                    and run_row(stack, run_id)["status"] == "queued"
                    and run_id
                ),
                15,
                "shout was not queued",
            )
            async with httpx2.AsyncClient(base_url=server.url, headers=headers) as http:
                for label, run_id in (("queued", queued_id), ("running", running_id)):
                    response = await http.post(f"/api/v1/runs/{run_id}/cancel")
                    assert response.status_code == 200, response.text
                    results[f"{label} answer"] = response.json()
        return results, queued_id, running_id

    results, queued_id, running_id = run(scenario)

    assert results["queued answer"]["status"] == "cancelled"
    assert results["running answer"]["status"] == "running"
    assert "will stop before its next node" in results["running answer"]["message"]
    assert results["queued"].is_error
    assert "'shout' cancelled: Cancelled before it started" in results["queued"].content[0].text
    assert run_row(stack, queued_id)["nodes"] == []
    assert results["running"].is_error
    assert "'nap_twice' cancelled at node 'nap2'" in results["running"].content[0].text
    record = run_row(stack, running_id)
    assert record["status"] == "cancelled"
    assert record["nodes"] == [("entry", "succeeded"), ("nap1", "succeeded")]


def test_a_run_whose_worker_died_is_retried_under_its_id_and_its_caller_gets_the_outcome(
    stack, tmp_path
):
    """`nap_retried` is marked safe to retry: the reaper queues it again; a second worker
    runs it to the end; the client waiting on the run's id gets that outcome."""
    before = latest_run(stack, "nap_retried") or 0
    settings = {**SETTINGS, "GRAPHS_RUN_WAIT_SECONDS": "60"}  # long enough for both attempts
    with ExitStack() as processes:
        patient = processes.enter_context(
            contextmanager(start_server)(
                tmp_path, EXECUTION_MODE="queued", DATABASE_URL=stack.database_url, **settings
            )
        )
        worker_args = ["worker", "--concurrency", "1", "--hostname", "queued-tests-b@%h",
                       "--without-gossip", "--without-mingle"]  # fmt: skip
        processes.enter_context(
            _running(_celery(patient.env, tmp_path / "worker-b.log", *worker_args, ready="ready."))
        )

        def nap1_running() -> int | None:
            run_id = latest_run(stack, "nap_retried")
            if run_id is None or run_id == before:
                return None
            return run_id if ("nap1", "running") in run_row(stack, run_id)["nodes"] else None

        async def scenario():
            results = []

            async def call() -> None:
                results.append(await _call(patient, "nap_retried", {"seconds": 1}))

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                run_id = await anyio.to_thread.run_sync(
                    wait_for, nap1_running, 30, "nap1 did not start"
                )
                killed = run_row(stack, run_id)["worker"]
                os.kill(int(killed.rsplit(":", 1)[1]), signal.SIGKILL)
            return run_id, killed, results[0]

        run_id, killed, result = run(scenario)

    # The caller waited on the run's id through both attempts and got the retry's outcome.
    assert not result.is_error, result.content
    assert result.meta["io.switchyard/runId"] == run_id
    record = run_row(stack, run_id)
    assert record["status"] == "succeeded"
    assert record["worker"] != killed
    assert record["nodes"] == [
        ("entry", "succeeded"),
        ("nap1", "succeeded"),
        ("nap2", "succeeded"),
        ("exit", "succeeded"),
    ]
    [(retries, notes)] = _query(
        stack.database_url, "SELECT retries, reaper_notes FROM graphs_run WHERE id = %s", run_id
    )
    assert retries == 1
    assert f"({killed}) stopped: no heartbeat" in notes
    # The lost attempt keeps its history as a failed run of its own, pointing at the run.
    [(attempt_id, error)] = _query(
        stack.database_url, "SELECT id, error FROM graphs_run WHERE attempt_of_id = %s", run_id
    )
    attempt = run_row(stack, attempt_id)
    assert attempt["status"] == "failed"
    assert attempt["node"] == "nap1"
    assert attempt["worker"] == killed
    assert attempt["nodes"] == [("entry", "succeeded"), ("nap1", "failed")]
    assert error.startswith(f"Attempt 1 of run {run_id}. The process running this run")
    assert f"the lost attempt is run {attempt_id}" in notes


def _lost_run(stack: Stack, **fields: int) -> int:
    """A run recorded as queued whose message never reached the broker, as after a broker
    restart that lost its queue; `fields` are set on the run as it is recorded."""
    code = (
        "from graphs.execution.runs import RunRequest, run_create; from graphs.models import Run; "
        "run = run_create(RunRequest(name='shout', arguments={'value': 'lost'})); "
        f"Run.objects.filter(pk=run.pk).update(status='queued', **{fields!r}); print(run.pk)"
    )
    return int(_manage(stack.queued.env, "shell", "--no-imports", "-c", code).strip())


def test_a_queued_run_whose_message_was_lost_is_sent_again_then_failed_if_lost_again(stack):
    recorded = time.monotonic()
    resent = _lost_run(stack)
    spent = _lost_run(stack, resends=1)

    # No worker hears of either; beat's reaper finds them queued past 4 s. The first is sent
    # again and runs; the second was sent again already (GRAPHS_QUEUED_RESENDS=1): failed.
    record = wait_for(
        lambda: (row := run_row(stack, resent))["status"] == "succeeded" and row,
        20,
        "the lost run was not sent again",
    )
    assert time.monotonic() - recorded >= 3.5
    assert record["nodes"] == [
        ("entry", "succeeded"),
        ("say", "succeeded"),
        ("loud", "succeeded"),
        ("exit", "succeeded"),
    ]
    [(resends, notes)] = _query(
        stack.database_url, "SELECT resends, reaper_notes FROM graphs_run WHERE id = %s", resent
    )
    assert resends == 1
    assert "no worker started it within 4 s" in notes
    assert "sent again (1 of 1)" in notes
    failed = wait_for(
        lambda: (row := run_row(stack, spent))["status"] != "queued" and row,
        20,
        "the run lost twice was not failed",
    )
    assert failed["status"] == "failed"
    assert failed["error"].startswith("Never started: no worker started it within 4 s")
    assert "check that the broker at CELERY_BROKER_URL keeps its messages" in failed["error"]
    assert failed["nodes"] == []
