"""Realistic run history for scale tests of the pages (`manage.py seed_history --runs N`).

Imports the seeded workflows once (`graphs.history.seed_shapes.GRAPH_FILE`, two versions of
each) and writes N runs spread over the past weeks, oldest first, each a shape of its workflow
(`build_shapes`) with times of its own: about ten node executions a run on average, the newest
few still running. Rows go in by COPY on PostgreSQL (bulk_create elsewhere), a batch per
transaction; one million runs take minutes (docs/history.md). Run it on a database of its
own: it reserves a block of run ids as it starts.
"""

from __future__ import annotations

import bisect
import itertools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import F, JSONField, Max

from graphs.authoring.files import graph_import
from graphs.execution.recorder import copy_rows, write_rows
from graphs.history.seed_shapes import GRAPH_FILE, WORKFLOWS, Shape, build_shapes, to_json
from graphs.models import Run, Workflow
from nodespecs.callers import caller_command

RUN_COLUMNS = (
    "id",
    "workflow_id",
    "version_id",
    "workflow_name",
    "status",
    "arguments",
    "result",
    "error",
    "error_node_id",
    "caller",
    "session_id",
    "node_count",
    "truncated",
    "created_at",
    "started_at",
    "finished_at",
    "duration_ms",
)
RUN_JSON_COLUMNS = ("arguments", "result")
CALLERS = (
    ["key:agent-prod"] * 6
    + ["key:agent-staging"] * 2
    + ["key:nightly-ci", "user:alice", "user:bob", "admin test run by carol"]
)
# Median milliseconds of a node of each type; durations are log-normal around them.
MEDIAN_MS = {"entry": 0.01, "exit": 0.01, "transform": 0.25, "switch": 0.06, "mcp": 90.0}
# How many of the newest runs may still be running (those that call an mcp server).
RUNNING_TAIL = 3


@dataclass(frozen=True)
class Seeded:
    """How much has been written so far, and in how long."""

    runs: int
    executions: int
    seconds: float


def seed_history(
    *,
    runs: int,
    weeks: float,
    batch: int,
    seed: int,
    on_batch: Callable[[Seeded], None] | None = None,
) -> Seeded:
    """Add `runs` runs over the past `weeks`, `batch` runs a transaction, from the random
    `seed` (the same seed writes the same history); `on_batch` hears of each batch written."""
    rng = random.Random(seed)
    if not Workflow.objects.filter(name__in=WORKFLOWS).exists():
        # Two versions of each, so the history shows runs of an older one too.
        caller = caller_command("seed_history")
        graph_import(text=GRAPH_FILE, caller=caller)
        graph_import(
            text=GRAPH_FILE.replace("maxExecutionTimeMs: 30000", "maxExecutionTimeMs: 60000"),
            caller=caller,
        )
    workflows = {
        w.name: (w, list(w.versions.order_by("number").values_list("pk", flat=True)))
        for w in Workflow.objects.filter(name__in=WORKFLOWS)
    }
    pools = build_shapes(rng)
    names = list(WORKFLOWS)
    cumulative = list(itertools.accumulate(WORKFLOWS[name][0] for name in names))
    first_id = _reserve_ids(runs)
    other_columns, other_values = _other_run_columns()
    now = datetime.now(UTC)
    start = now - timedelta(weeks=weeks)
    step = (now - start) / max(runs, 1)
    started = time.monotonic()
    executions = 0
    for offset in range(0, runs, batch):
        run_rows, node_rows = [], []
        for position in range(offset, min(offset + batch, runs)):
            name = names[bisect.bisect(cumulative, rng.random() * cumulative[-1])]
            workflow, versions = workflows[name]
            # The first half of the history ran the first version, the rest the latest.
            version = versions[0] if position < runs // 2 else versions[-1]
            shape = rng.choice(pools[name])
            created = start + step * position
            running = position >= runs - RUNNING_TAIL and any(
                node.node_type == "mcp" for node in shape.nodes
            )
            run, nodes = _rows(first_id + position, workflow, version, shape, created, rng, running)
            run_rows.append(run + other_values)
            node_rows.extend(nodes)
        with transaction.atomic():
            copy_rows(Run, RUN_COLUMNS + other_columns, RUN_JSON_COLUMNS, run_rows)
            if connection.vendor != "postgresql":
                # bulk_create stamps auto_now_add fields with the current time.
                Run.objects.filter(pk__gte=run_rows[0][0], pk__lte=run_rows[-1][0]).update(
                    created_at=F("started_at")
                )
            write_rows(node_rows)
        executions += len(node_rows)
        if on_batch is not None:
            on_batch(Seeded(offset + len(run_rows), executions, time.monotonic() - started))
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE graphs_run; ANALYZE graphs_nodeexecution")
    return Seeded(runs, executions, time.monotonic() - started)


def _reserve_ids(count: int) -> int:
    """The first of `count` run ids that no other insert will take."""
    if connection.vendor != "postgresql":
        return (Run.objects.aggregate(last=Max("id"))["last"] or 0) + 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_serial_sequence('graphs_run', 'id')")
        (sequence,) = cursor.fetchone()
        cursor.execute(
            "SELECT setval(%s, GREATEST(nextval(%s), "
            "(SELECT COALESCE(MAX(id), 0) + 1 FROM graphs_run)) + %s - 1)",
            [sequence, sequence, count],
        )
        (last,) = cursor.fetchone()
    return last - count + 1


def _other_run_columns() -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """The Run columns the seed does not fill, with their model defaults: COPY applies no
    Django default, and fields added to Run later must not break the seed."""
    fields = [field for field in Run._meta.concrete_fields if field.attname not in RUN_COLUMNS]
    return (
        tuple(field.attname for field in fields),
        tuple(
            to_json(field.get_default()) if isinstance(field, JSONField) else field.get_default()
            for field in fields
        ),
    )


def _rows(
    run_id: int,
    workflow: Workflow,
    version_id: int,
    shape: Shape,
    created: datetime,
    rng: random.Random,
    running: bool,
) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    """A run's row (RUN_COLUMNS) and its node executions' (graphs.execution.recorder.COLUMNS), with
    times of their own. A running run stops at its last mcp node, still running."""
    nodes = list(shape.nodes)
    if running:
        last_mcp = max(i for i, n in enumerate(nodes) if n.node_type == "mcp")
        nodes = nodes[: last_mcp + 1]
    node_rows = []
    at = created
    for index, node in enumerate(nodes):
        still = running and index == len(nodes) - 1
        # Log-normal around the type's median; a failing call waits for its time-out.
        duration_ms = rng.lognormvariate(0, 0.8) * MEDIAN_MS[node.node_type]
        duration_ms *= 20 if node.error else 1
        node_rows.append(
            (
                run_id,
                index,
                node.node_id,
                node.node_type,
                node.iteration,
                "running" if still else "failed" if node.error else "succeeded",
                node.detail,
                None if still else node.output,
                node.error,
                1,
                node.truncated,
                at,
                None if still else duration_ms,
            )
        )
        at += timedelta(milliseconds=duration_ms)
    total = (at - created) / timedelta(milliseconds=1) + rng.uniform(0.5, 3.0)
    if shape.status == Run.Status.TIMED_OUT:
        # The limit it breached: maxExecutionTimeMs.
        total = max(total, 30_000 + rng.uniform(0, 50))
    caller = rng.choice(CALLERS)
    run_row = (
        run_id,
        workflow.pk,
        version_id,
        workflow.name,
        Run.Status.RUNNING if running else shape.status,
        shape.arguments,
        None if running else shape.result,
        "" if running else shape.error,
        "" if running else shape.error_node_id,
        caller,
        f"{rng.getrandbits(64):016x}" if caller.startswith("key:agent") else "",
        len(nodes) - running,
        shape.truncated,
        created,
        created,
        None if running else created + timedelta(milliseconds=total),
        None if running else total,
    )
    return run_row, node_rows
