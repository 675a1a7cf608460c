"""Writes a run's history as it happens: the engine's observer, backed by the database.

An `mcp` node can take seconds, so its row is written when it starts (status `running`) and
completed when it ends: a crash mid-call leaves that row behind. Transform and switch nodes
take microseconds; a row per node written one by one would cost more than the run itself, so
their finished rows are collected and written together (COPY on PostgreSQL), before the next
`mcp` node, at most `FLUSH_SECONDS` after the first of them finished, once `FLUSH_ROWS` rows
or `FLUSH_BYTES` of payloads are waiting, and when the run ends. A crash loses at most that
window of in-memory steps, never an outside call. Nothing else is kept per execution, so the
recorder's memory is the same for a run of ten nodes or of ten thousand.

A node's input is the output of the execution before it, so it is not stored twice: pages
read it from the previous row.

A run can outlive its database connection (the server restarted, an operator or a failover
ended it while a node was running): each write finding the connection lost reconnects once
and writes again (`reconnecting`), so the run goes on instead of staying `running`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, models

from graphs.engine import NodeRecord, NullObserver
from graphs.execution.payloads import encoded, stored_error
from graphs.execution.telemetry import node_finished
from graphs.models import NodeExecution, Run

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 0.2
# Fast nodes with large outputs would otherwise gather FLUSH_SECONDS' worth of payloads (each
# up to GRAPHS_MAX_PAYLOAD_BYTES) in memory before a write.
FLUSH_ROWS = 1000
FLUSH_BYTES = 4 * 1024 * 1024
T = TypeVar("T")

# progress(done, message): one call per finished node.
Progress = Callable[[int, str], None]

# The columns of a finished row, in the order `_Row` holds them.
COLUMNS = (
    "run_id",
    "index",
    "node_id",
    "node_type",
    "iteration",
    "status",
    "detail",
    "output",
    "error",
    "attempts",
    "truncated",
    "started_at",
    "duration_ms",
)
JSON_COLUMNS = ("detail", "output")
_Row = tuple[Any, ...]


def reconnecting(write: Callable[[], T]) -> T:
    """Run a database write; if the connection turns out to be lost, reconnect and write once
    more. Outside a transaction only: inside one, the lost work is not this write's to redo.

    Writing again is safe: a write on a lost connection did not commit, and every history
    write is an insert of new rows or an update to the same values.
    """
    try:
        return write()
    except (OperationalError, InterfaceError) as exc:
        if connection.in_atomic_block or connection.is_usable():
            raise
        logger.warning("Database connection lost (%s); reconnecting to write again", exc)
        connection.close()
        return write()


def _at(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)


def copy_rows(
    model: type[models.Model],
    columns: Sequence[str],
    json_columns: Sequence[str],
    rows: Iterable[_Row],
) -> None:
    """Insert rows given in `columns` order, their `json_columns` already encoded as JSON."""
    if connection.vendor == "postgresql":
        # COPY takes a few microseconds a row; the ORM's bulk insert ten times that.
        names = ", ".join(connection.ops.quote_name(column) for column in columns)
        table = model._meta.db_table
        with (
            connection.cursor() as cursor,
            cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)
        return
    decode = [columns.index(column) for column in json_columns]
    instances = []
    for row in rows:
        values = dict(zip(columns, row, strict=True))
        for position in decode:
            if row[position] is not None:
                values[columns[position]] = json.loads(row[position])
        instances.append(model(**values))
    model._default_manager.bulk_create(instances)


def write_rows(rows: list[_Row]) -> None:
    """Insert finished node executions, their JSON already encoded."""
    copy_rows(NodeExecution, COLUMNS, JSON_COLUMNS, rows)


class HistoryRecorder(NullObserver):
    """Persists the node executions of one run through the engine's observer interface.

    `secrets` are the run's secret values (`graphs.execution.payloads.run_secrets`): masked wherever
    a node's detail, output or error holds them."""

    def __init__(
        self,
        run: Run,
        progress: Progress | None = None,
        secrets: Sequence[str] = (),
        waiting_index: int | None = None,
        resumed: bool = False,
    ) -> None:
        self.run = run
        self.progress = progress
        self.secrets = tuple(secrets)
        self.max_bytes: int = settings.GRAPHS_MAX_PAYLOAD_BYTES
        self.node_count = 0
        self.truncated = False
        self._pending: list[_Row] = []
        self._pending_since = 0.0
        self._pending_bytes = 0
        # Execution indexes of rows written at start (mcp nodes, and the approval node a
        # resumed run waited at: `waiting_index`), to complete at the end.
        self._open: set[int] = set() if waiting_index is None else {waiting_index}
        # A run that goes on from a stop counts on from the executions it had.
        if resumed:
            self.node_count = run.node_count

    def _encode(self, value: object) -> tuple[str, bool]:
        text, truncated = encoded(value, self.max_bytes, self.secrets)
        self.truncated |= truncated
        return text, truncated

    def flush(self) -> None:
        """Write the finished rows collected so far."""
        if self._pending:
            reconnecting(lambda: write_rows(self._pending))
            self._pending = []
            self._pending_bytes = 0

    def _row(
        self, record: NodeRecord, status: str, detail: str, output: str | None, truncated: bool
    ) -> _Row:
        return (
            self.run.pk,
            record.index,
            record.node_id,
            record.node_type,
            record.iteration,
            status,
            detail,
            output,
            stored_error(record.error or "", self.secrets),
            record.attempts,
            truncated,
            _at(record.started_at),
            record.duration_ms,
        )

    def node_started(self, record: NodeRecord) -> None:
        if record.node_type != "mcp":
            return
        # Written now, with whatever finished before it, so a call that never returns (a
        # crash, a hang) still shows in the history as the node that was running.
        detail, truncated = self._encode(record.detail)
        self._pending.append(
            self._row(record, NodeExecution.Status.RUNNING, detail, None, truncated)
        )
        self.flush()
        self._open.add(record.index)

    def _finished(self, record: NodeRecord, status: str) -> None:
        detail, detail_cut = self._encode(record.detail)
        output, output_cut = self._encode(record.output)
        self.node_count += 1
        if record.index in self._open:
            self._open.discard(record.index)
            row = NodeExecution.objects.filter(run=self.run, index=record.index)
            reconnecting(
                lambda: row.update(
                    status=status,
                    detail=json.loads(detail),
                    output=json.loads(output),
                    error=stored_error(record.error or "", self.secrets),
                    attempts=record.attempts,
                    duration_ms=record.duration_ms,
                    truncated=detail_cut or output_cut,
                )
            )
        else:
            if not self._pending:
                self._pending_since = time.monotonic()
            self._pending.append(
                self._row(record, status, detail, output, detail_cut or output_cut)
            )
            self._pending_bytes += len(detail) + len(output)
            if (
                status == NodeExecution.Status.FAILED
                or len(self._pending) >= FLUSH_ROWS
                or self._pending_bytes >= FLUSH_BYTES
                or time.monotonic() - self._pending_since >= FLUSH_SECONDS
            ):
                self.flush()
        node_finished(record, status)
        if self.progress is not None:
            self.progress(self.node_count, f"{record.node_id} {status}")

    def node_waiting(self, record: NodeRecord) -> None:
        # Written at once, with whatever finished before it: the run stops here.
        detail, truncated = self._encode(record.detail)
        self._pending.append(
            self._row(record, NodeExecution.Status.WAITING, detail, None, truncated)
        )
        self.flush()

    def node_finished(self, record: NodeRecord) -> None:
        self._finished(record, NodeExecution.Status.SUCCEEDED)

    def node_failed(self, record: NodeRecord) -> None:
        self._finished(record, NodeExecution.Status.FAILED)
