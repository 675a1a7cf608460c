"""SQLite for the embedded default, with this process's writers taking turns in order.

SQLite lets one connection write at a time; the others wait in its busy handler, which
sleeps and retries (after a few tries, every 100 ms). A writer that comes back often (a run
at its node ceiling writes a batch of history every 0.2 s) wins nearly every race, and a
short run's one write waited seconds for a window (bench/hostile.py: p99 2.8 s for a
three-step workflow). Here every write transaction of this process first takes its turn in
a first-come, first-served queue, so a waiting writer is next as soon as the current one
commits. Other processes (a management command) still meet the busy handler, as before.

Used as `ENGINE: config.sqlite` (config/settings.py). A writer that cannot get its turn in
`WRITER_WAIT_SECONDS` goes on without it, which is SQLite's own behaviour: a bug that kept
the turn could slow writes, never stop them.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from django.db.backends.sqlite3 import base

WRITER_WAIT_SECONDS = 5.0
# Statements that do not write on their own (BEGIN takes its turn where it is sent).
_READS = ("SELECT", "PRAGMA", "EXPLAIN", "WITH", "BEGIN")


class _Turns:
    """A lock granted in the order it was asked for."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held = False
        self._waiting: deque[threading.Event] = deque()

    def acquire(self, timeout: float) -> bool:
        with self._mutex:
            if not self._held:
                self._held = True
                return True
            turn = threading.Event()
            self._waiting.append(turn)
        if turn.wait(timeout):
            return True
        with self._mutex:
            if turn.is_set():  # handed over between the timeout and here
                return True
            self._waiting.remove(turn)
            return False

    def release(self) -> None:
        with self._mutex:
            if self._waiting:
                self._waiting.popleft().set()  # handed over: stays held
            else:
                self._held = False


_WRITERS = _Turns()
# The SQLite connections (by id) that hold the turn. Kept per connection, not per thread:
# a test's live server thread shares its connection with the test's thread.
_holding: set[int] = set()


def _take_turn(connection: Any) -> None:
    if id(connection) not in _holding and _WRITERS.acquire(WRITER_WAIT_SECONDS):
        _holding.add(id(connection))


def _give_turn(connection: Any) -> None:
    if id(connection) in _holding:
        _holding.discard(id(connection))
        _WRITERS.release()


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's SQLite backend; each write transaction waits for its turn first.

    The hooks overridden here are private to Django's backends and absent from django-stubs,
    hence the `type: ignore[misc]` ("undefined in superclass") on each call of them.
    """

    def _start_transaction_under_autocommit(self) -> None:
        _take_turn(self.connection)
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]  # not in the stubs
        except BaseException:
            _give_turn(self.connection)
            raise

    def _commit(self) -> None:
        try:
            super()._commit()  # type: ignore[misc]  # not in the stubs
        finally:
            _give_turn(self.connection)

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]  # not in the stubs
        finally:
            _give_turn(self.connection)

    def _close(self) -> None:
        connection = self.connection
        try:
            super()._close()  # type: ignore[misc]  # not in the stubs
        finally:
            _give_turn(connection)

    def create_cursor(self, name: str | None = None) -> Any:
        return self.connection.cursor(factory=_Cursor)


class _Cursor(base.SQLiteCursorWrapper):
    """A write outside a transaction is a transaction of its own: it takes a turn too."""

    def execute(self, query: str, params: Any = None) -> Any:
        return self._in_turn(super().execute, query, params)

    def executemany(self, query: str, param_list: Any) -> Any:
        return self._in_turn(super().executemany, query, param_list)

    def _in_turn(self, statement: Any, query: str, params: Any) -> Any:
        if not self._writes_alone(query):
            return statement(query, params)
        _take_turn(self.connection)
        try:
            return statement(query, params)
        finally:
            _give_turn(self.connection)

    def _writes_alone(self, query: str) -> bool:
        if self.connection.in_transaction or id(self.connection) in _holding:
            return False
        return not query.lstrip()[:7].upper().startswith(_READS)
