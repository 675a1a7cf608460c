"""A database or cache that does not answer is a 503 with Retry-After, which a client may
retry, not a 500 (mcp_endpoint/jsonrpc/errors.py: unavailable_errors)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import OperationalError
from django.test import override_settings

from tests.mcp_endpoint.helpers import make_key, modern, rpc_error
from tests.mcp_endpoint.test_asgi import answer_in_app, answer_on_a_thread, tools_list_arguments


def unanswered_redis_url() -> str:
    """A Redis URL on a port nobody listens on: every command fails to connect."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


@contextmanager
def hanging_redis_url() -> Iterator[str]:
    """A Redis URL whose server accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"


def assert_unavailable(status: int, retry_after: str | None, message: str) -> None:
    assert status == 503
    assert retry_after == "5"
    assert message.startswith("Service Unavailable: this server's database or cache did not")


def assert_mcp_unavailable(response) -> None:
    """A Django test response to /mcp: the 503 with its JSON-RPC error."""
    message = rpc_error(response)["message"]
    assert_unavailable(response.status_code, response.headers.get("Retry-After"), message)


def test_a_cache_down_is_a_503_over_mcp(client, key, settings, caplog):
    settings.REDIS_URL = unanswered_redis_url()  # the rate limit counts there
    with caplog.at_level(logging.ERROR, logger="mcp_endpoint.jsonrpc.errors"):
        response = modern(client, "tools/list", key=key)
    assert_mcp_unavailable(response)
    assert "Retry in 5 seconds" in rpc_error(response)["message"]
    assert any("ConnectionError" in record.getMessage() for record in caplog.records)


def test_a_database_down_is_a_503_over_mcp(client, transactional_db, monkeypatch):
    def refused(*args, **kwargs):
        raise OperationalError("connection to server at 127.0.0.1, port 5432 failed")

    monkeypatch.setattr("mcp_endpoint.access.auth.api_key_authenticate", refused)
    response = modern(client, "tools/list", key=make_key())
    assert_mcp_unavailable(response)


def test_a_request_answered_in_the_event_loop_is_a_503_too(key, settings):
    """The ASGI app answers a remembered key's cheap request in the event loop, where the
    rate limit is counted: its failure must not escape as a 500 either."""
    arguments = tools_list_arguments(key)
    assert answer_on_a_thread(arguments).status == 200  # key remembered
    settings.REDIS_URL = unanswered_redis_url()
    outbound = asyncio.run(answer_in_app(arguments))
    message = json.loads(outbound.body)["error"]["message"]
    assert_unavailable(outbound.status, outbound.headers.get("Retry-After"), message)


def test_a_cache_down_is_a_503_over_rest(client, key, settings):
    settings.REDIS_URL = unanswered_redis_url()
    response = client.get("/api/v1/mcp/tools", headers={"Authorization": f"Bearer {key}"})
    assert_unavailable(
        response.status_code, response.headers.get("Retry-After"), response.json()["error"]
    )


def test_a_redis_that_hangs_is_given_up_after_its_socket_timeout(client, key, settings):
    """A command that never returns would hold the request (and, answered in the event
    loop, every other request) for as long as it hangs: REDIS_SOCKET_TIMEOUT bounds it."""
    settings.REDIS_SOCKET_TIMEOUT = 0.3
    with hanging_redis_url() as url:
        settings.REDIS_URL = url
        began = time.monotonic()
        response = modern(client, "tools/list", key=key)
        took = time.monotonic() - began
    assert_mcp_unavailable(response)
    assert took < 2, f"answered after {took:.1f} s"


def test_health_is_503_naming_the_cache_when_it_does_not_answer(client, transactional_db):
    """A load balancer stops sending requests that would each be answered 503; the detailed
    health names what failed."""
    key = make_key(rate_limit_per_minute=0)  # unlimited: its rate is counted nowhere
    unanswered = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": unanswered_redis_url(),
        }
    }
    # Not the `settings` fixture: the cache must be back before the tests' own cache.clear().
    with override_settings(CACHES=unanswered):
        public = client.get("/api/v1/public/health")
        detailed = client.get("/api/v1/mcp/health", headers={"Authorization": f"Bearer {key}"})
    assert (public.status_code, public.json()) == (503, {"status": "unavailable"})
    assert detailed.status_code == 200, detailed.content
    assert detailed.json()["healthy"] is False
    assert detailed.json()["error"] == "cache unavailable: ConnectionError"
