"""Telling clients that a list they see changed: `notifications/tools/list_changed` (and, in
the 2026-07-28 era, `notifications/resources/list_changed`).

A client hears of changes on a stream it keeps open: a 2026-07-28 `subscriptions/listen`, a
2025 session's `GET` stream, the legacy HTTP+SSE stream, or a stdio connection. Each such
stream follows a `ListWatcher`, which compares what the client sees (the tool list of its
endpoint: every workflow at `/mcp`, one group's at `/mcp/<slug>`) every LISTEN_POLL_SECONDS.

The tool lists' fingerprints come from the workflow snapshot (graphs/toolset.py): one
thread hop per process and endpoint every LISTEN_POLL_SECONDS, however many streams follow
them, so a thousand open streams cost a thousand comparisons, not a thousand queries. Each
caller may keep MCP_STREAMS_PER_CALLER such streams open at once in a process, so that one
caller cannot hold every connection.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.core.cache import cache

from graphs import toolset
from graphs.follow import Threads
from nodespecs.registry import GENERATION_KEY as CATALOG_GENERATION_KEY

LISTEN_POLL_SECONDS = 2.0
TOOLS = "notifications/tools/list_changed"
RESOURCES = "notifications/resources/list_changed"


@dataclass(frozen=True)
class Watch:
    """What a stream reports: changes to the tool list of `server` (a group's slug, or None
    for `/mcp`), and to the catalog's resources when `resources`."""

    server: str | None
    tools: bool = True
    resources: bool = False


# What each watched list looked like when it was last read, and when (see the module's doc).
_reads: dict[Hashable, tuple[float, Any]] = {}


async def _read(key: Hashable, read: Callable[[], Any], threads: Threads, *, fresh: bool) -> Any:
    """`read()` on a thread, reused by every stream for LISTEN_POLL_SECONDS unless `fresh`."""
    last = _reads.get(key)
    if not fresh and last is not None and time.monotonic() - last[0] < LISTEN_POLL_SECONDS:
        return last[1]
    value = await threads.short(read)
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
            server = self.watch.server
            read = partial(toolset.tool_list_fingerprint, server)
            now[TOOLS] = await _read(("tools", server), read, self.threads, fresh=fresh)
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

    async def follow(self, send: Callable[[str], Awaitable[Any]]) -> None:
        """`send(method)` for every change, polling every LISTEN_POLL_SECONDS until cancelled
        (for streams with nothing else to send between: the legacy SSE stream, stdio)."""
        await self.start()
        while True:
            await asyncio.sleep(LISTEN_POLL_SECONDS)
            for method in await self.poll():
                await send(method)


# Notification streams open in this process, by caller identity.
_open_streams: Counter[str] = Counter()


def stream_refusal(identity: str) -> str | None:
    """Why `identity` may not open another notification stream now, or None when it may."""
    limit = settings.MCP_STREAMS_PER_CALLER
    if _open_streams[identity] < limit:
        return None
    return (
        f"Too many open notification streams: this caller holds {limit} already "
        "(MCP_STREAMS_PER_CALLER). Close one (one per session or endpoint is enough) and "
        "try again."
    )


@contextmanager
def holding_stream(identity: str) -> Iterator[None]:
    """Count a notification stream of `identity` while it is open."""
    _open_streams[identity] += 1
    try:
        yield
    finally:
        _open_streams[identity] -= 1
        if _open_streams[identity] <= 0:
            del _open_streams[identity]
