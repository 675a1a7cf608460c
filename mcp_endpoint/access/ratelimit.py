"""Per-key request limits, counted in Redis so they hold across instances, or without it in
this process's memory (as Django's cache is then: nothing is shared without Redis).

The counters in process memory are not Django's cache, so `cache.clear()` leaves them:
`rate_limits_forget()` starts every caller's count again (the tests do, before each test).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from django.conf import settings

from nodespecs.settings_reads import read_once

if TYPE_CHECKING:
    import redis

WINDOW_SECONDS = 60


class RateDecision(NamedTuple):
    """Whether a request may proceed, against its caller's `limit` per minute (a tuple: made
    on every request, and a frozen dataclass's fields cost a call each)."""

    allowed: bool
    limit: int
    remaining: int
    retry_after: int


def window_key(identity: str, window: int) -> str:
    """The cache key counting `identity`'s requests in the minute `window`. An identity may
    hold spaces or any character (an OAuth caller names its client): the key carries its
    digest."""
    digest = hashlib.blake2b(identity.encode(), digest_size=12).hexdigest()
    return f"mcp:rate:{digest}:{window}"


def rate_limit_hit(*, identity: str, limit: int, now: float | None = None) -> RateDecision:
    """Count one request for `identity` in the current minute and say whether it may proceed.

    A fixed one-minute window: simple, one cache round trip per request, and exact across
    instances sharing a cache. `limit` 0 means unlimited.
    """
    if limit <= 0:
        return RateDecision(True, 0, 0, 0)
    now = time.time() if now is None else now
    window = int(now // WINDOW_SECONDS)
    if _on_redis():
        count = _count_in_redis(window_key(identity, window))
    else:
        count = _count_in_process(identity, window)
    retry_after = max(1, int((window + 1) * WINDOW_SECONDS - now))
    return RateDecision(count <= limit, limit, max(0, limit - count), retry_after)


@read_once
def _on_redis() -> bool:
    return bool(settings.REDIS_URL)


@functools.cache
def _redis(url: str, timeout: float) -> redis.Redis:
    import redis  # only with REDIS_URL set: see errors.unavailable_errors

    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)


def _count_in_redis(key: str) -> int:
    """One more request under `key`, in one round trip: Django's `cache.incr` takes two
    (EXISTS, then INCRBY), and answering in the event loop waits for each."""
    pipeline = _redis(settings.REDIS_URL, settings.REDIS_SOCKET_TIMEOUT).pipeline(transaction=False)
    # The window's first request creates the counter, with its expiry; the others leave it.
    pipeline.set(key, 0, ex=WINDOW_SECONDS * 2, nx=True)
    pipeline.incr(key)
    return int(pipeline.execute()[1])


# Without Redis: each identity's counter for the current and the previous window (a request
# may arrive with the previous minute's clock), older ones dropped as a new window starts.
# `next()` on a counter is atomic, so the request threads and the event loop count without a
# lock; the lock only makes new counters.
_COUNTERS: dict[tuple[str, int], Iterator[int]] = {}
_COUNTERS_LOCK = threading.Lock()
_newest_window = 0


def _count_in_process(identity: str, window: int) -> int:
    """One more request for `identity` in `window`, counted in this process: a dict lookup
    and an increment (Django's local-memory cache cost 8 us: key checks, a lock, pickling)."""
    counter = _COUNTERS.get((identity, window))
    if counter is None:
        with _COUNTERS_LOCK:
            counter = _COUNTERS.get((identity, window))
            if counter is None:
                _start_window(window)
                counter = _COUNTERS[(identity, window)] = itertools.count(1)
    return next(counter)


def _start_window(window: int) -> None:
    """Drop the counters of windows before the previous one, once `window` is the newest."""
    global _newest_window
    if window > _newest_window:
        _newest_window = window
        for held in [held for held in _COUNTERS if held[1] < window - 1]:
            del _COUNTERS[held]


def rate_limits_forget() -> None:
    """Start every caller's count in this process again (without Redis; with it, the counts
    are Redis keys, `mcp:rate:*`, which expire after two minutes)."""
    global _newest_window
    with _COUNTERS_LOCK:
        _COUNTERS.clear()
        _newest_window = 0
