"""This service as the OAuth authorization server MCP clients sign in through: discovery,
registration, the code flow with PKCE S256, resource-bound tokens used at the MCP endpoint,
rotation of refresh tokens, revocation, and each bad input refused with the RFC's error and
nothing granted."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import urlsplit

import pytest
from oauth2_provider.models import AccessToken, Grant, RefreshToken

from graphs.execution.toolset import refresh_workflow_tools
from graphs.models import Run
from mcp_endpoint.transports import asgi, streamable_http
from nodespecs.knowledge.registry import refresh_registry
from nodespecs.models import AuditEvent
from tests.mcp_endpoint.helpers import modern, rpc_error
from tests.mcp_endpoint.oauth_helpers import (
    ORIGIN,
    REDIRECT,
    authorization,
    consent,
    exchange,
    person,
    redirect_query,
    refresh,
    register,
    tokens_for,
)
from tests.mcp_endpoint.test_asgi import tools_list_arguments

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]
# (Registering a client also makes an access token: its RFC 7592 registration token, of no
# user; the tokens below are the users'.)


def call(client, token: str, url: str = "/mcp"):
    return modern(client, "tools/list", key=token, url=url)


# Discovery.


def test_each_endpoint_publishes_its_protected_resource_metadata(client):
    for suffix, resource in [
        ("", f"{ORIGIN}/mcp"),
        ("/mcp", f"{ORIGIN}/mcp"),
        ("/mcp/countfiles", f"{ORIGIN}/mcp/countfiles"),
        ("/sse", f"{ORIGIN}/sse"),
    ]:
        answer = client.get(f"/.well-known/oauth-protected-resource{suffix}")
        assert answer.status_code == 200, suffix
        document = answer.json()
        assert document["resource"] == resource
        assert document["authorization_servers"] == [ORIGIN]
        assert "tools:execute" in document["scopes_supported"]
        assert document["bearer_methods_supported"] == ["header"]
    elsewhere = client.get("/.well-known/oauth-protected-resource/api/v1")
    assert elsewhere.status_code == 404
    assert "/mcp/<slug>" in elsewhere.json()["error_description"]


def test_the_authorization_server_metadata_offers_the_code_flow_with_s256_only(client):
    document = client.get("/.well-known/oauth-authorization-server").json()
    assert document["issuer"] == ORIGIN
    assert document["authorization_endpoint"] == f"{ORIGIN}/authorize"
    assert document["token_endpoint"] == f"{ORIGIN}/token"
    assert document["registration_endpoint"] == f"{ORIGIN}/register"
    assert document["revocation_endpoint"] == f"{ORIGIN}/revoke"
    assert document["response_types_supported"] == ["code"]
    assert document["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert document["code_challenge_methods_supported"] == ["S256"]
    assert "none" in document["token_endpoint_auth_methods_supported"]
    assert document["client_id_metadata_document_supported"] is True
    suffixed = client.get("/.well-known/oauth-authorization-server/mcp")
    assert suffixed.status_code == 404  # the issuer has no path
    assert "/.well-known/oauth-authorization-server" in suffixed.json()["error_description"]
    openid = client.get("/.well-known/openid-configuration")
    assert openid.status_code == 404
    assert "oauth-authorization-server" in openid.json()["error_description"]


# The flow, and the token at the endpoint.


def test_a_client_registers_signs_in_and_calls_the_endpoint_it_asked_for(client):
    alice = person()
    answer, client_id = tokens_for(client, alice)
    assert answer["token_type"] == "Bearer"
    assert set(answer["scope"].split()) == {"tools:read", "tools:execute"}
    assert 0 < answer["expires_in"] <= 3600
    client.logout()  # the token alone counts at the endpoint
    listed = call(client, answer["access_token"])
    assert listed.status_code == 200, listed.content
    token = AccessToken.objects.get(user__isnull=False)
    assert token.resource == [f"{ORIGIN}/mcp"]
    events = list(AuditEvent.objects.filter(action=AuditEvent.Action.GRANTED))
    assert [event.actor for event in events] == ["oauth:alice via Test client"]
    assert events[0].fields == ["tools:execute", "tools:read"]
    assert client_id


def test_a_token_for_one_endpoint_is_refused_at_another(client):
    alice = person()
    answer, _ = tokens_for(client, alice, resource=f"{ORIGIN}/mcp/a")
    refused = call(client, answer["access_token"], url="/mcp/b")
    assert refused.status_code == 401
    assert f"issued for {ORIGIN}/mcp/a, not for {ORIGIN}/mcp/b" in rpc_error(refused)["message"]
    assert 'error="invalid_token"' in refused["WWW-Authenticate"]
    assert "/.well-known/oauth-protected-resource/mcp/b" in refused["WWW-Authenticate"]
    assert call(client, answer["access_token"], url="/mcp").status_code == 401


def test_a_client_that_names_no_resource_gets_a_token_for_the_main_endpoint(client):
    answer, _ = tokens_for(client, person(), resource=None)
    assert AccessToken.objects.get(user__isnull=False).resource == [f"{ORIGIN}/mcp"]
    assert call(client, answer["access_token"]).status_code == 200


def test_a_run_started_with_a_token_records_the_user_and_the_client(client, loops):
    answer, _ = tokens_for(client, person())
    called = modern(
        client, "tools/call", {"name": "sum_to", "arguments": {"n": 3}}, key=answer["access_token"]
    )
    assert called.status_code == 200, called.content
    assert Run.objects.get().caller == "oauth:alice via Test client"


def test_a_call_beyond_the_granted_scopes_is_403_insufficient_scope(client):
    answer, _ = tokens_for(client, person(), scope="tools:read")
    called = modern(
        client,
        "tools/call",
        {"name": "get_node_types", "arguments": {}},
        key=answer["access_token"],
    )
    assert called.status_code == 403
    assert 'error="insufficient_scope"' in called["WWW-Authenticate"]
    assert 'scope="tools:execute"' in called["WWW-Authenticate"]


def test_a_refresh_token_rotates_and_used_twice_revokes_its_family(client):
    alice = person()
    answer, client_id = tokens_for(client, alice)
    status, renewed = refresh(client, client_id, answer["refresh_token"])
    assert status == 200, renewed
    assert renewed["refresh_token"] != answer["refresh_token"]
    assert call(client, renewed["access_token"]).status_code == 200
    assert AuditEvent.objects.filter(action=AuditEvent.Action.RENEWED).count() == 1

    status, reused = refresh(client, client_id, answer["refresh_token"])
    assert status == 400
    assert reused["error"] == "invalid_grant"
    replay = AuditEvent.objects.get(action=AuditEvent.Action.REVOKED)
    assert (replay.actor, replay.fields) == ("oauth:alice via Test client", ["token_family"])
    # The whole family is revoked: the rotated refresh token and its access token too.
    status, after = refresh(client, client_id, renewed["refresh_token"])
    assert status == 400, after
    assert call(client, renewed["access_token"]).status_code == 401


def test_a_revoked_token_is_refused_at_once_and_the_trail_says_so(client):
    answer, client_id = tokens_for(client, person())
    revoked = client.post("/revoke", {"token": answer["access_token"], "client_id": client_id})
    assert revoked.status_code == 200, revoked.content
    refused = call(client, answer["access_token"])
    assert refused.status_code == 401
    assert "neither a well-formed API key nor" not in rpc_error(refused)["message"]
    # A client signing in again asks for what the challenge names, not for every scope.
    assert 'scope="tools:read tools:execute resources:read"' in refused["WWW-Authenticate"]
    assert AuditEvent.objects.filter(action=AuditEvent.Action.REVOKED).count() == 1


def test_a_remembered_token_is_answered_in_the_event_loop_until_it_is_revoked(client):
    """Like a remembered API key, a token found valid costs no query for REMEMBER_SECONDS:
    the ASGI app answers its calls in the event loop, where a query would raise. Revoking
    it forgets it at once there too."""
    answer, client_id = tokens_for(client, person())
    token = answer["access_token"]
    assert call(client, token).status_code == 200  # found valid: remembered
    arguments = tools_list_arguments(token)
    arguments["headers"]["host"] = urlsplit(ORIGIN).netloc
    refresh_registry()
    refresh_workflow_tools()

    async def in_loop():
        return asgi._in_loop(
            arguments, arguments["headers"], arguments["body"], streamable_http.handle
        )

    answered = asyncio.run(in_loop())
    assert isinstance(answered, asgi._Done)
    assert answered.answer.status == 200, answered.answer.body

    revoked = client.post("/revoke", {"token": token, "client_id": client_id})
    assert revoked.status_code == 200, revoked.content
    assert asyncio.run(in_loop()) is None  # to a thread, which refuses it
    assert call(client, token).status_code == 401


def test_the_tokens_a_process_remembers_are_bounded(client, monkeypatch):
    from mcp_endpoint.access import oauth_tokens

    monkeypatch.setattr(oauth_tokens, "REMEMBERED_TOKENS", 2)
    oauth_tokens._remembered.clear()
    answer, client_id = tokens_for(client, person())
    for _ in range(5):  # each refresh hands out a new access token, each call remembers it
        assert call(client, answer["access_token"]).status_code == 200
        assert len(oauth_tokens._remembered) <= 2
        status, answer = refresh(client, client_id, answer["refresh_token"])
        assert status == 200, answer


def test_an_expired_token_is_refused_saying_so(client):
    answer, _ = tokens_for(client, person())
    AccessToken.objects.update(expires="2020-01-01T00:00:00Z")
    from mcp_endpoint.access import oauth_tokens

    oauth_tokens._remembered.clear()
    refused = call(client, answer["access_token"])
    assert refused.status_code == 401
    assert "expired" in rpc_error(refused)["message"]


def test_a_right_taken_from_the_user_leaves_their_token_once_the_process_asks_again(
    client, monkeypatch
):
    alice = person("alice", "graphs.view_run")
    answer, _ = tokens_for(client, alice, scope="tools:read runs:read")
    assert call(client, answer["access_token"]).status_code == 200  # remembered, rights too
    alice.user_permissions.clear()
    from mcp_endpoint.access import oauth_tokens

    # The REMEMBER_SECONDS a process trusts a checked token (and its user's rights) are over.
    monkeypatch.setattr(oauth_tokens, "REMEMBER_SECONDS", 0.0)
    refused = call(client, answer["access_token"])
    assert refused.status_code == 403  # tools:read went with the permission to connect


# Bad input: refused with the RFC's error, nothing granted.


def _asked(client, request):
    """The client sent back from the consent page's first request, with nothing granted."""
    response = client.get("/authorize", request.params)
    assert response.status_code == 302, response.content[:400]
    assert Grant.objects.count() == 0
    return redirect_query(response)


def test_pkce_plain_or_missing_is_refused(client):
    client_id = register(client)["client_id"]
    client.force_login(person())
    plain = authorization(client_id, code_challenge_method="plain")
    assert _asked(client, plain)["error"] == ["invalid_request"]
    missing = authorization(client_id)
    del missing.params["code_challenge"], missing.params["code_challenge_method"]
    assert _asked(client, missing)["error"] == ["invalid_request"]


def test_a_pkce_verifier_that_does_not_match_is_refused(client):
    client_id = register(client)["client_id"]
    client.force_login(person())
    request = authorization(client_id)
    code = consent(client, request)["code"][0]
    request.verifier = "x" * 50
    status, answer = exchange(client, request, code)
    assert (status, answer["error"]) == (400, "invalid_grant")
    assert not AccessToken.objects.filter(user__isnull=False).exists()


def test_a_redirect_uri_that_differs_is_refused_without_redirecting(client):
    client_id = register(client)["client_id"]
    client.force_login(person())
    request = authorization(client_id, redirect_uri="http://127.0.0.1:33418/other")
    page = client.get("/authorize", request.params)
    assert page.status_code == 400
    assert b"redirect" in page.content.lower()
    assert Grant.objects.count() == 0


def test_a_loopback_redirect_may_use_any_port(client):
    client_id = register(client)["client_id"]
    client.force_login(person())
    request = authorization(client_id, redirect_uri="http://127.0.0.1:50999/callback")
    page = client.get("/authorize", request.params)
    assert page.status_code == 200, page.content[:300]


def test_scopes_the_user_may_not_grant_are_refused(client):
    client_id = register(client)["client_id"]
    client.force_login(person())
    request = authorization(client_id, scope="tools:read workflows:admin")
    query = _asked(client, request)
    assert query["error"] == ["invalid_scope"]
    assert "workflows:admin" in query["error_description"][0]
    assert query["state"] == ["st4te"]


def test_a_user_without_the_right_to_connect_clients_is_refused(client):
    from django.contrib.auth.models import User

    client_id = register(client)["client_id"]
    client.force_login(User.objects.create_user("bob", password="pw"))
    query = _asked(client, authorization(client_id))
    assert query["error"] == ["access_denied"]
    assert "connect_oauth_clients" in query["error_description"][0]


def test_a_resource_that_is_not_ours_is_refused(client):
    client_id = register(client)["client_id"]
    client.force_login(person())
    for resource in ("https://elsewhere.example/mcp", f"{ORIGIN}/api/v1", f"{ORIGIN}/mcp/a/b"):
        query = _asked(client, authorization(client_id, resource=resource))
        assert query["error"] == ["invalid_target"], resource


def test_a_tampered_consent_form_is_refused(client):
    client_id = register(client)["client_id"]
    client.force_login(person())
    request = authorization(client_id)
    assert client.get("/authorize", request.params).status_code == 200
    form = {**request.params, "scope": "workflows:admin", "allow": "Authorize"}
    query = redirect_query(client.post("/authorize", form))
    assert query["error"] == ["invalid_scope"]
    assert Grant.objects.count() == 0


def test_denying_sends_the_client_access_denied(client):
    client_id = register(client)["client_id"]
    client.force_login(person())
    query = consent(client, authorization(client_id), allow=False)
    assert query["error"] == ["access_denied"]
    assert Grant.objects.count() == 0


# Registration.


def test_registration_refuses_a_plain_http_redirect_that_is_not_loopback(client):
    body = {"redirect_uris": ["http://evil.example/cb"], "token_endpoint_auth_method": "none"}
    answer = client.post("/register", json.dumps(body), content_type="application/json")
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_redirect_uri"


def test_registration_is_bounded(client):
    many = {"redirect_uris": [f"{REDIRECT}{n}" for n in range(11)]}
    answer = client.post("/register", json.dumps(many), content_type="application/json")
    assert answer.status_code == 400
    huge = {"client_name": "x" * 20_000, "redirect_uris": [REDIRECT]}
    answer = client.post("/register", json.dumps(huge), content_type="application/json")
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_client_metadata"


def test_registrations_from_one_address_are_limited_per_minute(client):
    for _ in range(10):
        register(client)
    answer = client.post(
        "/register", json.dumps({"redirect_uris": [REDIRECT]}), content_type="application/json"
    )
    assert answer.status_code == 429
    assert int(answer["Retry-After"]) >= 1
    assert "Too many registrations" in answer.json()["error_description"]
    other = client.post(
        "/register",
        json.dumps({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}),
        content_type="application/json",
        REMOTE_ADDR="10.0.0.9",
    )
    assert other.status_code == 201  # another address has its own count


def test_a_registration_declared_too_large_is_refused_before_it_is_read(client):
    answer = client.generic(
        "POST", "/register", b"{}", content_type="application/json", CONTENT_LENGTH="3000000"
    )
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_client_metadata"


def test_registration_turned_off_is_a_json_404_saying_what_to_do(client, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "DCR_ENABLED": False}
    answer = client.post("/register", "{}", content_type="application/json")
    assert answer.status_code == 404
    assert answer.json()["error"] == "registration_not_offered"
    assert (
        "registration_endpoint" not in client.get("/.well-known/oauth-authorization-server").json()
    )


# People: their connected clients.


def test_a_person_sees_their_connected_clients_and_revokes_one(client):
    alice = person()
    answer, _ = tokens_for(client, alice)
    page = client.get("/oauth/connections")
    assert b"Test client" in page.content
    assert b"Call tools" in page.content
    application_id = AccessToken.objects.get(user__isnull=False).application_id
    client.post(f"/oauth/connections/{application_id}/revoke")
    assert not AccessToken.objects.filter(user__isnull=False).exists()
    assert RefreshToken.objects.filter(revoked__isnull=True).count() == 0
    assert call(client, answer["access_token"]).status_code == 401
    assert AuditEvent.objects.filter(action=AuditEvent.Action.REVOKED).count() == 1
    client.post(f"/oauth/connections/{application_id}/revoke")  # nothing left to revoke
    assert AuditEvent.objects.filter(action=AuditEvent.Action.REVOKED).count() == 1


def test_the_admin_lists_clients_and_tokens(client, admin_client):
    tokens_for(client, person())
    applications = admin_client.get("/admin/oauth2_provider/application/")
    assert applications.status_code == 200
    assert b"Test client" in applications.content
    tokens = admin_client.get("/admin/oauth2_provider/accesstoken/")
    assert tokens.status_code == 200
    assert b"alice" in tokens.content


def test_one_person_cannot_revoke_anothers_client(client):
    answer, _ = tokens_for(client, person("alice"))
    application_id = AccessToken.objects.get(user__isnull=False).application_id
    client.force_login(person("bob"))
    client.post(f"/oauth/connections/{application_id}/revoke")
    assert b"Test client" not in client.get("/oauth/connections").content
    assert call(client, answer["access_token"]).status_code == 200  # alice's still works
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.REVOKED).exists()
