"""What a request's metric and log line say when its answer is not a plain response (issue 18):
a streamed answer is recorded as it ends, with its response's outcome, or as `disconnected`
when the client left before it; a request over stdio is a request like any other; with
tracing on, the request's and the downstream failure's lines name the trace."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connections
from opentelemetry import trace

from graphs.authoring.files import graph_import
from graphs.models import Run
from mcp_endpoint.observability import metrics_page
from mcp_endpoint.transports.stdio import serve
from nodespecs.downstream import client as mcp_client
from tests.graph_files import OPERATOR
from tests.mcp_endpoint.helpers import make_key, modern, sse_messages
from tests.mcp_endpoint.test_json_logs import events, json_lines, parsed  # noqa: F401
from tests.mcp_endpoint.test_metrics import (
    delta,
    modern_body,
    modern_headers,
    requests_of,
    samples,
    send_mcp,
    worker_threads,  # noqa: F401
)
from tests.mcp_endpoint.test_stdio import INITIALIZE, Client, answer_to
from tests.mcp_endpoint.test_tracing import spans  # noqa: F401
from tests.nodespecs.providers_helpers import servers  # noqa: F401
from tests.nodespecs.test_secret_redaction import GRAPH
from tests.peers import ECHO_SERVER, echo_http_server

pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db(transaction=True)]

COUNT = "switchyard_requests_total"
EITHER = "application/json, text/event-stream"
# sum_to past its maxNodeExecutions: a run that fails, answered with isError.
TOO_LONG = {"name": "sum_to", "arguments": {"n": 100000}}


def streamed_call(params: dict[str, Any] = TOO_LONG) -> bytes:
    """A 2026-07-28 tools/call whose `_meta` asks for progress: it is answered as a stream."""
    message = json.loads(modern_body("tools/call", params))
    message["params"]["_meta"]["progressToken"] = "p"
    return json.dumps(message).encode()


def now() -> dict:
    return samples(metrics_page.exposition().content.decode())


def test_a_streamed_answer_is_counted_by_its_response_over_the_django_view(client, loops):
    key = make_key()
    before = now()

    response = modern(
        client, "tools/call", TOO_LONG, key=key, accept=EITHER, meta={"progressToken": "p"}
    )
    messages = sse_messages(response)

    assert messages[-1]["result"]["isError"] is True
    after = now()
    # Recorded once, when the stream ended, as the tool error its response was.
    assert delta(before, after, COUNT, **requests_of("tools/call", "sum_to", "tool_error")) == 1
    assert delta(before, after, COUNT, **requests_of("tools/call", "sum_to", "ok")) == 0


def test_a_streamed_answer_is_counted_by_its_response_over_the_asgi_app(
    loops,
    worker_threads,  # noqa: F811
):
    key = make_key()
    headers = {**modern_headers(key, "tools/call", "sum_to"), "accept": EITHER}
    before = now()

    status, body = asyncio.run(send_mcp(streamed_call(), headers))

    assert status == 200
    assert b"notifications/progress" in body
    after = now()
    assert delta(before, after, COUNT, **requests_of("tools/call", "sum_to", "tool_error")) == 1


NAP = """
version: "1.0"
server: {{name: "napTests", version: "1.0.0"}}
mcpServers:
  echo: {{command: {python}, args: [{server}]}}
tools:
  - name: nap
    description: Sleeps on the echo server.
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: nap}}
      - {{id: nap, type: mcp, server: echo, tool: sleep, args: {{seconds: 3}}, next: exit}}
      - {{id: exit, type: exit}}
"""


@pytest.fixture
def nap() -> Iterator[None]:
    """A workflow whose run sleeps 3 s on a stdio echo server, after its entry node."""
    text = NAP.format(python=json.dumps(sys.executable), server=json.dumps(str(ECHO_SERVER)))
    graph_import(text=text, caller=OPERATOR)
    yield
    mcp_client.close_all()


def test_a_client_leaving_a_stream_before_its_response_is_counted_as_disconnected(
    nap,
    worker_threads,  # noqa: F811
):
    key = make_key()
    headers = {**modern_headers(key, "tools/call", "nap"), "accept": EITHER}
    body = streamed_call({"name": "nap", "arguments": {}})

    def cancelled() -> str:
        """The run's status once the cancel job queued on this same thread has run."""
        try:
            deadline = time.monotonic() + 30
            while (status := Run.objects.get().status) == Run.Status.RUNNING:
                assert time.monotonic() < deadline, "the abandoned run was not cancelled"
                time.sleep(0.1)
            return status
        finally:
            connections.close_all()

    async def scenario() -> tuple[bytes, str]:
        # The run is cancelled on the loop's default executor: one thread, whose connections
        # `cancelled` closes after that.
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        sent = await send_mcp(body, headers, leave_after_first_chunk=True)
        return sent[1], await loop.run_in_executor(None, cancelled)

    before = now()
    answered, status = asyncio.run(scenario())

    after = now()
    assert b"notifications/progress" in answered
    assert b'"result"' not in answered
    for outcome, count in (("disconnected", 1), ("ok", 0), ("tool_error", 0)):
        labels = requests_of("tools/call", "nap", outcome)
        assert delta(before, after, COUNT, **labels) == count, outcome
    # The run is cancelled with its answer (once its downstream call returns).
    assert status == Run.Status.CANCELLED


def test_requests_over_stdio_are_logged_and_counted(loops, json_lines):  # noqa: F811
    async def scenario() -> None:
        client = Client()
        serving = asyncio.create_task(serve(client.read_line, client.write_line))
        client.send(INITIALIZE)
        await client.wait_for(answer_to(0))
        client.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        client.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": TOO_LONG})
        client.send({"jsonrpc": "2.0", "id": 3, "method": "no/such/method"})
        for request_id in (1, 2, 3):
            await client.wait_for(answer_to(request_id))
        client.close()
        await serving

    before = now()
    asyncio.run(scenario())

    after = now()
    stdio = {"transport": "stdio"}
    assert delta(before, after, COUNT, **{**requests_of("initialize", "", "ok"), **stdio}) == 1
    assert delta(before, after, COUNT, **{**requests_of("tools/list", "", "ok"), **stdio}) == 1
    labels = {**requests_of("tools/call", "sum_to", "tool_error"), **stdio}
    assert delta(before, after, COUNT, **labels) == 1
    assert delta(before, after, COUNT, **{**requests_of("other", "", "error"), **stdio}) == 1
    lines = sorted(
        (line for line in events(parsed(json_lines), "request")),
        key=lambda line: line["request_id"],
    )
    assert [(line["method"], line["outcome"]) for line in lines] == [
        ("initialize", "ok"),
        ("tools/list", "ok"),
        ("tools/call", "tool_error"),
        ("no/such/method", "error"),
    ]
    assert {line["transport"] for line in lines} == {"stdio"}
    assert {line["key_id"] for line in lines} == {"stdio"}
    assert {line["era"] for line in lines} == {"2025"}
    assert {line["status"] for line in lines} == {None}
    assert lines[2]["tool"] == "sum_to"


def test_with_tracing_on_the_request_and_downstream_failure_lines_name_the_trace(
    json_lines,  # noqa: F811
    spans,  # noqa: F811
    servers,  # noqa: F811
    worker_threads,  # noqa: F811
):
    key = make_key()
    with echo_http_server("--reject-authorization", "200") as url:
        server = {"type": "streamableHttp", "url": url, "headers": {"Authorization": "Bearer x"}}
        graph_import(text=GRAPH.format(server=json.dumps(server)), caller=OPERATOR)
        body = modern_body("tools/call", {"name": "call_leaky", "arguments": {}})
        status, _ = asyncio.run(send_mcp(body, modern_headers(key, "tools/call", "call_leaky")))

    assert status == 200
    request_span = next(s for s in spans.get_finished_spans() if s.name.startswith("MCP tools"))
    trace_id = trace.format_trace_id(request_span.context.trace_id)
    lines = parsed(json_lines)
    [request] = [line for line in events(lines, "request") if line["method"] == "tools/call"]
    assert request["trace_id"] == trace_id
    failures = events(lines, "downstream_failure")
    assert failures
    assert {line["trace_id"] for line in failures} == {trace_id}
    [run_end] = events(lines, "run_end")
    assert run_end["trace_id"] == trace_id == Run.objects.get().trace_id


def test_with_tracing_on_a_rest_request_line_names_its_span_s_trace(
    client,
    json_lines,  # noqa: F811
    spans,  # noqa: F811
):
    listed = client.get("/api/v1/mcp/tools", headers={"Authorization": f"Bearer {make_key()}"})

    assert listed.status_code == 200
    [span] = [s for s in spans.get_finished_spans() if s.name == "REST GET /api/v1/mcp/tools"]
    [line] = events(parsed(json_lines), "request")
    assert line["trace_id"] == trace.format_trace_id(span.context.trace_id)
