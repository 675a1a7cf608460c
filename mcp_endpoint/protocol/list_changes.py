"""Telling clients that a list they see changed: `notifications/tools/list_changed` (and, in
the 2026-07-28 era, `notifications/resources/list_changed`).

A client hears of changes on a stream it keeps open: a 2026-07-28 `subscriptions/listen`, a
2025 session's `GET` stream, the legacy HTTP+SSE stream, or a stdio connection. Each such
stream follows a `ListWatcher`, which compares what the client sees (the tool list of its
endpoint: every workflow at `/mcp`, one group's at `/mcp/<slug>`) every LISTEN_POLL_SECONDS.

The tool lists' fingerprints come from the workflow snapshot (graphs/execution/toolset.py): one
thread hop per process and endpoint every LISTEN_POLL_SECONDS, however many streams follow
them, so a thousand open streams cost a thousand comparisons, not a thousand queries. Each
caller may keep MCP_STREAMS_PER_CALLER such streams open at once in a process (legacy SSE
streams included), so that one caller cannot hold every connection: a `StreamLease` is taken
when a stream is granted.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Hashable
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.core.cache import cache

from graphs.execution import toolset
from graphs.execution.follow import Threads
from nodespecs.knowledge.registry import GENERATION_KEY as CATALOG_GENERATION_KEY

logger = logging.getLogger(__name__)
LISTEN_POLL_SECONDS = 2.0
TOOLS = "notifications/tools/list_changed"
RESOURCES = "notifications/resources/list_changed"


@dataclass(frozen=True)
class Watch:
    """What a stream reports: changes to the tool list of `group` (a group's slug, or None
    for `/mcp`), and to the catalog's resources when `resources`."""

    group: str | None
    tools: bool = True
    resources: bool = False


# What each watched list looked like when it was last read, and when (see the module's doc),
# and the reads under way, which streams polling meanwhile wait for instead of reading again.
_reads: dict[Hashable, tuple[float, Any]] = {}
_reading: dict[Hashable, asyncio.Future[Any]] = {}


async def _read(key: Hashable, read: Callable[[], Any], threads: Threads, *, fresh: bool) -> Any:
    """`read()` on a thread, reused by every stream for LISTEN_POLL_SECONDS unless `fresh`;
    a read under way on this event loop is waited for, fresh or not, rather than repeated."""
    last = _reads.get(key)
    if not fresh and last is not None and time.monotonic() - last[0] < LISTEN_POLL_SECONDS:
        return last[1]
    under_way = _reading.get(key)
    if under_way is not None and under_way.get_loop() is asyncio.get_running_loop():
        # Shielded: a stream that goes away must not cancel the others' read.
        return await asyncio.shield(under_way)
    reading = asyncio.ensure_future(threads.short(read))
    _reading[key] = reading
    try:
        value = await asyncio.shield(reading)
    finally:
        if _reading.get(key) is reading:
            del _reading[key]
    _reads[key] = (time.monotonic(), value)
    return value


class ListWatcher:
    """Follows what a `Watch` covers: `poll()` says which of its lists changed since the
    last poll (or since `start()`)."""

    def __init__(self, watch: Watch, threads: Threads) -> None:
        self.watch = watch
        self.threads = threads
        self.seen: dict[str, Any] = {}

    async def _now(self, *, fresh: bool = False) -> dict[str, Any]:
        now: dict[str, Any] = {}
        if self.watch.tools:
            group = self.watch.group
            read = partial(toolset.tool_list_fingerprint, group)
            now[TOOLS] = await _read(("tools", group), read, self.threads, fresh=fresh)
        if self.watch.resources:
            read = partial(cache.get, CATALOG_GENERATION_KEY)
            now[RESOURCES] = await _read("resources", read, self.threads, fresh=fresh)
        return now

    async def start(self) -> None:
        """Take what the lists look like now: changes are counted from here (read afresh, so
        that a change made just before is not reported as made after)."""
        self.seen = await self._now(fresh=True)

    async def poll(self) -> list[str]:
        """The notification methods of the lists that changed since the last look."""
        now = await self._now()
        changed = [method for method, value in now.items() if value != self.seen.get(method)]
        self.seen = now
        return changed

    async def changes(self) -> AsyncIterator[str]:
        """The notification method of every change, polling every LISTEN_POLL_SECONDS for as
        long as it is read (for streams with nothing else to send between: the legacy SSE
        stream, stdio). A failed look (the database or cache down a moment) is logged and the
        next one tried: it must not end the notifications of a connection that stays open."""
        try:
            await self.start()
        except Exception:
            logger.warning("Reading the lists to watch failed; trying again", exc_info=True)
        while True:
            await asyncio.sleep(LISTEN_POLL_SECONDS)
            try:
                changed = await self.poll()
            except Exception:
                logger.warning("Polling the watched lists failed; trying again", exc_info=True)
                continue
            for method in changed:
                yield method


# How long a stream's hold on its caller's quota lasts unless renewed: a running stream renews
# it at every poll; one granted but never started (the client left before its first byte)
# gives its place back after this.
STREAM_LEASE_SECONDS = 60.0
# The leases held in this process, by caller identity, with when each runs out.
_leases: dict[str, dict[StreamLease, float]] = {}
_leases_lock = threading.Lock()


class StreamLease:
    """A caller's hold on one of its MCP_STREAMS_PER_CALLER notification streams: taken when
    the stream is granted, before it is sent (so that requests arriving together cannot all
    pass the check), renewed while it runs, released when it ends."""

    def __init__(self, identity: str) -> None:
        self.identity = identity

    def renew(self) -> None:
        """Keep the place for another STREAM_LEASE_SECONDS."""
        with _leases_lock:
            held = _leases.get(self.identity)
            if held is not None and self in held:
                held[self] = time.monotonic() + STREAM_LEASE_SECONDS

    def release(self) -> None:
        """Give the place back (once the stream has ended); releasing twice is harmless."""
        with _leases_lock:
            held = _leases.get(self.identity)
            if held is not None:
                held.pop(self, None)
                if not held:
                    del _leases[self.identity]


def lease_stream(identity: str) -> StreamLease | str:
    """A lease on another notification stream for `identity`, or why it may not open one."""
    limit = settings.MCP_STREAMS_PER_CALLER
    now = time.monotonic()
    with _leases_lock:
        held = _leases.setdefault(identity, {})
        for lease in [lease for lease, ends in held.items() if ends <= now]:
            del held[lease]
        if len(held) >= limit:
            if not held:
                del _leases[identity]
            return (
                f"Too many open notification streams: this caller holds {limit} already "
                "(MCP_STREAMS_PER_CALLER). Close one (one per session or endpoint is enough) "
                "and try again."
            )
        lease = StreamLease(identity)
        held[lease] = now + STREAM_LEASE_SECONDS
        return lease
