"""Who a JWT access token from an external authorization server stands for (single sign-on).

With OAUTH_EXTERNAL_ISSUER set, MCP clients sign in with the operator's issuer, which hands
them JWT access tokens (RFC 9068). A token is taken when it is signed with one of the issuer's
keys by an asymmetric algorithm, has RFC 9068's `typ`, was issued by that issuer, is for the
endpoint called (its `aud`: the endpoint's URL, or OAUTH_EXTERNAL_AUDIENCE), and is within its
validity. Rights stay here: the token acts for the local user its username claim names, who
must exist and be active, with the token's scopes that this user may give (`oauth_scopes`), as
a token this service issued would.

The issuer's keys (its JWKS) come only from the operator's settings: OAUTH_EXTERNAL_JWKS_URL,
or the `jwks_uri` of the issuer's own discovery document; never from a URL a token names
(`jku`, `x5u`). They are kept in this process and fetched again when older than
OAUTH_EXTERNAL_JWKS_MAX_AGE_SECONDS, or when a token names a key not yet seen (the issuer
rotated its keys), at most once per OAUTH_EXTERNAL_JWKS_REFETCH_SECONDS.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import jwt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from jwt.exceptions import (
    ExpiredSignatureError,
    ImmatureSignatureError,
    InvalidAudienceError,
    InvalidIssuerError,
    InvalidSignatureError,
    MissingRequiredClaimError,
    PyJWTError,
)

from mcp_endpoint.access.oauth_scopes import grantable_scopes
from mcp_endpoint.access.oauth_tokens import TokenRefused
from nodespecs.callers import Caller, actor_oauth

logger = logging.getLogger(__name__)

# Asymmetric signatures only: `none` proves nothing, and with HMAC anyone holding the key (a
# client secret, a public key passed off as one) could sign.
ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
# A fetch of the issuer's metadata or keys: its whole time, and the most it may send.
FETCH_SECONDS = 5.0
FETCH_MAX_BYTES = 256 * 1024
# Clocks of the issuer and of this service may differ by this much.
CLOCK_SKEW_SECONDS = 60
CLIENT_CLAIMS = ("client_id", "azp")
UNKNOWN_CLIENT = "an unknown client"


@dataclass(frozen=True)
class _Keys:
    """The issuer's signing keys as last fetched for `source`, and when."""

    source: tuple[str, str]  # (OAUTH_EXTERNAL_ISSUER, OAUTH_EXTERNAL_JWKS_URL)
    jwks: tuple[dict[str, Any], ...]
    fetched_at: float  # time.monotonic() of the last fetch that succeeded, or first tried
    tried_at: float  # time.monotonic() of the last fetch, whether or not it succeeded
    problem: str = ""  # why the last fetch failed; "" when it did not


_keys: _Keys | None = None
_fetching = threading.Lock()


class _FetchFailed(Exception):
    """The issuer's metadata or keys could not be had; the message says why."""


def external_caller(raw: str, resource: str) -> Caller:
    """The caller the JWT access token `raw` from OAUTH_EXTERNAL_ISSUER stands for at
    `resource` (the URL of the MCP endpoint called), or `TokenRefused` saying why it is not
    accepted there."""
    issuer = settings.OAUTH_EXTERNAL_ISSUER
    header = _header(raw, issuer)
    algorithm = header.get("alg")
    if algorithm not in ALGORITHMS:
        raise TokenRefused(
            f"The access token is signed with {_quoted(algorithm)}, which this service does not "
            f"take: only asymmetric signatures ({', '.join(ALGORITHMS)}). Configure {issuer} to "
            "sign access tokens with one of them."
        )
    _check_type(header.get("typ"))
    key = _verifier(_jwk(header.get("kid"), issuer), algorithm)
    audience = settings.OAUTH_EXTERNAL_AUDIENCE or resource
    claims = _verified_claims(raw, key, audience, issuer, resource)
    user = _local_user(claims)
    username = user.get_username()
    return Caller(
        actor=actor_oauth(username, _client(claims)),
        scopes=_scopes(claims) & grantable_scopes(user),
        key_owner_id=user.pk,
        key_owner_name=username,
    )


def _header(raw: str, issuer: str) -> dict[str, Any]:
    try:
        return jwt.get_unverified_header(raw)
    except PyJWTError:
        raise TokenRefused(
            "The token is neither a well-formed API key (sy_<prefix>_<secret>) nor a JWT "
            f"access token: this service takes the access tokens {issuer} issues. Sign in "
            "with your client's OAuth flow, or send a valid API key."
        ) from None


def _check_type(typ: Any) -> None:
    """RFC 9068's `typ` (or one the operator added): keeps out ID tokens and other JWTs the
    issuer signs with the same keys. Media types ignore case and may omit `application/`."""
    taken = {_media_type(name) for name in settings.OAUTH_EXTERNAL_TOKEN_TYPES}
    if not isinstance(typ, str) or _media_type(typ) not in taken:
        raise TokenRefused(
            f"The token's typ header is {_quoted(typ)}, not an access token's "
            f"({', '.join(settings.OAUTH_EXTERNAL_TOKEN_TYPES)}; RFC 9068): send the access "
            "token, not an ID token. An issuer that stamps its access tokens otherwise needs its "
            "typ added to OAUTH_EXTERNAL_TOKEN_TYPES."
        )


def _quoted(value: Any) -> str:
    """A header's value as a refusal quotes it: the sender chose it, so only its start."""
    return repr(value if value is None else str(value)[:80])


def _media_type(name: str) -> str:
    return name.strip().lower().removeprefix("application/")


def _verified_claims(
    raw: str, key: jwt.PyJWK, audience: str, issuer: str, resource: str
) -> dict[str, Any]:
    """The token's claims once its signature, issuer, audience and times are checked."""
    try:
        return jwt.decode(
            raw,
            key,
            algorithms=[key.algorithm_name],
            audience=audience,
            # The settings drop an issuer's trailing slash; some issuers' `iss` keeps it.
            issuer=(issuer, issuer + "/"),
            leeway=CLOCK_SKEW_SECONDS,
            options={"require": ["exp", "iss", "aud"]},
        )
    except InvalidSignatureError:
        raise TokenRefused(
            f"The access token's signature does not verify with {issuer}'s key: it was altered, "
            "or another server signed it. Sign in again."
        ) from None
    except PyJWTError as error:
        # Raised once the signature verified: the claims quoted below are the issuer's.
        problem = _claims_problem(error, _unverified(raw), audience, issuer, resource)
        raise TokenRefused(problem) from None


def _claims_problem(
    error: PyJWTError, claims: dict[str, Any], audience: str, issuer: str, resource: str
) -> str:
    if isinstance(error, ExpiredSignatureError):
        return (
            f"The access token expired at {_when(claims.get('exp'))}: refresh it, or sign in again."
        )
    if isinstance(error, ImmatureSignatureError):
        return (
            f"The access token is not valid yet (nbf {_when(claims.get('nbf'))}, iat "
            f"{_when(claims.get('iat'))}): the issuer's clock or this server's is wrong; ask "
            "the operator to check them."
        )
    if isinstance(error, InvalidIssuerError):
        return (
            f"The access token was issued by {claims.get('iss')!r}, not by {issuer}: sign in "
            f"with {issuer}."
        )
    if isinstance(error, InvalidAudienceError):
        how = (
            f"ask {issuer} for a token for this endpoint (resource={resource})"
            if audience == resource
            else f"ask {issuer} for a token for the audience {audience} (OAUTH_EXTERNAL_AUDIENCE)"
        )
        return f"The access token is for {claims.get('aud')!r}, not for {audience}: {how}."
    if isinstance(error, MissingRequiredClaimError):
        return (
            f"The access token has no {error.claim!r} claim, which every access token must carry "
            "(RFC 9068): configure the issuer to add it."
        )
    return f"The access token is not valid: {error}."


def _unverified(raw: str) -> dict[str, Any]:
    """The claims of a token whose signature was verified already (for what a refusal quotes)."""
    try:
        return jwt.decode(raw, options={"verify_signature": False})
    except PyJWTError:
        return {}


def _when(timestamp: Any) -> str:
    if not isinstance(timestamp, int | float):
        return "unstated"
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))
    except (OverflowError, OSError, ValueError):  # a time past what the platform can show
        return repr(timestamp)


def _local_user(claims: dict[str, Any]) -> AbstractBaseUser:
    """The active local user the token's username claim names; rights stay with this service."""
    claim = settings.OAUTH_EXTERNAL_USERNAME_CLAIM
    username = claims.get(claim)
    if not isinstance(username, str) or not username:
        raise TokenRefused(
            f"The access token has no {claim!r} claim naming a user: configure the issuer to "
            "add it, or set OAUTH_EXTERNAL_USERNAME_CLAIM to the claim that holds usernames."
        )
    model = get_user_model()
    user = model._default_manager.filter(**{model.USERNAME_FIELD: username}).first()
    if user is None:
        raise TokenRefused(
            f"The user {username!r} (the token's {claim!r} claim) has no account on this "
            "service: an operator creates one with that username in the admin, with the "
            "permission to connect OAuth clients and the rights it should have here."
        )
    if not user.is_active:
        raise TokenRefused(
            f"The user {username!r} is not active on this service: an operator activates "
            "the account in the admin, or sign in as another user."
        )
    return user


def _client(claims: dict[str, Any]) -> str:
    """How the trail names the client: RFC 9068's `client_id`, or OpenID Connect's `azp`."""
    for claim in CLIENT_CLAIMS:
        value = claims.get(claim)
        if isinstance(value, str) and value:
            return value
    return UNKNOWN_CLIENT


def _scopes(claims: dict[str, Any]) -> frozenset[str]:
    """The token's scopes: its `scope` claim (RFC 9068: space-separated; a list is taken too),
    or, without one, `scp` (Okta's list, Entra ID's space-separated string)."""
    scope = claims.get("scope", claims.get("scp"))
    if isinstance(scope, str):
        return frozenset(scope.split())
    if isinstance(scope, list):
        return frozenset(item for item in scope if isinstance(item, str))
    return frozenset()


def _verifier(jwk: dict[str, Any], algorithm: str) -> jwt.PyJWK:
    """The public key of `jwk`, bound to the token's `algorithm`: a key that names another
    algorithm, or of a type that cannot make that signature, is refused."""
    named = jwk.get("alg")
    if named is not None and named != algorithm:
        raise TokenRefused(
            f"The access token is signed with {algorithm}, but its key {jwk.get('kid')!r} is for "
            f"{named}: it was altered, or another server signed it. Sign in again."
        )
    try:
        return jwt.PyJWK(jwk, algorithm)
    except PyJWTError as error:
        raise TokenRefused(
            f"The access token is signed with {algorithm}, which its key {jwk.get('kid')!r} "
            f"cannot verify ({error}): sign in again."
        ) from None


def _jwk(kid: Any, issuer: str) -> dict[str, Any]:
    """The issuer's signing key `kid` names (or its only key, for a token naming none),
    fetched again once if not yet seen."""
    keys = _current_keys()
    found = _pick(keys, kid)
    if found is None:
        keys = _refreshed_keys()
        found = _pick(keys, kid)
    if found is not None:
        return found
    if not keys.jwks:
        raise TokenRefused(
            f"This service could not fetch the signing keys of {issuer} ({keys.problem}); it "
            f"tries again within {settings.OAUTH_EXTERNAL_JWKS_REFETCH_SECONDS:g} s. Retry "
            "later; if it goes on, tell the operator."
        )
    if kid is None:
        raise TokenRefused(
            f"The access token names no key (no kid header), and {issuer} has several: "
            "configure the issuer to name its key in the tokens it signs."
        )
    raise TokenRefused(
        f"The access token was signed with the key {_quoted(kid)}, which {issuer} does not "
        "publish: it was signed by another server, or with a key the issuer dropped. Sign in "
        "again."
    )


def _pick(keys: _Keys, kid: Any) -> dict[str, Any] | None:
    if kid is None:
        return keys.jwks[0] if len(keys.jwks) == 1 else None
    return next((jwk for jwk in keys.jwks if jwk.get("kid") == kid), None)


def _source() -> tuple[str, str]:
    return (settings.OAUTH_EXTERNAL_ISSUER, settings.OAUTH_EXTERNAL_JWKS_URL)


def _current_keys() -> _Keys:
    """The keys kept, fetched first when there are none yet for the settings in force or
    they are older than OAUTH_EXTERNAL_JWKS_MAX_AGE_SECONDS."""
    keys = _keys
    if (
        keys is None
        or keys.source != _source()
        or time.monotonic() - keys.fetched_at > settings.OAUTH_EXTERNAL_JWKS_MAX_AGE_SECONDS
    ):
        return _refreshed_keys()
    return keys


def _refreshed_keys() -> _Keys:
    """The keys fetched again, unless a fetch was tried less than
    OAUTH_EXTERNAL_JWKS_REFETCH_SECONDS ago (then the keys kept). A failed fetch keeps the
    keys had before: an issuer briefly down does not lock everyone out."""
    global _keys
    with _fetching:  # one fetch at a time; the others then find its result
        source = _source()
        kept = _keys if _keys is not None and _keys.source == source else None
        now = time.monotonic()
        if kept is not None and now - kept.tried_at < settings.OAUTH_EXTERNAL_JWKS_REFETCH_SECONDS:
            return kept
        try:
            jwks = _fetch_jwks(*source)
        except _FetchFailed as failed:
            logger.warning("The signing keys of %s could not be fetched: %s", source[0], failed)
            if kept is None:
                _keys = _Keys(source, (), fetched_at=now, tried_at=now, problem=str(failed))
            else:
                _keys = replace(kept, tried_at=now, problem=str(failed))
            return _keys
        logger.info("Fetched %d signing keys of %s.", len(jwks), source[0])
        _keys = _Keys(source, jwks, fetched_at=now, tried_at=now)
        return _keys


def _fetch_jwks(issuer: str, jwks_url: str) -> tuple[dict[str, Any], ...]:
    """The signing keys at `jwks_url`, or at the `jwks_uri` of `issuer`'s metadata."""
    document = _get_json(jwks_url or _discovered_jwks_url(issuer))
    listed = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(listed, list):
        raise _FetchFailed("the key set has no `keys` list (RFC 7517)")
    return tuple(
        jwk
        for jwk in listed
        # Keys for encryption are not for checking signatures.
        if isinstance(jwk, dict) and jwk.get("use", "sig") == "sig"
    )


def _discovered_jwks_url(issuer: str) -> str:
    """The `jwks_uri` of `issuer`'s RFC 8414 metadata, or else of its OpenID Connect
    discovery document, whichever it publishes first."""
    problems = []
    for url in _metadata_urls(issuer):
        try:
            document = _get_json(url)
        except _FetchFailed as failed:
            problems.append(str(failed))
            continue
        if not isinstance(document, dict):
            problems.append(f"{url} is not a JSON object")
            continue
        # RFC 8414, 3.3: the metadata must be the issuer's own.
        named = document.get("issuer")
        if not isinstance(named, str) or named.rstrip("/") != issuer:
            problems.append(f"{url} names the issuer {named!r}, not {issuer}")
            continue
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str) or urlsplit(jwks_uri).scheme not in ("https", "http"):
            problems.append(f"{url} has no jwks_uri")
            continue
        return jwks_uri
    raise _FetchFailed(
        "; ".join(problems) + ". Set OAUTH_EXTERNAL_JWKS_URL to the issuer's key set, or "
        "correct OAUTH_EXTERNAL_ISSUER"
    )


def _metadata_urls(issuer: str) -> list[str]:
    """Where `issuer` may publish its metadata: RFC 8414's well-known URL (inserted before the
    issuer's path), then OpenID Connect's (appended to it)."""
    parts = urlsplit(issuer)
    return [
        f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{parts.path}",
        f"{issuer}/.well-known/openid-configuration",
    ]


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Fetches go to the URLs the operator's settings lead to, not wherever a server points."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirects)


def _get_json(url: str) -> Any:
    """The JSON document at `url`, fetched within FETCH_SECONDS and FETCH_MAX_BYTES."""
    deadline = time.monotonic() + FETCH_SECONDS
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    body = b""
    try:
        with _opener.open(request, timeout=FETCH_SECONDS) as response:
            while chunk := response.read(64 * 1024):
                body += chunk
                if len(body) > FETCH_MAX_BYTES:
                    raise _FetchFailed(f"{url} sent more than {FETCH_MAX_BYTES} bytes")
                if time.monotonic() > deadline:
                    raise _FetchFailed(f"{url} took more than {FETCH_SECONDS:g} s")
    except urllib.error.HTTPError as error:
        if 300 <= error.code < 400:
            raise _FetchFailed(
                f"{url} redirects to {error.headers.get('Location')!r}, which is not followed: "
                "name the final URL in the settings"
            ) from None
        raise _FetchFailed(f"{url} answered {error.code}") from None
    except (OSError, ValueError) as error:  # refused, unreachable, timed out, bad URL
        raise _FetchFailed(f"{url} could not be reached: {error}") from None
    try:
        return json.loads(body)
    except ValueError:
        raise _FetchFailed(f"{url} did not send JSON") from None
