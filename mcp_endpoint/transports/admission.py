"""Admitting an HTTP request to the MCP endpoint, shared by the Django view and the ASGI app.

`admit_request` checks the Host and the Origin, the body's size, the API key and the rate
limit, and returns the admitted request (`Inbound`, its caller known) or the answer that
refuses it; the transport then answers the admitted request itself (streamable_http.py, or a
step of the legacy SSE transport). `answers_without_database` tells the ASGI app whether that
can be done in the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, wraps
from typing import Any, TypeVar

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp import types

from graphs.execution import toolset
from mcp_endpoint.access.auth import admit, presented_key
from mcp_endpoint.access.challenges import Refusal
from mcp_endpoint.access.keys import is_remembered
from mcp_endpoint.access.oauth_discovery import origin_of, resource_url
from mcp_endpoint.access.oauth_tokens import is_remembered as token_remembered
from mcp_endpoint.access.origins import origin_allowed
from mcp_endpoint.jsonrpc.errors import (
    RETRY_AFTER_SECONDS,
    unavailable_errors,
    unavailable_message,
)
from mcp_endpoint.observability.facts import Facts
from mcp_endpoint.transports import http_messages
from nodespecs.knowledge.registry import needs_database
from nodespecs.settings_reads import read_once


def _host_allowed(host: str) -> bool:
    """Django's Host rule (ALLOWED_HOSTS), for requests that do not pass through Django."""
    return _host_matches(host, _allowed_hosts())


@read_once
def _allowed_hosts() -> tuple[str, ...]:
    allowed_hosts = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed_hosts:
        allowed_hosts = [".localhost", "127.0.0.1", "[::1]"]
    return tuple(allowed_hosts)


@lru_cache(maxsize=64)
def _host_matches(host: str, allowed_hosts: tuple[str, ...]) -> bool:
    # Clients send the same few Host values on every request; matching one costs 4 us.
    domain, _ = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed_hosts)


Answered = TypeVar("Answered", bound=Callable[..., Any])


def _plain(status: int, message: str) -> http_messages.Outbound:
    return http_messages.Outbound(status, {"Content-Type": "text/plain"}, message.encode())


def unavailable_outbound(exc: Exception) -> http_messages.Outbound:
    """503 with Retry-After, for a request that met a database or cache that did not answer."""
    return http_messages.error_outbound(
        503,
        types.INTERNAL_ERROR,
        unavailable_message(exc),
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def answers_unavailable(answer: Answered) -> Answered:
    """`answer` (a transport's step for an admitted request), answering 503 rather than failing
    when the database or cache does not answer."""

    @wraps(answer)
    def answering(*args: Any, **kwargs: Any) -> Any:
        try:
            return answer(*args, **kwargs)
        except unavailable_errors() as exc:
            return unavailable_outbound(exc)

    return answering  # type: ignore[return-value]


def admit_request(
    *,
    method: str,
    headers: dict[str, str],
    raw_headers: list[tuple[str, str]],
    body: bytes | None,
    client_address: str,
    scheme: str,
    path: str,
    host: str | None = None,
    group: str | None = None,
    facts: Facts | None = None,
) -> http_messages.Inbound | http_messages.Outbound:
    """The request, admitted: Host, Origin, body size, API key or OAuth token and rate limit
    checked, its caller known; or the answer that refuses it. `headers` has lower-cased names;
    `body` None means it was larger than MCP_MAX_BODY_BYTES and was not read; `scheme` and
    `path` are where the request came (the protected resource it is for); `host` is given
    when already validated; `group` is the slug of the workflow group whose endpoint was
    called (`/mcp/<slug>`); `facts` is the transport's record of what the protocol learns of
    it, for its telemetry."""
    if host is None:
        host = headers.get("host", "")
        if not _host_allowed(host):
            return _plain(
                400, f"Bad Request: the Host {host!r} is not served here (ALLOWED_HOSTS)."
            )
    origin = headers.get("origin")
    if origin and not origin_allowed(origin, host):
        return _plain(
            403,
            f"Forbidden: requests from the origin {origin} are not allowed "
            "(add it to MCP_ALLOWED_ORIGINS if it is yours).",
        )
    if body is None:
        return http_messages.error_outbound(
            413,
            types.INVALID_REQUEST,
            f"Request body too large: the limit is {settings.MCP_MAX_BODY_BYTES} bytes "
            "(MCP_MAX_BODY_BYTES).",
        )
    try:
        caller = admit(headers, client_address, resource_url(origin_of(scheme, host), path))
    except unavailable_errors() as exc:
        return unavailable_outbound(exc)
    if isinstance(caller, Refusal):
        return http_messages.error_outbound(
            caller.status, types.INVALID_REQUEST, caller.message, headers=caller.headers
        )
    return http_messages.Inbound(
        method=method,
        headers=headers,
        body=body,
        caller=caller,
        raw_headers=raw_headers,
        group=group,
        facts=facts if facts is not None else Facts(),
    )


def answers_without_database(method: str, headers: dict[str, str], body: bytes | None) -> bool:
    """Whether `handle_request` can run in the event loop: the caller's API key or OAuth
    access token is remembered (or none is sent), the catalog and workflow snapshots are
    fresh, and the request neither reads nor cancels a run nor ends a session (which cancels
    its runs), so no query will be made. A workflow's `tools/call` makes none here: its run
    starts on the reply's threads (graphs/execution/follow.py)."""
    raw = presented_key(headers)
    return (
        method != "DELETE"
        and (raw is None or is_remembered(raw) or token_remembered(raw))
        and not needs_database()
        and not toolset.needs_database()
        and not _touches_runs(body)
    )


def _touches_runs(body: bytes | None) -> bool:
    """Whether a body may cancel or read a workflow run (`notifications/cancelled`, a
    `tasks/*` request), which queries the database. Errs towards yes: a wrong yes costs a
    thread hop, a wrong no would block the loop."""
    return body is not None and (b"notifications/cancelled" in body or b"tasks/" in body)


@read_once
def max_body_bytes() -> int:
    """The most a request body may hold (MCP_MAX_BODY_BYTES)."""
    return int(settings.MCP_MAX_BODY_BYTES)


def body_too_large(declared_length: str | None) -> bool:
    """Whether a declared Content-Length is over the limit (so the body is not read)."""
    value = declared_length or ""
    return value.isascii() and value.isdecimal() and int(value) > max_body_bytes()
