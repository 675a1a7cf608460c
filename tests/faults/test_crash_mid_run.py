"""A web process killed mid-run (SIGKILL, direct mode): what it leaves in the database is the
run's history up to its last write (graphs/execution/recorder.py). A run killed before its
first write leaves nothing, and its caller no answer; one killed after it leaves its row
`running` with the executions written so far, which the reaper then fails, naming the lost
process.

A real production start (uvicorn) is killed while a run is in a slow transform (hundreds of
thousands of JSONata steps: a second or more), as soon as its client is told that the node
before it ended; then the database is read from outside.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest

from tests.e2e.conftest import ROOT, _database_url, _free_port, _manage, last_line, manage_all
from tests.faults.conftest import descendants, wait_until
from tests.peers import echo_server_command

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

MODERN = "2026-07-28"
LOOP = 600
# A transform that takes a second or more: long enough to be killed in.
SPIN = "$sum([1..300000].($ * 2))"
GRAPH = """
version: "1.0"
server: {{name: crashTests, version: "1.0.0"}}
executionLimits: {{maxNodeExecutions: 5000, maxExecutionTimeMs: 60000}}
mcpServers:
  echo: {server}
tools:
  - name: spin_first
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: spin}}
      - {{id: spin, type: transform, transform: {{expr: '{spin}'}}, next: exit}}
      - {{id: exit, type: exit}}
  - name: loop_then_spin
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: step}}
      - {{id: step, type: transform, transform: {{expr: '$executionCount("step")'}}, next: more}}
      - id: more
        type: switch
        conditions:
          - {{rule: {{"<": [{{var: "$.step"}}, {loop}]}}, target: step}}
          - {{target: ready}}
      - {{id: ready, type: transform, transform: {{expr: '"ready"'}}, next: spin}}
      - {{id: spin, type: transform, transform: {{expr: '{spin}'}}, next: exit}}
      - {{id: exit, type: exit}}
  - name: call_then_spin
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: add}}
      - {{id: add, type: mcp, server: echo, tool: add, args: {{a: 1, b: 1}}, next: spin}}
      - {{id: spin, type: transform, transform: {{expr: '{spin}'}}, next: exit}}
      - {{id: exit, type: exit}}
"""


@dataclass(frozen=True)
class Site:
    """A migrated database with the crash workflows, and what a server of it needs."""

    env: dict[str, str]
    key: str


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Site:
    tmp = tmp_path_factory.mktemp("crash")
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(tmp, "crash"),
        "DEBUG": "false",
        "SECRET_KEY": "crash-test-secret-key-" + "x" * 40,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "false",
        "EXECUTION_MODE": "direct",
        # A lost run is stale after 1.5 s without a heartbeat (three heartbeats, the least
        # the settings allow).
        "GRAPHS_HEARTBEAT_SECONDS": "0.5",
        "GRAPHS_RUN_STALE_SECONDS": "1.5",
    }
    env.pop("REDIS_URL", None)
    command, *args = echo_server_command()
    graph = tmp / "crash.yaml"
    server = json.dumps({"command": command, "args": args})
    graph.write_text(GRAPH.format(server=server, spin=SPIN, loop=LOOP))
    # In one process: each start of Django costs 1 to 3 s.
    printed = manage_all(
        env,
        [
            ("migrate", "--verbosity", "0"),
            ("import_graph", str(graph)),
            ("create_api_key", "--name", "crash"),
        ],
    )
    return Site(env, last_line(printed[2]))


@contextmanager
def serving(site: Site, log: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """A production start on the site's database: its URL and process; stopped (or found
    killed) afterwards, its children with it."""
    port = _free_port()
    with open(log, "ab") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
             "--port", str(port), "--log-level", "warning"],
            cwd=ROOT, env=site.env, stdout=output, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _healthy(url), 30, lambda: log.read_text())
        yield url, server
    finally:
        server.terminate()
        server.wait(timeout=10)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/public/health", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def killed_at(url: str, key: str, server: subprocess.Popen, name: str, after: str) -> float:
    """Call `name` with a progress token and SIGKILL the server when the progress message
    `after` arrives (then the servers it started, orphaned); the seconds from the call to the
    kill. The call gets no answer."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": name,
            "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "progressToken": "crash",
            },
        },
    }
    headers = {
        "Authorization": f"Bearer {key}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    children: set[int] = set()
    sent = time.monotonic()
    killed: float | None = None
    answered = []
    stream = httpx2.stream("POST", f"{url}/mcp", json=body, headers=headers, timeout=30)
    with suppress(httpx2.HTTPError), stream as response:  # it ends with the process
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line.removeprefix("data: "))
            if "result" in event or "error" in event:
                answered.append(event)
            elif event["params"]["message"] == after and killed is None:
                children = descendants() - {server.pid}
                os.kill(server.pid, signal.SIGKILL)
                killed = time.monotonic() - sent
    assert killed is not None, f"{after!r} never came"
    assert not answered, answered
    for pid in children:  # the stdio servers it had started, orphaned now
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    server.wait(timeout=10)
    return killed


def query(database_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of `sql` (with %s placeholders) on the site's database, from outside."""
    if database_url.startswith("sqlite:///"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as connection:
            return connection.execute(sql.replace("%s", "?"), params).fetchall()
    with psycopg.connect(database_url) as connection:
        return connection.execute(sql, params).fetchall()


def runs_of(site: Site, name: str) -> list[tuple[Any, ...]]:
    return query(
        site.env["DATABASE_URL"],
        "SELECT id, status, worker, error FROM graphs_run WHERE workflow_name = %s",
        name,
    )


def executions_of(site: Site, run_id: int) -> list[tuple[Any, ...]]:
    return query(
        site.env["DATABASE_URL"],
        'SELECT "index", node_id, status FROM graphs_nodeexecution WHERE run_id = %s '
        'ORDER BY "index"',
        run_id,
    )


def reaped(site: Site) -> str:
    """What `manage.py reap_runs` did, once the killed process's runs are stale (1.5 s)."""
    time.sleep(2.0)
    return _manage(site.env, "reap_runs")


def test_a_run_killed_before_its_first_write_leaves_nothing(site, tmp_path):
    with serving(site, tmp_path / "server.log") as (url, server):
        seconds = killed_at(url, site.key, server, "spin_first", after="entry succeeded")

    assert seconds < 5
    assert runs_of(site, "spin_first") == []
    assert query(site.env["DATABASE_URL"], "SELECT count(*) FROM graphs_run") == [(0,)]
    assert "Nothing to reap" in reaped(site)


def test_a_run_killed_after_its_window_leaves_what_it_wrote_until_the_reaper_fails_it(
    site, tmp_path
):
    with serving(site, tmp_path / "server.log") as (url, server):
        killed_at(url, site.key, server, "loop_then_spin", after="ready succeeded")

    [(run_id, status, worker, _)] = runs_of(site, "loop_then_spin")
    assert status == "running"
    assert worker.endswith(f":{server.pid}")
    rows = executions_of(site, run_id)
    # Written as it went (a batch at most every 0.2 s, or 1,000 rows), not past its last write:
    # the loop's 1,203 executions and `ready`, at most; never the slow node it was killed in.
    assert 1000 <= len(rows) <= 1 + 2 * (LOOP + 1) + 1
    assert [index for index, _, _ in rows] == list(range(len(rows)))
    assert {status for _, _, status in rows} == {"succeeded"}
    assert "spin" not in {node for _, node, _ in rows}

    assert f"run {run_id} failed: its process stopped" in reaped(site)
    [(_, status, _, error)] = runs_of(site, "loop_then_spin")
    assert status == "failed"
    assert error.startswith(f"The process running this run ({worker}) stopped: no heartbeat")


def test_a_run_killed_after_a_call_shows_the_call_it_made(site, tmp_path):
    with serving(site, tmp_path / "server.log") as (url, server):
        killed_at(url, site.key, server, "call_then_spin", after="add succeeded")

    [(run_id, status, _, _)] = runs_of(site, "call_then_spin")
    assert status == "running"
    # Written before the call went out; its answer waited for the next write, which never came.
    assert executions_of(site, run_id) == [(0, "entry", "succeeded"), (1, "add", "running")]

    assert f"run {run_id} failed: its process stopped" in reaped(site)
    assert executions_of(site, run_id) == [(0, "entry", "succeeded"), (1, "add", "failed")]
