"""Who an OAuth access token this server issued stands for, at the resource it is used at.

A token is accepted at the one MCP endpoint it was issued for (RFC 8707: `/mcp/a`'s token is
refused at `/mcp/b`), until it expires or is revoked. Its caller acts for the user who
consented, with the scopes granted that the user may still give (`oauth_scopes`). Like an API
key, a token found valid is trusted for a few seconds without asking the database again, its
user's rights with it: revoking a token clears this process at once, and other processes
within REMEMBER_SECONDS; a right taken from the user leaves their tokens within
REMEMBER_SECONDS, in every process.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.utils import timezone
from oauth2_provider.models import AccessToken

from mcp_endpoint.access.oauth_scopes import grantable_scopes
from nodespecs.callers import Caller, actor_oauth

REMEMBER_SECONDS = 10.0
# Tokens rotate hourly, so a process would otherwise keep every token it ever saw: past this
# many, the ones older than REMEMBER_SECONDS (of no use any more) are dropped.
REMEMBERED_TOKENS = 10_000
_remembered: dict[str, tuple[float, AccessToken]] = {}


class TokenRefused(Exception):
    """An access token not accepted here; the message says why and what to do."""


def token_checksum(raw: str) -> str:
    """How django-oauth-toolkit finds a token it stores hashed (RFC 9700 token storage)."""
    return hashlib.sha256(raw.encode()).hexdigest()


def is_remembered(raw: str) -> bool:
    """Whether `oauth_caller(raw, ...)` would find the token without the database."""
    remembered = _remembered.get(token_checksum(raw))
    return remembered is not None and time.monotonic() - remembered[0] < REMEMBER_SECONDS


def _token(raw: str) -> AccessToken | None:
    checksum = token_checksum(raw)
    now = time.monotonic()
    remembered = _remembered.get(checksum)
    if remembered is not None and now - remembered[0] < REMEMBER_SECONDS:
        return remembered[1]
    token = (
        AccessToken.objects.select_related("application", "user")
        .filter(token_checksum=checksum)
        .first()
    )
    if token is None:
        _remembered.pop(checksum, None)
    else:
        if len(_remembered) >= REMEMBERED_TOKENS:
            _forget_stale(now)
        _remembered[checksum] = (now, token)
    return token


def _forget_stale(now: float) -> None:
    """Drop the tokens remembered longer than REMEMBER_SECONDS; all of them if that is not
    enough (so many fresh tokens at once: each then costs one query again)."""
    for checksum, (since, _) in list(_remembered.items()):
        if now - since >= REMEMBER_SECONDS:
            _remembered.pop(checksum, None)
    if len(_remembered) >= REMEMBERED_TOKENS:
        _remembered.clear()


@receiver(post_delete, sender=AccessToken)
def _forget_deleted(sender: Any, instance: AccessToken, **kwargs: Any) -> None:
    """A revoked token (django-oauth-toolkit deletes it) is refused in this process at once."""
    for checksum, (_, token) in list(_remembered.items()):
        if token.pk == instance.pk:
            _remembered.pop(checksum, None)


def client_name(token: AccessToken) -> str:
    """How the trail names the client a token was issued to."""
    application = token.application
    if application is None:
        return "an unknown client"
    return application.name or application.client_id


def oauth_caller(raw: str, resource: str) -> Caller:
    """The caller the access token `raw` stands for at `resource` (the URL of the MCP endpoint
    called), or `TokenRefused` saying why it is not accepted there."""
    token = _token(raw)
    if token is None:
        raise TokenRefused(
            "The token is neither a well-formed API key (sy_<prefix>_<secret>) nor an OAuth access "
            "token this server honours (it was revoked, or another server issued it): sign in "
            "again with your client's OAuth flow, or send a valid API key."
        )
    if token.expires <= timezone.now():
        raise TokenRefused(
            f"The access token expired at {token.expires.isoformat()}: refresh it, or sign in "
            "again."
        )
    if resource not in (token.resource or []):
        issued_for = ", ".join(token.resource or []) or "no resource"
        raise TokenRefused(
            f"The access token was issued for {issued_for}, not for {resource}: ask for a token "
            f"for this endpoint (resource={resource})."
        )
    user = token.user
    if user is None or not user.is_active:
        raise TokenRefused(
            "The user this access token acts for is no longer active: sign in as another user."
        )
    username = user.get_username()
    return Caller(
        actor=actor_oauth(username, client_name(token)),
        scopes=frozenset(token.scopes) & grantable_scopes(user),
        key_owner_id=user.pk,
        key_owner_name=username,
    )
