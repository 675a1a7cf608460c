"""What operators see of workflow runs: metrics and JSON log events for runs and nodes.

Recorded where the history is written, so the metrics and the history agree: a run's end in
`graphs/execution/runs.py` (`_finish`), each finished node in `graphs/execution/recorder.py`. The
machinery (metric children, `LOG_FORMAT`, multiprocess mode) is `nodespecs/telemetry.py`'s; requests
are `mcp_endpoint/observability/request_metrics.py`'s. `RunQueueCollector` reads the waiting runs
and the Celery queue when `/metrics` is scraped, so a run costs nothing for it.

Labels stay bounded whatever callers do: a workflow is named by its name only when it is one
of the METRICS_WORKFLOW_LABELS oldest published and enabled workflows (`workflow_label`; keys
with `workflows:write` create workflows, so their names are unbounded), else "other"; a test
run is "test", a node its type (five).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from graphs.engine import NodeRecord
from graphs.execution.toolset import WorkflowTool, workflow_tools
from graphs.models import Run
from nodespecs import telemetry

logger = logging.getLogger(__name__)

RUNS = telemetry.counter(
    "switchyard_runs_total",
    "Workflow runs that ended, by workflow and status.",
    ["workflow", "status"],
)
RUN_SECONDS = telemetry.histogram(
    "switchyard_run_seconds", "Durations of the workflow runs that ended.", ["workflow", "status"]
)
NODE_SECONDS = telemetry.histogram(
    "switchyard_node_seconds",
    "Durations of node executions, by node type (entry, mcp, transform, switch, exit).",
    ["type", "status"],
)
DECISIONS = telemetry.counter(
    "switchyard_approval_decisions_total",
    "Decisions taken at approval nodes, by outcome (approved, rejected, timeout) and by whom "
    "(user, api_key, client, timer).",
    ["decision", "by"],
)
TEST_RUN = "test"
# The names `labelled_workflows` chose, with the snapshot and the limit they were chosen from.
_labelled: tuple[dict[str, WorkflowTool], int, frozenset[str]] | None = None


def labelled_workflows() -> frozenset[str]:
    """The workflows whose names are metric labels: the METRICS_WORKFLOW_LABELS oldest (by
    id) of those served now. Chosen again only when the served workflows change. May query
    (the workflow snapshot, graphs/execution/toolset.py), as a call does."""
    global _labelled
    tools, limit = workflow_tools(), settings.METRICS_WORKFLOW_LABELS
    chosen = _labelled
    if chosen is None or chosen[0] is not tools or chosen[1] != limit:
        oldest = sorted(tools.values(), key=lambda tool: tool.workflow_id)[:limit]
        chosen = _labelled = (tools, limit, frozenset(tool.name for tool in oldest))
    return chosen[2]


def workflow_label(name: str) -> str:
    """A workflow's metric label: its name when `labelled_workflows` holds it, else "other"."""
    return name if name in labelled_workflows() else telemetry.OTHER


def run_finished(run: Run) -> None:
    """A run ended (`graphs.execution.runs._finish`, its fields set): count it and, with JSON logs,
    write its `run_end` line. Never its arguments, result or error text: they may carry
    what a caller sent."""
    workflow = TEST_RUN if run.is_test else workflow_label(run.workflow_name)
    seconds = (run.duration_ms or 0.0) / 1000
    if telemetry.metrics_enabled():
        RUNS.child(workflow, run.status).inc()
        RUN_SECONDS.child(workflow, run.status).observe(seconds)
    if telemetry.json_logs():
        fields = {
            "run_id": run.pk,
            "workflow": run.workflow_name,
            "version": run.version_id,
            "status": run.status,
            "duration_ms": round(run.duration_ms or 0.0, 2),
            "node_count": run.node_count,
            "error_node": run.error_node_id or None,
            "test": run.is_test,
            # With tracing on, the trace of the run (graphs/execution/tracing.py), to find it from
            # here.
            "trace_id": run.trace_id or None,
        }
        telemetry.emit("run_end", fields)


def decision_taken(decision: str, by_kind: str) -> None:
    """A run waiting at an approval node was decided (graphs/execution/approvals/)."""
    if telemetry.metrics_enabled():
        DECISIONS.child(decision, by_kind).inc()
    if telemetry.json_logs():
        telemetry.emit("approval_decided", {"decision": decision, "by": by_kind})


def node_finished(record: NodeRecord, status: str) -> None:
    """A node execution ended (`graphs.execution.recorder`)."""
    if telemetry.metrics_enabled():
        NODE_SECONDS.child(record.node_type, status).observe((record.duration_ms or 0.0) / 1000)


class RunQueueCollector(Collector):
    """At each scrape: the runs waiting for a worker (status queued), running, and waiting
    for approval, from the database, and the length of the Celery queue when the broker is
    Redis (with RabbitMQ it is not read here: use RabbitMQ's own exporter)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = {
            str(status): Run.objects.filter(status=status).count()
            for status in (Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.WAITING)
        }
        runs = GaugeMetricFamily(
            "switchyard_runs_in_status",
            "Runs now queued (waiting for a worker), running, or waiting for approval, from "
            "the database.",
            labels=["status"],
        )
        for status, count in counts.items():
            runs.add_metric([status], count)
        yield runs
        length = celery_queue_length()
        if length is not None:
            yield GaugeMetricFamily(
                "switchyard_celery_queue_length",
                "Messages waiting in the Celery queue (Redis broker only).",
                value=length,
            )


# The queue Celery sends to when no other is named (graphs/execution/queue.py names none).
CELERY_QUEUE = "celery"
_broker_clients: dict[str, Any] = {}


def celery_queue_length() -> int | None:
    """LLEN of the Celery queue on a Redis broker; None when the broker is not Redis, or is
    unreachable (logged: the scrape still answers with the rest)."""
    url: str = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        return None
    try:
        client = _broker_clients.get(url)
        if client is None:
            import redis

            client = _broker_clients[url] = redis.Redis.from_url(url, socket_timeout=1)
        return int(client.llen(CELERY_QUEUE))
    except Exception as exc:  # redis-py's errors; a scrape must not fail for them
        logger.warning("The Celery queue length could not be read: %s", type(exc).__name__)
        return None
