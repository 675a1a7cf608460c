"""The REST routes over workflow runs, mounted on the API of mcp_endpoint/api.py.

`GET /api/v1/runs` pages through every run, newest first, and `GET /api/v1/runs/{id}` reads
one with a page of its node executions (scope runs:read, any caller's runs); `POST
/api/v1/runs/{id}/cancel` stops a run the key started (scope tools:execute). The reads and
their checks are graphs/run_api_queries.py; these routes parse, call and format. Imported by
api.py when it mounts the router, after it has defined what this module takes from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Query, Router, Schema
from pydantic import Field, WithJsonSchema

from graphs.control import RunNotFound, run_cancel
from graphs.models import NodeExecution, Run
from graphs.run_api_queries import (
    DEFAULT_PAGE,
    MAX_PAGE,
    RUNS_CURSOR,
    STEPS_CURSOR,
    BadRunQuery,
    NotFound,
    run_read,
    runs_read,
)
from mcp_endpoint.api import INVALID, KEYED, ApiRefusal, _caller, responses

router = Router(tags=["runs"])

# A query the route cannot answer (a cursor it did not hand out, an unknown status): the
# message says how to fix it.
BAD_QUERY = 400

# The statuses as the schema's enums: documented there, checked by graphs (a 400 naming them).
RunStatus = Annotated[str, WithJsonSchema({"type": "string", "enum": Run.Status.values})]
RunStatusQuery = Annotated[
    str, WithJsonSchema({"type": "string", "enum": ["", *Run.Status.values], "default": ""})
]
ExecutionStatus = Annotated[
    str, WithJsonSchema({"type": "string", "enum": NodeExecution.Status.values})
]
# An ISO 8601 date and time, checked by graphs (a 400 with an example): pydantic would also
# take a number of seconds since the epoch.
Moment = Annotated[str | None, WithJsonSchema({"type": "string", "format": "date-time"})]
# The cursors' patterns, checked by graphs (a 400 saying to pass back next_cursor): every
# string that matches is a position a page can start at.
RunsCursor = Annotated[str | None, WithJsonSchema({"type": "string", "pattern": RUNS_CURSOR})]
StepsCursor = Annotated[str | None, WithJsonSchema({"type": "string", "pattern": STEPS_CURSOR})]


class RunOut(Schema):
    """A workflow run, as its history stores it (secrets masked, large payloads capped)."""

    id: int
    workflow: str = Field(description="The workflow's name when the run started.")
    workflow_version_id: int = Field(description="The id of the workflow version that ran.")
    workflow_version: int = Field(description="That version's number within its workflow.")
    status: RunStatus
    caller: str = Field(description="Who started it: key:PREFIX for an API key, or a user.")
    arguments: dict[str, Any]
    result: Any = Field(description="The workflow's result; null unless it succeeded.")
    error: str | None = Field(description="Why it failed, was cancelled or timed out.")
    error_node_id: str | None = Field(description="The node it failed at, if it was one.")
    node_count: int | None = Field(
        description="Node executions recorded; null while the run is queued or running."
    )
    truncated: bool = Field(description="Some payload was too large and is stored cut short.")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: float | None


class RunListOut(Schema):
    runs: list[RunOut] = Field(description="Newest first.")
    next_cursor: str | None = Field(
        description="Pass it back as cursor for the next (older) page; null on the last page."
    )


class NodeExecutionOut(Schema):
    """One execution of one node in a run; a node in a loop has one per iteration."""

    index: int = Field(description="Its position in the run's execution order, from 0.")
    node_id: str
    node_type: str = Field(description="entry, mcp, transform, switch or exit.")
    iteration: int = Field(description="How many times this node had run, this one included.")
    status: ExecutionStatus
    input: Any = Field(description="The previous execution's output, or the run's arguments.")
    detail: Any = Field(description="What the node evaluated: a call, an expression, a choice.")
    output: Any
    error: str | None
    attempts: int
    truncated: bool
    started_at: datetime
    finished_at: datetime | None
    duration_ms: float | None


class RunDetailOut(Schema):
    run: RunOut
    node_executions: list[NodeExecutionOut] = Field(description="In execution order.")
    next_cursor: str | None = Field(
        description=(
            "Pass it back as cursor for the executions that follow; null once the run has "
            "ended and all were served (while it runs, it is where the next ones will be)."
        )
    )


class CancelOut(Schema):
    """What became of a cancel request: the run's status and a message saying why."""

    run_id: int
    status: str
    message: str


@contextmanager
def _refused_as_http() -> Iterator[None]:
    """A query the reads cannot answer, as the refusal that says why."""
    try:
        yield
    except BadRunQuery as exc:
        raise ApiRefusal(BAD_QUERY, str(exc)) from None
    except NotFound as exc:
        raise ApiRefusal(404, str(exc)) from None


# Query parameters declared once (a call in a default is evaluated once anyway).
LIMIT = Query(
    DEFAULT_PAGE, ge=1, le=MAX_PAGE, description=f"Per page, 1 to {MAX_PAGE} ({DEFAULT_PAGE})."
)
STATUS = Query("", description="A run status; empty for any. Another is refused (400).")
SINCE = Query(None, description="Runs created at or after it; no offset: UTC.")
UNTIL = Query(None, description="Runs created before it; no offset: UTC.")
RUNS_PAGE = Query(None, description="The next_cursor of the previous page, unchanged.")
STEPS_PAGE = Query(None, description="The next_cursor of the previous page, unchanged.")


@router.get(
    "/runs",
    summary="List workflow runs, newest first (scope runs:read)",
    response=responses(RunListOut, *KEYED, BAD_QUERY, 404, INVALID),
)
def list_runs(
    request: HttpRequest,
    workflow: str = Query("", max_length=128, description="A workflow's name."),
    status: RunStatusQuery = STATUS,
    caller: str = Query("", max_length=200, description="Who started the run, e.g. key:ab12."),
    since: Moment = SINCE,
    until: Moment = UNTIL,
    limit: int = LIMIT,
    cursor: RunsCursor = RUNS_PAGE,
) -> dict[str, Any]:
    _caller(request, "runs:read")
    with _refused_as_http():
        page = runs_read(
            workflow=workflow,
            status=status,
            caller=caller,
            since=since,
            until=until,
            cursor=cursor,
            limit=limit,
        )
    return {"runs": page.runs, "next_cursor": page.next_cursor}


@router.get(
    "/runs/{run_id}",
    summary="A workflow run and a page of its node executions (scope runs:read)",
    response=responses(RunDetailOut, *KEYED, BAD_QUERY, 404, INVALID),
)
def get_run(
    request: HttpRequest,
    run_id: int,
    limit: int = LIMIT,
    cursor: StepsCursor = STEPS_PAGE,
) -> dict[str, Any]:
    _caller(request, "runs:read")
    with _refused_as_http():
        detail = run_read(run_id=run_id, cursor=cursor, limit=limit)
    return {
        "run": detail.run,
        "node_executions": detail.node_executions,
        "next_cursor": detail.next_cursor,
    }


@router.post(
    "/runs/{run_id}/cancel",
    summary="Cancel a workflow run started with your key (scope tools:execute)",
    response=responses(CancelOut, *KEYED, 404, INVALID),
)
def cancel_run(request: HttpRequest, run_id: int) -> dict[str, Any]:
    caller = _caller(request, "tools:execute")
    try:
        cancellation = run_cancel(
            run_id=run_id,
            reason=f"Cancelled through the REST API by {caller.identity}.",
            caller=caller.identity,
        )
    except RunNotFound as exc:
        message = f"{exc} Runs can be cancelled only by the key that started them."
        raise ApiRefusal(404, message) from None
    return {
        "run_id": cancellation.run_id,
        "status": cancellation.status,
        "message": cancellation.message,
    }
