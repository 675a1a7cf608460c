"""OpenTelemetry traces of workflow runs: a span per run and per node, and the trace carried
across threads and to the Celery workers.

One trace follows a call from the MCP request (`mcp_endpoint/protocol/traces.py`) through its
run to each downstream MCP call (`nodespecs/downstream/client.py`):

```
MCP tools/call <workflow>                  request, mcp_endpoint/protocol/traces.py
  run <workflow>                           `traced_run`, here (on the worker when queued)
    node mcp <id>                          `TracingObserver`, here
      downstream tools/call <tool>         nodespecs/downstream/client.py
        MCP send tools/call <tool>         the mcp SDK's client span; traceparent goes out here
```

The engine stays free of Django and of tracing: `TracingObserver` wraps the history's
observer (`graphs/execution/recorder.py`), and the node's span is made current around the engine's
call function (`RunTrace.calls`), so a downstream call made for a node is that node's child.

Configuration is the standard `OTEL_*` environment (`configure`, called once per process by
`graphs.apps`): `OTEL_TRACES_EXPORTER=otlp|console|none` (default none; several separated by
commas), then the SDK's own `OTEL_EXPORTER_OTLP_*`, `OTEL_SERVICE_NAME`,
`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`. With none, no SDK
TracerProvider is installed at all, and every function here returns at its first test of
`enabled()`: tracing off costs a flag check per request and per run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagate import extract, inject
from opentelemetry.trace import Span, Status, StatusCode

from graphs.engine import GraphRunError, NodeRecord, Observer
from graphs.models import Run

T = TypeVar("T")

TRACER = trace.get_tracer("switchyard")
EXPORTERS = ("otlp", "console")
# The longest error text put on a span: enough to read, short of a whole stack of messages.
_STATUS_CHARS = 500


class _State:
    enabled = False
    configured = False


def enabled() -> bool:
    """Whether this process traces (an exporter is configured, or a test installed one)."""
    return _State.enabled


def set_enabled(on: bool) -> None:
    """Turn the instrumentation on or off; `configure` does it, tests that install their own
    TracerProvider too."""
    _State.enabled = on


def exporter_names(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The exporters `OTEL_TRACES_EXPORTER` names ("none" and blanks left out).

    Raises ImproperlyConfigured for one that is not installed here."""
    raw = environ.get("OTEL_TRACES_EXPORTER", "none")
    names = [name.strip().lower() for name in raw.split(",") if name.strip()]
    names = [name for name in names if name != "none"]
    unknown = [name for name in names if name not in EXPORTERS]
    if unknown:
        raise ImproperlyConfigured(
            f"OTEL_TRACES_EXPORTER={raw!r} names {', '.join(unknown)}, which this server does "
            f"not have: use {', '.join(EXPORTERS)} or none (several separated by commas)."
        )
    protocol = environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    )
    if "otlp" in names and protocol not in ("", "http/protobuf"):
        raise ImproperlyConfigured(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: this server exports OTLP over HTTP "
            "only (http/protobuf, port 4318 of a collector); unset it or set http/protobuf."
        )
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    return names


def configure() -> bool:
    """Install the SDK's TracerProvider with the exporters of the `OTEL_*` environment, once
    per process; whether tracing is on. With none, nothing is installed: the API's no-op
    tracer stays, and the instrumentation is off."""
    if _State.configured:
        return _State.enabled
    _State.configured = True
    names = exporter_names()
    if not names:
        return False
    # Imported only when tracing is on: a server without it never loads the SDK.
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read by the SDK; without a name of
    # the operator's, ours rather than "unknown_service".
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    provider = TracerProvider(
        resource=Resource.create({} if named else {SERVICE_NAME: "switchyard"})
    )
    for name in names:
        exporter: SpanExporter
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        else:
            exporter = ConsoleSpanExporter()
        # Spans are exported in batches on the processor's thread, never on a request's.
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    set_enabled(True)
    return True


def trace_url(trace_id: str) -> str:
    """Where the operator's trace viewer shows this trace (`TRACE_URL_TEMPLATE` with the id
    in place of `{trace_id}`), or "" without a template or a trace id."""
    template: str = getattr(settings, "TRACE_URL_TEMPLATE", "")
    if not template or not trace_id:
        return ""
    return template.replace("{trace_id}", trace_id)


def trace_id_of(span: Span) -> str:
    """The span's trace id as 32 hex digits, or "" for an invalid (no-op) span."""
    span_context = span.get_span_context()
    return trace.format_trace_id(span_context.trace_id) if span_context.is_valid else ""


def current_trace_id() -> str:
    """The trace id of the span current here, or "" (tracing off, or no span)."""
    if not _State.enabled:
        return ""
    return trace_id_of(trace.get_current_span())


def current_trace_parent() -> str:
    """The current span as a W3C `traceparent`, or "" (tracing off, or no span)."""
    return carrier().get("traceparent", "")


def carrier() -> dict[str, str]:
    """The current trace context as W3C headers (`traceparent`, `tracestate`), to send along;
    empty when tracing is off or no span is current."""
    if not _State.enabled:
        return {}
    headers: dict[str, str] = {}
    inject(headers)
    return headers


def parent_from(*carriers: Mapping[str, Any] | None) -> Context | None:
    """The context of the first carrier with a valid `traceparent` (a request's `_meta`, then
    its HTTP headers), or None: the span then starts from what is current."""
    for headers in carriers:
        if not headers or not isinstance(headers.get("traceparent"), str):
            continue
        try:
            context = extract(headers)
        except (TypeError, ValueError):
            continue
        if trace.get_current_span(context).get_span_context().is_valid:
            return context
    return None


@contextmanager
def continued(headers: Mapping[str, str] | None) -> Iterator[None]:
    """Make the trace context `headers` carry (`carrier()` of another process) current while
    the block runs: a queued run's worker continues the caller's trace, and the reaper's
    re-send of a run the trace it was started in (`Run.trace_parent`)."""
    context = parent_from(headers) if _State.enabled else None
    if context is None:
        yield
        return
    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)


def within(context: Context, function: Callable[[], T]) -> T:
    """Call `function` with `context` current (on whichever thread runs this)."""
    token = otel_context.attach(context)
    try:
        return function()
    finally:
        otel_context.detach(token)


def failed(span: Span, description: str) -> None:
    """Mark a span as failed, with what went wrong (shortened)."""
    if len(description) > _STATUS_CHARS:
        description = description[: _STATUS_CHARS - 3] + "..."
    span.set_status(Status(StatusCode.ERROR, description))


CallTool = Callable[[str, str, dict[str, Any], float | None], Any]


class TracingObserver:
    """The engine's observer for a traced run: each node's span, around `inner` (the
    history's recorder), which hears everything first as it would alone."""

    def __init__(self, inner: Observer, run_context: Context) -> None:
        self.inner = inner
        self.run_context = run_context
        self.node_span: Span | None = None
        # Set when the engine reports the run's end: None succeeded, else its error.
        self.ended = False
        self.error: GraphRunError | None = None
        # The run's context with the running node's span: current during its downstream calls.
        self.node_context = run_context

    def run_started(self, tool_name: str, arguments: dict[str, Any]) -> None:
        self.inner.run_started(tool_name, arguments)

    def node_started(self, record: NodeRecord) -> None:
        self.node_started_at(record, None)
        self.inner.node_started(record)

    def node_started_at(self, record: NodeRecord, start_time: int | None) -> None:
        """Open the node's span (from `start_time`, ns since the epoch; None: now)."""
        self.close_node()
        span = TRACER.start_span(
            f"node {record.node_type} {record.node_id}",
            context=self.run_context,
            start_time=start_time,
            attributes={
                "switchyard.node.id": record.node_id,
                "switchyard.node.type": record.node_type,
                "switchyard.node.iteration": record.iteration,
                "switchyard.node.index": record.index,
            },
        )
        self.node_span = span
        self.node_context = trace.set_span_in_context(span, self.run_context)

    def node_finished(self, record: NodeRecord) -> None:
        self.inner.node_finished(record)
        if self.node_span is None and record.node_type == "approval":
            # A resumed run's approval node: its span covers the wait, from when it began.
            self.node_started_at(record, int(record.started_at * 1e9))
        self._end_node(record)

    def node_failed(self, record: NodeRecord) -> None:
        self.inner.node_failed(record)
        self._end_node(record)

    def node_waiting(self, record: NodeRecord) -> None:
        self.inner.node_waiting(record)
        if self.node_span is not None:
            self.node_span.set_attribute("switchyard.node.waiting", True)
        self.close_node()

    def run_finished(self, result: Any, error: GraphRunError | None) -> None:
        self.ended, self.error = True, error
        self.inner.run_finished(result, error)

    def _end_node(self, record: NodeRecord) -> None:
        span = self.node_span
        if span is None:
            return
        detail = record.detail or {}
        if record.node_type == "mcp":
            span.set_attribute("switchyard.node.server", str(detail.get("server", "")))
            span.set_attribute("switchyard.node.tool", str(detail.get("tool", "")))
            span.set_attribute("switchyard.node.attempts", record.attempts)
        if record.error is not None:
            failed(span, record.error)
        self.close_node()

    def close_node(self) -> None:
        """End the running node's span (the run ended under it, by an error outside the
        engine's making)."""
        if self.node_span is not None:
            self.node_span.end()
        self.node_span = None
        self.node_context = self.run_context


class RunTrace:
    """What a run's execution uses of its trace: the observer to give the engine, and its
    call function wrapped so each downstream call is a child of its node."""

    def __init__(self, observer: Observer, tracing: TracingObserver | None = None) -> None:
        self.observer = observer
        self._tracing = tracing

    def calls(self, call_tool: CallTool) -> CallTool:
        """`call_tool`, run with the calling node's span current."""
        observer = self._tracing
        if observer is None:
            return call_tool

        def traced(server: str, tool: str, arguments: dict[str, Any], timeout: float | None) -> Any:
            return within(
                observer.node_context, lambda: call_tool(server, tool, arguments, timeout)
            )

        return traced


@contextmanager
def traced_run(run: Run, recorder: Observer) -> Iterator[RunTrace]:
    """The span of a run's execution, child of the current span (the request's, or on a
    worker the one its message carried); it ends with the block, saying how the run ended.
    Tracing off: the recorder and the call function as they are."""
    if not _State.enabled:
        yield RunTrace(recorder)
        return
    span = TRACER.start_span(
        f"run {run.workflow_name}",
        attributes={
            "switchyard.workflow": run.workflow_name,
            "switchyard.workflow.version_id": run.version_id,
            "switchyard.run.id": run.pk,
            "switchyard.run.is_test": run.is_test,
        },
    )
    context = trace.set_span_in_context(span)
    trace_id = trace_id_of(span)
    if trace_id and run.trace_id != trace_id:
        # A run no request started (manage.py, the admin's test run): its trace begins here.
        run.trace_id = trace_id
        Run.objects.filter(pk=run.pk).update(trace_id=trace_id)
    observer = TracingObserver(recorder, context)
    token = otel_context.attach(context)
    try:
        yield RunTrace(observer, observer)
    except BaseException as exc:
        span.record_exception(exc)
        raise
    finally:
        otel_context.detach(token)
        observer.close_node()
        _end_run(span, run, observer)


def _end_run(span: Span, run: Run, observer: TracingObserver) -> None:
    """Say how the run ended: as the engine reported it, else (an error outside the engine,
    the history already written) as the run was finished."""
    if observer.ended:
        error = observer.error
        outcome = "succeeded" if error is None else (error.limit or error.kind)
        message = "" if error is None else str(error)
    else:
        outcome, message = run.status, run.error or run.status
    span.set_attribute("switchyard.run.outcome", outcome)
    if message:
        failed(span, message)
    span.end()
