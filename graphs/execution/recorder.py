"""Writes a run's history as it happens: the engine's observer, backed by the database.

A run's history is its `Run` row and a `NodeExecution` row per node execution. Transform and
switch nodes take microseconds; a write per node would cost more than the run itself, so what
a run does in memory waits and is written together: at most `FLUSH_SECONDS` after the first of
it began to wait (the row of a run not yet written counts from the run's start), once
`FLUSH_ROWS` rows or `FLUSH_BYTES` of payloads wait, at a failed node, before an outside call
(an mcp node's row goes out `running` before its call does, so a call that never returns still
shows in the history), where the run stops (an approval node, a breakpoint) and when it ends.
A crash loses at most that window of in-memory steps, never an outside call. Nothing else is
kept per execution, so the recorder's memory is the same for a run of ten nodes or of ten
thousand.

Each write is one round trip (`write_together`): one statement on PostgreSQL, one transaction
on SQLite. A direct run's id is reserved before its first node (`run_id_reserve`, no write) and
its row goes with its first write, so a run that ends within the window without calling out is
written once, when it ends: its row, its node executions and its outcome together; one that
calls out is written before its first call and at its end. A crash before a run's first write
leaves nothing of it (its caller got no answer); after it, the run's row stays `running` until
the reaper fails it.

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
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from django.conf import settings
from django.db import (
    DEFAULT_DB_ALIAS,
    InterfaceError,
    OperationalError,
    connection,
    connections,
    models,
    transaction,
)
from django.db.backends.base.base import BaseDatabaseWrapper

from graphs.engine import NodeRecord, NullObserver
from graphs.execution.payloads import encoded, stored_error, to_json
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
_STARTED_AT = COLUMNS.index("started_at")
# More rows than this in one write go by COPY on PostgreSQL rather than in its one statement:
# a thousand rows take 9 ms by COPY, 21 in the statement (docs/benchmarks.md, issue 31), and
# a short run's dozen cost the statement 0.1 ms more, against a commit and round trips saved.
ROWS_IN_STATEMENT = 100
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


def _postgresql() -> bool:
    return connection.vendor == "postgresql"


def _database() -> BaseDatabaseWrapper:
    """This thread's connection itself. `connection` is a proxy that looks the thread's up
    on every attribute read (a few µs each), and building a run's row reads dozens: each
    statement below looks it up once."""
    return connections[DEFAULT_DB_ALIAS]


# Column lists as the database quotes them, by vendor and columns: a few lists, each the same
# every time (a run's row has 28 columns).
_quoted: dict[tuple[str, tuple[str, ...]], str] = {}


def _names(columns: Iterable[str], database: BaseDatabaseWrapper) -> str:
    key = (database.vendor, tuple(columns))
    names = _quoted.get(key)
    if names is None:
        names = _quoted[key] = ", ".join(database.ops.quote_name(column) for column in key[1])
    return names


# ---------------------------------------------------------------------------- statements


@dataclass(frozen=True)
class Statement:
    """One write: SQL with `%s` placeholders and its parameters (one list per row when
    `many`: SQLite's batch of rows)."""

    sql: str
    params: Sequence[Any]
    many: bool = False


def run_id_reserve() -> int:
    """A new run id from the run table's own sequence, with nothing written: the run's row
    is written later under it (`run_insert`), and no other run can take it meanwhile."""
    table = Run._meta.db_table
    with connection.cursor() as cursor:
        if _postgresql():
            # Outside any transaction's reach: an id taken is never given again.
            cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id'))", [table])
            return int(cursor.fetchone()[0])
        # An AUTOINCREMENT table's next id is one more than its entry in sqlite_sequence,
        # which SQLite lets us raise (it keeps it at least the largest id ever written).
        cursor.execute(
            "UPDATE sqlite_sequence SET seq = seq + 1 WHERE name = %s RETURNING seq", [table]
        )
        reserved = cursor.fetchone()
    if reserved is not None:
        return int(reserved[0])
    # The table never had a row, so it has no entry yet: make it, once, then reserve.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO sqlite_sequence (name, seq) SELECT %s, 0 WHERE NOT EXISTS "
            "(SELECT 1 FROM sqlite_sequence WHERE name = %s)",
            [table, table],
        )
    return run_id_reserve()


def _run_values(
    run: Run, database: BaseDatabaseWrapper, names: Collection[str] | None = None
) -> dict[str, Any]:
    """The run's fields (those of `names`, else all) by column, as `database` takes them."""
    fields = [field for field in Run._meta.concrete_fields if names is None or field.name in names]
    # A concrete field always has its column (the stubs allow None for the others).
    return {
        cast(str, field.column): field.get_db_prep_save(getattr(run, field.attname), database)
        for field in fields
    }


def run_insert(run: Run) -> Statement:
    """The run's row, every field as it stands (its outcome too, once set)."""
    database = _database()
    values = _run_values(run, database)
    return Statement(
        f"INSERT INTO {Run._meta.db_table} ({_names(values, database)}) "
        f"VALUES ({', '.join(['%s'] * len(values))})",
        list(values.values()),
    )


def run_update(run: Run, names: Collection[str]) -> Statement:
    """The run's row's `names` fields set as they stand on `run`."""
    database = _database()
    values = _run_values(run, database, names)
    quote = database.ops.quote_name
    sets = ", ".join(f"{quote(column)} = %s" for column in values)
    return Statement(
        f"UPDATE {Run._meta.db_table} SET {sets} WHERE id = %s", [*values.values(), run.pk]
    )


def _row_json(row: _Row) -> str:
    """A finished row as a JSON object keyed by column, its JSON columns' text put in as it
    is (it is JSON already)."""
    scalars = dict(zip(COLUMNS, row, strict=True))
    payloads = [f'"{column}": {scalars.pop(column) or "null"}' for column in JSON_COLUMNS]
    scalars["started_at"] = row[_STARTED_AT].isoformat()
    return to_json(scalars)[:-1] + ", " + ", ".join(payloads) + "}"


def rows_insert(rows: Sequence[_Row]) -> Statement:
    """Finished node executions, their JSON already encoded, in one statement."""
    table = NodeExecution._meta.db_table
    database = _database()
    names = _names(COLUMNS, database)
    if database.vendor == "postgresql":
        # One parameter however many rows: a JSON array read as rows of the table's own type.
        text = "[" + ",".join(_row_json(row) for row in rows) + "]"
        return Statement(
            f"INSERT INTO {table} ({names}) SELECT {names} "
            f"FROM json_populate_recordset(NULL::{table}, %s)",
            [text],
        )
    adapt = database.ops.adapt_datetimefield_value
    placeholders = ", ".join(["%s"] * len(COLUMNS))
    return Statement(
        f"INSERT INTO {table} ({names}) VALUES ({placeholders})",
        [(*row[:_STARTED_AT], adapt(row[_STARTED_AT]), *row[_STARTED_AT + 1 :]) for row in rows],
        many=True,
    )


def row_complete(run_id: int, index: int, values: dict[str, Any]) -> Statement:
    """An execution written at its start (an mcp node's, an approval node's) completed with
    `values` by column, the JSON columns' already encoded."""
    database = _database()
    quote = database.ops.quote_name
    cast = "::jsonb" if database.vendor == "postgresql" else ""
    sets = ", ".join(
        f"{quote(column)} = %s{cast if column in JSON_COLUMNS else ''}" for column in values
    )
    return Statement(
        f"UPDATE {NodeExecution._meta.db_table} SET {sets} "
        f"WHERE run_id = %s AND {quote('index')} = %s",
        [*values.values(), run_id, index],
    )


def write_together(statements: Sequence[Statement]) -> None:
    """Write `statements` all or none, in one round trip: on PostgreSQL as one statement
    (each but the last a data-modifying WITH query; the foreign keys between their rows are
    checked at its end, Django's being deferrable), on SQLite as one transaction."""
    if _postgresql():
        *first, last = statements
        sql = last.sql
        if first:
            queries = ", ".join(f"w{n} AS ({statement.sql})" for n, statement in enumerate(first))
            sql = f"WITH {queries} {last.sql}"
        with connection.cursor() as cursor:
            cursor.execute(sql, [param for statement in statements for param in statement.params])
        return
    with transaction.atomic(), connection.cursor() as cursor:
        for statement in statements:
            if statement.many:
                cursor.executemany(statement.sql, statement.params)
            else:
                cursor.execute(statement.sql, statement.params)


def history_write(run: Statement | None, rows: Sequence[_Row], then: Sequence[Statement]) -> None:
    """Write a run's row (`run`: its insert, when it is not written yet), finished `rows`
    and then the statements `then` (rows completed, the run's outcome), all or none, with
    one commit: in one round trip (`write_together`), unless there are more than
    ROWS_IN_STATEMENT rows on PostgreSQL: those go by COPY, in a transaction with the rest."""
    if _postgresql() and len(rows) > ROWS_IN_STATEMENT:
        others = [*([run] if run else []), *then]
        if not others:  # a long run's batch alone: its own commit
            copy_rows(NodeExecution, COLUMNS, JSON_COLUMNS, rows)
            return
        with transaction.atomic():
            write_together(others)
            copy_rows(NodeExecution, COLUMNS, JSON_COLUMNS, rows)
        return
    statements = [*([run] if run else []), *([rows_insert(rows)] if rows else []), *then]
    if statements:
        write_together(statements)


def copy_rows(
    model: type[models.Model],
    columns: Sequence[str],
    json_columns: Sequence[str],
    rows: Iterable[_Row],
) -> None:
    """Insert rows given in `columns` order, their `json_columns` already encoded as JSON."""
    if _postgresql():
        # COPY takes a few microseconds a row; the ORM's bulk insert ten times that.
        table = model._meta.db_table
        with (
            connection.cursor() as cursor,
            cursor.cursor.copy(f"COPY {table} ({_names(columns, _database())}) FROM STDIN") as copy,
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
    history_write(None, rows, ())


# ---------------------------------------------------------------------------- the observer


class HistoryRecorder(NullObserver):
    """Persists a run and its node executions through the engine's observer interface.

    `recorded` says whether the run's row is written already (a queued or resumed run's is;
    a direct run's goes with its first write). `secrets` are the run's secret values
    (`graphs.execution.payloads.run_secrets`): masked wherever a node's detail, output or
    error holds them."""

    def __init__(
        self,
        run: Run,
        progress: Progress | None = None,
        secrets: Sequence[str] = (),
        waiting_index: int | None = None,
        resumed: bool = False,
        recorded: bool = True,
    ) -> None:
        self.run = run
        self.progress = progress
        self.secrets = tuple(secrets)
        self.max_bytes: int = settings.GRAPHS_MAX_PAYLOAD_BYTES
        self.node_count = 0
        self.truncated = False
        self._recorded = recorded
        # What waits to be written: finished rows, and completions of rows written at start.
        self._rows: list[_Row] = []
        self._completions: list[Statement] = []
        self._waiting_bytes = 0
        # When the oldest of it began to wait (an unwritten run's row: from the run's start).
        self._waiting_since = time.monotonic()
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

    def _waiting(self) -> bool:
        return not self._recorded or bool(self._rows or self._completions)

    def _wait(self, size: int) -> None:
        """Something more waits to be written (`size` bytes of payloads)."""
        if not self._waiting():
            self._waiting_since = time.monotonic()
        self._waiting_bytes += size

    def flush(self) -> None:
        """Write what waits: the run's row if it is not written yet, the finished rows, the
        completed ones."""
        self._write(None)

    def finish(self, outcome: Sequence[str]) -> None:
        """Write what waits with the run's outcome, the fields `outcome` names (set on the
        run), in one round trip."""
        self._write(outcome)

    def _write(self, outcome: Sequence[str] | None) -> None:
        run = None if self._recorded else run_insert(self.run)
        rows = self._rows
        then = list(self._completions)
        if outcome is not None and self._recorded:
            then.append(run_update(self.run, outcome))
        if run or rows or then:
            reconnecting(lambda: history_write(run, rows, then))
        self._recorded = True
        self._rows, self._completions, self._waiting_bytes = [], [], 0

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
        # Written now, with whatever waits, so a call that never returns (a crash, a hang)
        # still shows in the history as the node that was running.
        detail, truncated = self._encode(record.detail)
        self._rows.append(self._row(record, NodeExecution.Status.RUNNING, detail, None, truncated))
        self.flush()
        self._open.add(record.index)

    def _finished(self, record: NodeRecord, status: str) -> None:
        detail, detail_cut = self._encode(record.detail)
        output, output_cut = self._encode(record.output)
        self.node_count += 1
        self._wait(len(detail) + len(output))
        if record.index in self._open:
            self._open.discard(record.index)
            completed = {
                "status": status,
                "detail": detail,
                "output": output,
                "error": stored_error(record.error or "", self.secrets),
                "attempts": record.attempts,
                "duration_ms": record.duration_ms,
                "truncated": detail_cut or output_cut,
            }
            self._completions.append(row_complete(self.run.pk, record.index, completed))
        else:
            self._rows.append(self._row(record, status, detail, output, detail_cut or output_cut))
        if (
            status == NodeExecution.Status.FAILED
            or len(self._rows) >= FLUSH_ROWS
            or self._waiting_bytes >= FLUSH_BYTES
            or time.monotonic() - self._waiting_since >= FLUSH_SECONDS
        ):
            self.flush()
        node_finished(record, status)
        if self.progress is not None:
            self.progress(self.node_count, f"{record.node_id} {status}")

    def node_waiting(self, record: NodeRecord) -> None:
        # Written at once, with whatever waits: the run stops here.
        detail, truncated = self._encode(record.detail)
        self._rows.append(self._row(record, NodeExecution.Status.WAITING, detail, None, truncated))
        self.flush()

    def node_finished(self, record: NodeRecord) -> None:
        self._finished(record, NodeExecution.Status.SUCCEEDED)

    def node_failed(self, record: NodeRecord) -> None:
        self._finished(record, NodeExecution.Status.FAILED)
