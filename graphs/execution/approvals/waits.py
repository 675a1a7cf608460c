"""A run waiting at an approval node: entering the wait, what it waits for, going on.

When the engine returns a `Paused`, the run keeps nothing in memory: its `Approval` row holds
the engine's state (the arguments and every output so far, unmasked, hence encrypted at rest:
nodespecs/secrets.py) and the run's status becomes `waiting`, together. Whoever later resumes
it, in whatever process, rebuilds the engine's `Resume` from that row (`resume_of`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from graphs.engine import Paused, Resume
from graphs.models import Approval, NodeExecution, Run

# The layout of `Approval.state`; a state of another layout cannot be resumed.
STATE_VERSION = 1


class WaitLost(RuntimeError):
    """The run stopped being `running` while it reached its approval node (it was reaped)."""


class WaitTooLarge(ValueError):
    """What the run would keep while it waits passes GRAPHS_MAX_WAIT_STATE_BYTES."""


def wait_begin(run: Run, paused: Paused, arguments: Any, node_count: int) -> Approval:
    """Record that `run` waits at `paused`'s node: its `Approval` and its status together.
    Raises `WaitLost` when the run is no longer running here, `WaitTooLarge` when its state
    (every output so far: a loop of large tool results) passes GRAPHS_MAX_WAIT_STATE_BYTES."""
    now = timezone.now()
    timeout_at = now + timedelta(milliseconds=paused.timeout_ms) if paused.timeout_ms else None
    state = {
        "v": STATE_VERSION,
        "arguments": arguments,
        "executions": [[node_id, output] for node_id, output in paused.executions],
        "elapsed_ms": paused.elapsed_ms,
        "waited_since": paused.waited_since,
    }
    size = len(json.dumps(state, separators=(",", ":"), default=str))
    if size > settings.GRAPHS_MAX_WAIT_STATE_BYTES:
        raise WaitTooLarge(
            f"Node {paused.node_id!r} cannot wait: what the run must keep until the decision "
            f"(its arguments and every output so far) is {size} bytes, more than "
            f"GRAPHS_MAX_WAIT_STATE_BYTES ({settings.GRAPHS_MAX_WAIT_STATE_BYTES}); have the "
            "nodes before it return less, or raise the setting."
        )
    with transaction.atomic():
        moved = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
            status=Run.Status.WAITING,
            node_count=node_count,
            duration_ms=paused.elapsed_ms,
            worker="",
            heartbeat_at=None,
        )
        if not moved:
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
    run.status, run.node_count, run.duration_ms = Run.Status.WAITING, node_count, paused.elapsed_ms
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
    state = approval.state
    if not isinstance(state, dict) or state.get("v") != STATE_VERSION:
        raise ValueError(
            f"Run {run_id} cannot go on: its saved state is unreadable (layout "
            f"{state.get('v') if isinstance(state, dict) else None!r}, this server reads "
            f"{STATE_VERSION})."
        )
    resume = Resume(
        node_id=approval.node_id,
        executions=[(node_id, output) for node_id, output in state["executions"]],
        decision=output_of(approval),
        elapsed_ms=float(state["elapsed_ms"]),
        waited_since=float(state["waited_since"]),
    )
    return state["arguments"], resume


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
