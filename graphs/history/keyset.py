"""The keyset of the runs list, shared by the history pages and the REST API.

A cursor is the (created_at, id) of a row, and a page is the rows just before (older) or just
after (newer) it in that order. Each filter has an index that starts with it and ends with
(created_at, id) (see `Run.Meta.indexes`), so a page is a short range scan at row 5,000,000
as at row 1; nothing counts the table or skips by OFFSET. A run inserted while a client pages
is newer than every cursor already handed out, so it never shifts the pages that follow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Q, QuerySet

from graphs.models import Run

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
# A cursor's token: microseconds since the epoch (17 digits reach the year 5138, so every
# token that matches is a valid position), a dash, the id.
_TOKEN = re.compile(r"([0-9]{1,17})-([0-9]{1,18})")
TOKEN_PATTERN = f"^{_TOKEN.pattern}$"  # for JSON Schema, where $ is the end of the string


@dataclass(frozen=True)
class Cursor:
    """A position in the runs list: the (created_at, id) of a row."""

    created_at: datetime
    id: int

    @classmethod
    def of(cls, run: Run) -> Cursor:
        return cls(run.created_at, run.pk)

    @classmethod
    def parse(cls, token: str) -> Cursor:
        """Read a token made by `token()`; raises ValueError when it is not one."""
        match = _TOKEN.fullmatch(token)
        if match is None:
            raise ValueError(f"Not a runs cursor: {token!r}.")
        return cls(_EPOCH + int(match[1]) * _MICROSECOND, int(match[2]))

    def token(self) -> str:
        """The cursor as a short URL-safe string: microseconds since the epoch, then the id."""
        return f"{(self.created_at - _EPOCH) // _MICROSECOND}-{self.id}"


@dataclass(frozen=True)
class RunPage:
    runs: list[Run]
    # Cursors of the neighbouring pages; None where there is nothing more that way.
    older: Cursor | None
    newer: Cursor | None


def _before(cursor: Cursor) -> Q:
    # (created_at, id) < cursor, written so that `created_at <= c` bounds the index range
    # scan and the rest only sorts out rows of the same instant; an OR of the two cases
    # would make PostgreSQL scan every older row.
    return Q(created_at__lte=cursor.created_at) & (
        Q(created_at__lt=cursor.created_at) | Q(pk__lt=cursor.id)
    )


def _after(cursor: Cursor) -> Q:
    return Q(created_at__gte=cursor.created_at) & (
        Q(created_at__gt=cursor.created_at) | Q(pk__gt=cursor.id)
    )


def run_page(
    runs: QuerySet[Run],
    *,
    before: Cursor | None = None,
    after: Cursor | None = None,
    size: int,
) -> RunPage:
    """A page of `runs` (filtered, their columns chosen), newest first: the newest, those
    older than `before`, or those newer than `after`. One query, of `size` + 1 rows."""
    if after is not None:
        rows = list(runs.filter(_after(after)).order_by("created_at", "id")[: size + 1])
        more_newer = len(rows) > size
        rows = rows[:size][::-1]
        return RunPage(
            rows,
            older=Cursor.of(rows[-1]) if rows else after,
            newer=Cursor.of(rows[0]) if more_newer else None,
        )
    if before is not None:
        runs = runs.filter(_before(before))
    rows = list(runs.order_by("-created_at", "-id")[: size + 1])
    return RunPage(
        rows[:size],
        older=Cursor.of(rows[size - 1]) if len(rows) > size else None,
        newer=Cursor.of(rows[0]) if before is not None and rows else None,
    )
