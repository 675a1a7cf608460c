"""`/metrics`: who may scrape it, and counts that match what was sent (issue 18, item 3).

The load goes through the lean ASGI app that uvicorn serves (`mcp_endpoint.transports.asgi.mcp_app`)
and the REST API through Django; the scrape is read with prometheus-client's own parser.
The metrics of this process accumulate over the test session, so each test compares a scrape
after its load with one before.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis
from celery.signals import worker_init
from django.db import connections
from prometheus_client.parser import text_string_to_metric_families

from config.celery import _serve_metrics
from graphs.execution.runs import RunRequest, workflow_call
from graphs.execution.telemetry import CELERY_QUEUE
from mcp_endpoint.transports import asgi
from nodespecs.downstream import client as mcp_client
from nodespecs.downstream.client import Connection, DownstreamError
from nodespecs.knowledge.registry import Registry
from nodespecs.knowledge.service import get_node_details
from nodespecs.telemetry import serve_metrics_port
from tests.mcp_endpoint.helpers import (
    CAPABILITIES_KEY,
    MODERN,
    VERSION_KEY,
    auth_headers,
    make_key,
)
from tests.nodespecs.providers_helpers import servers  # noqa: F401

pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def worker_threads(monkeypatch) -> Iterator[None]:
    """One thread for each of the ASGI app's pools, their connections closed afterwards."""
    short, runs = ThreadPoolExecutor(max_workers=1), ThreadPoolExecutor(max_workers=1)
    monkeypatch.setattr(asgi, "_POOL", short)
    monkeypatch.setattr(asgi, "_RUNS", runs)
    yield
    for pool in (short, runs):
        pool.submit(connections.close_all).result(timeout=10)
        pool.shutdown()


def _scope(method: str, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": "/mcp",
        "query_string": b"",
        "headers": [(n.lower().encode(), v.encode()) for n, v in headers.items()],
        "client": ("127.0.0.1", 5000),
    }


async def send_mcp(
    body: bytes, headers: dict[str, str], *, leave_after_first_chunk: bool = False
) -> tuple[int, bytes]:
    """One POST to `/mcp` through the ASGI app; its status and body. With
    `leave_after_first_chunk`, the client disconnects once the first chunk of the body came."""
    sent = {"host": "localhost", "content-length": str(len(body)), **headers}
    answer: dict[str, Any] = {"status": 0, "chunks": []}
    delivered = False
    first_chunk = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        if leave_after_first_chunk:
            await first_chunk.wait()
            return {"type": "http.disconnect"}
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        elif message.get("body"):
            answer["chunks"].append(message["body"])
            first_chunk.set()

    await asyncio.wait_for(asgi.mcp_app(_scope("POST", sent), receive, send), 20)
    return answer["status"], b"".join(answer["chunks"])


def modern_body(method: str, params: dict[str, Any] | None = None, request_id: Any = 1) -> bytes:
    params = {**(params or {}), "_meta": {VERSION_KEY: MODERN, CAPABILITIES_KEY: {}}}
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return json.dumps(message).encode()


def modern_headers(key: str | None, method: str, name: str | None = None) -> dict[str, str]:
    headers = {
        "content-type": "application/json",
        "accept": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
        **{n.lower(): v for n, v in auth_headers(key).items()},
    }
    if name is not None:
        headers["mcp-name"] = name
    return headers


def samples(text: str) -> Samples:
    """Every sample of a scrape, by name and sorted labels."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def scrape(client, key: str) -> Samples:
    response = client.get("/metrics", headers=auth_headers(key))
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return samples(response.content.decode())


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def requests_of(method: str, tool: str, outcome: str, transport: str = "mcp") -> dict[str, str]:
    return {"transport": transport, "method": method, "tool": tool, "outcome": outcome}


def test_a_scrape_after_a_mixed_load_counts_what_was_sent(client, worker_threads):
    key, scraper = make_key(), make_key(scopes=["metrics:read"])
    before = scrape(client, scraper)
    lists, calls, unknown, bad_json, no_key = 5, 3, 2, 2, 1

    async def load() -> list[int]:
        statuses = []
        for number in range(lists):
            body = modern_body("tools/list", request_id=number)
            statuses.append((await send_mcp(body, modern_headers(key, "tools/list")))[0])
        for number in range(calls):
            body = modern_body("tools/call", {"name": "get_node_types", "arguments": {}}, number)
            headers = modern_headers(key, "tools/call", "get_node_types")
            statuses.append((await send_mcp(body, headers))[0])
        for number in range(unknown):
            body = modern_body("tools/call", {"name": f"no_such_tool_{number}", "arguments": {}})
            headers = modern_headers(key, "tools/call", f"no_such_tool_{number}")
            statuses.append((await send_mcp(body, headers))[0])
        for _ in range(bad_json):
            statuses.append((await send_mcp(b"{not json", modern_headers(key, "tools/list")))[0])
        for _ in range(no_key):
            body = modern_body("tools/list")
            statuses.append((await send_mcp(body, modern_headers(None, "tools/list")))[0])
        return statuses

    statuses = asyncio.run(load())
    rest = client.get("/api/v1/mcp/tools", headers=auth_headers(key))
    after = scrape(client, scraper)

    assert statuses == [200] * (lists + calls + unknown) + [400] * bad_json + [401] * no_key
    assert rest.status_code == 200
    count = "switchyard_requests_total"
    assert delta(before, after, count, **requests_of("tools/list", "", "ok")) == lists
    assert delta(before, after, count, **requests_of("tools/call", "get_node_types", "ok")) == calls
    # Tools nobody serves share one label, whatever their names: their calls are tool errors.
    assert delta(before, after, count, **requests_of("tools/call", "other", "tool_error")) == (
        unknown
    )
    assert delta(before, after, count, **requests_of("POST", "", "error")) == bad_json
    assert delta(before, after, count, **requests_of("POST", "", "refused")) == no_key
    rest_labels = requests_of("GET /api/v1/mcp/tools", "", "ok", transport="rest")
    assert delta(before, after, count, **rest_labels) == 1
    histogram = "switchyard_request_seconds_count"
    assert delta(before, after, histogram, **requests_of("tools/list", "", "ok")) == lists
    assert not any("no_such_tool" in str(labels) for _, labels in after)
    # The scrapes themselves are not requests to the REST API.
    assert not any("metrics" in str(labels) for _, labels in after)
    waiting = ("switchyard_runs_in_status", (("status", "queued"),))
    assert after[waiting] == 0


def test_runs_and_nodes_are_counted_by_workflow_status_and_type(client, loops):
    scraper = make_key(scopes=["metrics:read"])
    before = scrape(client, scraper)
    workflow_call(RunRequest(name="sum_to", arguments={"n": 3}, caller="tests"))
    workflow_call(RunRequest(name="sum_to", arguments={"n": 100000}, caller="tests"))
    after = scrape(client, scraper)

    runs = "switchyard_runs_total"
    assert delta(before, after, runs, workflow="sum_to", status="succeeded") == 1
    assert delta(before, after, runs, workflow="sum_to", status="failed") == 1
    assert delta(before, after, "switchyard_run_seconds_count", workflow="sum_to", status="failed")
    nodes = "switchyard_node_seconds_count"
    assert delta(before, after, nodes, type="entry", status="succeeded") == 2
    assert delta(before, after, nodes, type="exit", status="succeeded") == 1
    assert delta(before, after, nodes, type="transform", status="succeeded") > 3


def test_knowledge_cache_hits_follow_the_serialisation_cache(client, builtin_documents):
    scraper = make_key(scopes=["metrics:read"])
    registry = Registry(builtin_documents)
    asked = [{"node_type": "ACTION", "subtype": "HTTP_REQUEST"}]
    before = scrape(client, scraper)
    for _ in range(3):
        get_node_details(asked, registry=registry)
    after = scrape(client, scraper)

    cache = "switchyard_knowledge_cache_total"
    assert delta(before, after, cache, result="miss") == 1
    assert delta(before, after, cache, result="hit") == 2


def test_metrics_need_the_scope_or_an_allowed_address(client, settings):
    url = "/metrics"
    assert client.get(url).status_code == 401
    assert client.get(url).headers["WWW-Authenticate"].startswith("Bearer")
    assert client.get(url, headers=auth_headers("sy_nope_nope")).status_code == 401
    without = make_key(scopes=["tools:read", "health:check"])
    assert client.get(url, headers=auth_headers(without)).status_code == 403
    with_scope = make_key(scopes=["metrics:read"])
    assert client.get(url, headers=auth_headers(with_scope)).status_code == 200
    assert client.post(url, headers=auth_headers(with_scope)).status_code == 405

    settings.METRICS_ALLOWED_ADDRESSES = ["10.0.0.0/8", "127.0.0.1"]
    assert client.get(url).status_code == 200  # the test client is 127.0.0.1
    assert client.get(url, REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get(url, REMOTE_ADDR="192.168.1.1").status_code == 401
    settings.METRICS_ALLOWED_ADDRESSES = ["10.0.0.0/8"]
    assert client.get(url).status_code == 401


def test_nothing_is_counted_when_metrics_are_off(client, settings):
    from mcp_endpoint.observability import request_metrics
    from mcp_endpoint.observability.facts import Facts
    from mcp_endpoint.observability.request_metrics import Written

    scraper = make_key(scopes=["metrics:read"])
    before = scrape(client, scraper)
    settings.METRICS_ENABLED = False
    facts = Facts(method="ping", era=MODERN)
    request_metrics.mcp_request_done(Written(200), 0.0, http_method="POST", facts=facts)
    settings.METRICS_ENABLED = True
    after = scrape(client, scraper)

    assert delta(before, after, "switchyard_requests_total", **requests_of("ping", "", "ok")) == 0


# Several processes on one host: prometheus-client's multiprocess mode.

RECORDER = textwrap.dedent(
    """
    import sys, django
    django.setup()
    from mcp_endpoint.observability import request_metrics
    from mcp_endpoint.observability.facts import Facts
    from mcp_endpoint.observability.request_metrics import Written
    from nodespecs.telemetry import pool_size_changed
    for _ in range(int(sys.argv[1])):
        facts = Facts(method="tools/list", era="2026-07-28")
        request_metrics.mcp_request_done(Written(200), 0.0, http_method="POST", facts=facts)
    pool_size_changed(2)
    print("recorded", flush=True)
    sys.stdin.read()  # stays alive (its pool gauge with it) until told to end
    """
)
SCRAPER = textwrap.dedent(
    """
    import django
    django.setup()
    from mcp_endpoint.observability.metrics_page import exposition
    from unittest import mock
    with mock.patch("graphs.execution.telemetry.RunQueueCollector.collect", return_value=iter(())):
        print(exposition().content.decode())
    """
)


def _python(code: str, environment: dict[str, str], *args: str, **popen: Any):
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        text=True,
        **popen,
    )


def test_two_processes_sharing_a_multiprocess_directory_are_scraped_as_one(tmp_path):
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'unused.sqlite3'}",
    }
    environment.pop("REDIS_URL", None)
    workers = [_python(RECORDER, environment, str(n), stdin=subprocess.PIPE) for n in (3, 4)]
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == "recorded"
        scraper = _python(SCRAPER, environment)
        text, _ = scraper.communicate(timeout=30)
        assert scraper.returncode == 0
        live = samples(text)
    finally:
        for worker in workers:
            worker.communicate(input="", timeout=30)
    scraper = _python(SCRAPER, environment)
    text, _ = scraper.communicate(timeout=30)
    gone = samples(text)

    labels = tuple(sorted(requests_of("tools/list", "", "ok").items()))
    assert live[("switchyard_requests_total", labels)] == 7
    assert live[("switchyard_request_seconds_count", labels)] == 7
    assert live[("switchyard_mcp_pool_sessions", ())] == 4  # 2 in each live process
    assert gone[("switchyard_requests_total", labels)] == 7  # counters outlive their process
    assert gone.get(("switchyard_mcp_pool_sessions", ()), 0) == 0  # their sessions do not


# Downstream calls, the Celery queue, a worker's port.


def test_a_failed_downstream_call_is_timed_and_counted_by_provider(client, servers):  # noqa: F811
    scraper = make_key(scopes=["metrics:read"])
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    connection = Connection(
        name="nowhere",
        transport="streamable_http",
        url=f"http://127.0.0.1:{port}/mcp",
        timeout_seconds=5,
    )
    before = scrape(client, scraper)
    with pytest.raises(DownstreamError):
        mcp_client.call_tool(connection, "echo", {})
    after = scrape(client, scraper)

    errors = "switchyard_downstream_errors_total"
    assert delta(before, after, errors, provider="nowhere", error="DownstreamError") == 1
    calls = "switchyard_downstream_call_seconds_count"
    assert delta(before, after, calls, provider="nowhere", request="tools/call") == 1


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs REDIS_URL (a Redis broker)")
def test_the_celery_queue_length_is_read_from_a_redis_broker(client, settings):
    settings.CELERY_BROKER_URL = os.environ["REDIS_URL"]
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete(CELERY_QUEUE)
    broker.rpush(CELERY_QUEUE, "one", "two")
    try:
        found = scrape(client, make_key(scopes=["metrics:read"]))
    finally:
        broker.delete(CELERY_QUEUE)

    assert found[("switchyard_celery_queue_length", ())] == 2


def test_a_worker_serves_its_metrics_on_metrics_port(settings):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    settings.METRICS_PORT, settings.METRICS_ADDRESS = port, "127.0.0.1"
    assert _serve_metrics in [receiver() for _, receiver in worker_init.receivers]

    server, thread = serve_metrics_port()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)

    assert "switchyard_runs_total" in text or "switchyard_requests_total" in text
    settings.METRICS_PORT = 0
    assert serve_metrics_port() is None


def test_waiting_runs_and_decisions_are_counted(client, transactional_db):
    from graphs.execution.approvals.decisions import Decider, decide
    from tests.approval_runs import ended
    from tests.graph_files import import_file

    import_file("approvals.yaml")
    scraper = make_key(scopes=["metrics:read"])
    before = scrape(client, scraper)
    waiting = [
        workflow_call(RunRequest(name="refund", arguments={"amount": n, "customer": "m"}))
        for n in (1, 2)
    ]
    middle = scrape(client, scraper)
    assert middle[("switchyard_runs_in_status", (("status", "waiting"),))] == 2
    decide(waiting[0].run_id, "rejected", Decider("user", "1", "rita", frozenset({"rita"})))
    ended(waiting[0].run_id)
    after = scrape(client, scraper)
    decisions = "switchyard_approval_decisions_total"
    assert delta(before, after, decisions, decision="rejected", by="user") == 1
