"""API key services: create, authenticate, revoke.

A key reads `sy_<prefix>_<secret>`. The prefix finds the row; the secret is compared by its
SHA-256 in constant time. Keys are 190-bit random strings, so a fast hash is enough (there is
nothing to brute-force) and authentication stays cheap on every request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.contrib.auth.base_user import AbstractBaseUser
from django.utils import timezone

from mcp_endpoint.models import ApiKey, Scope
from nodespecs.callers import Caller

KEY_MARKER = "sy"
# Writing last_used_at on every request would turn each read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)
# A key found valid is trusted for this long without asking the database again, so a busy
# client costs no query per request. Revoking clears this process at once; other processes
# notice within this time.
REMEMBER_SECONDS = 10.0
# By the key's digest: until when it is trusted, and the answer (its key and caller), which
# is then given again as it is.
_remembered: dict[str, tuple[float, AuthResult]] = {}


class InvalidScopes(ValueError):
    """Scopes that do not exist; the message lists the valid ones."""


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def validate_scopes(scopes: list[str]) -> list[str]:
    """Return the scopes de-duplicated, or raise `InvalidScopes` naming the unknown ones."""
    unknown = [scope for scope in scopes if scope not in Scope.values]
    if unknown:
        raise InvalidScopes(
            f"Unknown scope(s) {', '.join(unknown)}; valid scopes: {', '.join(Scope.values)}."
        )
    return list(dict.fromkeys(scopes))


def api_key_create(
    *,
    name: str,
    scopes: list[str],
    owner: AbstractBaseUser | None = None,
    expires_at: datetime | None = None,
    rate_limit_per_minute: int | None = None,
) -> tuple[ApiKey, str]:
    """Create a key and return it with its secret, which is not stored and cannot be shown again."""
    prefix = secrets.token_hex(4)
    secret = secrets.token_urlsafe(24)
    key = ApiKey.objects.create(
        name=name,
        owner_id=owner.pk if owner is not None else None,
        prefix=prefix,
        secret_hash=_hash(secret),
        scopes=validate_scopes(scopes),
        expires_at=expires_at,
        rate_limit_per_minute=rate_limit_per_minute,
    )
    return key, f"{KEY_MARKER}_{prefix}_{secret}"


def api_key_revoke(*, key: ApiKey) -> None:
    """Revoke a key at once; requests with it are refused from now on."""
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    for digest, (_, remembered) in list(_remembered.items()):
        if remembered.key is not None and remembered.key.pk == key.pk:
            _remembered.pop(digest, None)


@dataclass(frozen=True)
class AuthResult:
    """An active key and the caller it makes, or the `problem` that refuses it."""

    key: ApiKey | None
    problem: str | None = None
    caller: Caller | None = None

    @classmethod
    def accepted(cls, key: ApiKey) -> AuthResult:
        owner = key.owner
        caller = Caller(
            actor=f"key:{key.prefix}",
            scopes=frozenset(key.scopes),
            rate_limit=key.rate_limit_per_minute,
            key_owner_id=owner.pk if owner is not None else None,
            key_owner_name=owner.get_username() if owner is not None else "",
        )
        return cls(key, caller=caller)


def is_remembered(raw: str) -> bool:
    """Whether `api_key_authenticate(raw)` would answer without the database."""
    remembered = _remembered.get(_hash(raw))
    return remembered is not None and remembered[0] > time.monotonic()


def api_key_authenticate(raw: str) -> AuthResult:
    """Find the active key for a presented secret, or say why it is refused."""
    digest = _hash(raw)
    remembered = _remembered.get(digest)
    if remembered is not None and remembered[0] > time.monotonic():
        # The caller is remembered with its key: building it again cost more than the rest.
        result = remembered[1]
        if result.key is not None and not result.key.is_expired():
            return result
    result = _authenticate(raw)
    if result.key is not None:
        _remembered[digest] = (time.monotonic() + REMEMBER_SECONDS, result)
    else:
        _remembered.pop(digest, None)
    return result


def _authenticate(raw: str) -> AuthResult:
    marker, _, rest = raw.strip().partition("_")
    prefix, _, secret = rest.partition("_")
    if marker != KEY_MARKER or not prefix or not secret:
        return AuthResult(None, "The API key is malformed: keys look like sy_<prefix>_<secret>.")
    # The owner with it: a key acts for its owner, who is named in the trail.
    key = ApiKey.objects.select_related("owner").filter(prefix=prefix).first()
    if key is None or not hmac.compare_digest(key.secret_hash, _hash(secret)):
        return AuthResult(None, "The API key is not valid.")
    if key.is_revoked:
        return AuthResult(None, f"The API key {prefix} was revoked; ask for a new one.")
    now = timezone.now()
    if key.is_expired(now):
        return AuthResult(
            None, f"The API key {prefix} expired at {key.expires_at:%Y-%m-%d %H:%M} UTC."
        )
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return AuthResult.accepted(key)


def with_same_owner_actors(caller: Caller) -> Caller:
    """`caller` with its `same_owner_actors`: "key:<prefix>" of every key of the user it acts
    for (revoked ones too: their runs stay that user's). A caller acting for no user (a key
    without an owner) is returned as it is: it owns only the runs of its own key. One query,
    made only where runs are read by owner (test_workflow's `from_run`).

    A user's name is not among them: no run records a bare user name as its caller, and a
    user named like another caller ("manage.py") must not read that caller's runs."""
    user_id = caller.user_id
    if user_id is None:
        return caller
    prefixes = ApiKey.objects.filter(owner_id=user_id).values_list("prefix", flat=True)
    return replace(caller, same_owner_actors=frozenset(f"key:{prefix}" for prefix in prefixes))
