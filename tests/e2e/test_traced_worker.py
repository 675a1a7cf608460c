"""A queued run's trace on a real Celery worker (issue 18, item 1): a web server in queued mode
and a worker on the local Redis (database 12, or TRACED_TESTS_BROKER), both exporting their
spans to stdout (OTEL_TRACES_EXPORTER=console); the spans are read back from their logs."""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest

from tests.e2e.conftest import _database_url, needs_redis, start_server
from tests.e2e.test_queued_runs import _celery, _running
from tests.peers import ECHO_SERVER

pytestmark = [pytest.mark.slow, needs_redis, pytest.mark.timeout(240)]

BROKER = os.environ.get("TRACED_TESTS_BROKER", "redis://127.0.0.1:6379/12")
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
MODERN = "2026-07-28"
GRAPH = """
version: "1.0"
server: {{name: "tracedWorker", version: "1.0.0"}}
mcpServers:
  echo:
    command: {python}
    args: [{server}]
tools:
  - name: traced_echo
    description: Echoes a value on the echo server.
    inputSchema: {{type: object, properties: {{value: {{type: string}}}}, required: [value]}}
    nodes:
      - {{id: entry, type: entry, next: say}}
      - {{id: say, type: mcp, server: echo, tool: echo, args: {{value: "$.entry.value"}},
          next: exit}}
      - {{id: exit, type: exit}}
"""


def spans_in(log: Path) -> list[dict]:
    """The spans the console exporter wrote into a process's log (one JSON object each,
    among other lines)."""
    text, decoder, found, at = log.read_text(errors="replace"), json.JSONDecoder(), [], 0
    while (at := text.find('{\n    "name"', at)) != -1:
        span, end = decoder.raw_decode(text, at)
        found.append(span)
        at = end
    return found


def test_a_queued_run_continues_the_callers_trace_on_its_worker(tmp_path):
    import redis

    redis.Redis.from_url(BROKER).flushdb()
    graph = tmp_path / "traced.yaml"
    graph.write_text(
        GRAPH.format(python=json.dumps(sys.executable), server=json.dumps(str(ECHO_SERVER)))
    )
    settings = {
        "EXECUTION_MODE": "queued",
        "CELERY_BROKER_URL": BROKER,
        "DATABASE_URL": _database_url(tmp_path, "traced"),
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "GRAPHS_RUN_WAIT_SECONDS": "30",
    }
    (tmp_path / "web").mkdir()
    commands = [("import_graph", str(graph))]
    with contextmanager(start_server)(tmp_path / "web", commands, **settings) as web:
        worker_args = ["worker", "--concurrency", "1", "--hostname", "traced-tests@%h",
                       "--without-gossip", "--without-mingle"]  # fmt: skip
        worker_log = tmp_path / "worker.log"
        with _running(_celery(web.env, worker_log, *worker_args, ready="ready.")):
            meta = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "traceparent": f"00-{TRACE_ID}-{CALLER_SPAN}-01",
            }
            params = {"name": "traced_echo", "arguments": {"value": "hi"}, "_meta": meta}
            answer = httpx2.post(
                f"{web.url}/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params},
                headers={
                    "Authorization": f"Bearer {web.key}",
                    "Accept": "application/json",
                    "MCP-Protocol-Version": MODERN,
                    "Mcp-Method": "tools/call",
                    "Mcp-Name": "traced_echo",
                },
                timeout=60,
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["result"]["isError"] is False, answer.text
            deadline = time.monotonic() + 30
            while True:
                worker_spans = {span["name"]: span for span in spans_in(worker_log)}
                if "run traced_echo" in worker_spans or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
    web_spans = {span["name"]: span for span in spans_in(tmp_path / "web" / "uvicorn.log")}
    request = web_spans["MCP tools/call traced_echo"]
    run = worker_spans["run traced_echo"]
    node = worker_spans["node mcp say"]
    downstream = worker_spans["downstream tools/call echo"]
    # The caller's trace, on the web server and then on the worker, one under the other.
    assert request["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert request["parent_id"] == f"0x{CALLER_SPAN}"
    assert run["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert run["parent_id"] == request["context"]["span_id"]
    assert node["parent_id"] == run["context"]["span_id"]
    assert downstream["parent_id"] == node["context"]["span_id"]
    assert run["attributes"]["switchyard.run.outcome"] == "succeeded"
