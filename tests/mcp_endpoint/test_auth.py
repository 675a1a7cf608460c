"""Who may call /mcp: API keys, scopes, anonymous access, session ownership, rate limits, and
the management commands that make keys."""

from __future__ import annotations

import io
import os
import re
import types
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from unittest.mock import patch

import pytest
import redis
from django.core.management import CommandError, call_command
from django.utils import timezone

from mcp_endpoint.access import ratelimit
from mcp_endpoint.access.keys import api_key_authenticate, api_key_create, api_key_revoke
from mcp_endpoint.features.tools import TOOLS
from mcp_endpoint.models import ApiKey, Scope
from tests.mcp_endpoint.helpers import (
    initialize,
    legacy,
    legacy_session,
    make_key,
    modern,
    result,
    rpc_error,
)

pytestmark = pytest.mark.django_db(transaction=True)

TOOL_CALL = {"name": "get_node_types", "arguments": {}}
READ = {"uri": "nodespec://ACTION/HTTP_REQUEST"}
# The tools a key with tools:read alone may call, and so lists.
READ_TOOLS = [name for name, tool in TOOLS.items() if tool.scope == Scope.TOOLS_READ]


def modern_tools_list(client, key):
    return modern(client, "tools/list", key=key)


def legacy_initialize(client, key):
    return initialize(client, key)


BOTH_ERAS = pytest.mark.parametrize(
    "send", [modern_tools_list, legacy_initialize], ids=["2026-07-28", "2025"]
)


def assert_refused(response, status: int, *words: str) -> str:
    assert response.status_code == status, response.content
    error = rpc_error(response)
    assert error["code"] == -32600
    for word in words:
        assert word in error["message"], error["message"]
    return error["message"]


# Keys.


@BOTH_ERAS
def test_a_request_without_a_key_is_401_with_a_challenge_and_a_json_rpc_error(client, send):
    response = send(client, None)
    assert_refused(response, 401, "API key", "Authorization: Bearer")
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert "Mcp-Session-Id" not in response


@BOTH_ERAS
def test_a_malformed_key_is_401_saying_it_is_malformed(client, send, settings):
    # On an MCP endpoint with OAuth on, a token that is no key may be an access token.
    response = send(client, "not-a-key")
    assert_refused(response, 401, "neither a well-formed API key", "sy_<prefix>_<secret>")
    settings.OAUTH_ENABLED = False
    response = send(client, "not-a-key")
    assert_refused(response, 401, "malformed", "sy_<prefix>_<secret>")
    assert 'error="invalid_token"' in response["WWW-Authenticate"]


@BOTH_ERAS
def test_a_key_with_a_wrong_secret_is_401_saying_it_is_not_valid(client, key, send):
    wrong = key[: key.rindex("_") + 1] + "x" * 32
    assert_refused(send(client, wrong), 401, "not valid")


@BOTH_ERAS
def test_a_revoked_key_is_401_saying_it_was_revoked(client, send):
    api_key, secret = api_key_create(name="old", scopes=list(Scope.values))
    api_key_revoke(key=api_key)
    assert_refused(send(client, secret), 401, "revoked", api_key.prefix)


@BOTH_ERAS
def test_an_expired_key_is_401_saying_when_it_expired(client, send):
    expired = timezone.now() - timedelta(days=1)
    api_key, secret = api_key_create(name="old", scopes=list(Scope.values), expires_at=expired)
    assert_refused(send(client, secret), 401, "expired", api_key.prefix, f"{expired:%Y-%m-%d}")


@BOTH_ERAS
def test_a_good_key_is_accepted(client, key, send):
    assert send(client, key).status_code == 200


def test_the_x_api_key_header_works_like_bearer(client, key):
    response = modern(client, "tools/list", headers={"X-API-Key": key})
    assert result(response)["tools"][0]["name"] == "get_node_types"
    session = initialize(client, None, headers={"X-API-Key": key})
    assert session.status_code == 200


def test_a_bad_x_api_key_is_refused_like_a_bad_bearer_key(client):
    response = modern(client, "tools/list", headers={"X-API-Key": "sy_nope_nope"})
    assert_refused(response, 401, "not valid")


def test_a_successful_request_records_when_the_key_was_last_used(client):
    api_key, secret = api_key_create(name="ci", scopes=list(Scope.values))
    assert api_key.last_used_at is None
    before = timezone.now()
    result(modern(client, "tools/list", key=secret))
    api_key.refresh_from_db()
    assert api_key.last_used_at is not None
    assert api_key.last_used_at >= before - timedelta(seconds=1)


# Scopes.


def test_a_key_without_tools_execute_calling_a_tool_is_403_naming_the_scope(client):
    key = make_key([Scope.TOOLS_READ, Scope.RESOURCES_READ])
    response = modern(client, "tools/call", TOOL_CALL, key=key)
    assert_refused(response, 403, "tools:execute", "tools/call")
    assert response.json()["id"] == 1


def test_a_key_without_tools_execute_in_a_session_is_403_naming_the_scope(client):
    key = make_key([Scope.TOOLS_READ])
    session = legacy_session(client, key)
    response = legacy(client, session, "tools/call", TOOL_CALL, key=key)
    assert_refused(response, 403, "tools:execute")


def test_a_key_without_resources_read_reading_a_resource_is_403(client):
    key = make_key([Scope.TOOLS_READ, Scope.TOOLS_EXECUTE])
    assert_refused(modern(client, "resources/read", READ, key=key), 403, "resources:read")
    assert_refused(modern(client, "resources/list", key=key), 403, "resources:read")


def test_a_key_without_tools_read_cannot_list_tools_but_may_discover_the_server(client):
    key = make_key([Scope.HEALTH_CHECK])
    assert_refused(modern(client, "tools/list", key=key), 403, "tools:read")
    assert "capabilities" in result(modern(client, "server/discover", key=key))


def test_a_key_with_only_tools_read_lists_the_tools_it_may_call_and_prompts(client):
    key = make_key([Scope.TOOLS_READ])
    assert len(result(modern(client, "tools/list", key=key))["tools"]) == len(READ_TOOLS)
    assert result(modern(client, "prompts/list", key=key))["prompts"]


# Anonymous access.


def test_anonymous_scopes_let_callers_without_a_key_use_those_scopes(client, settings):
    settings.MCP_ANONYMOUS_SCOPES = ["tools:read"]
    assert len(result(modern(client, "tools/list"))["tools"]) == len(READ_TOOLS)
    assert initialize(client, None).status_code == 200


def test_anonymous_scopes_grant_only_those_scopes(client, settings):
    settings.MCP_ANONYMOUS_SCOPES = ["tools:read"]
    assert_refused(modern(client, "tools/call", TOOL_CALL), 403, "tools:execute")
    assert_refused(modern(client, "resources/read", READ), 403, "resources:read")


def test_anonymous_scopes_do_not_excuse_a_bad_key(client, settings):
    settings.MCP_ANONYMOUS_SCOPES = list(Scope.values)
    assert_refused(modern(client, "tools/list", key="sy_nope_nope"), 401, "not valid")


def test_without_anonymous_scopes_a_caller_without_a_key_is_refused(client, settings):
    settings.MCP_ANONYMOUS_SCOPES = []
    assert_refused(modern(client, "tools/list"), 401)


# Sessions belong to the credential that opened them.


def test_a_session_opened_by_one_key_is_404_for_another(client):
    owner, stranger = make_key(), make_key()
    session = legacy_session(client, owner)
    response = legacy(client, session, "ping", key=stranger)
    assert response.status_code == 404
    assert rpc_error(response)["code"] == -32600
    assert result(legacy(client, session, "ping", key=owner)) == {}


def test_a_session_opened_by_a_key_cannot_be_ended_by_another(client):
    owner, stranger = make_key(), make_key()
    session = legacy_session(client, owner)
    ended = client.delete(
        "/mcp", headers={"Mcp-Session-Id": session, "Authorization": f"Bearer {stranger}"}
    )
    assert ended.status_code == 404
    assert result(legacy(client, session, "ping", key=owner)) == {}


def test_an_anonymous_session_is_404_for_a_keyed_caller(client, settings):
    settings.MCP_ANONYMOUS_SCOPES = ["tools:read"]
    session = legacy_session(client, None)
    assert legacy(client, session, "ping", key=make_key()).status_code == 404


def test_a_remembered_key_gives_its_caller_again_until_it_is_revoked(django_user_model):
    owner = django_user_model.objects.create_user("ada")
    key, secret = api_key_create(
        name="k", scopes=["tools:read"], owner=owner, rate_limit_per_minute=7
    )
    first = api_key_authenticate(secret).caller
    assert first is not None
    assert (first.actor, first.scopes, first.rate_limit) == (
        f"key:{key.prefix}",
        frozenset({"tools:read"}),
        7,
    )
    assert (first.key_owner_id, first.key_owner_name) == (owner.pk, "ada")
    assert api_key_authenticate(secret).caller is first  # remembered, not built again
    api_key_revoke(key=key)
    refused = api_key_authenticate(secret)
    assert (refused.caller, refused.key) == (None, None)
    assert "was revoked" in (refused.problem or "")


# Rate limits.


@pytest.fixture
def frozen_minute(monkeypatch):
    """Pin the rate limiter's clock 30 s into a minute, so no test straddles two windows."""
    monkeypatch.setattr(ratelimit, "time", types.SimpleNamespace(time=lambda: 1_800_000_030.0))


def test_the_request_after_the_limit_is_429_with_retry_after(client, key, settings, frozen_minute):
    settings.MCP_RATE_LIMIT_PER_MINUTE = 3
    for _ in range(3):
        result(modern(client, "tools/list", key=key))
    response = modern(client, "tools/list", key=key)
    assert_refused(response, 429, "Too many requests", "3 per minute")
    assert response["Retry-After"] == "30"


def test_the_limit_counts_session_requests_too(client, key, settings, frozen_minute):
    settings.MCP_RATE_LIMIT_PER_MINUTE = 3
    session = legacy_session(client, key)  # initialize and notifications/initialized
    assert result(legacy(client, session, "ping", key=key)) == {}
    response = legacy(client, session, "ping", key=key)
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0


def test_the_limit_is_per_key(client, settings, frozen_minute):
    settings.MCP_RATE_LIMIT_PER_MINUTE = 1
    first, second = make_key(), make_key()
    result(modern(client, "tools/list", key=first))
    assert modern(client, "tools/list", key=first).status_code == 429
    result(modern(client, "tools/list", key=second))


def test_a_key_s_own_higher_limit_wins_over_the_default(client, settings, frozen_minute):
    settings.MCP_RATE_LIMIT_PER_MINUTE = 3
    key = make_key(rate_limit_per_minute=5)
    for _ in range(5):
        result(modern(client, "tools/list", key=key))
    response = modern(client, "tools/list", key=key)
    assert_refused(response, 429, "5 per minute")


def test_a_key_s_own_lower_limit_wins_over_the_default(client, settings, frozen_minute):
    settings.MCP_RATE_LIMIT_PER_MINUTE = 100
    key = make_key(rate_limit_per_minute=1)
    result(modern(client, "tools/list", key=key))
    assert modern(client, "tools/list", key=key).status_code == 429


def test_a_rate_limit_of_zero_means_unlimited(client, key, settings, frozen_minute):
    settings.MCP_RATE_LIMIT_PER_MINUTE = 0
    for _ in range(5):
        result(modern(client, "tools/list", key=key))


def test_anonymous_callers_are_rate_limited_too(client, settings, frozen_minute):
    settings.MCP_ANONYMOUS_SCOPES = ["tools:read"]
    settings.MCP_RATE_LIMIT_PER_MINUTE = 1
    result(modern(client, "tools/list"))
    assert modern(client, "tools/list").status_code == 429


MINUTE = 1_800_000_030.0


def test_without_redis_requests_are_counted_per_identity_and_window(settings):
    settings.REDIS_URL = ""
    hits = [ratelimit.rate_limit_hit(identity="key:a", limit=2, now=MINUTE) for _ in range(3)]
    assert [hit.allowed for hit in hits] == [True, True, False]
    assert ratelimit.rate_limit_hit(identity="key:b", limit=2, now=MINUTE).allowed
    assert ratelimit.rate_limit_hit(identity="key:a", limit=2, now=MINUTE + 60).remaining == 1


def test_without_redis_requests_counted_at_once_on_threads_are_each_counted(settings):
    settings.REDIS_URL = ""

    def hit(_):
        return ratelimit.rate_limit_hit(identity="key:busy", limit=10**6, now=MINUTE)

    with ThreadPoolExecutor(max_workers=8) as pool:
        remaining = [decision.remaining for decision in pool.map(hit, range(4000))]
    assert sorted(remaining) == list(range(10**6 - 4000, 10**6))


def test_without_redis_a_new_window_drops_the_counters_before_the_previous_one(settings):
    settings.REDIS_URL = ""
    for minute in range(4):
        ratelimit.rate_limit_hit(identity="key:old", limit=5, now=MINUTE + 60 * minute)
    windows = sorted(window for _, window in ratelimit._COUNTERS)
    assert windows == [int(MINUTE // 60) + 2, int(MINUTE // 60) + 3]


def test_rate_limits_forget_starts_every_count_again(settings):
    """What the tests do before each test: `cache.clear()` does not reach the counters."""
    settings.REDIS_URL = ""
    ratelimit.rate_limit_hit(identity="key:reset", limit=1, now=MINUTE)
    assert not ratelimit.rate_limit_hit(identity="key:reset", limit=1, now=MINUTE).allowed
    ratelimit.rate_limits_forget()
    assert ratelimit.rate_limit_hit(identity="key:reset", limit=1, now=MINUTE).allowed


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs REDIS_URL (counts in Redis)")
def test_on_redis_a_window_is_counted_in_one_round_trip_and_expires(settings):
    """Every instance counts on the one counter, which goes away after its window; each
    request is one round trip (a pipeline), not Django's two (EXISTS, INCRBY)."""
    client = ratelimit._redis(settings.REDIS_URL, settings.REDIS_SOCKET_TIMEOUT)
    commands: list[int] = []
    real_execute = redis.client.Pipeline.execute

    def counted_execute(self, *args, **kwargs):
        commands.append(len(self.command_stack))
        return real_execute(self, *args, **kwargs)

    minute = 1_800_000_030.0
    with patch.object(redis.client.Pipeline, "execute", counted_execute):
        decisions = [
            ratelimit.rate_limit_hit(identity="key:redis", limit=2, now=minute) for _ in range(3)
        ]
    assert [(d.allowed, d.remaining) for d in decisions] == [(True, 1), (True, 0), (False, 0)]
    assert commands == [2, 2, 2]
    window_key = ratelimit.window_key("key:redis", int(minute // ratelimit.WINDOW_SECONDS))
    assert 0 < client.ttl(window_key) <= 2 * ratelimit.WINDOW_SECONDS
    later = ratelimit.rate_limit_hit(identity="key:redis", limit=2, now=minute + 60)
    assert (later.allowed, later.remaining) == (True, 1)


# Management commands.


def run_command(name: str, *args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(name, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_create_api_key_prints_the_key_alone_on_its_last_line(client):
    out, err = run_command("create_api_key", "--name", "ci", "--scopes", "tools:read")
    secret = out.strip().splitlines()[-1]
    assert re.fullmatch(r"sy_[0-9a-f]+_\S+", secret)
    assert "not shown again" in err
    api_key = ApiKey.objects.get(name="ci")
    assert api_key.scopes == ["tools:read"]
    assert secret.startswith(f"sy_{api_key.prefix}_")
    result(modern(client, "tools/list", key=secret))
    assert modern(client, "tools/call", TOOL_CALL, key=secret).status_code == 403


def test_create_api_key_gives_every_scope_by_default():
    run_command("create_api_key", "--name", "everything")
    assert sorted(ApiKey.objects.get(name="everything").scopes) == sorted(Scope.values)


def test_create_api_key_sets_expiry_and_rate_limit():
    run_command("create_api_key", "--name", "ci", "--expires-in-days", "2", "--rate-limit", "7")
    api_key = ApiKey.objects.get(name="ci")
    assert api_key.rate_limit_per_minute == 7
    assert timedelta(days=1) < api_key.expires_at - timezone.now() <= timedelta(days=2)


def test_create_api_key_refuses_an_unknown_scope_listing_the_valid_ones():
    with pytest.raises(CommandError) as refusal:
        run_command("create_api_key", "--name", "ci", "--scopes", "tools:read,tools:write")
    message = str(refusal.value)
    assert "tools:write" in message
    for scope in Scope.values:
        assert scope in message
    assert not ApiKey.objects.exists()


def demo_key(out: str) -> str:
    match = re.search(r"Demo API key[^:]*: (sy_\S+)", out)
    assert match, out
    return match.group(1)


def test_setup_demo_prints_a_working_key_with_every_scope(client):
    out, _ = run_command("setup_demo")
    assert "Demo admin: username admin" in out
    secret = demo_key(out)
    # The built-in tools, and the three demo workflows it leaves (graphs/authoring/demo_graphs.py).
    assert len(result(modern(client, "tools/list", key=secret))["tools"]) == len(TOOLS) + 3
    assert result(modern(client, "tools/call", TOOL_CALL, key=secret))["isError"] is False


def test_setup_demo_revokes_the_previous_demo_key(client):
    first = demo_key(run_command("setup_demo")[0])
    out, _ = run_command("setup_demo")
    assert "exists" in out  # the admin is made once
    second = demo_key(out)
    assert second != first
    assert_refused(modern(client, "tools/list", key=first), 401, "revoked")
    result(modern(client, "tools/list", key=second))
    assert ApiKey.objects.filter(name="demo", revoked_at__isnull=True).count() == 1
