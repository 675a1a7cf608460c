"""A run that goes on from a node rather than from its entry, in any process, however much
later: after an approval node is decided, after a breakpoint, or as a re-run of a recorded run
from one of its nodes.

The engine keeps nothing between calls of ``execute``: a ``Resume`` carries every execution's
output before the node (its history functions and ``$`` are rebuilt from them) and the time
the run had taken. Where a run stops on its own, ``execute`` returns what it needs to go on:
a ``Paused`` at an approval node (approvals.py), an ``AtBreakpoint`` before a breakpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: One finished execution: the node's id and its output.
Execution = tuple[str, Any]


@dataclass(frozen=True)
class Resume:
    """How a run goes on at `node_id`, with `executions` (oldest first) already done."""

    node_id: str
    executions: Sequence[Execution]
    # The run's time so far, which counts toward maxExecutionTimeMs.
    elapsed_ms: float
    # The approval node's output when `node_id` waited for its decision: the node ends with
    # it rather than running again.
    decision: dict[str, Any] | None = None
    # When the approval's wait began (time.time()), for the node's duration.
    waited_since: float = 0.0
    # An mcp node's tool arguments, sent instead of evaluating its `args` (a re-run with an
    # edited input); None evaluates them as in any run.
    tool_arguments: dict[str, Any] | None = None


@dataclass(frozen=True)
class AtBreakpoint:
    """A run stopped before `node_id`, because it is a breakpoint or the run was stepping."""

    node_id: str
    # The execution the node would have been: its 0-based position in the run, and which
    # iteration of the node (1-based).
    index: int
    iteration: int
    executions: tuple[Execution, ...]
    elapsed_ms: float
