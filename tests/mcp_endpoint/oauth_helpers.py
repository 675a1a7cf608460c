"""An OAuth client in a Django test client: registration, PKCE, consent and tokens, as MCP
clients do them (the live-server tests drive the real SDKs' clients instead)."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.contrib.auth.models import Permission, User

REDIRECT = "http://127.0.0.1:33418/callback"
ORIGIN = "http://testserver"


def verifier_and_challenge() -> tuple[str, str]:
    """A PKCE code verifier and its S256 challenge (RFC 7636, 4.2)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def person(username: str = "alice", *permissions: str, superuser: bool = False) -> User:
    """A user who may connect clients, with the other `permissions` ("app.codename")."""
    user = User.objects.create_user(username, password="pw", is_superuser=superuser)
    for name in ("mcp_endpoint.connect_oauth_clients", *permissions):
        app_label, codename = name.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


def register(client: Any, **metadata: Any) -> dict[str, Any]:
    """Register a public client by RFC 7591 and return the server's answer."""
    body = {
        "client_name": "Test client",
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **metadata,
    }
    response = client.post("/register", json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()


@dataclass
class Authorization:
    """An authorization request's parameters, and its PKCE verifier."""

    client_id: str
    verifier: str
    params: dict[str, str]


def authorization(
    client_id: str, *, resource: str | None = f"{ORIGIN}/mcp", **params: str
) -> Authorization:
    verifier, challenge = verifier_and_challenge()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "scope": "tools:read tools:execute",
        "state": "st4te",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        **params,
    }
    if resource is not None:
        query["resource"] = resource
    return Authorization(client_id, verifier, query)


def consent(client: Any, request: Authorization, *, allow: bool = True) -> dict[str, list[str]]:
    """Show the consent page, then allow (or deny); the query the client is sent back with."""
    page = client.get("/authorize", request.params)
    assert page.status_code == 200, (page.status_code, page.get("Location"), page.content[:500])
    form = {key: value for key, value in request.params.items()}
    if allow:
        form["allow"] = "Authorize"
    answer = client.post("/authorize", form)
    assert answer.status_code == 302, answer.content[:500]
    return redirect_query(answer)


def redirect_query(response: Any) -> dict[str, list[str]]:
    location = response["Location"]
    assert location.startswith(REDIRECT), location
    return parse_qs(urlsplit(location).query)


def exchange(
    client: Any, request: Authorization, code: str, **extra: str
) -> tuple[int, dict[str, Any]]:
    """Exchange `code` at the token endpoint; the status and the JSON answer."""
    body = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "client_id": request.client_id,
        "code_verifier": request.verifier,
        **extra,
    }
    if "resource" in request.params and "resource" not in extra:
        body["resource"] = request.params["resource"]
    response = client.post("/token", body)
    return response.status_code, response.json()


def refresh(client: Any, client_id: str, refresh_token: str) -> tuple[int, dict[str, Any]]:
    response = client.post(
        "/token",
        {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id},
    )
    return response.status_code, response.json()


def tokens_for(client: Any, user: User, scope: str = "tools:read tools:execute", **params: str):
    """Register, sign `user` in, consent and exchange: the token answer and the client id."""
    client_id = register(client)["client_id"]
    client.force_login(user)
    request = authorization(client_id, scope=scope, **params)
    code = consent(client, request)["code"][0]
    status, answer = exchange(client, request, code)
    assert status == 200, answer
    return answer, client_id
