"""OpenTelemetry traces (issue 18, item 1): one trace from the caller's `traceparent` through
the MCP request, its run and nodes, to the downstream call, which carries the trace on to a
real server (the echo peer over Streamable HTTP, whose `meta` tool says what `_meta` and
`traceparent` header it received); in direct and in queued mode. The spans are read from the
SDK's in-memory exporter."""

from __future__ import annotations

import contextvars
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from graphs.authoring.files import graph_import
from graphs.execution import control, tracing
from graphs.execution.queue import run_queued
from graphs.execution.reaper import runs_reap
from graphs.execution.runs import RunRequest, run_create
from graphs.models import Run
from mcp_endpoint.models import ApiKey
from nodespecs.downstream import client as mcp_client
from tests.conftest import ROOT
from tests.graph_files import FILES, OPERATOR
from tests.mcp_endpoint.helpers import legacy, legacy_session, make_key, modern, result
from tests.peers import echo_http_server

pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db(transaction=True)]

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CALLER_SPAN}-01"

GRAPH = """
version: "1.0"
server: {{name: "traceTests", version: "1.0.0"}}
mcpServers:
  echo: {{type: streamableHttp, url: "{url}"}}
tools:
  - name: traced_probe
    description: Asks the echo peer what it received, then passes it on.
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: probe}}
      - {{id: probe, type: mcp, server: echo, tool: meta, args: {{}}, next: shape}}
      - {{id: shape, type: transform, next: exit, transform: {{expr: "$.probe"}}}}
      - {{id: exit, type: exit}}
"""


class _WhileTracing(SimpleSpanProcessor):
    """Exports spans only while a test traces: the provider stays installed for the session
    (the API allows one), and other tests' downstream calls make spans too."""

    def on_end(self, span: ReadableSpan) -> None:
        if tracing.enabled():
            super().on_end(span)


_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on, into the in-memory exporter."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(_WhileTracing(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    tracing.set_enabled(True)
    yield _EXPORTER
    tracing.set_enabled(False)
    _EXPORTER.clear()


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    """The echo peer over Streamable HTTP, offering its `meta` probe."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ECHO_SERVER_TOOLS", "echo,meta")
        with echo_http_server() as url:
            yield url
    mcp_client.close_all()


@pytest.fixture
def probe(echo_url) -> str:
    """The traced_probe workflow, calling the echo peer; a key with every scope."""
    graph_import(text=GRAPH.format(url=echo_url), base_dir=FILES, caller=OPERATOR)
    return make_key()


@pytest.fixture(params=["direct", "queued"])
def mode(request, settings, monkeypatch) -> Iterator[str]:
    """Both execution modes. A queued run executes at once in this process through the real
    task (no broker here), but in an empty context, as on a worker: only what its message
    carries links it to the caller's trace."""
    settings.EXECUTION_MODE = request.param
    settings.GRAPHS_RUN_WAIT_SECONDS = 20
    monkeypatch.setattr(control, "_RESULT_FETCH_SECONDS", 0.05)
    queued = request.param == "queued"
    run_queued.app.conf.task_always_eager = queued
    if queued:
        send = run_queued.apply_async

        def on_a_worker(*args, **kwargs):
            return contextvars.Context().run(send, *args, **kwargs)

        monkeypatch.setattr(run_queued, "apply_async", on_a_worker)
    yield request.param
    run_queued.app.conf.task_always_eager = False


def by_name(finished: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    """The spans by name; each name looked up must have been made once."""
    counts: dict[str, int] = {}
    for span in finished:
        counts[span.name] = counts.get(span.name, 0) + 1

    class Named(dict):
        def __getitem__(self, name: str) -> ReadableSpan:
            assert counts.get(name) == 1, f"{name}: {counts}"
            return super().__getitem__(name)

    return Named({span.name: span for span in finished})


def parent_of(span: ReadableSpan) -> str:
    assert span.parent is not None, f"{span.name} has no parent"
    return trace.format_span_id(span.parent.span_id)


def span_id(span: ReadableSpan) -> str:
    return trace.format_span_id(span.context.span_id)


def call_probe(client, key: str) -> dict:
    """traced_probe's result, called in the 2026-07-28 era with the caller's TRACEPARENT."""
    return result(
        modern(
            client,
            "tools/call",
            {"name": "traced_probe", "arguments": {}},
            key=key,
            meta={"traceparent": TRACEPARENT},
        )
    )


def test_a_workflow_call_is_one_trace_down_to_the_downstream_server(client, spans, probe, mode):
    answer = call_probe(client, probe)

    assert answer["isError"] is False, answer
    received = json.loads(answer["content"][0]["text"])
    named = by_name(spans.get_finished_spans())
    request = named["MCP tools/call traced_probe"]
    run = named["run traced_probe"]
    steps = [("entry", "entry"), ("mcp", "probe"), ("transform", "shape"), ("exit", "exit")]
    nodes = [named[f"node {kind} {node}"] for kind, node in steps]
    downstream = named["downstream tools/call meta"]
    sent = named["MCP send tools/call meta"]  # the mcp SDK's client span
    # Every span is in the caller's trace, and hangs where it should.
    tree = [request, run, *nodes, downstream, sent]
    assert {trace.format_trace_id(span.context.trace_id) for span in tree} == {TRACE_ID}
    assert parent_of(request) == CALLER_SPAN
    assert request.kind == SpanKind.SERVER
    assert parent_of(run) == span_id(request)
    assert [parent_of(node) for node in nodes] == [span_id(run)] * 4
    assert parent_of(downstream) == span_id(nodes[1])
    assert parent_of(sent) == span_id(downstream)
    # The request span ends after the run's, which it covers.
    assert request.end_time >= run.end_time
    # The downstream server got the trace in its _meta, and in the HTTP header.
    carried = f"00-{TRACE_ID}-{span_id(sent)}-01"
    assert received["meta"]["traceparent"] == carried
    assert received["traceparent"] == carried
    # What the spans say.
    prefix = ApiKey.objects.get().prefix
    assert request.attributes["switchyard.caller"] == f"key:{prefix}"
    assert request.attributes["switchyard.era"] == "2026-07-28"
    assert request.attributes["gen_ai.tool.name"] == "traced_probe"
    assert request.attributes["switchyard.outcome"] == "ok"
    record = Run.objects.get()
    assert run.attributes["switchyard.run.id"] == record.pk
    assert run.attributes["switchyard.workflow"] == "traced_probe"
    assert run.attributes["switchyard.workflow.version_id"] == record.version_id
    assert run.attributes["switchyard.run.outcome"] == "succeeded"
    assert nodes[1].attributes["switchyard.node.type"] == "mcp"
    assert nodes[1].attributes["switchyard.node.iteration"] == 1
    assert nodes[1].attributes["switchyard.node.tool"] == "meta"
    assert downstream.attributes["switchyard.provider"] == "echo"
    # No span carries the key itself.
    for span in spans.get_finished_spans():
        assert not any(probe in str(value) for value in span.attributes.values()), span.name
    # The run remembers its trace.
    assert record.trace_id == TRACE_ID


def test_a_2025_call_continues_the_trace_of_its_http_header(client, spans, probe):
    session = legacy_session(client, probe)
    spans.clear()

    answer = result(
        legacy(
            client,
            session,
            "tools/call",
            {"name": "traced_probe", "arguments": {}},
            key=probe,
            headers={"traceparent": TRACEPARENT},
        )
    )

    assert answer["isError"] is False, answer
    named = by_name(spans.get_finished_spans())
    request = named["MCP tools/call traced_probe"]
    assert parent_of(request) == CALLER_SPAN
    assert request.attributes["switchyard.era"] == "2025"
    assert request.attributes["mcp.session.id"] == session
    assert parent_of(named["run traced_probe"]) == span_id(request)
    assert Run.objects.get().trace_id == TRACE_ID


def test_a_rest_call_continues_the_trace_of_its_http_header(client, spans, probe):
    answer = client.post(
        "/api/v1/mcp/invoke",
        {"name": "traced_probe", "arguments": {}},
        content_type="application/json",
        headers={"Authorization": f"Bearer {probe}", "traceparent": TRACEPARENT},
    )

    assert answer.status_code == 200, answer.content
    named = by_name(spans.get_finished_spans())
    rest = named["REST POST /api/v1/mcp/invoke"]
    request = named["MCP tools/call traced_probe"]
    assert parent_of(rest) == CALLER_SPAN
    assert rest.kind == SpanKind.SERVER
    assert rest.attributes["http.route"] == "POST /api/v1/mcp/invoke"
    assert rest.attributes["http.response.status_code"] == 200
    assert rest.attributes["switchyard.outcome"] == "ok"
    assert rest.attributes["switchyard.caller"] == f"key:{ApiKey.objects.get().prefix}"
    assert parent_of(request) == span_id(rest)
    assert parent_of(named["run traced_probe"]) == span_id(request)
    assert parent_of(named["downstream tools/call meta"]) == span_id(named["node mcp probe"])
    assert Run.objects.get().trace_id == TRACE_ID


def test_every_rest_request_has_a_span_named_by_its_route(client, spans, probe):
    listed = client.get(
        "/api/v1/runs", headers={"Authorization": f"Bearer {probe}", "traceparent": TRACEPARENT}
    )
    refused = client.get("/api/v1/runs/12345")

    assert (listed.status_code, refused.status_code) == (200, 401)
    named = by_name(spans.get_finished_spans())
    runs = named["REST GET /api/v1/runs"]
    assert parent_of(runs) == CALLER_SPAN
    assert runs.attributes["switchyard.outcome"] == "ok"
    one = named["REST GET /api/v1/runs/<run_id>"]
    assert one.parent is None  # no traceparent: a trace of its own
    assert one.attributes["http.response.status_code"] == 401
    assert one.attributes["switchyard.outcome"] == "refused"
    assert "switchyard.caller" not in one.attributes


def test_a_failing_node_fails_its_spans(client, spans, loops):
    key = make_key()
    call = {"name": "sum_to", "arguments": {"n": 1000}}
    answer = result(modern(client, "tools/call", call, key=key))

    assert answer["isError"] is True
    named = {span.name: span for span in spans.get_finished_spans()}
    run = named["run sum_to"]
    assert run.status.status_code == trace.StatusCode.ERROR
    assert run.attributes["switchyard.run.outcome"] == "maxNodeExecutions"
    assert "maxNodeExecutions" in run.status.description
    assert named["MCP tools/call sum_to"].attributes["switchyard.outcome"] == "tool_error"
    # A trace without a caller's parent starts at the request; the run records its id.
    assert named["MCP tools/call sum_to"].parent is None
    assert Run.objects.get().trace_id == trace.format_trace_id(run.context.trace_id)


def test_a_run_the_reaper_sends_again_continues_its_trace(spans, loops, settings):
    """A queued run whose message was lost is sent again under the span it was started in
    (`Run.trace_parent`): its spans join the caller's trace instead of starting another."""
    settings.GRAPHS_QUEUED_STALE_SECONDS = 300
    with tracing.continued({"traceparent": TRACEPARENT}):
        record = run_create(RunRequest(name="sum_to", arguments={"n": 3}))
    assert record.trace_parent == TRACEPARENT
    Run.objects.filter(pk=record.pk).update(created_at=timezone.now() - timedelta(seconds=301))
    run_queued.app.conf.task_always_eager = True
    try:
        # The reaper's own context carries no trace: only the run's record can link it.
        reaped = contextvars.Context().run(runs_reap)
    finally:
        run_queued.app.conf.task_always_eager = False

    assert [done.outcome for done in reaped] == ["sent to the workers again (1 of 2)"]
    run = by_name(spans.get_finished_spans())["run sum_to"]
    assert trace.format_trace_id(run.context.trace_id) == TRACE_ID
    assert parent_of(run) == CALLER_SPAN
    record.refresh_from_db()
    assert (record.status, record.trace_id) == (Run.Status.SUCCEEDED, TRACE_ID)


def test_tracing_off_makes_no_span_and_records_no_trace(client, probe):
    assert not tracing.enabled()
    answer = call_probe(client, probe)

    # The caller's trace is not continued, and the run records none.
    assert answer["isError"] is False, answer
    assert TRACE_ID not in answer["content"][0]["text"]
    assert Run.objects.get().trace_id == ""


def test_the_run_page_shows_and_links_the_trace(client, django_user_model, loops, settings):
    from tests.graphs.test_pages import add_run, detail_url

    user = django_user_model.objects.create_user("tina", password="x", is_staff=True)
    client.force_login(user)
    run = add_run("classify", trace_id=TRACE_ID)

    page = client.get(detail_url(run)).content.decode()
    assert f"<code>{TRACE_ID}</code>" in page

    settings.TRACE_URL_TEMPLATE = "http://127.0.0.1:16686/trace/{trace_id}"
    page = client.get(detail_url(run)).content.decode()
    link = f'<a href="http://127.0.0.1:16686/trace/{TRACE_ID}" rel="noopener">{TRACE_ID}</a>'
    assert link in page


@pytest.mark.parametrize(
    ("exporter", "installed"),
    [("", "ProxyTracerProvider False"), ("none", "ProxyTracerProvider False"),
     ("console", "TracerProvider True")],
)  # fmt: skip
def test_only_a_configured_exporter_installs_the_sdk(exporter, installed):
    script = (
        "import sys, django; django.setup(); from opentelemetry import trace; "
        "print(type(trace.get_tracer_provider()).__name__, 'opentelemetry.sdk' in sys.modules)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    env.pop("OTEL_TRACES_EXPORTER", None)
    if exporter:
        env["OTEL_TRACES_EXPORTER"] = exporter
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == installed


def test_an_unknown_exporter_is_refused_with_what_to_write():
    with pytest.raises(ImproperlyConfigured, match=r"zipkin.*otlp, console or none"):
        tracing.exporter_names({"OTEL_TRACES_EXPORTER": "zipkin"})
    grpc = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    with pytest.raises(ImproperlyConfigured, match="http/protobuf"):
        tracing.exporter_names(grpc)
    assert tracing.exporter_names({"OTEL_TRACES_EXPORTER": "otlp, console"}) == ["otlp", "console"]
