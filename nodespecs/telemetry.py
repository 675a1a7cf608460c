"""What operators see of this process: Prometheus metrics and JSON log events.

The lowest layer's telemetry, and the machinery the others share (`mcp_endpoint → graphs →
nodespecs`: `graphs/execution/telemetry.py` records runs and nodes,
`mcp_endpoint/observability/request_metrics.py` requests and the `/metrics` page). Each event is
recorded in one place, as a metric and, with `LOG_FORMAT=json`, as one log line on the
`switchyard.events` logger, so both always tell the same story. Here: downstream MCP calls (their
durations, and a line per failure), the size of the pool of downstream sessions, and the catalog's
serialisation cache.

Costs: a recorded event is a counter increment or a histogram observation (a dict lookup
finds the labelled child). Log events are built only when `LOG_FORMAT=json` and the level
lets them through; the plain default writes no line per request or call. `METRICS_ENABLED`
false records nothing.

Several processes on one host (uvicorn instances, a Celery worker's pool) share their metrics
through prometheus-client's multiprocess mode: `PROMETHEUS_MULTIPROC_DIR` names an empty
directory, set before any process starts (docs/operations.md). Every process then writes its
values there and `/metrics` (or a worker's `METRICS_PORT`) adds them up.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Hashable, Sequence
from typing import Any

from django.conf import settings
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    multiprocess,
    start_http_server,
)

from nodespecs.downstream.connection import Connection
from nodespecs.secrets import redact
from nodespecs.settings_reads import read_once

EVENTS = logging.getLogger("switchyard.events")
MULTIPROCESS_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
# Seconds: from a cached list (well under a millisecond) to a long workflow run.
LATENCY_BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)
LATENCY_BUCKETS += (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# The label value of anything not known to be bounded (a tool nobody registered, say).
OTHER = "other"


@read_once
def metrics_enabled() -> bool:
    """Whether events are counted (`METRICS_ENABLED`, on by default)."""
    return bool(settings.METRICS_ENABLED)


def json_logs(level: int = logging.INFO) -> bool:
    """Whether an event at `level` is written: only with `LOG_FORMAT=json`."""
    return _json_format() and EVENTS.isEnabledFor(level)


@read_once
def _json_format() -> bool:
    return bool(settings.LOG_FORMAT == "json")


def emit(event: str, fields: dict[str, Any], level: int = logging.INFO) -> None:
    """Write one event line (the caller checked `json_logs(level)`): the fields travel as the
    record's extra attributes, which the JSON formatter writes as keys."""
    EVENTS.log(level, event, extra={"event": event, **fields})


class Labelled:
    """A metric's labelled children, kept in a dict: prometheus-client's own `labels()`
    validates and locks on every call, which costs more than the increment."""

    def __init__(self, metric: Counter | Histogram | Gauge) -> None:
        self.metric = metric
        self._children: dict[Hashable, Any] = {}
        self._lock = threading.Lock()

    def child(self, *values: str) -> Any:
        """The child for these label values, made at first use."""
        found = self._children.get(values)
        if found is None:
            with self._lock:
                found = self._children.get(values)
                if found is None:
                    found = self._children[values] = self.metric.labels(*values)
        return found


def counter(name: str, documentation: str, labels: Sequence[str]) -> Labelled:
    return Labelled(Counter(name, documentation, labels))


def histogram(name: str, documentation: str, labels: Sequence[str]) -> Labelled:
    return Labelled(Histogram(name, documentation, labels, buckets=LATENCY_BUCKETS))


def scrape_registry() -> CollectorRegistry:
    """The registry a scrape reads: this process's, or in multiprocess mode every process's
    values from `PROMETHEUS_MULTIPROC_DIR` (a fresh registry per scrape, as the client's
    documentation asks)."""
    if not MULTIPROCESS_DIR:
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return registry


def _forget_this_process() -> None:
    """At exit, drop this process's live gauges (the pool size): a process that is gone holds
    no session."""
    multiprocess.mark_process_dead(os.getpid())


if MULTIPROCESS_DIR:
    atexit.register(_forget_this_process)


def serve_metrics_port() -> Any:
    """Serve this host's metrics on `METRICS_PORT` (a Celery worker: it has no web server),
    when that is set; with several processes on the host, set `PROMETHEUS_MULTIPROC_DIR` too
    so that this port serves them all. Returns the HTTP server and its thread, or None."""
    port = settings.METRICS_PORT
    if not port:
        return None
    if not MULTIPROCESS_DIR:
        logging.getLogger(__name__).warning(
            "METRICS_PORT is set without PROMETHEUS_MULTIPROC_DIR: the port shows this process "
            "alone, not the pool processes that execute the runs. Set PROMETHEUS_MULTIPROC_DIR "
            "to an empty directory (docs/operations.md)."
        )
    return start_http_server(port, addr=settings.METRICS_ADDRESS, registry=scrape_registry())


# Downstream MCP calls (nodespecs/downstream/pool.py).

# The `provider` label of every server an agent declared in its workflow (egress-checked:
# `Provider.declared_by` set): each key may declare servers, so their names are unbounded.
DECLARED = "declared"

DOWNSTREAM_SECONDS = histogram(
    "switchyard_downstream_call_seconds",
    "Downstream MCP requests by provider and request (tools/call, tools/list), failed or not.",
    ["provider", "request"],
)
DOWNSTREAM_ERRORS = counter(
    "switchyard_downstream_errors_total",
    "Downstream MCP requests that failed (unreachable, broken, timed out), by provider and "
    "error class; a tool's own isError result is not one.",
    ["provider", "error"],
)
POOL_SESSIONS = Gauge(
    "switchyard_mcp_pool_sessions",
    "Live or starting sessions with downstream MCP servers (summed over live processes).",
    multiprocess_mode="livesum",
)


def provider_label(connection: Connection) -> str:
    """The `provider` label of a connection's calls: its name when an operator registered it
    (operators' providers are few), DECLARED for every server an agent declared."""
    return DECLARED if connection.egress_checked else connection.name


def downstream_done(
    connection: Connection,
    what: str,
    seconds: float,
    error: BaseException | None = None,
    *,
    trace_id: str = "",
) -> None:
    """A downstream request to `connection`'s server ended: `what` as the pool names it
    (`tools/call 'name'`), its `error` if it failed. A failure is also a
    `downstream_failure` log line naming the provider, its message redacted of the
    connection's secrets (the pool's messages already are; this holds whatever reaches here),
    with the `trace_id` of the call's span when there is one."""
    request, _, tool = what.partition(" ")
    if metrics_enabled():
        provider = provider_label(connection)
        DOWNSTREAM_SECONDS.child(provider, request).observe(seconds)
        if error is not None:
            DOWNSTREAM_ERRORS.child(provider, type(error).__name__).inc()
    if error is not None and json_logs(logging.WARNING):
        fields = {
            "provider": connection.name,
            "request": request,
            "tool": tool.strip("'\""),
            "error_class": type(error).__name__,
            "error": redact(str(error), connection.secrets),
            "duration_ms": round(seconds * 1000, 2),
            "trace_id": trace_id or None,
        }
        emit("downstream_failure", fields, logging.WARNING)


def pool_size_changed(size: int) -> None:
    """The pool now holds `size` sessions (set when a session is added or dropped)."""
    if metrics_enabled():
        POOL_SESSIONS.set(size)


# The catalog's serialisation cache (nodespecs/knowledge/registry.py, read by
# nodespecs/knowledge/service.py).

KNOWLEDGE_CACHE = counter(
    "switchyard_knowledge_cache_total",
    "Spec serialisations asked of the catalog's cache by get_node_details and search_nodes: "
    "hit (built before) or miss (built now).",
    ["result"],
)


def knowledge_cache(hits: int, misses: int) -> None:
    """A knowledge query found `hits` serialisations ready and built `misses`."""
    if metrics_enabled():
        if hits:
            KNOWLEDGE_CACHE.child("hit").inc(hits)
        if misses:
            KNOWLEDGE_CACHE.child("miss").inc(misses)
