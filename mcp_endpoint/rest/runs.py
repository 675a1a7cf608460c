"""The REST routes over workflow runs, mounted on the API of mcp_endpoint/rest/api.py.

`GET /api/v1/runs` pages through every run, newest first, and `GET /api/v1/runs/{id}` reads one with
a page of its node executions (scope runs:read, any caller's runs); `POST /api/v1/runs/{id}/cancel`
stops a run the key started (scope tools:execute); `POST /api/v1/runs/{id}/decision` approves or
rejects a run waiting at an approval node for reviewers (scope runs:decide; not by the key that
started it, graphs/execution/approvals/decisions.py). The reads and their checks are
graphs/history/run_api_queries.py, and the shapes of their answers graphs/history/run_schemas.py,
which the MCP tools `list_runs` and `get_run` share (mcp_endpoint/features/run_tools.py); these
routes parse, call and format. Imported by api.py when it mounts the router, after it has defined
what this module takes from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema
from pydantic import WithJsonSchema

from graphs.execution.approvals.decisions import DecisionError, decide, decider_of
from graphs.execution.control import RunNotFound, run_cancel
from graphs.history.annotations import MAX_TAG_CHARS
from graphs.history.run_api_queries import (
    DEFAULT_PAGE,
    MAX_PAGE,
    VERDICT_FILTERS,
    BadRunQuery,
    WorkflowNotFound,
    run_read,
    runs_read,
)
from graphs.history.run_schemas import (
    Moment,
    RunDetailOut,
    RunListOut,
    RunsCursor,
    RunStatusQuery,
    StepsCursor,
)
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

# A query the route cannot answer (a cursor it did not hand out, an unknown status): the
# message says how to fix it.
BAD_QUERY = 400


class CancelOut(Schema):
    """What became of a cancel request: the run's status and a message saying why."""

    run_id: int
    status: str
    message: str


class DecisionIn(Schema):
    """A reviewer's decision on a run waiting at an approval node."""

    decision: str = Field(description="approved or rejected.", max_length=16)
    comment: str = Field("", description="Why; recorded with the decision.", max_length=2000)
    form: dict[str, Any] | None = Field(
        None, description="The node's form, filled in (its schema: waiting_for.form)."
    )


class DecisionOut(Schema):
    """A decision taken: the run goes on along its route."""

    run_id: int
    decision: str
    by: dict[str, str] | None
    decided_at: datetime
    message: str


@contextmanager
def _refused_as_http() -> Iterator[None]:
    """A query the reads cannot answer, as the refusal that says why."""
    try:
        yield
    except BadRunQuery as exc:
        raise ApiRefusal(BAD_QUERY, str(exc)) from None
    except (RunNotFound, WorkflowNotFound) as exc:
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
VERDICT = Query(
    "", description="A reviewer's verdict: good, bad, or none for the runs without one."
)
TAG = Query("", max_length=MAX_TAG_CHARS, description="A tag a reviewer gave the runs.")
# Documented (an enum, a pattern), checked by run_api_queries (whose messages say what to send).
VerdictQuery = Annotated[
    str, WithJsonSchema({"type": "string", "enum": list(VERDICT_FILTERS), "default": ""})
]
TagQuery = Annotated[
    str,
    WithJsonSchema(
        {"type": "string", "pattern": f"^[A-Za-z0-9._-]{{0,{MAX_TAG_CHARS}}}$", "default": ""}
    ),
]


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
    verdict: VerdictQuery = VERDICT,
    tag: TagQuery = TAG,
) -> dict[str, Any]:
    rest_caller(request, "runs:read")
    with _refused_as_http():
        page = runs_read(
            workflow=workflow,
            status=status,
            caller=caller,
            since=since,
            until=until,
            cursor=cursor,
            limit=limit,
            verdict=verdict,
            tag=tag,
        )
    return page.as_dict()


@router.get(
    "/runs/{run_id}",
    summary="A workflow run and a page of its node executions (scope runs:read)",
    response=responses(RunDetailOut, *KEYED, BAD_QUERY, 404, INVALID),
)
def get_run(
    request: HttpRequest,
    run_id: RunId,
    limit: int = LIMIT,
    cursor: StepsCursor = STEPS_PAGE,
) -> dict[str, Any]:
    rest_caller(request, "runs:read")
    with _refused_as_http():
        detail = run_read(run_id=run_id, cursor=cursor, limit=limit)
    return detail.as_dict()


@router.post(
    "/runs/{run_id}/cancel",
    summary="Cancel a workflow run started with your key (scope tools:execute)",
    response=responses(CancelOut, *KEYED, 404, INVALID),
)
def cancel_run(request: HttpRequest, run_id: RunId) -> dict[str, Any]:
    caller = rest_caller(request, "tools:execute")
    try:
        cancellation = run_cancel(
            run_id=run_id,
            reason=f"Cancelled through the REST API by {caller.actor}.",
            caller=caller.actor,
        )
    except RunNotFound as exc:
        message = f"{exc} Runs can be cancelled only by the key that started them."
        raise ApiRefusal(404, message) from None
    return {
        "run_id": cancellation.run_id,
        "status": cancellation.status,
        "message": cancellation.message,
    }


@router.post(
    "/runs/{run_id}/decision",
    summary="Approve or reject a run waiting for reviewers (scope runs:decide)",
    response=responses(DecisionOut, *KEYED, 404, 409, *INVALID_BODY),
)
def decide_run(request: HttpRequest, run_id: RunId, body: DecisionIn) -> dict[str, Any]:
    caller = rest_caller(request, "runs:decide")
    try:
        decided = decide(
            run_id, body.decision, decider_of(caller), comment=body.comment, form=body.form
        )
    except DecisionError as exc:
        raise ApiRefusal(exc.status, exc.message) from None
    return {
        "run_id": decided.run_id,
        "decision": decided.decision,
        "by": decided.by,
        "decided_at": decided.decided_at,
        "message": (
            f"Run {run_id} {decided.decision}: it goes on; read it at GET /api/v1/runs/{run_id}."
        ),
    }
