"""The REST routes of examples, mounted on the API of mcp_endpoint/rest/api.py:
`POST /api/v1/runs/{id}/example` keeps a run that succeeded as an example of its workflow
(which every version must still pass before it is published), `DELETE` removes it. Both need
the scope workflows:write, the right to change the workflow's group, and the read right on
the run (runs:read, or a run the key or another key of its user started). The checks and the
copies are graphs/authoring/examples.py; these routes parse, call and format.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from ninja import Body, Field, Router, Schema

from graphs.authoring.examples import (
    MAX_NOTE_CHARS,
    ExampleRefused,
    example_as_json,
    example_create,
    example_delete,
)
from mcp_endpoint.access.keys import with_same_owner_actors
from mcp_endpoint.rest.common import (
    INVALID_BODY,
    KEYED,
    ApiRefusal,
    RunId,
    responses,
    rest_caller,
)

router = Router(tags=["examples"])

SCOPE = "workflows:write"
# The body may be left out (no note): declared once, as runs.py declares its queries.
OPTIONAL_BODY = Body(None)


class ExampleIn(Schema):
    """Why the run is kept (optional)."""

    note: str = Field("", max_length=MAX_NOTE_CHARS, description="Why it is kept; shown with it.")


class ExampleOut(Schema):
    """An example: where it came from and what it keeps (counted, not its values)."""

    example: int | None = Field(description="The example's id (null once removed).")
    workflow: str
    run_id: int | None = Field(description="The run it was kept from.")
    note: str
    created_by: str
    created_at: datetime
    calls: dict[str, int] = Field(description="Each mcp node's recorded outputs, counted.")
    decisions: dict[str, int] = Field(description="Each approval node's decisions, counted.")
    message: str


@router.post(
    "/runs/{run_id}/example",
    summary="Keep a run that succeeded as an example of its workflow (scope workflows:write)",
    description=(
        "Copies the run's arguments, each mcp node's outputs and each approval's decisions in "
        "order, and its result. publish_workflow then refuses a version that does not give "
        "that result from those outputs, unless forced. Refused: a run not finished (409), "
        "failed or cancelled (400), holding a masked or cut value (400), already an example "
        "or of a workflow at its bound of examples (409)."
    ),
    response=responses(ExampleOut, *KEYED, 404, 409, *INVALID_BODY),
)
def create_example(
    request: HttpRequest, run_id: RunId, body: ExampleIn | None = OPTIONAL_BODY
) -> dict[str, Any]:
    caller = with_same_owner_actors(rest_caller(request, SCOPE))
    try:
        example = example_create(run_id, caller, note=body.note if body is not None else "")
    except ExampleRefused as exc:
        raise ApiRefusal(exc.status, exc.message) from None
    return {
        **example_as_json(example),
        "message": (
            f"Run {run_id} is example {example.pk} of {example.workflow.name!r}: publishing a "
            "version now checks that it gives the same result."
        ),
    }


@router.delete(
    "/runs/{run_id}/example",
    summary="Stop keeping a run as an example (scope workflows:write)",
    response=responses(ExampleOut, *KEYED, 404, 422),
)
def delete_example(request: HttpRequest, run_id: RunId) -> dict[str, Any]:
    caller = with_same_owner_actors(rest_caller(request, SCOPE))
    try:
        example = example_delete(run_id, caller)
    except ExampleRefused as exc:
        raise ApiRefusal(exc.status, exc.message) from None
    return {
        **example_as_json(example),
        "message": f"Run {run_id} is no longer an example: publishing no longer checks it.",
    }
