"""Carrying event-stream chunks to the instance that holds a legacy SSE stream.

A client of the HTTP+SSE transport keeps `GET /sse` open on one instance and POSTs its
messages to `/messages`, which a load balancer may send to any instance. The instance that
answers a POST publishes the answer's events on the stream's channel; the instance holding
the stream is subscribed to it and writes them out.

With REDIS_URL set the channels are Redis pub/sub channels, so any number of instances
cooperate. Without it, channels are in-process queues: a single instance (one process) only.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import redis.asyncio as redis
from django.conf import settings

_PREFIX = "switchyard:sse:"
# One Redis client per event loop (a client's connections belong to the loop that made them).
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, redis.Redis] = (
    weakref.WeakKeyDictionary()
)
# Without Redis: the queue of each stream this process holds.
_local: dict[str, asyncio.Queue[bytes]] = {}

Inbox = Callable[[float], Awaitable[bytes | None]]


def _client() -> redis.Redis:
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        client = _clients[loop] = redis.Redis.from_url(settings.REDIS_URL)
    return client


@asynccontextmanager
async def subscribe(channel_id: str) -> AsyncIterator[Inbox]:
    """Listen on a stream's channel; the inbox returns the next chunk, or None when `timeout`
    seconds pass without one. Subscribed before the block runs, so nothing published after
    that is missed."""
    if not settings.REDIS_URL:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        _local[channel_id] = queue

        async def local_next(timeout: float) -> bytes | None:
            try:
                return await asyncio.wait_for(queue.get(), timeout)
            except TimeoutError:
                return None

        try:
            yield local_next
        finally:
            _local.pop(channel_id, None)
        return
    pubsub = _client().pubsub(ignore_subscribe_messages=True)
    await pubsub.subscribe(_PREFIX + channel_id)

    async def redis_next(timeout: float) -> bytes | None:
        message = await pubsub.get_message(timeout=timeout)
        return None if message is None else message["data"]

    try:
        yield redis_next
    finally:
        await pubsub.aclose()


async def publish(channel_id: str, chunk: bytes) -> bool:
    """Send a chunk to the stream's holder; False when no instance holds the stream."""
    if not settings.REDIS_URL:
        queue = _local.get(channel_id)
        if queue is None:
            return False
        queue.put_nowait(chunk)
        return True
    return bool(await _client().publish(_PREFIX + channel_id, chunk))
