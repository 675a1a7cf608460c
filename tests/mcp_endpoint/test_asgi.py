"""The lean ASGI app's choice between the event loop and its worker threads."""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import pytest
from django.conf import settings
from django.db import connections

from mcp_endpoint.access import keys
from mcp_endpoint.transports import admission, asgi, streamable_http
from nodespecs import snapshots
from nodespecs.knowledge import registry
from tests.mcp_endpoint.helpers import CAPABILITIES_KEY, MODERN, VERSION_KEY, make_key


def tools_list_arguments(key: str) -> dict:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/list",
            "params": {"_meta": {VERSION_KEY: MODERN, CAPABILITIES_KEY: {}}},
        }
    ).encode()
    headers = {
        "host": "localhost",
        "content-type": "application/json",
        "accept": "application/json",
        "authorization": f"Bearer {key}",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/list",
    }
    return {
        "method": "POST",
        "headers": headers,
        "raw_headers": list(headers.items()),
        "body": body,
        "client_address": "127.0.0.1",
        "scheme": "http",
        "path": "/mcp",
    }


async def answer_in_app(arguments: dict) -> Any:
    """The ASGI app's answer to a request (`tools_list_arguments`' form): in the event loop
    when it can be made there, else on a worker thread."""
    return await asgi._run(
        arguments,
        headers=arguments["headers"],
        body=arguments["body"],
        answer=streamable_http.handle,
    )


def answer_on_a_thread(arguments: dict) -> Any:
    """The ASGI app's answer to a request made on a worker thread: admitted, then answered."""
    return asgi._work(partial(asgi._admitted_answer, arguments, streamable_http.handle))


def test_a_request_on_a_worker_thread_brings_the_registry_up_to_date(key, monkeypatch):
    """tools/list never reads the registry; once one such request has run on a thread because
    the registry's check was due, the next ones may run in the event loop again."""
    registry.current_registry()
    # Due for needs_database(), not yet for current_registry(): the thread must check anyway.
    due = snapshots.TABLE_CHECK_SECONDS - snapshots.CHECK_MARGIN_SECONDS / 2
    monkeypatch.setattr(registry._snapshot, "_checked_at", time.monotonic() - due)
    assert registry.needs_database()
    assert answer_on_a_thread(tools_list_arguments(key)).status == 200
    assert not registry.needs_database()


def test_the_host_check_follows_allowed_hosts(key, settings):
    """The ASGI path checks Host itself (Django does not see the request)."""
    arguments = tools_list_arguments(key)
    arguments["headers"]["host"] = "evil.example"
    assert answer_on_a_thread(arguments).status == 400
    settings.ALLOWED_HOSTS = ["evil.example"]
    assert answer_on_a_thread(arguments).status == 200
    settings.ALLOWED_HOSTS = ["localhost"]
    assert answer_on_a_thread(arguments).status == 400


@pytest.mark.django_db(transaction=True)
def test_a_key_forgotten_between_the_check_and_the_answer_is_answered_on_a_thread(monkeypatch):
    """Under load the event loop can stall past a remembered key's expiry after the choice
    to answer in the loop was made; the answer must still come (it once was a 500)."""
    key = make_key()
    arguments = tools_list_arguments(key)
    assert answer_on_a_thread(arguments).status == 200  # key remembered, snapshots fresh
    checked = admission.answers_without_database

    def check_then_forget(method, headers, body):
        in_loop = checked(method, headers, body)
        keys._remembered.clear()
        return in_loop

    monkeypatch.setattr(admission, "answers_without_database", check_then_forget)
    # A pool of its own, so that its thread's database connection is closed afterwards.
    pool = ThreadPoolExecutor(max_workers=1)
    monkeypatch.setattr(asgi, "_POOL", pool)
    try:
        outbound = asyncio.run(answer_in_app(arguments))
    finally:
        pool.submit(connections.close_all).result()
        pool.shutdown()
    assert outbound.status == 200, outbound.body
    assert b'"tools"' in outbound.body


@pytest.mark.skipif(not settings.REDIS_URL, reason="needs REDIS_URL (the cache on Redis)")
def test_requests_answered_in_the_loop_share_their_redis_connections(key):
    """Each request is its own asyncio task; Django keeps cache connections per context, so
    answering in the request's own context opened a Redis connection per request."""
    import redis

    arguments = tools_list_arguments(key)
    assert answer_on_a_thread(arguments).status == 200  # key remembered, snapshots fresh
    server = redis.Redis.from_url(settings.REDIS_URL)

    def connections() -> int:
        return server.info("stats")["total_connections_received"]

    async def twenty_requests() -> list[int]:
        async def one() -> int:
            outbound = await answer_in_app(arguments)
            return outbound.status

        return [await asyncio.ensure_future(one()) for _ in range(20)]

    def serve() -> list[int]:
        # As under uvicorn: the server's context has never touched the cache.
        return contextvars.Context().run(asyncio.run, twenty_requests())

    serve()  # the loop context's connection is made here
    before = connections()
    assert serve() == [200] * 20
    # Other clients of the server may connect meanwhile; twenty would be one per request.
    assert connections() - before < 5
