"""A reviewer's judgement of a run: a verdict (good, bad or none), a note and tags.

One annotation per run, written whole each time (its tags replace the run's tags), read by the
run page, `GET /api/v1/runs/{id}` and `GET /api/v1/runs/{id}/annotation`. Tags are `RunTag`
rows so that the runs list filters by one with an index (graphs/history/selectors.py). Every
input is checked before anything is written: a refused write changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction

from graphs.execution.control import RunNotFound
from graphs.models import Run, RunAnnotation, RunTag

VERDICTS = tuple(RunAnnotation.Verdict.values)
MAX_NOTE_CHARS = 4000
MAX_TAGS = 20
MAX_TAG_CHARS = 40
# What a tag is made of, once lowercased: ASCII letters and digits, '-', '_' and '.', so that
# a tag reads the same in a URL, a filter box and a list.
_TAG = re.compile(rf"[a-z0-9._-]{{1,{MAX_TAG_CHARS}}}")
TAG_PATTERN = f"^{_TAG.pattern}$"  # for JSON Schema
TAG_RULE = (
    f"a tag is 1 to {MAX_TAG_CHARS} letters (a-z), digits, '-', '_' or '.', e.g. "
    "wrong-branch or needs.review"
)
# The largest id a run can have (a 64-bit primary key).
MAX_RUN_ID = 2**63 - 1
# How many characters of a refused value a message quotes.
_QUOTED = 60


class AnnotationRefused(ValueError):
    """An annotation that cannot be written; the message says what was wrong and how to fix
    it."""


@dataclass(frozen=True)
class Annotation:
    """A run's annotation; a run nobody annotated has the empty one (no verdict, no `by`)."""

    run_id: int
    verdict: str = ""
    note: str = ""
    tags: list[str] = field(default_factory=list)
    # Who wrote it last: a username, or key:<prefix> for an API key.
    by: str = ""
    updated_at: datetime | None = None

    def as_json(self) -> dict[str, Any]:
        """As the REST API gives it (`review_schemas.AnnotationOut`)."""
        return {
            "run_id": self.run_id,
            "verdict": self.verdict,
            "note": self.note,
            "tags": self.tags,
            "by": self.by,
            "updated_at": self.updated_at,
        }


def verdict_checked(verdict: str) -> str:
    """`verdict` as stored (good, bad, or empty for none), whatever its case and spaces;
    raises `AnnotationRefused` for another."""
    normal = verdict.strip().lower()
    if normal not in ("", *VERDICTS):
        raise AnnotationRefused(
            f"Unknown verdict {verdict[:_QUOTED]!r}: send good, bad, or an empty verdict for none."
        )
    return normal


def tag_checked(tag: str) -> str:
    """`tag` lowercased and stripped; raises `AnnotationRefused` when it is not a tag."""
    normal = tag.strip().lower()
    if not _TAG.fullmatch(normal):
        raise AnnotationRefused(f"Invalid tag {tag[:_QUOTED]!r}: {TAG_RULE}.")
    return normal


def tags_checked(tags: Iterable[str]) -> list[str]:
    """The tags to store, sorted and each once; raises `AnnotationRefused` for more than
    `MAX_TAGS` or one that is not a tag."""
    given = list(tags)
    if len(given) > MAX_TAGS:
        raise AnnotationRefused(
            f"Too many tags ({len(given)}): a run takes at most {MAX_TAGS}; drop some."
        )
    return sorted({tag_checked(tag) for tag in given})


def tags_split(text: str) -> list[str]:
    """The tags typed in one box (the run page's form), separated by commas or spaces."""
    return [part for part in re.split(r"[\s,]+", text) if part]


def note_checked(note: str) -> str:
    """`note` without its surrounding spaces; raises `AnnotationRefused` past
    `MAX_NOTE_CHARS`."""
    note = note.strip()
    if len(note) > MAX_NOTE_CHARS:
        raise AnnotationRefused(
            f"The note is {len(note)} characters long: at most {MAX_NOTE_CHARS} are kept; "
            "shorten it."
        )
    return note


def annotation_of(run: Run) -> Annotation:
    """The annotation of a run read with `select_related("annotation")`: no query when it
    has none, one for its tags when it has one."""
    try:
        row = run.annotation
    except RunAnnotation.DoesNotExist:
        return Annotation(run_id=run.pk)
    return _with_tags(row)


def annotation_read(*, run_id: int) -> Annotation:
    """A run's annotation (the empty one when nobody annotated it); raises `RunNotFound`."""
    if not 0 < run_id <= MAX_RUN_ID:
        # No such run; and SQLite would refuse to compare a larger number with the column.
        raise _not_found(run_id)
    row = RunAnnotation.objects.filter(run_id=run_id).first()
    if row is not None:
        return _with_tags(row)
    if not Run.objects.filter(pk=run_id).exists():
        raise _not_found(run_id)
    return Annotation(run_id=run_id)


def annotation_write(
    *, run_id: int, verdict: str, note: str, tags: Iterable[str], by: str
) -> Annotation:
    """Write a run's annotation whole: its verdict ("good", "bad" or "" for none), note (at
    most `MAX_NOTE_CHARS`) and tags (at most `MAX_TAGS`, replacing the run's), recording `by`
    (a username or key:<prefix>). Raises `AnnotationRefused` for a bad value and
    `RunNotFound` for no run, in both cases before writing anything."""
    verdict, note, checked = verdict_checked(verdict), note_checked(note), tags_checked(tags)
    with transaction.atomic():
        # Locked, so that two reviewers saving at once each leave a whole annotation.
        if not Run.objects.select_for_update().filter(pk=run_id).exists():
            raise _not_found(run_id)
        row, _ = RunAnnotation.objects.update_or_create(
            run_id=run_id, defaults={"verdict": verdict, "note": note, "by": by[:200]}
        )
        RunTag.objects.filter(run_id=run_id).exclude(tag__in=checked).delete()
        RunTag.objects.bulk_create(
            [RunTag(run_id=run_id, tag=tag) for tag in checked], ignore_conflicts=True
        )
    return Annotation(run_id, row.verdict, row.note, checked, row.by, row.updated_at)


def _with_tags(row: RunAnnotation) -> Annotation:
    tags = list(
        RunTag.objects.filter(run_id=row.run_id).order_by("tag").values_list("tag", flat=True)
    )
    return Annotation(row.run_id, row.verdict, row.note, tags, row.by, row.updated_at)


def _not_found(run_id: int) -> RunNotFound:
    return RunNotFound(
        f"No run {run_id}; it may have been deleted. The runs are listed at GET /api/v1/runs "
        "and on the Runs page."
    )
