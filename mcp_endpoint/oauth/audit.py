"""The audit trail of OAuth: every grant, renewal and revocation of a client's access."""

from __future__ import annotations

from typing import Any

from nodespecs.audit import audit_record
from nodespecs.callers import actor_oauth


def audit_client_event(*, user: Any, application: Any, action: str, scopes: list[str]) -> None:
    """Record that `user`'s grant to the client `application` had `action` (granted, renewed,
    revoked); the event's fields are the scopes concerned, never a token."""
    if application is None:
        return
    username = user.get_username() if user is not None else "nobody"
    audit_record(
        actor=actor_oauth(username, application.name or application.client_id),
        action=action,
        target=application,
        fields=scopes,
    )
