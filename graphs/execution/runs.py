"""Running a workflow: validate the arguments, run the engine, keep the history.

`workflow_call` is the one way a workflow runs, whether the call comes over MCP, from the REST API,
the admin's test run or `manage.py run_workflow`; in queued mode the web side records the run with
`run_create` and a worker executes it with `run_execute`, through the same `_execute`
(graphs/execution/control.py chooses). A direct run's id is reserved before its first node and its
`Run` row is written with its history (graphs/execution/recorder.py: once, at its end, for a short
run); a queued run's row is written when it is queued. Every run that starts is finished in every
case (success, failure, cancellation, a bug), so no run is left `running` by this process; one
whose process dies is failed by the reaper.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.utils import timezone
from mcp.types import CallToolResult

from graphs.engine import (
    AtBreakpoint,
    CancelToken,
    CompiledTool,
    DefinitionError,
    ExecutionLimits,
    GraphRunError,
    MockedCall,
    Paused,
    Resume,
    compile_tool,
    execute,
    parse_tool,
)
from graphs.engine.language.regex import RegexNotSupported
from graphs.engine.schemas import SchemaUnresolvable, schema_errors, schema_validator
from graphs.execution import lineage, liveness, telemetry
from graphs.execution.approvals.notify import notify_waiting
from graphs.execution.approvals.waits import WaitLost, resume_of, wait_begin
from graphs.execution.limits import ceiling_explained, limits_for_run, limits_from_mapping
from graphs.execution.mocks import call_mocks, decided_by_mocks
from graphs.execution.payloads import (
    SecretPath,
    run_secrets,
    secret_paths,
    storable,
    stored_arguments,
    stored_error,
)
from graphs.execution.recorder import HistoryRecorder, Progress, run_id_reserve
from graphs.execution.resuming.pauses import PauseLost, pause_begin, pause_resume_of
from graphs.execution.resuming.saved_state import StateTooLarge
from graphs.execution.tracing import (
    continued,
    current_trace_id,
    current_trace_parent,
    traced_run,
)
from graphs.models import NodeExecution, Run, Workflow, WorkflowVersion
from nodespecs.downstream import client
from nodespecs.downstream.call_lineage import Lineage
from nodespecs.providers.connections import provider_connections

logger = logging.getLogger(__name__)

_COMPILED_CACHE_SIZE = 256


class WorkflowCallError(ValueError):
    """The call could not start (unknown workflow, bad arguments); nothing was run."""


@dataclass(frozen=True)
class RunRequest:
    """One call of a workflow, as every way of running one takes it."""

    # The workflow's tool name.
    name: str
    arguments: Any
    # Who called (an API key's identity, "manage.py", ...), as the history records it.
    caller: str = ""
    # The MCP session the call came in (2025 revisions): ending it cancels the run.
    session_id: str = ""
    # The JSON-RPC id of the call, as JSON: `notifications/cancelled` names it.
    request_id: str = ""
    # The (id, digest) of the version to run, as `tools/list` showed it (a version already
    # run in this process then needs no query); None runs the current one.
    version: tuple[int, str] | None = None
    # A test run (test_workflow: graphs/execution/mocks.py), and what its mocked mcp nodes answer,
    # by node id (CallToolResult JSON).
    is_test: bool = False
    mocks: dict[str, Any] | None = None
    # The workflow runs whose calls led to this one (graphs/execution/lineage.py), empty for a call
    # from outside: recorded, and sent on with the run's own calls.
    lineage: Lineage = ()
    # A test run's breakpoints: node ids it pauses before
    # (graphs/execution/resuming/breakpoints.py).
    breakpoints: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunOutcome:
    run_id: int
    status: str
    result: Any = None
    error: str = ""
    error_node_id: str = ""

    @property
    def succeeded(self) -> bool:
        return self.status == Run.Status.SUCCEEDED


@dataclass(frozen=True)
class _Prepared:
    """What every run of one version needs, built once per process (versions never change)."""

    version_id: int
    workflow_id: int
    limits: ExecutionLimits
    servers: dict[str, int]
    compiled: CompiledTool
    validator: Any
    # Where the inputSchema puts secrets (`payloads.secret_paths`): the same for every run.
    secret_paths: tuple[SecretPath, ...]


# By (version id, digest): ids alone can come back after a database is reset or restored.
_prepared: dict[tuple[int, str], _Prepared] = {}
_prepared_lock = threading.Lock()


def prepared_version(version: WorkflowVersion) -> _Prepared:
    """Compile a version's expressions and input schema, once per process."""
    key = (version.pk, version.digest)
    prepared = _prepared.get(key)
    if prepared is not None:
        return prepared
    try:
        tool = parse_tool(
            version.definition, server_names=version.servers.keys(), exit_value_checked=False
        )
    except DefinitionError as exc:  # stored before a check it fails was made (a remote $ref)
        raise WorkflowCallError(
            f"Version {version.number} of {version.workflow.name!r} cannot run: it fails a "
            f"check made since it was saved: {'; '.join(exc.problems)}. Fix it and save it "
            "again."
        ) from None
    prepared = _Prepared(
        version.pk,
        version.workflow_id,
        limits_from_mapping(version.limits),
        dict(version.servers),
        compile_tool(tool),
        schema_validator(tool.input_schema or {"type": "object"}),
        tuple(secret_paths(tool.input_schema)),
    )
    with _prepared_lock:
        if len(_prepared) >= _COMPILED_CACHE_SIZE:
            _prepared.pop(next(iter(_prepared)))
        _prepared[key] = prepared
    return prepared


def check_arguments(name: str, validator: Any, arguments: Any) -> None:
    """Raise `WorkflowCallError` naming each place where `arguments` break the workflow's
    inputSchema (`validator`)."""
    if not isinstance(arguments, dict):
        raise WorkflowCallError(
            f"Arguments for {name} must be an object, not {type(arguments).__name__}."
        )
    try:
        errors = sorted(schema_errors(validator, arguments), key=lambda e: list(e.absolute_path))
    except RegexNotSupported as exc:  # a schema saved before patterns ran on RE2
        raise WorkflowCallError(
            f"The inputSchema of {name} cannot be checked: {exc}. Fix the pattern and save "
            "the workflow again."
        ) from None
    except SchemaUnresolvable as exc:  # never fetched: schemas are evaluated where they are
        raise WorkflowCallError(
            f"The inputSchema of {name} cannot be checked: {exc}. Fix the schema and save "
            "the workflow again."
        ) from None
    problems = [
        f"{'.'.join(str(part) for part in error.absolute_path) or 'arguments'}: {error.message}"
        for error in errors
    ]
    if problems:
        raise WorkflowCallError(
            f"Invalid arguments for {name}: "
            + "; ".join(problems)
            + ". Check them against the tool's inputSchema."
        )


def _downstream(
    servers: dict[str, int], carried: Lineage
) -> Callable[[str, str, dict[str, Any], float | None], Any]:
    """The engine's call function: a node's server name → its provider's pooled connection;
    every call carries the lineage `carried` (the run's, and the run itself last). The
    providers are read from their snapshot, as they are when the run starts (a provider
    disabled before then is refused)."""
    providers = provider_connections(set(servers.values())) if servers else {}
    bound = {name: providers.get(pk) for name, pk in servers.items()}

    def call_tool(server: str, tool: str, arguments: dict[str, Any], timeout: float | None) -> Any:
        provider = bound.get(server)
        if provider is None:
            raise client.DownstreamError(
                f"Server {server!r} has no registered provider any more: re-import the graph "
                "file or bind the server in the workflow's admin page."
            )
        if not provider.enabled:
            raise client.DownstreamError(
                f"Provider {provider.name!r} (server {server!r}) is disabled: enable it in the "
                "admin to run this workflow."
            )
        return client.call_tool(
            provider.connection(), tool, arguments, timeout=timeout, lineage=carried
        )

    return call_tool


def _mocked(mocks: dict[str, Any] | None) -> MockedCall | None:
    """The engine's answers for a test run's mocked mcp nodes (`Run.mocks`), or None."""
    calls = call_mocks(mocks)
    if not calls:
        return None
    answers = {node_id: CallToolResult.model_validate(result) for node_id, result in calls.items()}
    return lambda node: answers.get(node.id)


def _status_of(error: GraphRunError) -> str:
    if error.kind == "cancelled":
        return Run.Status.CANCELLED
    if error.limit == "maxExecutionTimeMs":
        return Run.Status.TIMED_OUT
    return Run.Status.FAILED


def _find_version(name: str, version_id: int | None) -> WorkflowVersion:
    if version_id is not None:
        version = WorkflowVersion.objects.filter(pk=version_id, workflow__name=name).first()
    else:
        workflow = Workflow.objects.filter(name=name).select_related("current_version").first()
        version = workflow.current_version if workflow is not None else None
    if version is None:
        raise WorkflowCallError(
            f"No workflow named {name!r}; tools/list shows the workflows you can call."
        )
    return version


def _resolve(request: RunRequest) -> _Prepared:
    version = request.version
    prepared = _prepared.get(version) if version is not None else None
    if prepared is None:
        prepared = prepared_version(_find_version(request.name, version[0] if version else None))
    return prepared


def _secrets(prepared: _Prepared, arguments: Any) -> tuple[str, ...]:
    """The run's secret values, masked wherever its history holds them
    (graphs/execution/payloads.py); its nodes get the real ones."""
    return run_secrets(prepared.secret_paths, arguments)


def _new_run(
    prepared: _Prepared, request: RunRequest, *, status: str, run_id: int | None = None
) -> Run:
    """The run of a call whose arguments were checked, not written yet: under a reserved
    `run_id` (a direct run, written by its recorder), or none (a queued one, saved at once)."""
    # One clock reading for both: a run that starts as it is recorded was created no later.
    now = timezone.now()
    running = status == Run.Status.RUNNING
    return Run(
        id=run_id,
        created_at=now,
        workflow_id=prepared.workflow_id,
        version_id=prepared.version_id,
        workflow_name=request.name,
        status=status,
        arguments=stored_arguments(request.arguments, _secrets(prepared, request.arguments)),
        caller=request.caller[:200],
        session_id=request.session_id[:200],
        request_id=request.request_id[:200],
        is_test=request.is_test,
        mocks=request.mocks,
        breakpoints=list(request.breakpoints) or None,
        started_at=now if running else None,
        heartbeat_at=now if running else None,
        worker=liveness.process_label() if running else "",
        trace_id=current_trace_id(),
        trace_parent=current_trace_parent(),
        lineage=lineage.stored(request.lineage),
    )


def workflow_call(
    request: RunRequest,
    *,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    started: Callable[[int], None] | None = None,
) -> RunOutcome:
    """Run a workflow by tool name in this process and record the run.

    `started(run_id)` is called once the run is recorded, before its first node.
    Raises `WorkflowCallError` when nothing could run; every run that starts returns an
    outcome, failed ones included.
    """
    prepared = _resolve(request)
    check_arguments(request.name, prepared.validator, request.arguments)
    run = _new_run(prepared, request, status=Run.Status.RUNNING, run_id=run_id_reserve())
    if started is not None:
        started(run.pk)
    return _execute(run, prepared, request.arguments, progress, cancel, recorded=False)


def run_create(request: RunRequest) -> Run:
    """Check a call as `workflow_call` does and record its run as queued, for a worker to
    execute with `run_execute`. Raises `WorkflowCallError` when the call cannot run."""
    prepared = _resolve(request)
    check_arguments(request.name, prepared.validator, request.arguments)
    run = _new_run(prepared, request, status=Run.Status.QUEUED)
    run.save(force_insert=True)
    return run


def run_execute(*, run_id: int, arguments: Any) -> RunOutcome | None:
    """Execute a queued run in this process (a worker), as `workflow_call` does; a run that
    was decided at an approval node goes on from there (its arguments are then its saved
    state's: `arguments` is None).

    The run is claimed with a conditional update, so a task delivered twice, or one for a
    run cancelled (or reaped) meanwhile, executes nothing: then None.
    """
    now = timezone.now()
    claimed = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
        status=Run.Status.RUNNING, started_at=now, heartbeat_at=now, worker=liveness.process_label()
    )
    if not claimed:
        logger.info("Run %s is not queued any more (cancelled or taken): skipped", run_id)
        return None
    return run_resume(run_id, arguments)


def run_resume(run_id: int, arguments: Any = None) -> RunOutcome:
    """Execute a run this process has claimed (status running): from its approval node when
    it was decided there, from the node it was paused before when continued or stepped (or
    a re-run's first node), else from its entry with `arguments`."""
    run = Run.objects.select_related("version").get(pk=run_id)
    resumed = resume_of(run_id)
    step = False
    if resumed is None:
        going_on = pause_resume_of(run_id)
        if going_on is None:
            return _execute(run, prepared_version(run.version), arguments, None, None)
        resumed, step = (going_on.arguments, going_on.resume), going_on.step
    arguments, resume = resumed
    # The rest of the run continues the trace it was started in, whoever sent it on.
    with continued({"traceparent": run.trace_parent}):
        return _execute(
            run, prepared_version(run.version), arguments, None, None, resume, step=step
        )


def _execute(
    run: Run,
    prepared: _Prepared,
    arguments: Any,
    progress: Progress | None,
    cancel: CancelToken | None,
    resume: Resume | None = None,
    *,
    step: bool = False,
    recorded: bool = True,
) -> RunOutcome:
    """Run the engine on a started run, with its heartbeat, and record how it ended (or that
    it waits at an approval node, or is paused at a breakpoint). `recorded`: whether the
    run's row is written already (a direct run's is not: its recorder writes it)."""
    secrets = _secrets(prepared, arguments)
    recorder = HistoryRecorder(
        run,
        progress,
        secrets,
        waiting_index=(len(resume.executions) if resume and resume.decision is not None else None),
        resumed=resume is not None,
        recorded=recorded,
    )
    # Capped here, not when the version was saved: a workflow stored before a ceiling was
    # lowered still runs, within the ceiling in force now.
    limits = limits_for_run(prepared.limits)
    # A resumed run's duration counts its time before the wait, not the wait.
    started = time.perf_counter() - (resume.elapsed_ms / 1000 if resume is not None else 0.0)
    calls_carry = lineage.downstream_lineage(run.lineage, run.workflow_name, run.pk)
    with liveness.registry.watching(run, cancel) as token, traced_run(run, recorder) as traced:
        try:
            result = execute(
                prepared.compiled,
                arguments,
                call_tool=traced.calls(_downstream(prepared.servers, calls_carry)),
                limits=limits,
                observer=traced.observer,
                cancel=token,
                mocked=_mocked(run.mocks),
                decided=decided_by_mocks(run.mocks),
                resume=resume,
                breakpoints=run.breakpoints or (),
                step=step,
            )
        except GraphRunError as exc:
            error = ceiling_explained(exc, prepared.limits, limits)
            return _finish(run, recorder, started, error=error, cancel_reason=token.reason)
        except Exception as exc:
            logger.exception("Run %s of %s failed unexpectedly", run.pk, run.workflow_name)
            message = f"Internal error ({exc.__class__.__name__}: {exc}); it is logged."
            return _finish(run, recorder, started, failure=message)
        except BaseException:
            _finish(run, recorder, started, failure="The server was interrupted during the run.")
            raise
    if isinstance(result, Paused):
        return _wait(run, recorder, started, result, arguments)
    if isinstance(result, AtBreakpoint):
        return _pause(run, recorder, started, result, arguments)
    return _finish(run, recorder, started, result=result)


def _wait(
    run: Run, recorder: HistoryRecorder, started: float, paused: Paused, arguments: Any
) -> RunOutcome:
    """The run reached an approval node: it waits, holding nothing but its saved state (or
    fails there, when that state is too large to keep)."""
    recorder.flush()
    try:
        approval = wait_begin(run, paused, arguments, recorder.node_count)
    except StateTooLarge as exc:
        NodeExecution.objects.filter(run=run, status=NodeExecution.Status.WAITING).update(
            status=NodeExecution.Status.FAILED, error=str(exc)
        )
        return _finish(run, recorder, started, failure=str(exc))
    except WaitLost as exc:
        logger.warning("%s", exc)
        status = Run.objects.values_list("status", flat=True).get(pk=run.pk)
        return RunOutcome(run.pk, status, error=str(exc))
    notify_waiting(approval, run.workflow_name)
    return RunOutcome(run.pk, Run.Status.WAITING)


def _pause(
    run: Run, recorder: HistoryRecorder, started: float, at: AtBreakpoint, arguments: Any
) -> RunOutcome:
    """The test run reached a breakpoint: it pauses, holding nothing but its saved state."""
    recorder.flush()
    try:
        pause_begin(run, at, arguments, recorder.node_count)
    except StateTooLarge as exc:
        return _finish(run, recorder, started, failure=str(exc))
    except PauseLost as exc:
        logger.warning("%s", exc)
        status = Run.objects.values_list("status", flat=True).get(pk=run.pk)
        return RunOutcome(run.pk, status, error=str(exc))
    return RunOutcome(run.pk, Run.Status.PAUSED)


def _finish(
    run: Run,
    recorder: HistoryRecorder,
    started: float,
    *,
    result: Any = None,
    error: GraphRunError | None = None,
    failure: str = "",
    cancel_reason: str = "",
) -> RunOutcome:
    """Write the rest of the history and the run's outcome, in one round trip: its result,
    the engine's `error`, or a `failure` outside the engine's making. A run cancelled before
    its row was written is written with the reason it was given (`cancel_reason`)."""
    run.finished_at = timezone.now()
    run.duration_ms = (time.perf_counter() - started) * 1000
    run.node_count = recorder.node_count
    run.truncated = recorder.truncated
    if error is not None:
        run.status = _status_of(error)
        run.error = stored_error(str(error), recorder.secrets)
        run.error_node_id = error.node_id or ""
        if run.status == Run.Status.CANCELLED and not run.cancel_reason:
            run.cancel_reason = cancel_reason[:500]
    elif failure:
        run.status = Run.Status.FAILED
        run.error = stored_error(failure, recorder.secrets)
    else:
        run.status = Run.Status.SUCCEEDED
        run.result, truncated = storable(result, recorder.max_bytes, recorder.secrets)
        run.truncated |= truncated
    fields = [
        "status",
        "result",
        "error",
        "error_node_id",
        "node_count",
        "truncated",
        "finished_at",
        "duration_ms",
    ]
    recorder.finish(fields)
    telemetry.run_finished(run)
    return RunOutcome(run.pk, run.status, result, run.error, run.error_node_id)
