"""What a run's expressions saw at any step, rebuilt from its stored history, and an ad-hoc
JSONata expression evaluated there.

A step's context is not stored: the engine's `$` is each node's latest output at that moment
and the history functions read every output before it, so replaying the stored outputs before
the step into a `RunHistory` (the engine's own) gives back exactly what the step's
expressions read. What was stored masked (a secret) or cut (over GRAPHS_MAX_PAYLOAD_BYTES) is
not what the node produced: those nodes are named, so nobody mistakes them for the real value.
An expression is evaluated as a run evaluates one (same parser, same time, depth and size
bounds), against data that is only read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from graphs.engine.checks.all_checks import MAX_EXPRESSION_CHARS, MAX_PATH_STEPS
from graphs.engine.history import RunHistory
from graphs.engine.language.expressions import (
    Expression,
    ExpressionError,
    ExpressionSyntaxError,
    Guard,
    ParseBudget,
)
from graphs.execution.payloads import holds_secret_or_cut, storable
from graphs.models import NodeExecution, Run, RunPause


class StepNotFound(LookupError):
    """No such run, or no such step in it: the message says which steps there are."""


class ExpressionRefused(ValueError):
    """The expression does not parse, is too long, or failed or hit a bound evaluating."""


@dataclass
class StepContext:
    """One step of a run and the context its expressions saw (the outputs before it)."""

    run_id: int
    index: int
    node_id: str
    node_type: str
    iteration: int
    # "succeeded", "failed", "waiting", "running", or "paused" (the node a paused run stops
    # before: it has not run).
    status: str
    # `$`: each node's latest output before the step.
    context: dict[str, Any]
    # What the history functions answered there: `$previousNode()` and `$executionCount(id)`.
    previous: Any
    counts: dict[str, int]
    # Nodes of the context whose stored output is masked or cut: not what they produced.
    unfaithful: list[str] = field(default_factory=list)
    history: RunHistory = field(default_factory=RunHistory, repr=False)

    def as_json(self) -> dict[str, Any]:
        """As the REST API answers it."""
        return {
            "run_id": self.run_id,
            "index": self.index,
            "node": self.node_id,
            "type": self.node_type,
            "iteration": self.iteration,
            "status": self.status,
            "context": {
                "$": self.context,
                "previousNode": self.previous,
                "executionCount": self.counts,
            },
            "unfaithful": self.unfaithful,
        }


def step_context(*, run_id: int, index: int) -> StepContext:
    """The context of step `index` (0-based, as the history numbers executions) of run
    `run_id`; for a run paused at a breakpoint, the node it paused before is a step too.
    Raises `StepNotFound`."""
    run = Run.objects.filter(pk=run_id).only("pk", "status").first()
    if run is None:
        raise StepNotFound(f"No run {run_id}; it may have been deleted.")
    row = (
        NodeExecution.objects.filter(run_id=run_id, index=index)
        .values("node_id", "node_type", "iteration", "status")
        .first()
    )
    step: dict[str, Any] = dict(row) if row is not None else _paused_step(run, index)
    executions = NodeExecution.objects.filter(
        run_id=run_id, index__lt=index, status=NodeExecution.Status.SUCCEEDED
    ).order_by("index")
    history = RunHistory()
    unfaithful: set[str] = set()
    for node_id, output, truncated in executions.values_list("node_id", "output", "truncated"):
        history.record(node_id, output)
        if truncated or holds_secret_or_cut(output):
            unfaithful.add(node_id)
        else:
            unfaithful.discard(node_id)  # a later, whole output is what `$` shows
    return StepContext(
        run_id=run_id,
        index=index,
        node_id=step["node_id"],
        node_type=step["node_type"],
        iteration=step["iteration"],
        status=step["status"],
        context=dict(history.context),
        previous=history.previous_node(),
        counts={node_id: len(outputs) for node_id, outputs in history.by_node.items()},
        unfaithful=sorted(unfaithful & set(history.context)),
        history=history,
    )


def _paused_step(run: Run, index: int) -> dict[str, Any]:
    pause = None
    if run.status == Run.Status.PAUSED:
        pause = RunPause.objects.filter(run_id=run.pk, index=index, ending="").first()
    if pause is None:
        count = NodeExecution.objects.filter(run_id=run.pk).count()
        if run.status == Run.Status.PAUSED:
            count += 1  # the node it is paused before is a step too
        steps = f"its steps are 0 to {count - 1}" if count else "it has no steps yet"
        raise StepNotFound(f"Run {run.pk} has no step {index}: {steps}.")
    # The version's graph is read only here, for the one step that has no row to name it.
    definition = Run.objects.filter(pk=run.pk).values_list("version__definition", flat=True)
    node_type = next(
        (
            node.get("type", "")
            for node in (definition.first() or {}).get("nodes", [])
            if isinstance(node, dict) and node.get("id") == pause.node_id
        ),
        "",
    )
    return {
        "node_id": pause.node_id,
        "node_type": node_type,
        "iteration": pause.iteration,
        "status": "paused",
    }


def step_evaluate(step: StepContext, expression: str) -> Any:
    """The value of JSONata `expression` in `step`'s context, as the step's own expressions
    would have had it (null when it has none), cut as a stored output is when larger than
    GRAPHS_MAX_PAYLOAD_BYTES. Raises `ExpressionRefused` saying what is wrong (a syntax
    error gives its position)."""
    if not isinstance(expression, str) or not expression.strip():
        raise ExpressionRefused('Send the JSONata to evaluate as "expression", e.g. "$.entry".')
    try:
        compiled = Expression(
            expression,
            budget=ParseBudget(MAX_EXPRESSION_CHARS, MAX_EXPRESSION_CHARS, MAX_PATH_STEPS),
        )
    except ExpressionSyntaxError as exc:
        raise ExpressionRefused(f"The expression does not parse: {exc}.") from None
    history = step.history
    guard = Guard(time.monotonic() + 3600)  # the field's own bound (TIME_LIMIT_MS) applies
    guard.start()
    try:
        value = compiled.evaluate(history.context, {**history.bindings, **guard.bindings}, guard)
    except ExpressionError as exc:
        raise ExpressionRefused(f"The expression failed: {exc}.") from None
    except Exception as exc:  # the history functions' own refusals (a bad node id)
        raise ExpressionRefused(f"The expression failed: {exc}.") from None
    stored, _cut = storable(value, settings.GRAPHS_MAX_PAYLOAD_BYTES, ())
    return stored
