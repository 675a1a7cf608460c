"""Per-process snapshots of a table that hot paths read without a query.

A snapshot (the catalog's registry, the workflows served as tools) is built once and reused
until the table changes. A change bumps a generation token in Django's cache (with Redis,
every instance sees it, within GENERATION_READ_SECONDS below), and the table's stamp, e.g.
(count, last change), is compared at most once a second, so a change made by another process
without a shared cache (a management command beside `runserver`) is still seen within a
second.

A process reads each generation from the cache at most once every GENERATION_READ_SECONDS:
with Redis every read is a round trip (about 150 µs even on the same host), and one MCP
request looked at the snapshots up to a dozen times. A change made in this process is seen
by it at once; other instances see it within that time.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Generic, TypeVar

from django.core.cache import cache
from django.db import transaction

T = TypeVar("T")

TABLE_CHECK_SECONDS = 1.0
# `needs_database()` says a check is due this long before `get()` makes it, so a request let
# into an event loop (where a query raises SynchronousOnlyOperation) cannot reach the check
# while it runs; threads that may query make it that early (`refresh()`).
CHECK_MARGIN_SECONDS = 0.25
GENERATION_READ_SECONDS = 0.1

# The generation last read of each snapshot's key, and when (time.monotonic()).
_generations: dict[str, tuple[str, float]] = {}


def forget_generations() -> None:
    """Read every generation from the cache again at the next look: after the cache was
    cleared (the tests do it between tests), a remembered generation would keep a snapshot
    that was built from other data."""
    _generations.clear()


class StampedSnapshot(Generic[T]):
    """The latest `build()` of a table, rebuilt when its generation or stamp changes."""

    def __init__(self, key: str, stamp: Callable[[], str], build: Callable[[], T]):
        self.key = key
        self._stamp = stamp
        self._build = build
        self._lock = threading.Lock()
        # (generation, stamp, value) of the snapshot in use.
        self._current: tuple[str, str, T] | None = None
        self._checked_at = 0.0

    def changed(self) -> None:
        """Announce a change to every process, once the current transaction commits."""
        transaction.on_commit(self._announce)

    def _announce(self) -> None:
        generation = uuid.uuid4().hex
        cache.set(self.key, generation, timeout=None)
        _generations[self.key] = (generation, time.monotonic())

    def _generation(self) -> str:
        now = time.monotonic()
        remembered = _generations.get(self.key)
        if remembered is not None and now - remembered[1] < GENERATION_READ_SECONDS:
            return remembered[0]
        generation = cache.get(self.key)
        if generation is None:
            # A cold or flushed cache: start a new generation so no stale snapshot is trusted.
            cache.add(self.key, uuid.uuid4().hex, timeout=None)
            generation = cache.get(self.key)
        latest = _generations.get(self.key)
        if latest is None or latest[1] <= now:  # not over one announced since this read began
            _generations[self.key] = (generation, now)
        return generation

    def needs_database(self) -> bool:
        """Whether the next `get()` may query the database (callers in an event loop then
        call it from a thread)."""
        current = self._current
        return (
            current is None
            or current[0] != self._generation()
            or time.monotonic() - self._checked_at >= TABLE_CHECK_SECONDS - CHECK_MARGIN_SECONDS
        )

    def get(self) -> T:
        """The snapshot of the table as it is now, rebuilt only when it changed."""
        return self._get(check_after=TABLE_CHECK_SECONDS)

    def refresh(self) -> T:
        """`get()`, making the table check as soon as `needs_database()` asks for it: for a
        thread that may query, so that the requests after it need not."""
        return self._get(check_after=TABLE_CHECK_SECONDS - CHECK_MARGIN_SECONDS)

    def _get(self, *, check_after: float) -> T:
        generation = self._generation()
        current = self._current
        if current is not None and current[0] == generation:
            now = time.monotonic()
            if now - self._checked_at < check_after:
                return current[2]
            self._checked_at = now
            if current[1] == self._stamp():
                return current[2]
        with self._lock:
            latest = self._current
            if latest is not None and latest is not current and latest[0] == generation:
                return latest[2]
            stamp = self._stamp()
            self._current = (generation, stamp, self._build())
            self._checked_at = time.monotonic()
            return self._current[2]

    def token(self) -> str:
        """Names the snapshot `get()` returns now: it changes whenever the snapshot does."""
        self.get()
        current = self._current
        assert current is not None
        return f"{current[0]}:{current[1]}"
