"""A test run paused before a breakpoint, and the person who continues, steps or stops it.

The run paused (graphs/execution/resuming/pauses.py) keeps nothing in memory but its `RunPause` row.
Continuing or stepping takes the run out of `paused` with one conditional update (so two
clicks cannot both send it on), then it goes on where the mode says
(graphs/execution/resuming/going_on.py), where the process that resumes it rebuilds the engine's
`Resume` from the row. Stopping ends it cancelled; a pause left longer than
GRAPHS_BREAKPOINT_EXPIRY_SECONDS expires the same way (the approval timer looks for them).

A re-run from a node (reruns.py) starts as a run standing before that node with the replayed
executions as its state: a pause continued at once.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from graphs.engine import Execution
from graphs.execution.resuming.going_on import go_on, going_on_fields
from graphs.execution.resuming.saved_state import state_saved
from graphs.models import Run, RunPause, WorkflowVersion

logger = logging.getLogger(__name__)

#: The most breakpoints one test run takes.
MAX_BREAKPOINTS = 50
#: What a person may do at a breakpoint.
ACTIONS = ("continue", "step", "stop")
_ENDINGS = {
    "continue": RunPause.Ending.CONTINUED,
    "step": RunPause.Ending.STEPPED,
    "stop": RunPause.Ending.STOPPED,
}


class PauseError(Exception):
    """A continue, step or stop that cannot be done: `status` is the HTTP status that says
    why (400 bad action, 404 no such run, 409 not paused), `message` what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def stand_before(
    run: Run,
    node_id: str,
    iteration: int,
    arguments: Any,
    executions: Sequence[Execution],
    *,
    tool_arguments: dict[str, Any] | None,
    by: str,
) -> None:
    """Save a new run (created `going_on_fields`) as standing before `node_id` with
    `executions` done, continued at once: how a re-run starts; the caller sends it on
    (`go_on`) once this is committed. Raises `StateTooLarge`."""
    state = state_saved(node_id, arguments, executions, 0.0, tool_arguments=tool_arguments)
    now = timezone.now()
    RunPause.objects.create(
        run=run,
        index=len(executions),
        node_id=node_id,
        iteration=iteration,
        created_at=now,
        expires_at=now,
        ending=RunPause.Ending.CONTINUED,
        ended_at=now,
        ended_by=by[:200],
        state=state,
    )


def breakpoints_checked(definition: dict[str, Any], names: Sequence[str]) -> tuple[str, ...]:
    """`names` as a test run's breakpoints for a version with this `definition`; raises
    `PauseError` (400) for too many, or for one that names no node of it."""
    if len(names) > MAX_BREAKPOINTS:
        raise PauseError(400, f"{len(names)} breakpoints: at most {MAX_BREAKPOINTS}.")
    nodes = [node.get("id") for node in definition.get("nodes", []) if isinstance(node, dict)]
    unknown = [name for name in names if name not in nodes]
    if unknown:
        raise PauseError(
            400,
            f"Breakpoint(s) {', '.join(map(repr, unknown))} name no node of the version; its "
            f"nodes are {', '.join(map(repr, nodes))}.",
        )
    return tuple(dict.fromkeys(names))


def pause_end(
    run_id: int, action: str, by: str, *, started_by: Collection[str] | None = None
) -> str:
    """Continue (to the next breakpoint), step (one node) or stop the run paused at its
    breakpoint; the run's status after. With `started_by`, only a run one of those callers
    started is found. Raises `PauseError` (nothing changed)."""
    if action not in ACTIONS:
        raise PauseError(400, f"Unknown action {action!r}: send one of {', '.join(ACTIONS)}.")
    if (
        started_by is not None
        and not Run.objects.filter(
            pk=run_id, caller__in=[actor for actor in started_by if actor]
        ).exists()
    ):
        raise PauseError(
            404,
            f"No run {run_id} started with your key (or its user's); a key with runs:decide "
            "may continue, step or stop any.",
        )
    pause = RunPause.objects.filter(run_id=run_id, ending="").defer("state").last()
    now = timezone.now()
    stopping = action == "stop"
    fields: dict[str, Any] = (
        {
            "status": Run.Status.CANCELLED,
            "cancel_reason": f"Stopped at a breakpoint by {by}",
            "error": f"Stopped at the breakpoint before node "
            f"{pause.node_id if pause else '?'!r} by {by}.",
            "finished_at": now,
        }
        if stopping
        else going_on_fields(now)
    )
    with transaction.atomic():
        taken = Run.objects.filter(pk=run_id, status=Run.Status.PAUSED).update(**fields)
        if not taken or pause is None:
            raise PauseError(*_not_paused(run_id))
        RunPause.objects.filter(pk=pause.pk).update(
            ending=_ENDINGS[action], ended_at=now, ended_by=by[:200]
        )
    logger.info("Run %s at its breakpoint before %s: %s by %s", run_id, pause.node_id, action, by)
    if not stopping:
        go_on(run_id)
    return str(fields["status"])


def test_run_version(run_id: int, workflow_name: str) -> WorkflowVersion | None:
    """The version test run `run_id` of `workflow_name` runs; None when there is no such
    test run."""
    run = (
        Run.objects.filter(pk=run_id, workflow_name=workflow_name, is_test=True)
        .select_related("version__workflow__group")
        .first()
    )
    return run.version if run is not None else None


def _not_paused(run_id: int) -> tuple[int, str]:
    status = Run.objects.filter(pk=run_id).values_list("status", flat=True).first()
    if status is None:
        return 404, f"No run {run_id}; it may have been deleted."
    return 409, (
        f"Run {run_id} is not paused at a breakpoint (it is {status}): nothing to continue, "
        "step or stop. Reload its page to see where it stands."
    )


def pauses_expire() -> float | None:
    """End the pauses left longer than GRAPHS_BREAKPOINT_EXPIRY_SECONDS (their runs end
    cancelled, saying so); the seconds until the next one expires, None when none is
    paused. One indexed query when none is due."""
    earliest = (
        RunPause.objects.filter(ending="", run__status=Run.Status.PAUSED)
        .order_by("expires_at")
        .values_list("run_id", "node_id", "expires_at")[:_EXPIRY_BATCH]
    )
    for run_id, node_id, expires_at in earliest:
        left = (expires_at - timezone.now()).total_seconds()
        if left > 0:
            return left
        _expire(run_id, node_id)
    return 0.0 if len(earliest) == _EXPIRY_BATCH else None


# How many expired pauses one look ends at most before looking again.
_EXPIRY_BATCH = 50


def _expire(run_id: int, node_id: str) -> None:
    seconds = settings.GRAPHS_BREAKPOINT_EXPIRY_SECONDS
    now = timezone.now()
    with transaction.atomic():
        if Run.objects.filter(pk=run_id, status=Run.Status.PAUSED).update(
            status=Run.Status.CANCELLED,
            cancel_reason="Paused too long at a breakpoint",
            error=f"Paused at the breakpoint before node {node_id!r} for longer than "
            f"GRAPHS_BREAKPOINT_EXPIRY_SECONDS ({seconds:g} s): it expired.",
            finished_at=now,
        ):
            RunPause.objects.filter(run_id=run_id, ending="").update(
                ending=RunPause.Ending.EXPIRED, ended_at=now
            )
