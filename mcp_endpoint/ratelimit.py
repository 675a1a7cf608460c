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

    A fixed one-minute window: simple, one cache operation per request, and exact across instances
    sharing a cache. `limit` 0 means unlimited.
    """
    if limit <= 0:
        return RateDecision(True, 0, 0, 0)
    now = time.time() if now is None else now
    window = int(now // WINDOW_SECONDS)
    key = f"mcp:rate:{identity}:{window}"
    # One cache operation for all but a window's first request. incr() is atomic in Redis and
    # in local memory; add() creates the counter only if no other request did meanwhile.
    try:
        count = cache.incr(key)
    except ValueError:  # the window's first request (or the counter was evicted)
        count = 1 if cache.add(key, 1, timeout=WINDOW_SECONDS * 2) else cache.incr(key)
    retry_after = max(1, int((window + 1) * WINDOW_SECONDS - now))
    return RateDecision(count <= limit, limit, max(0, limit - count), retry_after)
