"""Per-key request limits, counted in Redis (or, without it, in Django's cache in process
memory) so they hold across instances."""

from __future__ import annotations

import functools
import hashlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.cache import cache

if TYPE_CHECKING:
    import redis

WINDOW_SECONDS = 60


@dataclass(frozen=True)
class RateDecision:
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
    key = window_key(identity, window)
    count = _count_in_redis(key) if settings.REDIS_URL else _count_in_cache(key)
    retry_after = max(1, int((window + 1) * WINDOW_SECONDS - now))
    return RateDecision(count <= limit, limit, max(0, limit - count), retry_after)


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


def _count_in_cache(key: str) -> int:
    # incr() is atomic in local memory; add() creates the counter only if no other request
    # did meanwhile.
    try:
        return cache.incr(key)
    except ValueError:  # the window's first request (or the counter was evicted)
        return 1 if cache.add(key, 1, timeout=WINDOW_SECONDS * 2) else cache.incr(key)
