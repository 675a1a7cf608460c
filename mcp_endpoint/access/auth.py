"""Who is calling: API key from the request headers, or the anonymous scopes if allowed; and
the `WWW-Authenticate` challenges of the refusals (RFC 6750, section 3)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from django.conf import settings

from mcp_endpoint.access.keys import api_key_authenticate
from mcp_endpoint.access.ratelimit import rate_limit_hit
from mcp_endpoint.models import ApiKey
from nodespecs.callers import Caller

REALM = 'Bearer realm="switchyard"'
# How a caller authenticates, as every refusal that asks for a key says it.
KEY_HOW = (
    "send an API key as 'Authorization: Bearer KEY' (or 'X-API-Key: KEY'). "
    "Keys are created in the admin or with manage.py create_api_key."
)
# Longest error_description a challenge carries: the body says the rest.
DESCRIPTION_CHARACTERS = 300


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
        # No credentials: no error code in the challenge (RFC 6750, section 3.1).
        return Refusal(401, f"Unauthorized: {KEY_HOW}", {"WWW-Authenticate": REALM})
    result = api_key_authenticate(raw)
    if result.key is None:
        problem = result.problem or "The API key is not valid."
        return Refusal(
            401, f"Unauthorized: {problem}", _challenge(error="invalid_token", description=problem)
        )
    return _caller_of(result.key)


def scope_refusal(scope: str, message: str) -> Refusal:
    """403 for a caller without `scope`, with the challenge that names it (RFC 6750, 3.1:
    `error="insufficient_scope"`, `scope`), as the MCP authorization spec asks of a refusal
    for scope; `message` (which says how to fix it) is the body's and the description's."""
    return Refusal(403, message, scope_challenge(scope, message))


def scope_challenge(scope: str, message: str) -> dict[str, str]:
    """The `WWW-Authenticate` header of a refusal for the missing `scope`."""
    return _challenge(error="insufficient_scope", scope=scope, description=message)


def _challenge(*, error: str, description: str, scope: str | None = None) -> dict[str, str]:
    parameters = [REALM, f"error={_quoted(error)}"]
    if scope is not None:
        parameters.append(f"scope={_quoted(scope)}")
    parameters.append(f"error_description={_quoted(_description(description))}")
    return {"WWW-Authenticate": ", ".join(parameters)}


def _description(text: str) -> str:
    """`text` in the characters RFC 6750 allows an error_description (printable ASCII but `"`
    and `\\`): quotes become apostrophes, a backslash a slash, anything else a space; bounded."""
    text = text.replace('"', "'").replace("\\", "/")
    text = "".join(c if " " <= c <= "~" else " " for c in text)
    if len(text) > DESCRIPTION_CHARACTERS:
        text = text[: DESCRIPTION_CHARACTERS - 3] + "..."
    return text


def _quoted(value: str) -> str:
    """`value` as an HTTP quoted-string (RFC 9110, 5.6.4): `"` and `\\` escaped, no line
    breaks or other control characters."""
    value = "".join(c if c == "\t" or " " <= c <= "~" else " " for c in value)
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


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
