"""A run waiting at an approval node: entering the wait, what it waits for, going on.

When the engine returns a `Paused`, the run keeps nothing in memory: its `Approval` row holds
the engine's state (the arguments and every output so far, unmasked, hence encrypted at rest:
nodespecs/secrets.py) and the run's status becomes `waiting`, together. Whoever later resumes
it, in whatever process, rebuilds the engine's `Resume` from that row (`resume_of`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from graphs.engine import Paused, Resume
from graphs.execution.resuming.saved_state import stand_still, state_read, state_saved
from graphs.models import Approval, NodeExecution, Run


class WaitLost(RuntimeError):
    """The run stopped being `running` while it reached its approval node (it was reaped)."""


def wait_begin(run: Run, paused: Paused, arguments: Any, node_count: int) -> Approval:
    """Record that `run` waits at `paused`'s node: its `Approval` and its status together.
    Raises `WaitLost` when the run is no longer running here, `StateTooLarge` when its state
    (every output so far: a loop of large tool results) passes GRAPHS_MAX_WAIT_STATE_BYTES."""
    now = timezone.now()
    timeout_at = now + timedelta(milliseconds=paused.timeout_ms) if paused.timeout_ms else None
    state = state_saved(
        paused.node_id,
        arguments,
        paused.executions,
        paused.elapsed_ms,
        waited_since=paused.waited_since,
    )
    with transaction.atomic():
        if not stand_still(run, Run.Status.WAITING, node_count, paused.elapsed_ms):
            raise WaitLost(f"Run {run.pk} is no longer running: it cannot wait.")
        approval = Approval.objects.create(
            run=run,
            index=paused.index,
            node_id=paused.node_id,
            iteration=paused.iteration,
            approvers=paused.approvers,
            message=paused.message,
            form=paused.form,
            created_at=now,
            timeout_at=timeout_at,
            state=state,
        )
    return approval


def output_of(approval: Approval) -> dict[str, Any]:
    """A decided approval node's output, as expressions after it read it."""
    return {
        "decision": approval.decision,
        "by": approval.decided_by,
        "comment": approval.comment,
        "form": approval.form_values or {},
        "decided_at": approval.decided_at.isoformat() if approval.decided_at else None,
    }


def resume_of(run_id: int) -> tuple[Any, Resume] | None:
    """The arguments and the engine's `Resume` of a run whose latest approval is decided and
    not yet gone on from; None for a run that never waited (it starts from its entry)."""
    approval = (
        Approval.objects.filter(run_id=run_id).exclude(decision="").order_by("-index").first()
    )
    if approval is None:
        return None
    waiting = NodeExecution.objects.filter(
        run_id=run_id, index=approval.index, status=NodeExecution.Status.WAITING
    )
    if not waiting.exists():
        return None  # gone on already: a later node failed or the run ended
    arguments, executions, elapsed_ms = state_read(run_id, approval.state)
    resume = Resume(
        node_id=approval.node_id,
        executions=executions,
        elapsed_ms=elapsed_ms,
        decision=output_of(approval),
        waited_since=float(approval.state["waited_since"]),
    )
    return arguments, resume


@dataclass(frozen=True)
class WaitingFor:
    """What a waiting run waits for, as the pages and MCP calls show it."""

    run_id: int
    node: str
    iteration: int
    message: str
    form: dict[str, Any] | None
    approvers: str
    since: datetime
    timeout_at: datetime | None


def _waiting_for(approval: Approval) -> WaitingFor:
    return WaitingFor(
        approval.run_id,
        approval.node_id,
        approval.iteration,
        approval.message,
        approval.form,
        approval.approvers,
        approval.created_at,
        approval.timeout_at,
    )


def waiting_for(run_id: int) -> WaitingFor | None:
    """What the run waits for now; None when it is not waiting."""
    approval = (
        Approval.objects.filter(run_id=run_id, decision="", run__status=Run.Status.WAITING)
        .defer("state")
        .first()
    )
    return None if approval is None else _waiting_for(approval)


def waiting_runs(*, limit: int = 200) -> list[tuple[Run, WaitingFor]]:
    """The runs waiting for reviewers now, oldest wait first (the Approvals page)."""
    approvals = (
        Approval.objects.filter(decision="", run__status=Run.Status.WAITING, approvers="reviewers")
        .select_related("run")
        .defer("state")
        .order_by("created_at", "id")[:limit]
    )
    return [(approval.run, _waiting_for(approval)) for approval in approvals]
