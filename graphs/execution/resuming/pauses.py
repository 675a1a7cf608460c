"""A test run paused before a breakpoint: entering the pause, where it stands, going on.

When the engine returns an `AtBreakpoint`, the run keeps nothing in memory: its `RunPause` row
holds the engine's state (graphs/execution/resuming/saved_state.py) and the run's status becomes
`paused`, together. Whoever later sends it on, in whatever process, rebuilds the engine's
`Resume` from that row (`pause_resume_of`). What people do at a pause (continue, step, stop)
is graphs/execution/resuming/breakpoints.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from graphs.engine import AtBreakpoint, Resume
from graphs.execution.resuming.saved_state import stand_still, state_read, state_saved
from graphs.models import NodeExecution, Run, RunPause


class PauseLost(RuntimeError):
    """The run stopped being `running` as it reached its breakpoint (it was reaped)."""


def pause_begin(run: Run, at: AtBreakpoint, arguments: Any, node_count: int) -> RunPause:
    """Record that `run` is paused before `at`'s node: its `RunPause` and its status together.
    Raises `PauseLost` when the run is no longer running here, `StateTooLarge` when what it
    must keep passes GRAPHS_MAX_WAIT_STATE_BYTES."""
    state = state_saved(at.node_id, arguments, at.executions, at.elapsed_ms)
    now = timezone.now()
    with transaction.atomic():
        if not stand_still(run, Run.Status.PAUSED, node_count, at.elapsed_ms):
            raise PauseLost(f"Run {run.pk} is no longer running: it cannot pause.")
        pause = RunPause.objects.create(
            run=run,
            index=at.index,
            node_id=at.node_id,
            iteration=at.iteration,
            created_at=now,
            expires_at=now + timedelta(seconds=settings.GRAPHS_BREAKPOINT_EXPIRY_SECONDS),
            state=state,
        )
    return pause


@dataclass(frozen=True)
class PausedGoingOn:
    """How a run continued or stepped from its pause goes on."""

    arguments: Any
    resume: Resume
    # Stepping: pause again before the next node, whatever it is.
    step: bool


def pause_resume_of(run_id: int) -> PausedGoingOn | None:
    """The engine's `Resume` of a run whose latest pause was continued or stepped and not yet
    gone on from; None when there is none."""
    pause = RunPause.objects.filter(run_id=run_id).exclude(ending="").last()
    if pause is None or pause.ending not in (RunPause.Ending.CONTINUED, RunPause.Ending.STEPPED):
        return None
    if NodeExecution.objects.filter(run_id=run_id, index__gte=pause.index).exists():
        return None  # gone on already
    arguments, executions, elapsed_ms = state_read(run_id, pause.state)
    tool_arguments = pause.state.get("tool_arguments")
    resume = Resume(pause.node_id, executions, elapsed_ms, tool_arguments=tool_arguments)
    return PausedGoingOn(arguments, resume, pause.ending == RunPause.Ending.STEPPED)


def pause_of(run_id: int) -> RunPause | None:
    """The pause a run is stopped at now; None when it is not paused."""
    return (
        RunPause.objects.filter(run_id=run_id, ending="", run__status=Run.Status.PAUSED)
        .defer("state")
        .last()
    )
