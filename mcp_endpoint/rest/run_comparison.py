"""The REST route comparing two runs of one workflow, mounted on the API of
mcp_endpoint/rest/api.py: `GET /api/v1/runs/{a}/compare/{b}` (scope runs:read, any caller's
runs). The comparison is graphs/history/comparison.py; this route parses, calls and formats.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Field, Router, Schema

from graphs.execution.control import RunNotFound
from graphs.history.comparison import RunsNotComparable, runs_compare
from graphs.history.comparison_shapes import (
    DIFFERENT,
    NOT_COMPARABLE,
    NOT_COMPARED,
    ONLY_A,
    ONLY_B,
    SAME,
)
from graphs.history.run_schemas import ExecutionStatus, RunStatus, Timestamp
from mcp_endpoint.rest.common import (
    INVALID,
    KEYED,
    ApiRefusal,
    RunId,
    responses,
    rest_caller,
)

router = Router(tags=["runs"])

# Two runs that are not of one workflow: a well-formed request the runs' state refuses; the
# message says which to compare instead.
NOT_COMPARABLE_STATUS = 409

_STATES: dict[str, Any] = {"enum": [SAME, DIFFERENT, NOT_COMPARABLE, NOT_COMPARED, ONLY_A, ONLY_B]}


class DifferencesOut(Schema):
    items: list[dict[str, Any]] = Field(
        description=(
            'Each {"path": a JSON Pointer, "a": the value in run A, "b": the value in run B}; '
            "a side without that place has no key. A value over limits.value_chars of JSON is "
            'given as {"_truncated": true, "bytes", "preview"}.'
        )
    )
    cut: bool = Field(description="There were more than these: only the first are given.")


class ComparedOut(Schema):
    state: str = Field(
        description=(
            "same, different, not_comparable (a side was stored masked or cut), not_compared "
            "(the comparison's budget was spent), only_a or only_b (an execution one run has)."
        ),
        json_schema_extra=_STATES,
    )
    differences: DifferencesOut | None = Field(description="Where they differ; null unless so.")
    reason: str = Field(description="Why it was not compared; empty when it was.")


class ComparedRunOut(Schema):
    id: int
    workflow: str
    workflow_version_id: int
    workflow_version: int
    status: RunStatus
    result: Any
    error: str | None = Field(description="The start of its error, if it has one.")
    error_node_id: str | None
    node_count: int
    truncated: bool
    created_at: Timestamp
    duration_ms: float | None


class StepOut(Schema):
    node_id: str
    iteration: int


class DivergenceOut(Schema):
    index: int = Field(description="The first execution index at which the paths differ.")
    a: StepOut | None = Field(description="What run A executed there; null: it had ended.")
    b: StepOut | None = Field(description="What run B executed there; null: it had ended.")


class ExecutionSideOut(Schema):
    index: int
    status: ExecutionStatus
    error: str | None
    truncated: bool


class NodeComparedOut(Schema):
    node_id: str
    iteration: int
    node_type: str
    state: str = Field(
        description="As the output's, or different when the executions ended differently.",
        json_schema_extra=_STATES,
    )
    a: ExecutionSideOut | None = Field(description="The execution in run A; null: none.")
    b: ExecutionSideOut | None = Field(description="The execution in run B; null: none.")
    output: ComparedOut


class LimitsOut(Schema):
    executions: int = Field(description="The most node executions of each run compared.")
    differences_per_value: int
    differences: int = Field(description="The most differences in all.")
    value_chars: int = Field(description="A longer value in a difference is a preview.")


class ComparisonOut(Schema):
    """Two runs of one workflow side by side."""

    a: ComparedRunOut
    b: ComparedRunOut
    same_version: bool
    same_path: bool = Field(description="The runs executed the same nodes in the same order.")
    divergence: DivergenceOut | None = Field(description="Where the paths part; null if not.")
    arguments: ComparedOut
    result: ComparedOut
    executions: list[NodeComparedOut] = Field(
        description="Each (node, iteration) either run executed, in path order."
    )
    cut: bool = Field(description="A run had more executions than were compared.")
    notes: list[str] = Field(description="What was left out, and why.")
    limits: LimitsOut


@router.get(
    "/runs/{run_id}/compare/{other_id}",
    summary="Compare two runs of one workflow (scope runs:read)",
    response=responses(ComparisonOut, *KEYED, NOT_COMPARABLE_STATUS, 404, INVALID),
)
def compare_runs(request: HttpRequest, run_id: RunId, other_id: RunId) -> dict[str, Any]:
    """Where the paths of run `run_id` (A) and run `other_id` (B) part, and what differs in
    their arguments, each node's output (matched by node and iteration) and their result."""
    rest_caller(request, "runs:read")
    try:
        comparison = runs_compare(run_id, other_id)
    except RunNotFound as exc:
        raise ApiRefusal(404, str(exc)) from None
    except RunsNotComparable as exc:
        raise ApiRefusal(NOT_COMPARABLE_STATUS, str(exc)) from None
    return comparison.as_json()
