"""What a run that stands still keeps so that any process can take it on later: at an
approval node (graphs/execution/approvals/waits.py), before a breakpoint or the node a re-run
starts at (graphs/execution/resuming/breakpoints.py).

The state is the arguments and every execution's output so far, unmasked (the run's nodes
need the real values), so the rows that keep it encrypt it at rest. It is bounded by
GRAPHS_MAX_WAIT_STATE_BYTES: a loop of large tool results cannot make one row huge.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.conf import settings

from graphs.engine import Execution
from graphs.models import Run

# The layout of a saved state; one of another layout cannot be resumed.
STATE_VERSION = 1


class StateTooLarge(ValueError):
    """What the run would keep passes GRAPHS_MAX_WAIT_STATE_BYTES."""


class StateUnreadable(ValueError):
    """A saved state of a layout this server does not read."""


def state_saved(
    node_id: str,
    arguments: Any,
    executions: Sequence[Execution],
    elapsed_ms: float,
    **more: Any,
) -> dict[str, Any]:
    """The state a run stopped at `node_id` keeps (with `more` fields of the stop's own).
    Raises `StateTooLarge` naming the node and the setting."""
    state = {
        "v": STATE_VERSION,
        "arguments": arguments,
        "executions": [[execution_node, output] for execution_node, output in executions],
        "elapsed_ms": elapsed_ms,
        **more,
    }
    size = len(json.dumps(state, separators=(",", ":"), default=str))
    limit = settings.GRAPHS_MAX_WAIT_STATE_BYTES
    if size > limit:
        raise StateTooLarge(
            f"Node {node_id!r} cannot wait: what the run must keep until it goes on (its "
            f"arguments and every output so far) is {size} bytes, more than "
            f"GRAPHS_MAX_WAIT_STATE_BYTES ({limit}); have the nodes before it return less, or "
            "raise the setting."
        )
    return state


def stand_still(run: Run, status: str, node_count: int, elapsed_ms: float) -> bool:
    """Move `run` from running to `status` (waiting, paused), where it holds no process: one
    conditional update, inside the caller's transaction with the row that keeps its state.
    False when it was no longer running (reaped, cancelled)."""
    moved = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
        status=status,
        node_count=node_count,
        duration_ms=elapsed_ms,
        worker="",
        heartbeat_at=None,
    )
    if moved:
        run.status, run.node_count, run.duration_ms = status, node_count, elapsed_ms
    return bool(moved)


def state_read(run_id: int, state: Any) -> tuple[Any, list[Execution], float]:
    """A saved state's arguments, executions and elapsed time. Raises `StateUnreadable`."""
    if not isinstance(state, dict) or state.get("v") != STATE_VERSION:
        raise StateUnreadable(
            f"Run {run_id} cannot go on: its saved state is unreadable (layout "
            f"{state.get('v') if isinstance(state, dict) else None!r}, this server reads "
            f"{STATE_VERSION})."
        )
    executions = [(node_id, output) for node_id, output in state["executions"]]
    return state["arguments"], executions, float(state["elapsed_ms"])
