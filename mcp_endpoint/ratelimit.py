"""Per-key request limits, counted in Django's cache so they hold across instances (Redis)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.core.cache import cache

WINDOW_SECONDS = 60


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    limit: int
    remaining: int
    retry_after: int


def rate_limit_hit(*, identity: str, limit: int, now: float | None = None) -> RateDecision:
    """Count one request for `identity` in the current minute and say whether it may proceed.

    A fixed one-minute window: simple, one cache round trip, and exact across instances
    sharing a cache. `limit` 0 means unlimited.
    """
    if limit <= 0:
        return RateDecision(True, 0, 0, 0)
    now = time.time() if now is None else now
    window = int(now // WINDOW_SECONDS)
    key = f"mcp:rate:{identity}:{window}"
    # add() is a no-op when the counter exists; incr() is atomic in Redis and in local memory.
    cache.add(key, 0, timeout=WINDOW_SECONDS * 2)
    try:
        count = cache.incr(key)
    except ValueError:  # evicted between add() and incr()
        cache.set(key, 1, timeout=WINDOW_SECONDS * 2)
        count = 1
    retry_after = max(1, int((window + 1) * WINDOW_SECONDS - now))
    return RateDecision(count <= limit, limit, max(0, limit - count), retry_after)
