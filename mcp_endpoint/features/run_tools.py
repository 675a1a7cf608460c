"""Runs for agents: the MCP tools `list_runs` and `get_run`, and the `run://<id>` resource.

They answer what `GET /api/v1/runs` and `GET /api/v1/runs/{id}` answer (mcp_endpoint/rest/runs.py),
from the same reads (graphs/history/run_api_queries.py) in the same shapes
(graphs/history/run_schemas.py), with the same limits: at most `MAX_PAGE` runs or node executions a
page, keyset cursors that are checked before use. One bound more than REST: an answer lands in a
model's context, so a page also ends early once its JSON passes `ANSWER_BYTES` (its `next_cursor`
then goes on from there). Like `runs:read` over REST, the scope reads every caller's runs; the
`run://` resource needs it too (resources.py), beside `resources:read`.
"""

from __future__ import annotations

import re
from typing import Any

from mcp import types
from pydantic import Field

from graphs.execution.control import RunNotFound
from graphs.history.run_api_queries import (
    DEFAULT_PAGE,
    MAX_PAGE,
    RUNS_CURSOR,
    STEPS_CURSOR,
    BadRunQuery,
    WorkflowNotFound,
    run_read,
    runs_read,
)
from graphs.history.run_schemas import RunDetailOut, RunListOut, run_detail_json, runs_page_json
from graphs.models import Run
from mcp_endpoint.features.tool_definitions import StrictArguments, ToolDefinition, ToolError
from mcp_endpoint.jsonrpc.encoding import json_text
from nodespecs.callers import Caller

SCOPE = "runs:read"
# The most JSON of runs or node executions one answer carries (the structured content; its
# text copy doubles it). A page holds at least one record, however large: the recorder caps
# each payload at GRAPHS_MAX_PAYLOAD_BYTES.
ANSWER_BYTES = 512 * 1024
RUN_SCHEME = "run://"
MIME_TYPE = "application/json"
# A run's URI: run:// and its id (as many digits as a 64-bit id has, at most).
_RUN_URI = re.compile(r"run://([0-9]{1,19})")

_PAGED = (
    f"At most `limit` per page (1 to {MAX_PAGE}, default {DEFAULT_PAGE}), fewer when their JSON "
    f"passes {ANSWER_BYTES // 1024} KB; pass `next_cursor` back as `cursor` for the next page."
)
_LIMIT = Field(
    default=DEFAULT_PAGE,
    ge=1,
    le=MAX_PAGE,
    description=f"How many per page, 1 to {MAX_PAGE}.",
)


class ListRunsArguments(StrictArguments):
    workflow: str | None = Field(
        default=None, max_length=128, description="Only the runs of the workflow of this name."
    )
    status: str | None = Field(
        default=None,
        description="Only the runs with this status.",
        json_schema_extra={"enum": list(Run.Status.values)},
    )
    limit: int = _LIMIT
    # The pattern is documented, not enforced here: run_api_queries refuses another cursor
    # saying what to send instead.
    cursor: str | None = Field(
        default=None,
        description="The `next_cursor` of the previous page, unchanged; leave it out for the "
        "newest runs.",
        json_schema_extra={"pattern": RUNS_CURSOR},
    )


class GetRunArguments(StrictArguments):
    run_id: int = Field(
        ge=1,
        description="The run's id: `id` in list_runs, `run_id` in a test_workflow answer.",
    )
    limit: int = _LIMIT
    cursor: str | None = Field(
        default=None,
        description="The `next_cursor` of the previous answer for this run, unchanged; leave "
        "it out to start from the run's first node execution.",
        json_schema_extra={"pattern": STEPS_CURSOR},
    )


def run_json(run_id: int, cursor: str | None = None, limit: int = DEFAULT_PAGE) -> dict[str, Any]:
    """A run and a page of its node executions as JSON (`RunDetailOut`), bounded by
    `ANSWER_BYTES`; raises `ToolError` saying what to send instead."""
    try:
        detail = run_read(run_id=run_id, cursor=cursor, limit=limit, max_bytes=ANSWER_BYTES)
    except (BadRunQuery, RunNotFound, WorkflowNotFound) as exc:
        raise ToolError(str(exc)) from None
    return run_detail_json(detail)


def _list_runs(arguments: ListRunsArguments, caller: Caller) -> dict[str, Any]:
    try:
        page = runs_read(
            workflow=arguments.workflow or "",
            status=arguments.status or "",
            cursor=arguments.cursor,
            limit=arguments.limit,
            max_bytes=ANSWER_BYTES,
        )
    except (BadRunQuery, RunNotFound, WorkflowNotFound) as exc:
        raise ToolError(str(exc)) from None
    return runs_page_json(page)


def _get_run(arguments: GetRunArguments, caller: Caller) -> dict[str, Any]:
    return run_json(arguments.run_id, arguments.cursor, arguments.limit)


class NotARun(LookupError):
    """A `run://` URI that names no run; the message says what to send instead."""


def run_contents(uri: str) -> list[types.TextResourceContents | types.BlobResourceContents]:
    """The contents of the resource `run://<id>`: the run and its first node executions, as
    `get_run` answers without a cursor. Raises `NotARun`."""
    match = _RUN_URI.fullmatch(uri)
    if match is None:
        raise NotARun(
            f"No resource {uri[:100]!r}: a run is at run://ID, its id in digits, e.g. "
            "run://42 (list_runs gives the ids)."
        )
    try:
        detail = run_json(int(match[1]))
    except ToolError as exc:
        raise NotARun(str(exc)) from None
    return [types.TextResourceContents(uri=uri, mime_type=MIME_TYPE, text=json_text(detail))]


RUN_TOOLS: tuple[ToolDefinition, ...] = (
    ToolDefinition(
        name="list_runs",
        title="List workflow runs",
        description=(
            "List workflow runs, newest first, every caller's: each with its status, "
            "arguments, result or error (and the node it failed at), and timings. Filter by "
            f"`workflow` name and `status`. {_PAGED} get_run shows a run's node executions."
        ),
        arguments=ListRunsArguments,
        output_schema=RunListOut.model_json_schema(),
        handler=_list_runs,
        scope=SCOPE,
    ),
    ToolDefinition(
        name="get_run",
        title="Show a workflow run",
        description=(
            "Show one workflow run and its node executions in execution order, each with its "
            "input, what it evaluated (`detail`), its output or error and timings: what to "
            f"read when a run failed or returned the wrong thing. {_PAGED} While the run is "
            "going on, `next_cursor` is where the executions still to come will be. Also a "
            "resource: run://ID."
        ),
        arguments=GetRunArguments,
        output_schema=RunDetailOut.model_json_schema(),
        handler=_get_run,
        scope=SCOPE,
    ),
)
