"""Writes a run's history as it happens: the engine's observer, backed by the database.

An `mcp` node can take seconds, so its row is written when it starts (status `running`) and
completed when it ends: a crash mid-call leaves that row behind. Transform and switch nodes
take microseconds; a row per node written one by one would cost more than the run itself, so
their finished rows are collected and written together, before the next `mcp` node, at most
`FLUSH_SECONDS` after the first of them finished, and when the run ends. A crash loses at most
that window of in-memory steps, never an outside call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from django.conf import settings

from graphs.engine import NodeRecord, NullObserver
from graphs.models import NodeExecution, Run
from graphs.payloads import storable

FLUSH_SECONDS = 0.2

# progress(done, message): one call per finished node.
Progress = Callable[[int, str], None]


def _at(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)


class HistoryRecorder(NullObserver):
    """Persists the node executions of one run through the engine's observer interface."""

    def __init__(self, run: Run, progress: Progress | None = None):
        self.run = run
        self.progress = progress
        self.max_bytes: int = settings.GRAPHS_MAX_PAYLOAD_BYTES
        self.node_count = 0
        self.truncated = False
        self._pending: list[NodeExecution] = []
        self._pending_since = 0.0
        # Rows written at start (mcp nodes), by execution index, to complete at the end.
        self._open: dict[int, NodeExecution] = {}

    def _store(self, row: NodeExecution, **payloads: object) -> None:
        """Set payload fields on a row, capped, and mark the row (and run) if any was cut."""
        for name, value in payloads.items():
            stored, truncated = storable(value, self.max_bytes)
            setattr(row, name, stored)
            row.truncated |= truncated
            self.truncated |= truncated

    def _row(self, record: NodeRecord, status: str) -> NodeExecution:
        row = NodeExecution(
            run=self.run,
            index=record.index,
            node_id=record.node_id,
            node_type=record.node_type,
            iteration=record.iteration,
            status=status,
            started_at=_at(record.started_at),
        )
        self._store(row, input=record.input, detail=record.detail)
        return row

    def flush(self) -> None:
        """Write the finished rows collected so far."""
        if self._pending:
            NodeExecution.objects.bulk_create(self._pending)
            self._pending = []

    def node_started(self, record: NodeRecord) -> None:
        if record.node_type != "mcp":
            return
        self.flush()
        row = self._row(record, NodeExecution.Status.RUNNING)
        row.save(force_insert=True)
        self._open[record.index] = row

    def _finished(self, record: NodeRecord, status: str) -> None:
        row = self._open.pop(record.index, None)
        written = row is not None
        if row is None:
            row = self._row(record, status)
        row.status = status
        self._store(row, detail=record.detail, output=record.output)
        row.error = record.error or ""
        row.attempts = record.attempts
        row.duration_ms = record.duration_ms
        self.node_count += 1
        if written:
            row.save(
                update_fields=[
                    "status",
                    "detail",
                    "output",
                    "error",
                    "attempts",
                    "duration_ms",
                    "truncated",
                ]
            )
        else:
            if not self._pending:
                self._pending_since = time.monotonic()
            self._pending.append(row)
            if status == NodeExecution.Status.FAILED or (
                time.monotonic() - self._pending_since >= FLUSH_SECONDS
            ):
                self.flush()
        if self.progress is not None:
            self.progress(self.node_count, f"{record.node_id} {status}")

    def node_finished(self, record: NodeRecord) -> None:
        self._finished(record, NodeExecution.Status.SUCCEEDED)

    def node_failed(self, record: NodeRecord) -> None:
        self._finished(record, NodeExecution.Status.FAILED)
