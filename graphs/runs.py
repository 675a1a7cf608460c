"""Running a workflow: validate the arguments, run the engine, keep the history.

`workflow_call` is the one way a workflow runs, whether the call comes over MCP, from the
REST API, the admin's test run or `manage.py run_workflow`. The `Run` row is written before
the first node and finished in every case (success, failure, cancellation, a bug), so no run
is left `running` by this process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jsonschema
from django.utils import timezone

from graphs.engine import (
    CancelToken,
    CompiledTool,
    ExecutionLimits,
    GraphRunError,
    compile_tool,
    execute,
    parse_tool,
)
from graphs.history import HistoryRecorder, Progress
from graphs.models import Run, Workflow, WorkflowVersion
from graphs.payloads import mask_secrets, storable
from graphs.services import limits_from_mapping
from nodespecs import mcp_client
from nodespecs.models import Provider

logger = logging.getLogger(__name__)

_COMPILED_CACHE_SIZE = 256


class WorkflowCallError(ValueError):
    """The call could not start (unknown workflow, bad arguments); nothing was run."""


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


# By (version id, digest): ids alone can come back after a database is reset or restored.
_prepared: dict[tuple[int, str], _Prepared] = {}
_prepared_lock = threading.Lock()


def _prepare(version: WorkflowVersion) -> _Prepared:
    """Compile a version's expressions and input schema, once."""
    key = (version.pk, version.digest)
    prepared = _prepared.get(key)
    if prepared is not None:
        return prepared
    tool = parse_tool(version.definition, server_names=version.servers.keys())
    schema = tool.input_schema or {"type": "object"}
    validator_class = jsonschema.validators.validator_for(schema)
    prepared = _Prepared(
        version.pk,
        version.workflow_id,
        limits_from_mapping(version.limits),
        dict(version.servers),
        compile_tool(tool),
        validator_class(schema),
    )
    with _prepared_lock:
        if len(_prepared) >= _COMPILED_CACHE_SIZE:
            _prepared.pop(next(iter(_prepared)))
        _prepared[key] = prepared
    return prepared


def _check_arguments(name: str, validator: Any, arguments: Any) -> None:
    if not isinstance(arguments, dict):
        raise WorkflowCallError(
            f"Arguments for {name} must be an object, not {type(arguments).__name__}."
        )
    problems = [
        f"{'.'.join(str(part) for part in error.absolute_path) or 'arguments'}: {error.message}"
        for error in sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    ]
    if problems:
        raise WorkflowCallError(
            f"Invalid arguments for {name}: "
            + "; ".join(problems)
            + ". Check them against the tool's inputSchema."
        )


def _downstream(
    servers: dict[str, int],
) -> Callable[[str, str, dict[str, Any], float | None], Any]:
    """The engine's call function: a node's server name → its provider's pooled connection."""
    providers = Provider.objects.in_bulk(list(servers.values())) if servers else {}
    bound = {name: providers.get(pk) for name, pk in servers.items()}

    def call_tool(server: str, tool: str, arguments: dict[str, Any], timeout: float | None) -> Any:
        provider = bound.get(server)
        if provider is None:
            raise mcp_client.DownstreamError(
                f"Server {server!r} has no registered provider any more: re-import the graph "
                "file or bind the server in the workflow's admin page."
            )
        if not provider.enabled:
            raise mcp_client.DownstreamError(
                f"Provider {provider.name!r} (server {server!r}) is disabled: enable it in the "
                "admin to run this workflow."
            )
        return mcp_client.call_tool(provider.connection(), tool, arguments, timeout=timeout)

    return call_tool


def _status_of(error: GraphRunError) -> str:
    if error.kind == "cancelled":
        return Run.Status.CANCELLED
    if error.kind == "limit" and "maxExecutionTimeMs" in str(error):
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


def workflow_call(
    *,
    name: str,
    arguments: Any,
    caller: str = "",
    session_id: str = "",
    version: tuple[int, str] | None = None,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
) -> RunOutcome:
    """Run a workflow by tool name and record the run.

    `version` is the (id, digest) of the version to run, as `tools/list` showed it (a
    version already run in this process then needs no query); else the current one.
    Raises `WorkflowCallError` when nothing could run; every run that starts returns an
    outcome, failed ones included.
    """
    prepared = _prepared.get(version) if version is not None else None
    if prepared is None:
        prepared = _prepare(_find_version(name, version[0] if version else None))
    _check_arguments(name, prepared.validator, arguments)
    run = Run.objects.create(
        workflow_id=prepared.workflow_id,
        version_id=prepared.version_id,
        workflow_name=name,
        status=Run.Status.RUNNING,
        arguments=mask_secrets(arguments),
        caller=caller[:200],
        session_id=session_id[:200],
        started_at=timezone.now(),
    )
    recorder = HistoryRecorder(run, progress)
    started = time.perf_counter()
    try:
        result = execute(
            prepared.compiled,
            arguments,
            call_tool=_downstream(prepared.servers),
            limits=prepared.limits,
            observer=recorder,
            cancel=cancel,
        )
    except GraphRunError as exc:
        return _finish(run, recorder, started, error=exc)
    except Exception as exc:
        logger.exception("Run %s of %s failed unexpectedly", run.pk, name)
        message = f"Internal error ({exc.__class__.__name__}: {exc}); it is logged."
        return _finish(run, recorder, started, failure=message)
    except BaseException:
        _finish(run, recorder, started, failure="The server was interrupted during the run.")
        raise
    return _finish(run, recorder, started, result=result)


def _finish(
    run: Run,
    recorder: HistoryRecorder,
    started: float,
    *,
    result: Any = None,
    error: GraphRunError | None = None,
    failure: str = "",
) -> RunOutcome:
    """Write the rest of the history and the run's outcome: its result, the engine's `error`,
    or a `failure` outside the engine's making."""
    recorder.flush()
    run.finished_at = timezone.now()
    run.duration_ms = (time.perf_counter() - started) * 1000
    run.node_count = recorder.node_count
    run.truncated = recorder.truncated
    if error is not None:
        run.status = _status_of(error)
        run.error = str(error)
        run.error_node_id = error.node_id or ""
    elif failure:
        run.status = Run.Status.FAILED
        run.error = failure
    else:
        run.status = Run.Status.SUCCEEDED
        run.result, truncated = storable(result, recorder.max_bytes)
        run.truncated |= truncated
    run.save(
        update_fields=[
            "status",
            "result",
            "error",
            "error_node_id",
            "node_count",
            "truncated",
            "finished_at",
            "duration_ms",
        ]
    )
    return RunOutcome(run.pk, run.status, result, run.error, run.error_node_id)
