"""What a comparison of two runs holds (graphs/history/comparison.py makes them): each run's
summary, where their paths part, and how each value compares, with their JSON for the REST API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from graphs.engine.json_diff import Differences

# How a value (arguments, result, an output) of the two runs compares.
SAME = "same"
DIFFERENT = "different"
NOT_COMPARABLE = "not_comparable"
NOT_COMPARED = "not_compared"
# An execution only one run has.
ONLY_A = "only_a"
ONLY_B = "only_b"


@dataclass(frozen=True)
class RunSummary:
    """One side of a comparison: the run and how it ended."""

    id: int
    workflow: str
    version_id: int
    version: int
    status: str
    result: Any
    error: str
    error_node_id: str
    node_count: int
    truncated: bool
    created_at: datetime
    duration_ms: float | None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "workflow": self.workflow,
            "workflow_version_id": self.version_id,
            "workflow_version": self.version,
            "status": self.status,
            "result": self.result,
            "error": self.error or None,
            "error_node_id": self.error_node_id or None,
            "node_count": self.node_count,
            "truncated": self.truncated,
            "created_at": self.created_at,
            "duration_ms": self.duration_ms,
        }


@dataclass(frozen=True)
class Compared:
    """How one value compares: `SAME`, `DIFFERENT` (its `differences`), `NOT_COMPARABLE` (a
    side is masked or cut) or `NOT_COMPARED` (the budget was spent); `reason` says why for
    the last two."""

    state: str
    differences: Differences | None = None
    reason: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "differences": self.differences.as_json() if self.differences else None,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Execution:
    """One node execution as a comparison reads it (its output apart, read in batches)."""

    index: int
    node_id: str
    iteration: int
    node_type: str
    status: str
    error: str
    truncated: bool

    @property
    def step(self) -> tuple[str, int]:
        return (self.node_id, self.iteration)

    def as_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "status": self.status,
            "error": self.error or None,
            "truncated": self.truncated,
        }


@dataclass(frozen=True)
class NodeComparison:
    """One (node, iteration) in either run: its execution in each (None where it has none)
    and how their outputs compare (`ONLY_A` / `ONLY_B` when one run has it)."""

    node_id: str
    iteration: int
    node_type: str
    a: Execution | None
    b: Execution | None
    output: Compared

    @property
    def state(self) -> str:
        """The output's state; `DIFFERENT` also when the outputs match but the executions
        ended differently (one failed, say)."""
        ended = (self.a.status, self.a.error) if self.a else None
        if self.b and self.output.state == SAME and ended != (self.b.status, self.b.error):
            return DIFFERENT
        return self.output.state

    def as_json(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "iteration": self.iteration,
            "node_type": self.node_type,
            "state": self.state,
            "a": self.a.as_json() if self.a else None,
            "b": self.b.as_json() if self.b else None,
            "output": self.output.as_json(),
        }


@dataclass(frozen=True)
class Divergence:
    """Where two paths part: the first index at which the runs executed different nodes (or
    one had ended), and the (node, iteration) each executed there (None: it had ended)."""

    index: int
    a: tuple[str, int] | None
    b: tuple[str, int] | None

    def as_json(self) -> dict[str, Any]:
        def side(step: tuple[str, int] | None) -> dict[str, Any] | None:
            return {"node_id": step[0], "iteration": step[1]} if step else None

        return {"index": self.index, "a": side(self.a), "b": side(self.b)}


@dataclass(frozen=True)
class Comparison:
    a: RunSummary
    b: RunSummary
    # None when the paths are the same, as far as they were read.
    divergence: Divergence | None
    arguments: Compared
    result: Compared
    # Path order: run A's executions, each with run B's of the same (node, iteration), and
    # those only B has placed before the next execution both have.
    executions: list[NodeComparison]
    # A run had more than MAX_EXECUTIONS executions: only its first ones were compared.
    cut: bool
    # What a reader must know about what was left out, a sentence each.
    notes: list[str] = field(default_factory=list)
    # The bounds it was made within (graphs/history/comparison.py).
    limits: dict[str, int] = field(default_factory=dict)

    @property
    def same_version(self) -> bool:
        return self.a.version_id == self.b.version_id

    def as_json(self) -> dict[str, Any]:
        """As the REST API gives it (`review_schemas.ComparisonOut`)."""
        return {
            "a": self.a.as_json(),
            "b": self.b.as_json(),
            "same_version": self.same_version,
            "same_path": self.divergence is None,
            "divergence": self.divergence.as_json() if self.divergence else None,
            "arguments": self.arguments.as_json(),
            "result": self.result.as_json(),
            "executions": [each.as_json() for each in self.executions],
            "cut": self.cut,
            "notes": self.notes,
            "limits": self.limits,
        }
