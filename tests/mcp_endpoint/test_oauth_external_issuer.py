"""An external authorization server (single sign-on): with OAUTH_EXTERNAL_ISSUER set, the MCP
endpoint takes the JWT access tokens (RFC 9068) that issuer signs, checked against its keys
fetched from a real HTTP server on 127.0.0.1, for the local user the token names, each
refusal saying why; and this service offers no authorization server of its own."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from mcp_endpoint.access import external_tokens
from tests.mcp_endpoint.helpers import make_key, modern, rpc_error
from tests.mcp_endpoint.oauth_helpers import ORIGIN, person

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

# Made once: a 2048-bit RSA key takes a moment to generate.
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
REALM = "/realms/switchyard"
RESOURCE = f"{ORIGIN}/mcp"


def public_jwk(private_key: Any, kid: str, alg: str) -> dict[str, Any]:
    """The public half of `private_key` as a JWK, as an issuer publishes it."""
    algorithm = ECAlgorithm if isinstance(private_key, ec.EllipticCurvePrivateKey) else RSAAlgorithm
    jwk = algorithm.to_jwk(private_key.public_key(), as_dict=True)
    return {**jwk, "kid": kid, "alg": alg, "use": "sig"}


@dataclass
class Issuer:
    """A stand-in for the operator's identity provider: its discovery documents and key set
    served over HTTP (what it serves can change between requests), and tokens it signs."""

    url: str = ""
    keys: list[dict[str, Any]] = field(default_factory=list)
    # Path -> (status, body) overriding what is served; a missing path answers 404.
    pages: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    delay: float = 0.0
    hits: Counter[str] = field(default_factory=Counter)

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/keys"

    def metadata(self) -> bytes:
        return json.dumps({"issuer": self.url, "jwks_uri": self.jwks_url}).encode()

    def answer(self, path: str) -> tuple[int, bytes]:
        self.hits[path] = self.hits[path] + 1
        if path in self.pages:
            return self.pages[path]
        if path in (f"/.well-known/oauth-authorization-server{REALM}", f"{REALM}/keys"):
            if path.endswith("/keys"):
                return 200, json.dumps({"keys": self.keys}).encode()
            return 200, self.metadata()
        return 404, b'{"error": "not_found"}'

    def token(
        self,
        *,
        key: Any = RSA_KEY,
        kid: str = "rsa-1",
        alg: str = "RS256",
        typ: str | None = "at+jwt",
        **claims: Any,
    ) -> str:
        """An access token signed by `key`, with RFC 9068's claims unless told otherwise
        (a claim given as None is left out)."""
        now = int(time.time())
        body = {
            "iss": self.url,
            "aud": RESOURCE,
            "sub": "alice",
            "client_id": "sso-client",
            "scope": "tools:read tools:execute",
            "iat": now,
            "exp": now + 300,
            "jti": uuid.uuid4().hex,
            **claims,
        }
        body = {name: value for name, value in body.items() if value is not None}
        # PyJWT writes typ JWT unless told None, which leaves it out.
        return jwt.encode(body, key, algorithm=alg, headers={"kid": kid, "typ": typ})


@pytest.fixture
def issuer(settings, monkeypatch) -> Iterator[Issuer]:
    """The identity provider, named by OAUTH_EXTERNAL_ISSUER, publishing one RSA and one EC
    key; this process's keys forgotten before and after."""
    state = Issuer(
        keys=[public_jwk(RSA_KEY, "rsa-1", "RS256"), public_jwk(EC_KEY, "ec-1", "ES256")]
    )

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = state.answer(self.path)
            time.sleep(state.delay)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if status in (301, 302):
                self.send_header("Location", "http://127.0.0.1:9/elsewhere")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}{REALM}"
    settings.OAUTH_EXTERNAL_ISSUER = state.url
    monkeypatch.setattr(external_tokens, "_keys", None)
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def alice(transactional_db):
    return person("alice")


def call(client, token: str, url: str = "/mcp"):
    return modern(client, "tools/list", key=token, url=url)


def refusal(answer) -> str:
    """The message of a 401 that refuses the token, after checking its challenge."""
    assert answer.status_code == 401, answer.content
    challenge = answer["WWW-Authenticate"]
    assert 'error="invalid_token"' in challenge
    assert "/.well-known/oauth-protected-resource/mcp" in challenge
    return rpc_error(answer)["message"]


# Accepted.


def test_a_token_from_the_issuer_acts_for_the_local_user_it_names(client, issuer, alice):
    assert call(client, issuer.token()).status_code == 200
    caller = external_tokens.external_caller(issuer.token(), RESOURCE)
    assert caller.actor == "oauth:alice via sso-client"
    assert caller.scopes == {"tools:read", "tools:execute"}
    assert (caller.key_owner_id, caller.key_owner_name) == (alice.pk, "alice")


def test_an_ec_signed_token_and_the_client_named_by_azp_are_accepted(client, issuer, alice):
    token = issuer.token(key=EC_KEY, kid="ec-1", alg="ES256", client_id=None, azp="inspector")
    assert call(client, token).status_code == 200
    assert external_tokens.external_caller(token, RESOURCE).actor == "oauth:alice via inspector"


def test_the_media_type_spelling_of_the_token_type_is_accepted(client, issuer, alice):
    assert call(client, issuer.token(typ="application/at+jwt")).status_code == 200


def test_an_operator_may_take_plain_jwt_access_tokens(client, issuer, alice, settings):
    assert "typ header is 'JWT'" in refusal(call(client, issuer.token(typ="JWT")))
    settings.OAUTH_EXTERNAL_TOKEN_TYPES = ["at+jwt", "JWT"]
    assert call(client, issuer.token(typ="JWT")).status_code == 200


def test_api_keys_are_still_taken_beside_the_issuers_tokens(client, issuer):
    assert call(client, make_key()).status_code == 200


# Refused, each saying why.

HOUR = 3600


@pytest.mark.parametrize(
    ("token_of", "says"),
    [
        pytest.param(
            lambda issuer: issuer.token(key=OTHER_RSA_KEY),
            "signature does not verify",
            id="bad signature",
        ),
        pytest.param(
            lambda issuer: issuer.token(key=OTHER_RSA_KEY, kid="rsa-9"),
            "signed with the key 'rsa-9', which http://127.0.0.1",
            id="unknown kid",
        ),
        pytest.param(
            lambda issuer: issuer.token(typ="JWT"), "typ header is 'JWT'", id="id-token typ"
        ),
        pytest.param(lambda issuer: issuer.token(typ=None), "typ header is None", id="no typ"),
        pytest.param(
            lambda issuer: issuer.token(iss="https://idp.example.com"),
            "issued by 'https://idp.example.com', not by http://127.0.0.1",
            id="wrong issuer",
        ),
        pytest.param(
            lambda issuer: issuer.token(aud="https://elsewhere.example.com/mcp"),
            f"is for 'https://elsewhere.example.com/mcp', not for {RESOURCE}",
            id="wrong audience",
        ),
        pytest.param(lambda issuer: issuer.token(aud=None), "no 'aud' claim", id="no audience"),
        pytest.param(
            lambda issuer: issuer.token(exp=int(time.time()) - HOUR),
            "expired at",
            id="expired",
        ),
        pytest.param(
            lambda issuer: issuer.token(nbf=int(time.time()) + HOUR),
            "not valid yet",
            id="not yet valid",
        ),
        pytest.param(
            lambda issuer: issuer.token(sub="mallory"),
            "The user 'mallory' (the token's 'sub' claim) has no account on this service: an "
            "operator creates one",
            id="no such local user",
        ),
        pytest.param(lambda issuer: issuer.token(sub=None), "no 'sub' claim", id="no subject"),
        pytest.param(
            lambda issuer: issuer.token(key=None, alg="none"),
            "signed with 'none'",
            id="alg none",
        ),
        pytest.param(
            lambda issuer: issuer.token(key="a-shared-secret-of-at-least-32-bytes!", alg="HS256"),
            "signed with 'HS256', which this service does not take",
            id="hmac",
        ),
        pytest.param(
            lambda issuer: issuer.token(kid="ec-1", alg="RS256"),
            "signed with RS256, but its key 'ec-1' is for ES256",
            id="algorithm of another key",
        ),
        pytest.param(lambda issuer: "not-a-jwt", "neither a well-formed API key", id="not a token"),
    ],
)
def test_a_token_not_to_be_taken_is_refused_saying_why(client, issuer, alice, token_of, says):
    assert says in refusal(call(client, token_of(issuer)))


def test_an_inactive_user_is_refused_saying_how_to_fix_it(client, issuer, alice):
    alice.is_active = False
    alice.save()
    assert "'alice' is not active on this service" in refusal(call(client, issuer.token()))


def test_a_token_for_one_endpoint_is_refused_at_another(client, issuer, alice):
    token = issuer.token(aud=f"{ORIGIN}/mcp/a")
    message = refusal(call(client, token, url="/mcp/b"))
    assert f"is for '{ORIGIN}/mcp/a', not for {ORIGIN}/mcp/b" in message
    assert "resource=http://testserver/mcp/b" in message
    assert (
        "/.well-known/oauth-protected-resource/mcp/b"
        in call(client, token, "/mcp/b")["WWW-Authenticate"]
    )


def test_a_configured_audience_replaces_the_endpoint_url(client, issuer, alice, settings):
    settings.OAUTH_EXTERNAL_AUDIENCE = "switchyard"
    assert call(client, issuer.token(aud=["switchyard", "other-api"])).status_code == 200
    message = refusal(call(client, issuer.token()))
    assert "not for switchyard" in message
    assert "OAUTH_EXTERNAL_AUDIENCE" in message


# Rights stay here.


def test_scopes_the_user_may_not_give_are_dropped_from_the_token(client, issuer, alice):
    token = issuer.token(scope="tools:read tools:execute workflows:write")
    called = modern(client, "tools/call", {"name": "create_workflow", "arguments": {}}, key=token)
    assert called.status_code == 403
    assert 'error="insufficient_scope"' in called["WWW-Authenticate"]
    assert 'scope="workflows:write"' in called["WWW-Authenticate"]
    person("bob", "graphs.change_workflow")
    allowed = modern(
        client,
        "tools/call",
        {"name": "create_workflow", "arguments": {}},
        key=issuer.token(sub="bob", scope="tools:read tools:execute workflows:write"),
    )
    assert allowed.status_code != 403, allowed.content


@pytest.mark.parametrize("scp", [["tools:read"], "tools:read"], ids=["okta-list", "entra-string"])
def test_an_scp_claim_stands_for_scope(client, issuer, alice, scp):
    token = issuer.token(scope=None, scp=scp)
    assert call(client, token).status_code == 200
    refused = modern(client, "tools/call", {"name": "get_node_types", "arguments": {}}, key=token)
    assert 'scope="tools:execute"' in refused["WWW-Authenticate"]


def test_a_user_without_the_right_to_connect_clients_gets_no_scope(client, issuer):
    from django.contrib.auth.models import User

    User.objects.create_user("carol")
    listed = call(client, issuer.token(sub="carol"))
    assert listed.status_code == 403
    assert 'error="insufficient_scope"' in listed["WWW-Authenticate"]


def test_another_claim_may_name_the_local_user(client, issuer, alice, settings):
    settings.OAUTH_EXTERNAL_USERNAME_CLAIM = "preferred_username"
    token = issuer.token(sub="0b6f-4c2e", preferred_username="alice")
    assert call(client, token).status_code == 200
    assert "no 'preferred_username' claim" in refusal(call(client, issuer.token()))


# The issuer's keys: discovered, kept, fetched again, bounded.

KEYS_PATH = f"{REALM}/keys"
RFC8414_PATH = f"/.well-known/oauth-authorization-server{REALM}"
OIDC_PATH = f"{REALM}/.well-known/openid-configuration"


def test_the_keys_are_fetched_once_and_kept(client, issuer, alice):
    for _ in range(3):
        assert call(client, issuer.token()).status_code == 200
    assert issuer.hits[RFC8414_PATH] == 1
    assert issuer.hits[KEYS_PATH] == 1


def test_an_issuer_with_openid_discovery_only_is_found(client, issuer, alice):
    issuer.pages[RFC8414_PATH] = (404, b"{}")
    issuer.pages[OIDC_PATH] = (200, issuer.metadata())
    assert call(client, issuer.token()).status_code == 200
    assert issuer.hits[OIDC_PATH] == 1


def test_a_configured_jwks_url_is_used_without_discovery(client, issuer, alice, settings):
    settings.OAUTH_EXTERNAL_JWKS_URL = issuer.jwks_url
    issuer.pages[RFC8414_PATH] = (404, b"{}")
    assert call(client, issuer.token()).status_code == 200
    assert issuer.hits[RFC8414_PATH] == 0
    assert issuer.hits[OIDC_PATH] == 0


def test_metadata_naming_another_issuer_is_not_trusted(client, issuer, alice):
    impostor = json.dumps({"issuer": "https://idp.example.com", "jwks_uri": issuer.jwks_url})
    issuer.pages[RFC8414_PATH] = (200, impostor.encode())
    message = refusal(call(client, issuer.token()))
    assert "could not fetch the signing keys" in message
    assert "names the issuer 'https://idp.example.com'" in message
    assert issuer.hits[KEYS_PATH] == 0


def test_a_new_key_is_fetched_when_a_token_names_it(client, issuer, alice, settings):
    settings.OAUTH_EXTERNAL_JWKS_REFETCH_SECONDS = 0.05
    assert call(client, issuer.token()).status_code == 200
    issuer.keys.append(public_jwk(OTHER_RSA_KEY, "rsa-2", "RS256"))
    time.sleep(0.1)
    assert call(client, issuer.token(key=OTHER_RSA_KEY, kid="rsa-2")).status_code == 200
    assert issuer.hits[KEYS_PATH] == 2


def test_a_key_the_issuer_dropped_is_refused_once_the_keys_are_old(client, issuer, alice, settings):
    settings.OAUTH_EXTERNAL_JWKS_MAX_AGE_SECONDS = 0.05
    settings.OAUTH_EXTERNAL_JWKS_REFETCH_SECONDS = 0.05
    assert call(client, issuer.token()).status_code == 200
    issuer.keys[:] = [public_jwk(OTHER_RSA_KEY, "rsa-2", "RS256")]
    time.sleep(0.1)
    assert "which http://127.0.0.1" in refusal(call(client, issuer.token()))


def test_made_up_key_ids_make_no_fetch_within_a_minute_of_the_last(client, issuer, alice):
    assert call(client, issuer.token()).status_code == 200
    for number in range(5):
        assert "does not publish" in refusal(call(client, issuer.token(kid=f"made-up-{number}")))
    assert issuer.hits[KEYS_PATH] == 1


def test_an_issuer_that_is_down_is_refused_saying_so(client, issuer, alice):
    issuer.pages[KEYS_PATH] = (500, b"{}")
    message = refusal(call(client, issuer.token()))
    assert f"could not fetch the signing keys of {issuer.url}" in message
    assert "answered 500" in message
    assert "tell the operator" in message


def test_the_keys_kept_serve_while_the_issuer_is_down(client, issuer, alice, settings):
    settings.OAUTH_EXTERNAL_JWKS_MAX_AGE_SECONDS = 0.05
    settings.OAUTH_EXTERNAL_JWKS_REFETCH_SECONDS = 0.05
    assert call(client, issuer.token()).status_code == 200
    issuer.pages[KEYS_PATH] = (500, b"{}")
    time.sleep(0.1)
    assert call(client, issuer.token()).status_code == 200
    assert issuer.hits[KEYS_PATH] == 2


def test_a_key_set_over_the_size_bound_is_refused_naming_it(client, issuer, alice):
    padding = "x" * external_tokens.FETCH_MAX_BYTES
    issuer.pages[KEYS_PATH] = (200, json.dumps({"keys": issuer.keys, "pad": padding}).encode())
    message = refusal(call(client, issuer.token()))
    assert f"sent more than {external_tokens.FETCH_MAX_BYTES} bytes" in message


def test_a_slow_issuer_is_given_up_on(client, issuer, alice, monkeypatch):
    monkeypatch.setattr(external_tokens, "FETCH_SECONDS", 0.3)
    issuer.delay = 3.0
    started = time.monotonic()
    message = refusal(call(client, issuer.token()))
    assert "could not be reached" in message
    # Given up near 0.3 s; the margin to the issuer's 3 s is for a loaded machine.
    assert time.monotonic() - started < 2.0


def test_a_redirect_is_not_followed(client, issuer, alice):
    issuer.pages[KEYS_PATH] = (302, b"")
    message = refusal(call(client, issuer.token()))
    assert "redirects to 'http://127.0.0.1:9/elsewhere', which is not followed" in message


# Discovery: this service names the issuer and offers no authorization server of its own.


def test_the_resource_metadata_names_the_external_issuer(client, issuer):
    for suffix, resource in [("/mcp", RESOURCE), ("/mcp/countfiles", f"{ORIGIN}/mcp/countfiles")]:
        document = client.get(f"/.well-known/oauth-protected-resource{suffix}").json()
        assert document["resource"] == resource
        assert document["authorization_servers"] == [issuer.url]


def test_this_service_offers_no_authorization_server(client, issuer):
    answer = client.get("/.well-known/oauth-authorization-server")
    assert answer.status_code == 404
    assert answer["Content-Type"] == "application/json"
    assert issuer.url in answer.json()["error_description"]
