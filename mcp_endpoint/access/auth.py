"""Who is calling: API key from the request headers, or the anonymous scopes if allowed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from django.conf import settings

from mcp_endpoint.access.keys import api_key_authenticate
from mcp_endpoint.access.ratelimit import rate_limit_hit
from mcp_endpoint.models import ApiKey
from nodespecs.callers import Caller

REALM = 'Bearer realm="switchyard"'


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str
    headers: dict[str, str]


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key from `Authorization: Bearer KEY` or `X-API-Key: KEY`, if any."""
    authorization = headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return headers.get("x-api-key", "").strip() or None


def authenticate(headers: Mapping[str, str], client_address: str) -> Caller | Refusal:
    """Identify the caller; a `Refusal` (401) says why a presented key is not accepted."""
    raw = presented_key(headers)
    if raw is None:
        if settings.MCP_ANONYMOUS_SCOPES:
            return Caller(
                actor=f"anonymous:{client_address}",
                scopes=frozenset(settings.MCP_ANONYMOUS_SCOPES),
            )
        return Refusal(
            401,
            "Unauthorized: send an API key as 'Authorization: Bearer KEY' (or 'X-API-Key: KEY'). "
            "Keys are created in the admin or with manage.py create_api_key.",
            {"WWW-Authenticate": REALM},
        )
    result = api_key_authenticate(raw)
    if result.key is None:
        return Refusal(
            401,
            f"Unauthorized: {result.problem}",
            {"WWW-Authenticate": f'{REALM}, error="invalid_token"'},
        )
    return _caller_of(result.key)


def _caller_of(key: ApiKey) -> Caller:
    owner = key.owner
    return Caller(
        actor=f"key:{key.prefix}",
        scopes=frozenset(key.scopes),
        rate_limit=key.rate_limit_per_minute,
        key_owner_id=owner.pk if owner is not None else None,
        key_owner_name=owner.get_username() if owner is not None else "",
    )


def admit(headers: Mapping[str, str], client_address: str) -> Caller | Refusal:
    """Identify the caller and count the request against its per-minute limit; a `Refusal`
    (401 or 429) says why the request is not admitted. Shared by MCP and REST."""
    caller = authenticate(headers, client_address)
    if isinstance(caller, Refusal):
        return caller
    limit = caller.rate_limit
    if limit is None:
        limit = settings.MCP_RATE_LIMIT_PER_MINUTE
    decision = rate_limit_hit(identity=caller.actor, limit=limit)
    if not decision.allowed:
        return Refusal(
            429,
            f"Too many requests: the limit is {decision.limit} per minute for this caller; "
            f"retry in {decision.retry_after} s.",
            {"Retry-After": str(decision.retry_after)},
        )
    return caller
