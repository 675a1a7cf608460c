"""How much version history callers may store: a workflow keeps at most
GRAPHS_MAX_VERSIONS_PER_WORKFLOW versions, pruning its oldest drafts that nothing needs, and an
API key stores at most GRAPHS_STORED_BYTES_PER_KEY_PER_DAY bytes of versions a day (UTC).

Every save stores the whole definition (up to a megabyte), so without these a key saving
drafts in a loop added about 0.9 GB a minute at the default rate limit. What is never
pruned: published versions (served now, or once: a rollback target and the history's record)
and any version a run points at (its run page shows the graph that ran). So a workflow may
hold more than the cap when those alone are more; the daily bound still holds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Exists, F, OuterRef

from graphs.models import Run, StoredBytes, Workflow, WorkflowVersion
from nodespecs.callers import Caller


def prune_drafts(workflow: Workflow, *, keep: WorkflowVersion) -> int:
    """Delete the oldest drafts of `workflow` past GRAPHS_MAX_VERSIONS_PER_WORKFLOW versions:
    never `keep` (the version just saved), a published version or one a run points at.
    Returns how many were deleted."""
    excess = workflow.versions.count() - settings.GRAPHS_MAX_VERSIONS_PER_WORKFLOW
    if excess <= 0:
        return 0
    prunable = (
        workflow.versions.filter(published_at__isnull=True)
        .exclude(pk=keep.pk)
        .exclude(Exists(Run.objects.filter(version=OuterRef("pk"))))
        .order_by("number")
        .values_list("pk", flat=True)
    )
    chosen = list(prunable[:excess])
    deleted, _ = WorkflowVersion.objects.filter(pk__in=chosen).delete()
    return deleted


def _next_day(now: datetime) -> tuple[datetime, str]:
    """When the day after `now` starts (UTC), and how long until then, for people."""
    start = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    hours, rest = divmod(int((start - now).total_seconds()), 3600)
    return start, f"{hours} h {rest // 60:02d} min"


def charge_storage(caller: Caller, size: int) -> None:
    """Count `size` bytes of a version that API `caller` is about to store today, or raise
    `ValidationError` naming GRAPHS_STORED_BYTES_PER_KEY_PER_DAY and when its count starts
    again, storing nothing, when they would take the key past it. People and operators'
    commands are not counted; 0 turns the bound off."""
    limit = settings.GRAPHS_STORED_BYTES_PER_KEY_PER_DAY
    if not caller.is_api_caller or limit <= 0:
        return
    now = datetime.now(UTC)
    today = now.date()
    rows = StoredBytes.objects.filter(actor=caller.actor, day=today)
    # One conditional UPDATE: concurrent saves of one key cannot both pass the bound.
    if rows.filter(bytes__lte=limit - size).update(bytes=F("bytes") + size):
        return
    used = rows.values_list("bytes", flat=True).first()
    if used is None and size <= limit:
        try:
            with transaction.atomic():
                StoredBytes.objects.create(actor=caller.actor, day=today, bytes=size)
        except IntegrityError:  # another save of the key created today's row first
            return charge_storage(caller, size)
        StoredBytes.objects.filter(day__lt=today).delete()  # yesterday's counts are spent
        return
    starts, wait = _next_day(now)
    raise ValidationError(
        f"This version ({size:,} bytes) would take {caller.actor} past "
        f"GRAPHS_STORED_BYTES_PER_KEY_PER_DAY ({limit:,} bytes of versions a day; "
        f"{used or 0:,} stored today); nothing was stored. The count starts again at "
        f"{starts:%Y-%m-%d %H:%M} UTC, in {wait}. Send smaller changes less often (a patch "
        "still stores the whole definition), or ask an operator to raise the limit."
    )
