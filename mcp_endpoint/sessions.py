"""Sessions of the 2025 protocol revisions, kept in Django's cache.

With a shared cache (Redis) any instance serves any session. A session is bound to the
credential that opened it, so a leaked session id is useless without the key.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache

from graphs.control import session_runs_cancel

_PREFIX = "mcp:session:"


@dataclass
class Session:
    id: str
    protocol_version: str
    owner: str
    client_info: dict[str, Any] = field(default_factory=dict)
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    log_level: str = "info"
    initialized: bool = False
    # The slug of the workflow group whose endpoint opened it; None for `/mcp`.
    server: str | None = None


def _ttl() -> int:
    return int(getattr(settings, "MCP_SESSION_TTL_SECONDS", 86400))


def session_open(
    *,
    protocol_version: str,
    owner: str,
    client_info: dict[str, Any],
    client_capabilities: dict[str, Any],
    server: str | None = None,
) -> Session:
    """Start a session at `/mcp`, or at the endpoint of the group whose slug is `server`; its
    id is 256 random bits (visible ASCII, as the transport requires)."""
    session = Session(
        id=secrets.token_urlsafe(32),
        protocol_version=protocol_version,
        owner=owner,
        client_info=client_info,
        client_capabilities=client_capabilities,
        server=server,
    )
    session_save(session)
    return session


def session_save(session: Session) -> None:
    cache.set(_PREFIX + session.id, asdict(session), timeout=_ttl())


def session_get(session_id: str, *, owner: str, server: str | None = None) -> Session | None:
    """The live session with this id opened by `owner` at the same endpoint (`server`, as in
    `session_open`), or None (unknown, ended, expired, or another endpoint's)."""
    if not session_id or len(session_id) > 128:
        return None
    data = cache.get(_PREFIX + session_id)
    if data is None or data.get("owner") != owner or data.get("server") != server:
        return None
    return Session(**data)


def session_end(session_id: str, *, reason: str) -> None:
    """End a session, and cancel the workflow runs its calls started: their answers have
    nowhere to go (`reason` is recorded on each run)."""
    # Runs first: should that fail, the session is still there for the client to end again.
    session_runs_cancel(session_id=session_id, reason=reason)
    cache.delete(_PREFIX + session_id)


# The client's answers to requests the server sent on a call's event stream.
_REPLY_PREFIX = "mcp:reply:"
REPLY_TTL_SECONDS = 300


def _reply_key(session_id: str, request_id: Any) -> str:
    return f"{_REPLY_PREFIX}{session_id}:{request_id}"


def reply_store(session_id: str, message: dict[str, Any]) -> None:
    """Keep a client's JSON-RPC response until the waiting call takes it."""
    cache.set(_reply_key(session_id, message.get("id")), message, timeout=REPLY_TTL_SECONDS)


def reply_take(session_id: str, request_id: Any) -> dict[str, Any] | None:
    """The client's response to `request_id`, once; None while it has not arrived."""
    key = _reply_key(session_id, request_id)
    message = cache.get(key)
    if message is not None:
        cache.delete(key)
    return message


# Streams of the legacy HTTP+SSE transport (`GET /sse`): the key that opened one, and the
# session its `initialize` started, so that a POST to `/messages` on any instance finds them.
_CHANNEL_PREFIX = "mcp:sse:"


def channel_open(owner: str) -> str:
    """Register a new stream opened by `owner`; its id is 256 random bits."""
    channel_id = secrets.token_urlsafe(32)
    cache.set(_CHANNEL_PREFIX + channel_id, {"owner": owner, "session": None}, timeout=_ttl())
    return channel_id


def channel_get(channel_id: str, *, owner: str) -> dict[str, Any] | None:
    """The open stream with this id opened by `owner` (`{"owner", "session"}`), or None."""
    if not channel_id or len(channel_id) > 128:
        return None
    data = cache.get(_CHANNEL_PREFIX + channel_id)
    if data is None or data.get("owner") != owner:
        return None
    return data


def channel_bind(channel_id: str, session_id: str) -> None:
    """Record the session that the stream's `initialize` started."""
    data = cache.get(_CHANNEL_PREFIX + channel_id)
    if data is not None:
        data["session"] = session_id
        cache.set(_CHANNEL_PREFIX + channel_id, data, timeout=_ttl())


def channel_end(channel_id: str) -> None:
    """Forget a stream that closed, and end its session."""
    data = cache.get(_CHANNEL_PREFIX + channel_id)
    cache.delete(_CHANNEL_PREFIX + channel_id)
    if data is not None and data.get("session"):
        session_end(data["session"], reason="The client closed its SSE stream")
