"""The REST routes of a run's steps, mounted on the API of mcp_endpoint/rest/api.py:

- `GET /api/v1/runs/{id}/steps/{index}` (scope runs:read): a step and the context its
  expressions saw, rebuilt from the history (graphs/history/step_context.py);
- `POST /api/v1/runs/{id}/steps/{index}/evaluate` (scope runs:read): a JSONata expression
  evaluated in that context, within a run's own bounds;
- `POST /api/v1/runs/{id}/rerun` (scope tools:execute): a new run from one of the run's nodes,
  the steps before it replayed (graphs/execution/resuming/reruns.py);
- `POST /api/v1/runs/{id}/breakpoint` (scope tools:execute): continue, step or stop a test
  run paused at a breakpoint (graphs/execution/resuming/breakpoints.py).

Acting on a run is kept to its owner, as cancelling is: a key re-runs any run it may read
(runs:read) or one of its own user's, and continues, steps or stops a run its user started,
or any with runs:decide (a reviewer's right over other people's runs). These routes parse,
call and format.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja import Field, Path, Router, Schema
from ninja.responses import Status

from graphs.authoring.rights import run_change_refusal
from graphs.engine.checks.all_checks import MAX_EXPRESSION_CHARS
from graphs.engine.nesting import deeper_than
from graphs.execution.resuming.breakpoints import ACTIONS, PauseError, pause_end
from graphs.execution.resuming.reruns import NOT_GIVEN, VERSIONS, RerunRefused, rerun
from graphs.history.step_context import (
    ExpressionRefused,
    StepNotFound,
    step_context,
    step_evaluate,
)
from mcp_endpoint.access.keys import with_same_owner_actors
from mcp_endpoint.rest.common import (
    INVALID,
    INVALID_BODY,
    KEYED,
    ApiRefusal,
    ErrorOut,
    RunId,
    responses,
    rest_caller,
)

router = Router(tags=["runs"])

# An expression that does not parse or failed evaluating, a re-run or an action that cannot
# be done as asked: the message says what to change.
REFUSED = 400
# A run in a state that does not allow it (still going, not paused).
CONFLICT = 409
# What became of a run paused at a breakpoint, by the action taken.
PAUSE_ENDED = {
    "continue": "continued: it goes on to its next breakpoint or its end",
    "step": "stepped: it runs the node it stood before, then pauses before the next",
    "stop": "stopped: it ended cancelled",
}
# A step's index: the history numbers executions from 0 (the column holds up to 2**31 - 1).
STEP = Path(..., ge=0, le=2**31 - 1, description="The step's index in the run, from 0.")


class RunStepContextOut(Schema):
    """What a step's expressions read: `$`, `$previousNode()` and `$executionCount(id)`."""

    model_config = {"populate_by_name": True}

    root: dict[str, Any] = Field(
        alias="$", description="Each node's latest output before the step, by node id."
    )
    previousNode: Any = Field(description="The output of the execution just before the step.")
    executionCount: dict[str, int] = Field(description="How many times each node had run.")


class RunStepOut(Schema):
    """One step of a run and the context it saw, rebuilt from the stored history."""

    run_id: int
    index: int
    node: str
    type: str = Field(description="entry, mcp, transform, switch, approval or exit.")
    iteration: int = Field(description="How many times this node had run, this one included.")
    status: str = Field(
        description=(
            "The execution's status; paused for the node a run paused at a breakpoint stands "
            "before (it has not run)."
        )
    )
    context: RunStepContextOut
    unfaithful: list[str] = Field(
        description=(
            "Nodes of the context whose stored output is masked (a secret) or cut (over the "
            "size cap): not what they produced."
        )
    )


class StepEvaluateIn(Schema):
    expression: str = Field(
        max_length=MAX_EXPRESSION_CHARS,
        description='A JSONata expression, as a node would hold it, e.g. "$.entry.amount * 2".',
    )


class StepEvaluateOut(Schema):
    value: Any = Field(
        description=(
            "The expression's value in the step's context (null when it has none), cut as a "
            "stored output is when over the size cap."
        )
    )


class RerunIn(Schema):
    from_node: str = Field(max_length=128, description="The node to run again from.")
    iteration: int = Field(
        0,
        ge=-(2**31),
        le=2**31 - 1,
        description="Which of that node's executions: 0 the first, -1 the latest.",
    )
    input: Any = Field(
        None,
        description=(
            "The node's input in place of its own: the arguments for the entry node, the "
            "tool's arguments for an mcp node, the previous output for any other. Leave it "
            "out to replay the node's own input (null is an input too)."
        ),
    )
    version: str = Field(
        "original",
        max_length=16,
        description="Run on the run's own version (original) or the workflow's current one.",
        json_schema_extra={"enum": list(VERSIONS)},
    )


class RerunOut(Schema):
    run_id: int = Field(description="The new run: read it at GET /api/v1/runs/{run_id}.")
    rerun_of: int
    from_node: str
    index: int = Field(description="The step of the new run that executes first.")
    message: str


class BreakpointIn(Schema):
    action: str = Field(
        max_length=16,
        description="continue (to the next breakpoint), step (one node) or stop.",
        json_schema_extra={"enum": list(ACTIONS)},
    )


class BreakpointOut(Schema):
    run_id: int
    status: str = Field(description="The run's status after: running or queued, or cancelled.")
    message: str


@router.get(
    "/runs/{run_id}/steps/{index}",
    summary="A step of a run and the context its expressions saw (scope runs:read)",
    response=responses(RunStepOut, *KEYED, 404, INVALID),
    by_alias=True,
)
def get_step(request: HttpRequest, run_id: RunId, index: int = STEP) -> dict[str, Any]:
    rest_caller(request, "runs:read")
    try:
        return step_context(run_id=run_id, index=index).as_json()
    except StepNotFound as exc:
        raise ApiRefusal(404, str(exc)) from None


@router.post(
    "/runs/{run_id}/steps/{index}/evaluate",
    summary="Evaluate a JSONata expression in a step's context (scope runs:read)",
    response=responses(StepEvaluateOut, *KEYED, REFUSED, 404, *INVALID_BODY),
)
def evaluate_at_step(
    request: HttpRequest, run_id: RunId, body: StepEvaluateIn, index: int = STEP
) -> dict[str, Any]:
    rest_caller(request, "runs:read")
    try:
        step = step_context(run_id=run_id, index=index)
    except StepNotFound as exc:
        raise ApiRefusal(404, str(exc)) from None
    try:
        return {"value": step_evaluate(step, body.expression)}
    except ExpressionRefused as exc:
        raise ApiRefusal(REFUSED, str(exc)) from None


@router.post(
    "/runs/{run_id}/rerun",
    summary="Re-run a run from one of its nodes, replaying the steps before it "
    "(scope tools:execute)",
    response={
        201: RerunOut,
        **dict.fromkeys((*KEYED, REFUSED, 404, CONFLICT, *INVALID_BODY), ErrorOut),
    },
)
def rerun_run(request: HttpRequest, run_id: RunId, body: RerunIn) -> Status[dict[str, Any]]:
    caller = rest_caller(request, "tools:execute")
    given = body.input if "input" in body.model_fields_set else NOT_GIVEN
    limit = settings.MCP_MAX_JSON_DEPTH
    if given is not NOT_GIVEN and deeper_than(given, limit):
        raise ApiRefusal(
            REFUSED,
            f"input nests deeper than {limit} levels (MCP_MAX_JSON_DEPTH): send a flatter value.",
        )
    # An mcp node's input goes to its provider as given: a builder's right, not a caller's.
    tool_arguments_refusal = (
        run_change_refusal(run_id, caller, "re-run a run with an mcp node's arguments edited")
        if given is not NOT_GIVEN
        else None
    )
    try:
        made = rerun(
            run_id=run_id,
            from_node=body.from_node,
            iteration=body.iteration,
            input=given,
            version=body.version,
            caller=caller.actor,
            started_by=None
            if caller.has_scope("runs:read")
            else with_same_owner_actors(caller).own_actors,
            tool_arguments_refusal=tool_arguments_refusal,
        )
    except RerunRefused as exc:
        raise ApiRefusal(exc.status, str(exc)) from None
    message = (
        f"Run {made.run_id} re-runs run {run_id} from node {made.from_node!r}; read it at "
        f"GET /api/v1/runs/{made.run_id}."
    )
    return Status(
        201,
        {
            "run_id": made.run_id,
            "rerun_of": run_id,
            "from_node": made.from_node,
            "index": made.index,
            "message": message,
        },
    )


@router.post(
    "/runs/{run_id}/breakpoint",
    summary="Continue, step or stop a test run paused at a breakpoint (scope tools:execute)",
    response=responses(BreakpointOut, *KEYED, REFUSED, 404, CONFLICT, *INVALID_BODY),
)
def breakpoint_action(request: HttpRequest, run_id: RunId, body: BreakpointIn) -> dict[str, Any]:
    caller = rest_caller(request, "tools:execute")
    started_by = (
        None if caller.has_scope("runs:decide") else with_same_owner_actors(caller).own_actors
    )
    try:
        status = pause_end(run_id, body.action, caller.actor, started_by=started_by)
    except PauseError as exc:
        raise ApiRefusal(exc.status, exc.message) from None
    return {
        "run_id": run_id,
        "status": status,
        "message": f"Run {run_id} {PAUSE_ENDED[body.action]}; read it at "
        f"GET /api/v1/runs/{run_id}.",
    }
