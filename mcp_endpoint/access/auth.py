"""Who is calling: an API key, or on an MCP endpoint an OAuth access token, from the request
headers; or the anonymous scopes if allowed. Refusals carry their `WWW-Authenticate`
challenges (`challenges`)."""

from __future__ import annotations

from collections.abc import Mapping

from django.conf import settings

from mcp_endpoint.access.challenges import KEY_HOW, Refusal, challenge
from mcp_endpoint.access.external_tokens import external_caller
from mcp_endpoint.access.keys import KEY_MARKER, api_key_authenticate
from mcp_endpoint.access.oauth_discovery import CHALLENGE_SCOPE, resource_metadata_url
from mcp_endpoint.access.oauth_tokens import TokenRefused, oauth_caller
from mcp_endpoint.access.ratelimit import rate_limit_hit
from nodespecs.callers import Caller

_KEY_PREFIX = f"{KEY_MARKER}_"


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key from `Authorization: Bearer KEY` or `X-API-Key: KEY`, if any."""
    authorization = headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return headers.get("x-api-key", "").strip() or None


def authenticate(
    headers: Mapping[str, str], client_address: str, resource: str | None = None
) -> Caller | Refusal:
    """Identify the caller; a `Refusal` (401) says why the credentials are not accepted.
    `resource` is the URL of the MCP endpoint called, where OAuth access tokens are taken
    beside API keys and refusals point to the endpoint's metadata; None elsewhere (REST,
    /metrics: API keys only)."""
    raw = presented_key(headers)
    if raw is None:
        if settings.MCP_ANONYMOUS_SCOPES:
            return Caller(
                actor=f"anonymous:{client_address}",
                scopes=frozenset(settings.MCP_ANONYMOUS_SCOPES),
            )
        # No credentials: no error code in the challenge (RFC 6750, section 3.1).
        metadata = _metadata(resource)
        how = KEY_HOW if metadata is None else f"{KEY_HOW} Or sign in with OAuth ({metadata})."
        return Refusal(
            401,
            f"Unauthorized: {how}",
            challenge(resource_metadata=metadata, scope=CHALLENGE_SCOPE if metadata else None),
        )
    # A key of ours is known by its prefix, without reading the OAuth settings.
    if raw.startswith(_KEY_PREFIX) or resource is None or not _oauth_here(resource):
        result = api_key_authenticate(raw)
        if result.caller is not None:
            return result.caller
        problem = result.problem or "The API key is not valid."
        scope = None
    else:
        try:
            if settings.OAUTH_EXTERNAL_ISSUER:
                return external_caller(raw, resource)
            return oauth_caller(raw, resource)
        except TokenRefused as refused:
            problem = str(refused)
        # What a client signing in again should ask for: without it, clients ask for every
        # scope the metadata lists (the MCP spec's fallback), which only a superuser may grant.
        scope = CHALLENGE_SCOPE
    metadata = _metadata(resource)
    return Refusal(
        401,
        f"Unauthorized: {problem}",
        challenge(
            error="invalid_token", description=problem, resource_metadata=metadata, scope=scope
        ),
    )


def _oauth_here(resource: str | None) -> bool:
    """Whether OAuth access tokens are taken where `resource` is (None: REST, /metrics)."""
    return resource is not None and bool(settings.OAUTH_ENABLED)


def _metadata(resource: str | None) -> str | None:
    """The metadata URL a refusal points to, where OAuth is taken (only refusals need it)."""
    return resource_metadata_url(resource) if resource and _oauth_here(resource) else None


def admit(
    headers: Mapping[str, str], client_address: str, resource: str | None = None
) -> Caller | Refusal:
    """Identify the caller and count the request against its per-minute limit; a `Refusal`
    (401 or 429) says why the request is not admitted. Shared by MCP (which names the
    `resource` called) and REST."""
    caller = authenticate(headers, client_address, resource)
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
