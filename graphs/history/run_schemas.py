"""The shapes of the run history as API clients receive it, declared once for every caller:
the REST routes (mcp_endpoint/rest/runs.py) document and check their answers with these
models, and the MCP tools `list_runs` and `get_run` and the `run://` resource
(mcp_endpoint/features/run_tools.py) take their `outputSchema` and their JSON from them.

The records themselves are built by graphs/history/run_api_queries.py (`run_record`,
`execution_record`); `runs_page_json` and `run_detail_json` turn a page of them into JSON
values, the same as the REST routes send: datetimes as ISO 8601 texts in UTC to the
millisecond, as Django's JSON encoder (which django-ninja renders with) writes them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from django.core.serializers.json import DjangoJSONEncoder
from pydantic import BaseModel, Field, PlainSerializer, WithJsonSchema

from graphs.history.run_api_queries import RUNS_CURSOR, STEPS_CURSOR, RunDetail, RunsPage
from graphs.models import NodeExecution, Run, RunAnnotation

# The statuses as enums in the schemas: documented there, checked by run_api_queries (whose
# message names the valid ones).
RunStatus = Annotated[str, WithJsonSchema({"type": "string", "enum": Run.Status.values})]
RunStatusQuery = Annotated[
    str, WithJsonSchema({"type": "string", "enum": ["", *Run.Status.values], "default": ""})
]
ExecutionStatus = Annotated[
    str, WithJsonSchema({"type": "string", "enum": NodeExecution.Status.values})
]
# An ISO 8601 date and time, checked by run_api_queries (a refusal with an example): pydantic
# would also take a number of seconds since the epoch.
Moment = Annotated[str | None, WithJsonSchema({"type": "string", "format": "date-time"})]
# The cursors' patterns, checked by run_api_queries (a refusal saying to pass back
# next_cursor): every string that matches is a position a page can start at.
RunsCursor = Annotated[str | None, WithJsonSchema({"type": "string", "pattern": RUNS_CURSOR})]
StepsCursor = Annotated[str | None, WithJsonSchema({"type": "string", "pattern": STEPS_CURSOR})]

_ENCODER = DjangoJSONEncoder()


def _as_rest(moment: datetime) -> str:
    """A datetime as the REST routes write it: ISO 8601 to the millisecond, Z for UTC."""
    text: str = _ENCODER.default(moment)
    return text


# A datetime, written in JSON as REST writes it (the REST routes dump in Python mode and have
# Django's encoder write it; the MCP tools dump in JSON mode).
Timestamp = Annotated[
    datetime,
    PlainSerializer(_as_rest, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


class RerunFromOut(BaseModel):
    """Where a re-run started from in the run it re-runs (graphs/execution/resuming/reruns.py)."""

    node: str
    iteration: int = Field(description="Which execution of the node (from 1), as the run shows.")
    index: int = Field(description="Its step in both runs: the steps before it were replayed.")
    version: str = Field(description="original (the run's own version) or current.")
    input_edited: bool = Field(description="The node was given an input other than its own.")


class PausedAtOut(BaseModel):
    """Where a test run paused at a breakpoint stands (graphs/execution/resuming/breakpoints.py)."""

    node: str = Field(description="The node it paused before: it has not run.")
    index: int = Field(description="The step that node will be.")
    iteration: int
    expires_at: Timestamp = Field(description="When it ends cancelled if nobody goes on.")


class RunOut(BaseModel):
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
    created_at: Timestamp
    started_at: Timestamp | None
    finished_at: Timestamp | None
    duration_ms: float | None
    rerun_of: int | None = Field(
        default=None, description="The run this one re-runs from a node; null if none."
    )
    rerun_from: RerunFromOut | None = Field(default=None, description="From where; null if none.")
    paused_at: PausedAtOut | None = Field(
        default=None,
        description=(
            "Where a paused run stands (go on: POST /api/v1/runs/{id}/breakpoint); null unless "
            "paused."
        ),
    )


class RunListOut(BaseModel):
    runs: list[RunOut] = Field(description="Newest first.")
    next_cursor: str | None = Field(
        description="Pass it back as cursor for the next (older) page; null on the last page."
    )


class NodeExecutionOut(BaseModel):
    """One execution of one node in a run; a node in a loop has one per iteration."""

    index: int = Field(description="Its position in the run's execution order, from 0.")
    node_id: str
    node_type: str = Field(description="entry, mcp, transform, switch, approval or exit.")
    iteration: int = Field(description="How many times this node had run, this one included.")
    status: ExecutionStatus
    input: Any = Field(description="The previous execution's output, or the run's arguments.")
    detail: Any = Field(description="What the node evaluated: a call, an expression, a choice.")
    output: Any
    error: str | None
    attempts: int
    truncated: bool
    started_at: Timestamp
    finished_at: Timestamp | None
    duration_ms: float | None


class DeciderOut(BaseModel):
    kind: str = Field(description="user, api_key or client.")
    id: str
    name: str


class ApprovalOut(BaseModel):
    """An approval node the run reached: what was asked, the wait and its decision."""

    node: str
    iteration: int
    message: str = Field(description="What the person is asked (the node's message).")
    form: dict[str, Any] | None = Field(description="The form's JSON Schema, if it has one.")
    approvers: str = Field(description="reviewers or caller.")
    since: Timestamp = Field(description="When the run began to wait.")
    timeout_at: Timestamp | None = Field(description="When the wait times out, if it does.")
    until: Timestamp | None = Field(description="When it was decided; null while waiting.")
    waited_ms: float | None = Field(description="How long the run waited.")
    decision: str | None = Field(description="approved, rejected or timeout; null while waiting.")
    by: DeciderOut | None = Field(description="Who decided; null for a timeout.")
    comment: str
    form_values: dict[str, Any] | None = Field(description="The form as it was filled in.")


class AnnotationOut(BaseModel):
    """A reviewer's judgement of a run (graphs/history/annotations.py)."""

    run_id: int
    verdict: str = Field(
        description="good, bad, or empty for none.",
        json_schema_extra={"enum": ["", *RunAnnotation.Verdict.values]},
    )
    note: str
    tags: list[str] = Field(description="Sorted; each lowercase letters, digits, -, _ or .")
    by: str = Field(description="Who wrote it last: a username, or key:PREFIX for an API key.")
    updated_at: Timestamp | None = Field(description="When; null if nobody annotated the run.")


class RunDetailOut(BaseModel):
    run: RunOut
    node_executions: list[NodeExecutionOut] = Field(description="In execution order.")
    next_cursor: str | None = Field(
        description=(
            "Pass it back as cursor for the executions that follow; null once the run has "
            "ended and all were served (while it runs, it is where the next ones will be)."
        )
    )
    approvals: list[ApprovalOut] = Field(
        default_factory=list, description="The approval nodes the run reached, oldest first."
    )
    waiting_for: ApprovalOut | None = Field(
        default=None,
        description="What a waiting run waits for (decide it: POST /api/v1/runs/{id}/decision).",
    )
    annotation: AnnotationOut | None = Field(
        default=None,
        description="A reviewer's verdict, note and tags; null if nobody annotated the run.",
    )


def runs_page_json(page: RunsPage) -> dict[str, Any]:
    """A page of runs as JSON values, in `RunListOut`'s shape."""
    return RunListOut.model_validate(page.as_dict()).model_dump(mode="json")


def run_detail_json(detail: RunDetail) -> dict[str, Any]:
    """A run and a page of its node executions as JSON values, in `RunDetailOut`'s shape."""
    return RunDetailOut.model_validate(detail.as_dict()).model_dump(mode="json")
