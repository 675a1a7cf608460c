"""The REST routes of a run's review, mounted on the API of mcp_endpoint/rest/api.py:
`GET /api/v1/runs/{id}/annotation` (scope runs:read) and `PUT /api/v1/runs/{id}/annotation`
(scope runs:decide), a reviewer's verdict, note and tags. The reads, writes and checks are
graphs/history/annotations.py; these routes parse, call and format.
"""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Field, Router, Schema
from pydantic import StringConstraints

from graphs.execution.control import RunNotFound
from graphs.history.annotations import (
    MAX_NOTE_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    TAG_PATTERN,
    TAG_RULE,
    AnnotationRefused,
    annotation_read,
    annotation_write,
)
from graphs.history.run_schemas import AnnotationOut
from graphs.models import RunAnnotation
from mcp_endpoint.rest.common import (
    INVALID,
    INVALID_BODY,
    KEYED,
    ApiRefusal,
    RunId,
    responses,
    rest_caller,
)

router = Router(tags=["runs"])

# A verdict or tag the checks refuse: the message says what to send.
BAD_ANNOTATION = 400

# The pattern is documented, not enforced here: annotations.py refuses another tag saying
# what a tag is (a 400), where pydantic would only quote its regex.
Tag = Annotated[
    str,
    StringConstraints(max_length=MAX_TAG_CHARS),
    Field(json_schema_extra={"pattern": TAG_PATTERN}),
]


class AnnotationIn(Schema):
    """A run's review, written whole: a field left out is emptied."""

    verdict: str = Field(
        "",
        max_length=8,
        description="good, bad, or empty for none.",
        json_schema_extra={"enum": ["", *RunAnnotation.Verdict.values]},
    )
    note: str = Field("", max_length=MAX_NOTE_CHARS, description="Why; shown on the run page.")
    tags: list[Tag] = Field(
        default_factory=list,
        max_length=MAX_TAGS,
        description=f"They replace the run's tags; {TAG_RULE}. Lowercased.",
    )


def _refused_as_http(exc: Exception) -> ApiRefusal:
    if isinstance(exc, RunNotFound):
        return ApiRefusal(404, str(exc))
    return ApiRefusal(BAD_ANNOTATION, f"{exc} Nothing was changed.")


@router.get(
    "/runs/{run_id}/annotation",
    summary="A run's review: verdict, note and tags (scope runs:read)",
    response=responses(AnnotationOut, *KEYED, 404, INVALID),
)
def get_annotation(request: HttpRequest, run_id: RunId) -> dict[str, Any]:
    rest_caller(request, "runs:read")
    try:
        return annotation_read(run_id=run_id).as_json()
    except RunNotFound as exc:
        raise _refused_as_http(exc) from None


@router.put(
    "/runs/{run_id}/annotation",
    summary="Write a run's review: verdict, note and tags (scope runs:decide)",
    response=responses(AnnotationOut, *KEYED, BAD_ANNOTATION, 404, *INVALID_BODY),
)
def put_annotation(request: HttpRequest, run_id: RunId, body: AnnotationIn) -> dict[str, Any]:
    caller = rest_caller(request, "runs:decide")
    try:
        annotation = annotation_write(
            run_id=run_id, verdict=body.verdict, note=body.note, tags=body.tags, by=caller.actor
        )
    except (RunNotFound, AnnotationRefused) as exc:
        raise _refused_as_http(exc) from None
    return annotation.as_json()
