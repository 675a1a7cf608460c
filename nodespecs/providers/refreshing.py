"""Refreshing a provider's tools once it is saved: started after the save commits, on a thread of
this process, so that a slow server (a stdio server that takes seconds to start, an HTTP server
far away) never holds the request that saved it.

The provider says where its refresh stands (`Provider.tools_refresh_state` and
`tools_refresh_at`): refreshing from the save on, then refreshed or failed, which
`provider_refresh` records whichever way a refresh ran. A failed refresh changes no spec and says
why (`Provider.last_error`). `refresh_state_text` is what a person is shown.

A thread rather than Celery: the refresh must reach the server from a process that may start it
(a stdio server is started by the process that calls it, and kept in its pool for the graph runs
that follow), it is one short job per save, and nothing is lost if the process ends: the page
then says the refresh was interrupted, and "Refresh tools" runs it again.
"""

from __future__ import annotations

import datetime
import functools
import logging
import threading

from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from nodespecs.audit import audit_refresh
from nodespecs.models import Provider
from nodespecs.providers.lifecycle import ProviderRefreshError, provider_refresh

logger = logging.getLogger(__name__)

# A refresh still marked running this long after its provider's own timeout was cut off (the
# process that ran it ended): said so, so that nobody waits for it.
_STALE_AFTER_SECONDS = 60.0

# One refresh at a time per provider in this process: two saves in a row would otherwise write
# the same specs at once.
_locks: dict[int, threading.Lock] = {}
_locks_guard = threading.Lock()

REFRESHING = Provider.RefreshState.REFRESHING

#: How the threads that refresh a provider after a save are named (tests wait for them).
THREAD_NAME_PREFIX = "provider-refresh-"


def provider_refresh_after_save(*, provider: Provider, actor: str, wait_seconds: float) -> bool:
    """Refresh the tools of `provider` (just saved, in the current transaction) once that
    transaction commits, on a thread, recording the refresh for `actor` in the audit trail.

    The provider is marked refreshing now. Once the transaction commits, the caller waits at
    most `wait_seconds` for the refresh (so that a fast one is done before the next page is
    shown), then goes on while it ends in the background. Returns False, and does nothing,
    for a provider that is never refreshed (disabled, or a server a builder declared).
    """
    if not provider.enabled or provider.declared_by:
        return False
    provider.tools_refresh_state = REFRESHING
    provider.tools_refresh_at = timezone.now()
    provider.save(update_fields=["tools_refresh_state", "tools_refresh_at"])
    transaction.on_commit(
        functools.partial(_start, provider_id=provider.pk, actor=actor, wait_seconds=wait_seconds)
    )
    return True


def _start(*, provider_id: int, actor: str, wait_seconds: float) -> None:
    thread = threading.Thread(
        target=_refresh,
        kwargs={"provider_id": provider_id, "actor": actor},
        name=f"{THREAD_NAME_PREFIX}{provider_id}",
        daemon=True,
    )
    thread.start()
    thread.join(wait_seconds)


def _lock_of(provider_id: int) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(provider_id, threading.Lock())


def _refresh(*, provider_id: int, actor: str) -> None:
    try:
        with _lock_of(provider_id):
            _refresh_now(provider_id, actor)
    finally:
        # This thread's own database connection: nobody else would close it.
        connection.close()


def _refresh_now(provider_id: int, actor: str) -> None:
    close_old_connections()
    provider = Provider.objects.filter(pk=provider_id).first()
    if provider is None:
        return  # deleted since it was saved
    reason = ""
    try:
        report = provider_refresh(provider=provider)
    except ProviderRefreshError as exc:
        reason = str(exc)  # recorded on the provider by provider_refresh, when it reached it
    except Exception as exc:
        logger.exception("The refresh of provider %r failed", provider.name)
        reason = f"the refresh failed unexpectedly ({type(exc).__name__}: {exc}); see the log"
    else:
        audit_refresh(actor=actor, provider=provider, report=report)
        return
    # A refresh that ended before reaching the server (disabled meanwhile) or broke on the way
    # says so too, rather than staying "refreshing" for good.
    Provider.objects.filter(pk=provider_id, tools_refresh_state=REFRESHING).update(
        tools_refresh_state=Provider.RefreshState.FAILED,
        tools_refresh_at=timezone.now(),
        last_error=reason,
    )


def refresh_state_text(provider: Provider, *, now: datetime.datetime | None = None) -> str:
    """Where the refresh of the provider's tools stands, in words: "refreshing… (since
    10:42:03)", "refreshed at 10:42:05", "failed at 10:42:05: why", or "never refreshed"."""
    at = provider.tools_refresh_at
    state = provider.tools_refresh_state
    if not state or at is None:
        return "never refreshed" if provider.last_refreshed_at is None else "refreshed"
    when = timezone.localtime(at).strftime("%Y-%m-%d %H:%M:%S")
    if state == Provider.RefreshState.REFRESHED:
        return f"refreshed at {when}"
    if state == Provider.RefreshState.FAILED:
        return f"failed at {when}: {provider.last_error}"
    age = ((now or timezone.now()) - at).total_seconds()
    if age > provider.timeout_seconds + _STALE_AFTER_SECONDS:
        return (
            f"interrupted: started at {when} and never ended (the process running it stopped); "
            "use “Refresh tools” on the provider list to run it again"
        )
    return f"refreshing… (since {when})"
