"""Where this service's rules meet django-oauth-toolkit's authorization server.

django-oauth-toolkit (with its RFC 9700 gates on, config/settings.py) checks PKCE, codes,
clients, refresh-token rotation and reuse; this validator adds what is ours: a plain `http`
redirect only to a loopback address (RFC 8252, 7.3; any port), and the audit trail of every
grant, renewal and revocation.
"""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from oauth2_provider.models import AccessToken, RefreshToken
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.common import Request

from mcp_endpoint.access.oauth_tokens import token_checksum
from mcp_endpoint.oauth.audit import audit_client_event
from nodespecs.models import AuditEvent

LOOPBACK_NAMES = ("localhost",)


def loopback_host(host: str) -> bool:
    """Whether `host` names this machine: `localhost` or a loopback address."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def redirect_uri_problem(uri: str) -> str | None:
    """Why `uri` may not be a redirect URI here, or None: HTTPS, or plain HTTP to loopback."""
    parts = urlsplit(uri)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname and loopback_host(parts.hostname):
        return None
    return (
        f"The redirect URI {uri[:200]!r} is neither HTTPS nor plain HTTP to a loopback address "
        "(127.0.0.1, [::1], localhost): register one that is."
    )


class Validator(OAuth2Validator):
    """django-oauth-toolkit's validator with this service's rules (module docstring)."""

    def validate_redirect_uri(
        self, client_id: str, redirect_uri: str, request: Request, *args: Any, **kwargs: Any
    ) -> bool:
        return redirect_uri_problem(redirect_uri) is None and bool(
            super().validate_redirect_uri(client_id, redirect_uri, request, *args, **kwargs)
        )

    def save_bearer_token(
        self, token: dict[str, Any], request: Request, *args: Any, **kwargs: Any
    ) -> None:
        super().save_bearer_token(token, request, *args, **kwargs)
        renewed = request.grant_type == "refresh_token"
        audit_client_event(
            user=request.user,
            application=request.client,
            action=AuditEvent.Action.RENEWED if renewed else AuditEvent.Action.GRANTED,
            scopes=token.get("scope", "").split(),
        )

    def validate_refresh_token(
        self, refresh_token: str, client: Any, request: Request, *args: Any, **kwargs: Any
    ) -> bool:
        replayed = _replayed(refresh_token)
        valid = bool(
            super().validate_refresh_token(refresh_token, client, request, *args, **kwargs)
        )
        if replayed is not None:
            # The toolkit has just revoked the family (REFRESH_TOKEN_REUSE_PROTECTION): a
            # refresh token used twice means it leaked, and the trail says so.
            audit_client_event(
                user=replayed.user,
                application=replayed.application,
                action=AuditEvent.Action.REVOKED,
                scopes=["token_family"],
            )
        return valid

    def revoke_token(
        self,
        token: str,
        token_type_hint: str | None,
        request: Request,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        holder = _holder(token)
        super().revoke_token(token, token_type_hint, request, *args, **kwargs)
        if holder is not None:
            user, application, scopes = holder
            audit_client_event(
                user=user, application=application, action=AuditEvent.Action.REVOKED, scopes=scopes
            )


def _replayed(raw: str) -> RefreshToken | None:
    """The refresh token `raw`, if it is one already used or revoked while its family still
    holds a live one: a replay, which makes the toolkit revoke that family."""
    used = (
        RefreshToken.objects.select_related("user", "application")
        .filter(token_checksum=token_checksum(raw), revoked__isnull=False)
        .exclude(token_family=None)
        .first()
    )
    if used is None:
        return None
    live = RefreshToken.objects.filter(token_family=used.token_family, revoked__isnull=True)
    return used if live.exists() else None


def _holder(raw: str) -> tuple[Any, Any, list[str]] | None:
    """The user, client and scopes of the access or refresh token `raw`, if it is one still
    in force."""
    checksum = token_checksum(raw)
    access = (
        AccessToken.objects.select_related("user", "application")
        .filter(token_checksum=checksum)
        .first()
    )
    if access is not None:
        return access.user, access.application, access.scope.split()
    refresh = (
        RefreshToken.objects.select_related("user", "application", "access_token")
        .filter(token_checksum=checksum, revoked__isnull=True)
        .first()
    )
    if refresh is None:
        return None
    scopes = refresh.access_token.scope.split() if refresh.access_token is not None else []
    return refresh.user, refresh.application, scopes
