"""A new run from one node of a recorded run: the steps before it replayed from the history
(no downstream call for them), that node and the rest executed, on the run's own version or
on the workflow's current one, optionally with the node's input edited.

The new run's history starts with copies of the replayed executions (marked, with the run
they came from), so its page, its context at any step and a comparison read it as any run.
It starts as a run standing before the node with the replayed outputs as its saved state,
sent on at once (breakpoints.py `stand_before`), so it runs in a thread here or on a worker
as the mode says, and the request that asked for it only waits for the rows.

A node's input, as the history shows it, is what it acts on: for the entry node the run's
arguments (checked against the inputSchema); for an mcp node the tool's arguments, sent
instead of evaluating its `args` (checked against the tool's inputSchema when its provider
has it); for any other node the previous execution's output (`$previousNode()` and
`$.<that node>`), which then replaces that output in the new run's history.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from graphs.engine import Execution
from graphs.engine.schemas import schema_errors, schema_validator
from graphs.execution import tracing
from graphs.execution.payloads import holds_secret_or_cut
from graphs.execution.resuming.breakpoints import stand_before
from graphs.execution.resuming.going_on import go_on, going_on_fields
from graphs.execution.resuming.saved_state import StateTooLarge
from graphs.execution.runs import WorkflowCallError, check_arguments, prepared_version
from graphs.models import NodeExecution, Run, WorkflowVersion
from nodespecs.models import NodeSpec
from nodespecs.providers.tool_specs import port_schema

#: The versions a re-run may run on.
VERSIONS = ("original", "current")
#: Marks the input given in place of a node's own (absent: the node's own input).
NOT_GIVEN: Any = object()


class RerunRefused(ValueError):
    """The re-run cannot start as asked; nothing was created. `status` is the HTTP status
    (404 no such run, 409 a run still going, 400 otherwise)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Rerun:
    """The run a re-run made, and the step it executes from."""

    run_id: int
    from_node: str
    index: int


def rerun(
    *,
    run_id: int,
    from_node: str,
    iteration: int = 0,
    input: Any = NOT_GIVEN,
    version: str = "original",
    caller: str,
    started_by: Collection[str] | None = None,
    tool_arguments_refusal: str | None = None,
) -> Rerun:
    """Start a re-run of run `run_id` from the `iteration`-th execution (0 the first, -1 the
    latest, as `$nodeExecution` counts) of node `from_node`, with `input` in place of the
    node's own when given, on the run's version or the workflow's current one. With
    `started_by`, only a run one of those callers started is found. An mcp node's edited
    input goes to its provider as given, past the workflow's own `args`: with
    `tool_arguments_refusal` (why this caller may not, as its builders may) it is refused.
    Raises `RerunRefused` saying what to change."""
    if version not in VERSIONS:
        raise RerunRefused(f"Unknown version {version!r}: send 'original' or 'current'.")
    # The current version is read only when asked for (`_version`): a definition is large.
    original = Run.objects.select_related("version").filter(pk=run_id)
    if started_by is not None:
        original = original.filter(caller__in=[actor for actor in started_by if actor])
    run = original.first()
    if run is None:
        raise RerunRefused(
            f"No run {run_id}"
            + (" started with your key (or its user's)." if started_by is not None else ".")
            + " It may have been deleted; a key with runs:read may re-run any run.",
            404,
        )
    if run.status in Run.ACTIVE:
        raise RerunRefused(
            f"Run {run_id} is still {run.status}: wait until it ends, or cancel it, then re-run "
            "it.",
            409,
        )
    target = _execution_of(run, from_node, iteration)
    replayed = list(
        NodeExecution.objects.filter(run_id=run_id, index__lt=target.index).order_by("index")
    )
    chosen = _version(run, version)
    try:
        prepared = prepared_version(chosen)
    except WorkflowCallError as exc:  # a version saved before a check it now fails
        raise RerunRefused(str(exc)) from None
    nodes = prepared.compiled.nodes
    missing = sorted(
        {row.node_id for row in replayed if row.node_id not in nodes} | ({from_node} - set(nodes))
    )
    if missing:
        raise RerunRefused(
            f"Version {chosen.number} has no node {', '.join(map(repr, missing))} that run "
            f"{run_id} went through before {from_node!r}: re-run on the original version, or "
            "from a node both versions share."
        )
    arguments = run.arguments
    executions: list[Execution] = [(row.node_id, row.output) for row in replayed]
    tool_arguments = None
    if input is not NOT_GIVEN:
        if target.node_type == "mcp" and tool_arguments_refusal is not None:
            raise RerunRefused(tool_arguments_refusal, 403)
        arguments, executions, tool_arguments = _edited(
            run, target, prepared, chosen, arguments, executions, input
        )
    _check_faithful(run, replayed, arguments, edited_entry=target.node_type == "entry")
    if target.node_type == "entry":
        try:
            check_arguments(run.workflow_name, prepared.validator, arguments)
        except WorkflowCallError as exc:
            raise RerunRefused(str(exc)) from None
    started = _started(
        run, chosen, target, replayed, executions, arguments, tool_arguments, version, caller
    )
    go_on(started.run_id)
    return started


def _execution_of(run: Run, node_id: str, iteration: int) -> NodeExecution:
    executions = list(
        NodeExecution.objects.filter(run_id=run.pk, node_id=node_id)
        .order_by("index")
        .only("index", "node_id", "node_type", "iteration")
    )
    if not executions:
        reached = list(
            NodeExecution.objects.filter(run_id=run.pk)
            .order_by("node_id")
            .values_list("node_id", flat=True)
            .distinct()
        )
        raise RerunRefused(
            f"Run {run.pk} never reached node {node_id!r}; it reached "
            f"{', '.join(map(repr, reached)) or 'no node'}. Re-run from one of those."
        )
    if not -len(executions) <= iteration < len(executions):
        raise RerunRefused(
            f"Node {node_id!r} ran {len(executions)} time(s) in run {run.pk}: iteration is "
            f"0 to {len(executions) - 1} (or -1 for the latest), not {iteration}."
        )
    return executions[iteration]


def _version(run: Run, version: str) -> WorkflowVersion:
    if version == "original":
        return run.version
    current = run.workflow.current_version
    if current is None:
        raise RerunRefused(
            f"Workflow {run.workflow_name!r} has no published version now: re-run on the "
            "original version."
        )
    return current


def _edited(
    run: Run,
    target: NodeExecution,
    prepared: Any,
    chosen: WorkflowVersion,
    arguments: Any,
    executions: list[Execution],
    given: Any,
) -> tuple[Any, list[Execution], dict[str, Any] | None]:
    """The arguments, replayed executions and tool arguments with `given` as the node's
    input; raises `RerunRefused` when it fails the node's checks."""
    node = prepared.compiled.nodes[target.node_id].node
    if node.type == "entry":
        return given, executions, None
    if node.type == "mcp":
        if not isinstance(given, dict):
            raise RerunRefused(
                f"Node {node.id!r} is an mcp node: its input is the tool's arguments, an "
                f"object, not {type(given).__name__}."
            )
        _check_tool_arguments(chosen, node.server, node.tool, node.id, given)
        return arguments, executions, given
    if not executions:
        raise RerunRefused(f"Node {node.id!r} has no input to edit: it runs first.")
    if node.type == "exit" and prepared.compiled.output is not None:
        failure = prepared.compiled.output.failure(given)
        if failure is not None:
            raise RerunRefused(f"The input given to exit node {node.id!r} {failure}.")
    edited = [*executions[:-1], (executions[-1][0], given)]
    return arguments, edited, None


def _check_tool_arguments(
    version: WorkflowVersion, server: str | None, tool: str | None, node_id: str, given: Any
) -> None:
    provider_id = version.servers.get(server or "")
    ports = (
        NodeSpec.objects.filter(provider_id=provider_id, provider_tool=tool)
        .values_list("input_ports", flat=True)
        .first()
    )
    schema = port_schema(ports)
    if schema is None:
        return  # the tool's schema is unknown here: its server checks the arguments
    problems = [
        f"{'.'.join(str(part) for part in error.absolute_path) or 'arguments'}: {error.message}"
        for error in schema_errors(schema_validator(schema), given)
    ]
    if problems:
        raise RerunRefused(
            f"The arguments given to node {node_id!r} do not fit tool {tool!r}'s inputSchema: "
            + "; ".join(problems[:10])
            + "."
        )


def _check_faithful(
    run: Run, replayed: list[NodeExecution], arguments: Any, *, edited_entry: bool
) -> None:
    """Refuse a re-run that would replay a value the history does not hold whole."""
    for row in replayed:
        if row.truncated or holds_secret_or_cut(row.output):
            raise RerunRefused(
                f"Node {row.node_id!r}'s output in run {run.pk} was stored masked (a secret) "
                "or cut (over GRAPHS_MAX_PAYLOAD_BYTES), so it cannot be replayed: re-run "
                "from that node or an earlier one."
            )
    if not edited_entry and holds_secret_or_cut(arguments):
        raise RerunRefused(
            f"Run {run.pk}'s arguments were stored with a secret masked, so they cannot be "
            "replayed: re-run from the entry node with the arguments as input."
        )


@transaction.atomic
def _started(
    run: Run,
    chosen: WorkflowVersion,
    target: NodeExecution,
    replayed: list[NodeExecution],
    executions: list[Execution],
    arguments: Any,
    tool_arguments: dict[str, Any] | None,
    version: str,
    caller: str,
) -> Rerun:
    now = timezone.now()
    edited = executions != [(row.node_id, row.output) for row in replayed] or (
        tool_arguments is not None or arguments != run.arguments
    )
    new = Run.objects.create(
        created_at=now,
        workflow_id=run.workflow_id,
        version=chosen,
        workflow_name=run.workflow_name,
        arguments=arguments,
        caller=caller[:200],
        is_test=run.is_test,
        mocks=run.mocks,
        started_at=now,
        node_count=len(replayed),
        trace_id=tracing.current_trace_id(),
        trace_parent=tracing.current_trace_parent(),
        rerun_of=run,
        rerun_from={
            "node": target.node_id,
            "iteration": target.iteration,
            "index": target.index,
            "version": version,
            "input_edited": edited,
        },
        **going_on_fields(now),
    )
    NodeExecution.objects.bulk_create(
        [
            NodeExecution(
                run=new,
                index=row.index,
                node_id=row.node_id,
                node_type=row.node_type,
                iteration=row.iteration,
                status=row.status,
                detail={**(row.detail or {}), "replayed_from": run.pk},
                output=output,
                attempts=row.attempts,
                started_at=row.started_at,
                duration_ms=row.duration_ms,
            )
            for row, (_node, output) in zip(replayed, executions, strict=True)
        ]
    )
    try:
        stand_before(
            new,
            target.node_id,
            target.iteration,
            arguments,
            executions,
            tool_arguments=tool_arguments,
            by=f"re-run of run {run.pk}",
        )
    except StateTooLarge as exc:
        raise RerunRefused(str(exc)) from None
    return Rerun(new.pk, target.node_id, target.index)


def input_of(execution_index: int, run_id: int) -> Any:
    """A step's input as the history shows it, for a form that edits it: the previous
    execution's output, the run's arguments for the first, an mcp node's tool arguments."""
    row = NodeExecution.objects.filter(run_id=run_id, index=execution_index).first()
    if row is None:
        return None
    if row.node_type == "mcp" and isinstance(row.detail, dict):
        return row.detail.get("arguments")
    if execution_index == 0:
        return Run.objects.values_list("arguments", flat=True).get(pk=run_id)
    return (
        NodeExecution.objects.filter(run_id=run_id, index=execution_index - 1)
        .values_list("output", flat=True)
        .first()
    )
