"""Sessions of the 2025 protocol revisions, and the legacy SSE transport's streams, kept in a
cache of their own (the `sessions` alias of CACHES).

With a shared cache (Redis) any instance serves any session. A session is bound to the
credential that opened it, so a leaked session id is useless without the key.

Sessions once shared the default cache with rate windows, task records and kept results: on
the embedded default (local memory, 300 entries) a key sending 400 `initialize` requests
culled other callers' live sessions (issue 25, item 11). Now nothing else is stored beside
them, and one caller holds at most MCP_SESSIONS_PER_CALLER: opening one more ends its oldest
(its later requests are answered 404, saying to start a new one; calls already going on
finish). So one caller's sessions only ever end its own.
"""

from __future__ import annotations

import logging
import secrets
import threading
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from django.conf import settings
from django.core.cache import BaseCache, cache, caches

from graphs.execution.control import session_runs_cancel

logger = logging.getLogger(__name__)

_PREFIX = "mcp:session:"
# The ids of one caller's sessions, oldest first (some may have expired since).
_OWNER_PREFIX = "mcp:sessions-of:"
# This process's opens take turns at reading and writing a caller's ids. Across instances
# sharing Redis two opens at once may leave one id out: that session is not counted against
# the cap until it expires.
_opening = threading.Lock()


def _store() -> BaseCache:
    """The cache that holds sessions and streams, and nothing else."""
    return caches["sessions"]


@dataclass
class Session:
    id: str
    protocol_version: str
    owner: str
    client_info: dict[str, Any] = field(default_factory=dict)
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    log_level: str = "info"
    initialized: bool = False
    # The workflow group whose endpoint opened it, by its slug; None for `/mcp`.
    group: str | None = None


_SESSION_FIELDS = {field.name for field in fields(Session)}


def _ttl() -> int:
    return int(getattr(settings, "MCP_SESSION_TTL_SECONDS", 86400))


def session_open(
    *,
    protocol_version: str,
    owner: str,
    client_info: dict[str, Any],
    client_capabilities: dict[str, Any],
    group: str | None = None,
) -> Session:
    """Start a session at `/mcp`, or at the endpoint of the group whose slug is `group`; its
    id is 256 random bits (visible ASCII, as the transport requires)."""
    session = Session(
        id=secrets.token_urlsafe(32),
        protocol_version=protocol_version,
        owner=owner,
        client_info=client_info,
        client_capabilities=client_capabilities,
        group=group,
    )
    store, owned = _store(), _OWNER_PREFIX + owner
    with _opening:
        # Ids of sessions ended since left the list when they ended (`session_end`); those
        # that expired are among the oldest, and go first.
        opened = [*store.get(owned, []), session.id]
        ended = opened[: max(len(opened) - settings.MCP_SESSIONS_PER_CALLER, 0)]
        if ended:
            store.delete_many([_PREFIX + session_id for session_id in ended])
            logger.info(
                "%s opened more than MCP_SESSIONS_PER_CALLER (%d) sessions: its oldest ended",
                owner,
                settings.MCP_SESSIONS_PER_CALLER,
            )
        store.set(owned, opened[len(ended) :], timeout=_ttl())
        session_save(session)
    return session


def session_save(session: Session) -> None:
    _store().set(_PREFIX + session.id, asdict(session), timeout=_ttl())


def session_get(session_id: str, *, owner: str, group: str | None = None) -> Session | None:
    """The live session with this id opened by `owner` at the same endpoint (`group`, as in
    `session_open`), or None (unknown, ended, expired, or another endpoint's)."""
    if not session_id or len(session_id) > 128:
        return None
    data = _store().get(_PREFIX + session_id)
    if data is None or data.get("owner") != owner or data.get("group") != group:
        return None
    if set(data) != _SESSION_FIELDS:
        # Stored by a server of another shape (before an upgrade): the client starts a new
        # session, as for one that expired.
        return None
    return Session(**data)


def session_end(session_id: str, *, reason: str) -> None:
    """End a session, and cancel the workflow runs its calls started: their answers have
    nowhere to go (`reason` is recorded on each run)."""
    # Runs first: should that fail, the session is still there for the client to end again.
    session_runs_cancel(session_id=session_id, reason=reason)
    store = _store()
    data = store.get(_PREFIX + session_id)
    store.delete(_PREFIX + session_id)
    if data is not None:  # it no longer counts against its owner's cap
        owned = _OWNER_PREFIX + data["owner"]
        with _opening:
            opened = store.get(owned, [])
            if session_id in opened:
                opened.remove(session_id)
                store.set(owned, opened, timeout=_ttl())


# The client's answers to requests the server sent on a call's event stream: in the default
# cache, as any client may send as many as it likes.
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
    _store().set(_CHANNEL_PREFIX + channel_id, {"owner": owner, "session": None}, timeout=_ttl())
    return channel_id


def channel_get(channel_id: str, *, owner: str) -> dict[str, Any] | None:
    """The open stream with this id opened by `owner` (`{"owner", "session"}`), or None."""
    if not channel_id or len(channel_id) > 128:
        return None
    data = _store().get(_CHANNEL_PREFIX + channel_id)
    if data is None or data.get("owner") != owner:
        return None
    return data


def channel_bind(channel_id: str, session_id: str) -> None:
    """Record the session that the stream's `initialize` started."""
    data = _store().get(_CHANNEL_PREFIX + channel_id)
    if data is not None:
        data["session"] = session_id
        _store().set(_CHANNEL_PREFIX + channel_id, data, timeout=_ttl())


def channel_end(channel_id: str) -> None:
    """Forget a stream that closed, and end its session."""
    data = _store().get(_CHANNEL_PREFIX + channel_id)
    _store().delete(_CHANNEL_PREFIX + channel_id)
    if data is not None and data.get("session"):
        session_end(data["session"], reason="The client closed its SSE stream")
