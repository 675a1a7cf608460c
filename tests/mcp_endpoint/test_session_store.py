"""Sessions in a store of their own, a few per key (issue 25, item 11): on the embedded default
a key with only health:check sent 400 `initialize` requests and another caller's five live
sessions answered 404 after, culled from the one local-memory cache of 300 entries that they
shared with rate windows, task records and kept results."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from tests.mcp_endpoint.helpers import (
    auth_headers,
    initialize,
    legacy,
    legacy_session,
    make_key,
    rpc_error,
)

pytestmark = [pytest.mark.timeout(120), pytest.mark.django_db(transaction=True)]


def answers(client, key: str, session_id: str) -> bool:
    """Whether a session still answers a ping (a 404 when it ended or was culled)."""
    response = legacy(client, session_id, "ping", key=key)
    return response.status_code == 200


def test_another_keys_flood_of_sessions_leaves_live_sessions_answering(client, settings):
    settings.MCP_RATE_LIMIT_PER_MINUTE = 0  # unlimited: the flood is of sessions, not requests
    victim = make_key(["tools:read"])
    flooder = make_key(["health:check"])
    mine = [legacy_session(client, victim) for _ in range(5)]

    for _ in range(400):
        assert initialize(client, flooder).status_code == 200
    for index in range(400):  # and whatever else fills the default cache
        cache.set(f"other:{index}", index)

    assert [answers(client, victim, session_id) for session_id in mine] == [True] * 5


def test_a_key_past_its_cap_ends_its_own_oldest_live_session(client, settings):
    settings.MCP_SESSIONS_PER_CALLER = 3
    key, other = make_key(["tools:read"]), make_key(["tools:read"])
    others = [legacy_session(client, other) for _ in range(3)]
    for _ in range(3):  # sessions ended by their client do not count
        gone = legacy_session(client, key)
        ending = client.delete("/mcp", headers={"Mcp-Session-Id": gone, **auth_headers(key)})
        assert ending.status_code == 200
    opened = [legacy_session(client, key) for _ in range(4)]

    assert [answers(client, key, session_id) for session_id in opened] == [
        False,
        True,
        True,
        True,
    ]
    assert [answers(client, other, session_id) for session_id in others] == [True] * 3
    ended = legacy(client, opened[0], "ping", key=key)
    assert ended.status_code == 404
    assert "more than 3 sessions since (MCP_SESSIONS_PER_CALLER" in rpc_error(ended)["message"]
