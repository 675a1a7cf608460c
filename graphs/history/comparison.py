"""Two runs of one workflow side by side: where their paths part, and what differs in their
arguments, in each node's output and in their result (issue 28, item 3).

The runs may have run different versions. A run's path is its executions' (node, iteration) in
index order; the outputs are matched by (node, iteration), so the second pass of a loop is
compared with the other run's second pass, and an execution only one run has is listed as such.
An output stored masked (it held a secret) or cut (over GRAPHS_MAX_PAYLOAD_BYTES) is not what
the node produced: it is marked as not comparable rather than diffed as if it were real.

The work is bounded whatever the runs' size: at most `MAX_EXECUTIONS` executions of each run
are read (their outputs `_BATCH` at a time), each value's differences stop at
`MAX_DIFFERENCES`, all of them at `MAX_TOTAL_DIFFERENCES`, and a value in a difference is given
as a preview past `VALUE_CHARS` characters of JSON; the answer says where it stopped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models.functions import Left

from graphs.engine.json_diff import Differences, differences
from graphs.execution.control import RunNotFound
from graphs.execution.payloads import TRUNCATED_KEY, holds_secret_or_cut
from graphs.history.comparison_shapes import (
    DIFFERENT,
    NOT_COMPARABLE,
    NOT_COMPARED,
    ONLY_A,
    ONLY_B,
    SAME,
    Compared,
    Comparison,
    Divergence,
    Execution,
    NodeComparison,
    RunSummary,
)
from graphs.models import NodeExecution, Run

#: The most node executions of each run that are compared.
MAX_EXECUTIONS = 500
#: The most differences reported for one value (the arguments, the result, one output).
MAX_DIFFERENCES = 20
#: The most differences reported in all: past it, the outputs left are not diffed.
MAX_TOTAL_DIFFERENCES = 2000
#: A value in a difference longer than this (as JSON) is given as a preview of that length.
VALUE_CHARS = 500
#: How much of an execution's or a run's error a comparison quotes.
ERROR_CHARS = 300
# Outputs read at once: at most this many pairs of stored payloads are held in memory.
_BATCH = 100


class RunsNotComparable(ValueError):
    """Two runs that cannot be compared; the message says why and what to compare instead."""


def runs_compare(a_id: int, b_id: int) -> Comparison:
    """Compare run `a_id` with run `b_id`, two runs of one workflow (any versions). Raises
    `RunNotFound` when either does not exist and `RunsNotComparable` when they are runs of
    different workflows. Four queries, and two per _BATCH pairs of outputs compared."""
    a, b = _summary(a_id), _summary(b_id)
    if a.workflow_id != b.workflow_id:
        raise RunsNotComparable(
            f"Run {a_id} is a run of {a.summary.workflow} and run {b_id} of "
            f"{b.summary.workflow}: only runs of one workflow can be compared. Pick a run of "
            f"{a.summary.workflow} (GET /api/v1/runs?workflow={a.summary.workflow}, or the "
            "Runs page filtered by it)."
        )
    path_a, path_b = _path(a_id), _path(b_id)
    budget = _Budget(MAX_TOTAL_DIFFERENCES)
    arguments = _compared(a.arguments, b.arguments, "arguments", a_id, b_id, budget)
    result = _compared(a.summary.result, b.summary.result, "result", a_id, b_id, budget)
    cut = len(path_a) > MAX_EXECUTIONS or len(path_b) > MAX_EXECUTIONS
    notes = [
        f"Run {run_id} has more than {MAX_EXECUTIONS} node executions: only its first "
        f"{MAX_EXECUTIONS} were compared, and an execution only the other run seems to have "
        "may come later in it."
        for run_id, path in ((a_id, path_a), (b_id, path_b))
        if len(path) > MAX_EXECUTIONS
    ]
    executions = _executions(a_id, b_id, path_a[:MAX_EXECUTIONS], path_b[:MAX_EXECUTIONS], budget)
    if budget.spent:
        notes.append(
            f"The comparison stopped diffing after {MAX_TOTAL_DIFFERENCES} differences: the "
            "outputs after that are marked not compared. Compare runs that differ less, or read "
            "the runs' pages."
        )
    return Comparison(
        a=a.summary,
        b=b.summary,
        divergence=_divergence(path_a, path_b),
        arguments=arguments,
        result=result,
        executions=executions,
        cut=cut,
        notes=notes,
        limits={
            "executions": MAX_EXECUTIONS,
            "differences_per_value": MAX_DIFFERENCES,
            "differences": MAX_TOTAL_DIFFERENCES,
            "value_chars": VALUE_CHARS,
        },
    )


@dataclass(frozen=True)
class _Read:
    summary: RunSummary
    workflow_id: int
    arguments: Any


def _summary(run_id: int) -> _Read:
    try:
        run = (
            Run.objects.select_related("version")
            .only(
                "workflow_id",
                "workflow_name",
                "version__number",
                "status",
                "arguments",
                "result",
                "node_count",
                "truncated",
                "error_node_id",
                "created_at",
                "duration_ms",
            )
            .annotate(error_start=Left("error", ERROR_CHARS))
            .get(pk=run_id)
        )
    except Run.DoesNotExist:
        raise RunNotFound(
            f"No run {run_id}; it may have been deleted. Compare two runs that exist: they "
            "are listed at GET /api/v1/runs and on the Runs page."
        ) from None
    summary = RunSummary(
        id=run.pk,
        workflow=run.workflow_name,
        version_id=run.version_id,
        version=run.version.number,
        status=run.status,
        result=run.result,
        error=run.error_start,
        error_node_id=run.error_node_id,
        node_count=run.node_count,
        truncated=run.truncated,
        created_at=run.created_at,
        duration_ms=run.duration_ms,
    )
    return _Read(summary, run.workflow_id, run.arguments)


def _path(run_id: int) -> list[Execution]:
    """The run's first MAX_EXECUTIONS + 1 executions, without their outputs: one more than
    is compared, to tell a longer run from one that ended there."""
    rows = (
        NodeExecution.objects.filter(run_id=run_id)
        .order_by("index")
        .annotate(error_start=Left("error", ERROR_CHARS))
        .values_list(
            "index", "node_id", "iteration", "node_type", "status", "error_start", "truncated"
        )[: MAX_EXECUTIONS + 1]
    )
    return [Execution(*row) for row in rows]


def _divergence(path_a: Sequence[Execution], path_b: Sequence[Execution]) -> Divergence | None:
    for index in range(max(len(path_a), len(path_b))):
        step_a = path_a[index].step if index < len(path_a) else None
        step_b = path_b[index].step if index < len(path_b) else None
        if step_a != step_b:
            return Divergence(index, step_a, step_b)
    return None


class _Budget:
    """The differences still to be reported in a comparison."""

    def __init__(self, total: int) -> None:
        self.left = total
        self.spent = False

    def take(self) -> int:
        """How many differences the next value may report (0: none left)."""
        return min(MAX_DIFFERENCES, self.left)

    def used(self, found: Differences) -> None:
        self.left -= len(found.items)


def _compared(
    a: Any, b: Any, what: str, a_id: int, b_id: int, budget: _Budget, *, cut: tuple[int, ...] = ()
) -> Compared:
    """How value `a` of run `a_id` compares with `b` of run `b_id` (`what` names them in a
    reason); `cut` holds the ids of runs whose value is flagged cut."""
    unfaithful = [
        run_id
        for run_id, value in ((a_id, a), (b_id, b))
        if run_id in cut or holds_secret_or_cut(value)
    ]
    if unfaithful:
        which = " and ".join(f"run {run_id}'s" for run_id in dict.fromkeys(unfaithful))
        return Compared(
            NOT_COMPARABLE,
            reason=(
                f"Not compared: {which} {what} was stored masked (it held a secret) or cut "
                "(over GRAPHS_MAX_PAYLOAD_BYTES), so it is not what the run produced."
            ),
        )
    limit = budget.take()
    if limit <= 0:
        budget.spent = True
        return Compared(NOT_COMPARED, reason="Not compared: the comparison's budget was spent.")
    found = differences(a, b, limit=limit)
    budget.used(found)
    if found.cut and limit < MAX_DIFFERENCES:
        budget.spent = True
    if not found.items:
        return Compared(SAME)
    found.items = [_shortened(item) for item in found.items]
    return Compared(DIFFERENT, found)


def _shortened(item: dict[str, Any]) -> dict[str, Any]:
    """A difference whose values are at most VALUE_CHARS characters of JSON each; a longer
    one becomes a preview, marked as the history marks a cut payload."""
    shown = dict(item)
    for side in ("a", "b"):
        if side in shown:
            text = json.dumps(shown[side], ensure_ascii=False, default=str)
            if len(text) > VALUE_CHARS:
                shown[side] = {
                    TRUNCATED_KEY: True,
                    "bytes": len(text.encode()),
                    "preview": text[:VALUE_CHARS],
                }
    return shown


def _executions(
    a_id: int,
    b_id: int,
    path_a: Sequence[Execution],
    path_b: Sequence[Execution],
    budget: _Budget,
) -> list[NodeComparison]:
    """Each (node, iteration) of either path, in path order, with its outputs compared."""
    of_a = {execution.step: execution for execution in path_a}
    of_b = {execution.step: execution for execution in path_b}
    # Sorted by (A's index, 0) for A's executions; an execution only B has goes just before
    # the next one both have, after A's own: (that one's A index, -1, B's index).
    placed: list[tuple[tuple[float, int, int], Execution | None, Execution | None]] = [
        ((execution.index, 0, 0), execution, of_b.get(execution.step)) for execution in path_a
    ]
    following = float("inf")
    for execution in reversed(path_b):
        if execution.step in of_a:
            following = of_a[execution.step].index
        else:
            placed.append(((following, -1, execution.index), None, execution))
    placed.sort(key=lambda entry: entry[0])

    pairs = [(x, y) for _, x, y in placed if x is not None and y is not None]
    outputs = _outputs_compared(a_id, b_id, pairs, budget)
    compared = []
    for _, x, y in placed:
        if x is not None and y is not None:
            output = outputs[x.index]
        elif x is not None:
            output = Compared(ONLY_A, reason=f"Run {b_id} has no such execution.")
        else:
            output = Compared(ONLY_B, reason=f"Run {a_id} has no such execution.")
        first = x or y
        assert first is not None  # every entry has one side at least
        compared.append(
            NodeComparison(first.node_id, first.iteration, first.node_type, x, y, output)
        )
    return compared


def _outputs_compared(
    a_id: int, b_id: int, pairs: Sequence[tuple[Execution, Execution]], budget: _Budget
) -> dict[int, Compared]:
    """How the outputs of each pair of executions (A's, B's) compare, by A's index. The
    outputs are read _BATCH pairs at a time and let go once compared; an output flagged
    cut is not read at all."""
    found: dict[int, Compared] = {}
    for start in range(0, len(pairs), _BATCH):
        batch = pairs[start : start + _BATCH]
        a_outputs = _read_outputs(a_id, [x.index for x, _ in batch if not x.truncated])
        b_outputs = _read_outputs(b_id, [y.index for _, y in batch if not y.truncated])
        for x, y in batch:
            cut = tuple(run_id for run_id, side in ((a_id, x), (b_id, y)) if side.truncated)
            found[x.index] = _compared(
                a_outputs.get(x.index), b_outputs.get(y.index), "output", a_id, b_id, budget,
                cut=cut,
            )  # fmt: skip
    return found


def _read_outputs(run_id: int, indexes: list[int]) -> dict[int, Any]:
    if not indexes:
        return {}
    rows = NodeExecution.objects.filter(run_id=run_id, index__in=indexes)
    return dict(rows.values_list("index", "output"))
