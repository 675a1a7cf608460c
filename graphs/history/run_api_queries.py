"""Reads of the run history for API clients: a page of runs, and a run with a page of its
node executions, as JSON-ready records. The REST routes (mcp_endpoint/rest/runs.py) call
these; the checks and the messages that say how to fix a query live here, for every caller.

Both page by keyset, never by OFFSET: the runs by (created_at, id), newest first, with the
history pages' keyset (graphs/history/keyset.py); a run's executions by their index, in execution
order (`selectors.run_steps`). Clients treat a cursor as opaque and pass it back unchanged;
every string of a cursor's pattern (`RUNS_CURSOR`, `STEPS_CURSOR`) is a valid position, any
other is refused saying so, so an API schema can state exactly what is accepted.

The history is served as stored: masked and size-capped where the recorder capped it
(`truncated`). A caller that must bound its whole answer, not only its count (an MCP tool,
whose answer lands in a model's context), passes `max_bytes`: the page then ends early once
its records' JSON passes that size, and its cursor starts the next page where it stopped.
The JSON shapes of these records are graphs/history/run_schemas.py.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from django.utils import timezone

from graphs.engine.nesting import cut_to_depth
from graphs.execution.control import RunNotFound
from graphs.execution.resuming.pauses import pause_of
from graphs.history.annotations import AnnotationRefused, annotation_of, tag_checked
from graphs.history.keyset import TOKEN_PATTERN, Cursor, run_page
from graphs.history.selectors import RunFilters, Step, run_steps, runs_filtered
from graphs.models import Approval, NodeExecution, Run, RunAnnotation, Workflow

DEFAULT_PAGE = 50
MAX_PAGE = 200
# A page of a run's executions starts at an index of up to 9 digits (a run has at most
# GRAPHS_MAX_NODE_EXECUTIONS_CEILING of them; the column holds up to 2**31 - 1).
_STEPS = re.compile(r"[0-9]{1,9}")
RUNS_CURSOR = TOKEN_PATTERN
STEPS_CURSOR = f"^{_STEPS.pattern}$"
# What starts an ISO 8601 date and time in its extended format: a date, then T or a space.
_DATE_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ]")
RUN_FIELDS = (
    "workflow_name",
    "version__number",
    "status",
    "caller",
    "arguments",
    "result",
    "error",
    "error_node_id",
    "node_count",
    "truncated",
    "created_at",
    "started_at",
    "finished_at",
    "duration_ms",
    "rerun_of",
    "rerun_from",
)

ANNOTATION_FIELDS = (
    "annotation__verdict",
    "annotation__note",
    "annotation__by",
    "annotation__updated_at",
)
# The verdicts the runs list filters by: none is the runs without one.
VERDICT_FILTERS = ("", *RunAnnotation.Verdict.values, "none")


class BadRunQuery(ValueError):
    """A query that cannot be answered; the message says what was wrong and how to fix it."""


class WorkflowNotFound(LookupError):
    """No workflow with that name; the message says so, with the names closest to it."""


@dataclass(frozen=True)
class RunsPage:
    runs: list[dict[str, Any]]
    # Pass it back as `cursor` for the next (older) page; None on the last page.
    next_cursor: str | None

    def as_dict(self) -> dict[str, Any]:
        """The page as API clients receive it (`run_schemas.RunListOut`)."""
        return {"runs": self.runs, "next_cursor": self.next_cursor}


@dataclass(frozen=True)
class RunDetail:
    run: dict[str, Any]
    node_executions: list[dict[str, Any]]
    # Pass it back as `cursor` for the executions after these; None once the run has ended
    # and every execution was served (while it is active, more may come).
    next_cursor: str | None
    # Every approval node the run reached, decided or not, oldest first.
    approvals: list[dict[str, Any]]
    # What the run waits for now (the undecided approval of a waiting run), else None.
    waiting_for: dict[str, Any] | None
    # A reviewer's verdict, note and tags (graphs/history/annotations.py); None if none.
    annotation: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The run and its page as API clients receive them (`run_schemas.RunDetailOut`)."""
        return {
            "run": self.run,
            "node_executions": self.node_executions,
            "next_cursor": self.next_cursor,
            "approvals": self.approvals,
            "waiting_for": self.waiting_for,
            "annotation": self.annotation,
        }


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise BadRunQuery(f"Invalid limit {limit}: ask for 1 to {MAX_PAGE} per page.")


def json_size(record: dict[str, Any]) -> int:
    """The size of a record's compact JSON, in bytes (what a page's budget counts)."""
    try:
        return len(orjson.dumps(record))
    except (orjson.JSONEncodeError, TypeError):  # an integer beyond 64 bits, say
        return len(json.dumps(record, default=str, separators=(",", ":")).encode())


def _within(records: list[dict[str, Any]], max_bytes: int | None) -> int:
    """How many of `records`, from the first, fit in `max_bytes` of JSON: all of them when
    there is no budget, and always at least one, so that a page moves on."""
    if max_bytes is None:
        return len(records)
    used = 0
    for count, record in enumerate(records):
        used += json_size(record)
        if count and used > max_bytes:
            return count
    return len(records)


def _moment(name: str, value: str | datetime | None) -> datetime | None:
    """`value` as a moment in UTC: an ISO 8601 date and time (RFC 3339's among them), read
    as UTC when it has no offset. An offset that moves it past the first or the last moment
    a datetime holds (0001-01-01T00:30+01:00) makes it that moment."""
    if value is None or isinstance(value, datetime):
        moment = value
    else:
        text = value.strip().upper()  # RFC 3339 allows a lower-case t and z
        try:
            if not _DATE_TIME.match(text):
                raise ValueError(text)
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise BadRunQuery(
                f"{name}: {value[:60]!r} is not an ISO 8601 date and time; send e.g. "
                "2026-11-01T09:30:00Z (without an offset it is read as UTC)."
            ) from None
    if moment is None:
        return None
    if timezone.is_naive(moment):
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        edge = datetime.min if moment.year == datetime.min.year else datetime.max
        return edge.replace(tzinfo=UTC)


def _workflow_id(name: str) -> int:
    found = Workflow.objects.filter(name=name).values_list("pk", flat=True).first()
    if found is not None:
        return found
    names = list(Workflow.objects.values_list("name", flat=True))
    close = difflib.get_close_matches(name, names, n=5)
    hint = f"did you mean {', '.join(close)}?" if close else "workflow takes a workflow's name."
    raise WorkflowNotFound(f"No workflow named {name[:200]!r}; {hint}")


def runs_read(
    *,
    workflow: str = "",
    status: str = "",
    caller: str = "",
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    cursor: str | None = None,
    limit: int = DEFAULT_PAGE,
    max_bytes: int | None = None,
    verdict: str = "",
    tag: str = "",
) -> RunsPage:
    """Runs newest first, every caller's, filtered: of the workflow named `workflow`, with
    `status`, started by `caller`, created at or after `since` and before `until` (datetimes,
    or ISO 8601 texts), judged `verdict` by a reviewer (good, bad, or none for no verdict) and
    tagged `tag`; at most `limit` of them, and fewer when their JSON would pass `max_bytes`.
    One query for the page (and one to find the workflow by name)."""
    _check_limit(limit)
    if status and status not in Run.Status.values:
        raise BadRunQuery(
            f"Unknown status {status[:50]!r}; valid statuses: {', '.join(Run.Status.values)}."
        )
    if verdict not in VERDICT_FILTERS:
        raise BadRunQuery(
            f"Unknown verdict {verdict[:50]!r}: send good, bad, or none for the runs without "
            "a verdict."
        )
    if tag:
        try:
            tag = tag_checked(tag)
        except AnnotationRefused as exc:
            raise BadRunQuery(str(exc)) from None
    since, until = _moment("since", since), _moment("until", until)
    before = None
    if cursor is not None:
        try:
            before = Cursor.parse(cursor)
        except ValueError:
            raise BadRunQuery(
                f"Invalid cursor {cursor[:80]!r}: pass back the next_cursor of the previous "
                "page unchanged, or leave cursor out for the newest runs."
            ) from None
    # PostgreSQL holds no text with a NUL character, so no workflow name or caller has one;
    # it would refuse even to compare with one.
    if "\x00" in workflow:
        raise WorkflowNotFound(
            f"No workflow named {workflow[:200]!r}: names hold no NUL character."
        )
    if "\x00" in caller:
        return RunsPage(runs=[], next_cursor=None)
    filters = RunFilters(
        workflow_id=_workflow_id(workflow) if workflow else None,
        status=status,
        caller=caller,
        since=since,
        until=until,
        verdict=verdict,
        tag=tag,
    )
    runs = runs_filtered(filters).select_related("version").only(*RUN_FIELDS)
    page = run_page(runs, before=before, size=limit)
    records = [run_record(run) for run in page.runs]
    kept = _within(records, max_bytes)
    if kept < len(records):
        return RunsPage(records[:kept], Cursor.of(page.runs[kept - 1]).token())
    return RunsPage(records, page.older.token() if page.older is not None else None)


def run_read(
    *,
    run_id: int,
    cursor: str | None = None,
    limit: int = DEFAULT_PAGE,
    max_bytes: int | None = None,
) -> RunDetail:
    """A run and its node executions in execution order, `limit` of them from the cursor's
    position (the first when no cursor), each with its input; fewer when the JSON of the run
    and of them would pass `max_bytes` (never none, if there are any), and the approvals it
    reached. Three queries."""
    _check_limit(limit)
    start = 0
    if cursor is not None:
        if not _STEPS.fullmatch(cursor):
            raise BadRunQuery(
                f"Invalid cursor {cursor[:80]!r}: pass back the next_cursor of the run's "
                "previous page unchanged, or leave cursor out to start from its first node "
                "execution."
            )
        start = int(cursor)
    # The run first: if it had ended, every execution it wrote is there to read. Its
    # annotation comes in the same query (its tags in one more, if it has one).
    try:
        run = (
            Run.objects.select_related("version", "annotation")
            .only(*RUN_FIELDS, *ANNOTATION_FIELDS)
            .get(pk=run_id)
        )
    except Run.DoesNotExist:
        raise RunNotFound(
            f"No run {run_id}; it may have been deleted. The runs are listed by list_runs "
            "(MCP) and GET /api/v1/runs (REST)."
        ) from None
    steps = run_steps(run=run, start=start, size=limit + 1)
    more = len(steps) > limit
    steps = steps[:limit]
    record = run_record(run)
    approvals = approval_records(run)
    waiting = None
    if run.status == Run.Status.WAITING and approvals and approvals[-1]["decision"] is None:
        waiting = approvals[-1]
    annotation = annotation_of(run)
    reviewed = annotation.as_json() if annotation.updated_at else None
    executions = [execution_record(step) for step in steps]
    # Everything of the answer but its executions counts against `max_bytes` (a cursor at
    # its longest), so the executions kept are what is left.
    envelope = {
        "run": record,
        "node_executions": [],
        "next_cursor": "9" * 9,
        "approvals": approvals,
        "waiting_for": waiting,
        "annotation": reviewed,
    }
    budget = None if max_bytes is None else max(max_bytes - json_size(envelope), 1)
    kept = _within(executions, budget)
    if kept < len(executions):
        more, steps, executions = True, steps[:kept], executions[:kept]
    following = steps[-1].execution.index + 1 if steps else start
    next_cursor = None
    if (more or run.status in Run.ACTIVE) and _STEPS.fullmatch(str(following)):
        next_cursor = str(following)
    return RunDetail(
        record,
        executions,
        next_cursor,
        approvals,
        waiting,
        reviewed,
    )


def approval_records(run: Run) -> list[dict[str, Any]]:
    """The approval nodes a run reached, oldest first: what was asked, the wait (from, until,
    how long) and the decision (who, the comment, the form)."""
    records = []
    for approval in Approval.objects.filter(run=run).defer("state").order_by("index"):
        until = approval.decided_at
        waited = (until - approval.created_at).total_seconds() * 1000 if until else None
        records.append(
            {
                "node": approval.node_id,
                "iteration": approval.iteration,
                "message": approval.message,
                "form": approval.form,
                "approvers": approval.approvers,
                "since": approval.created_at,
                "timeout_at": approval.timeout_at,
                "until": until,
                "waited_ms": waited,
                "decision": approval.decision or None,
                "by": approval.decided_by,
                "comment": approval.comment,
                "form_values": approval.form_values,
            }
        )
    return records


def run_record(run: Run) -> dict[str, Any]:
    """A run as API clients see it (payloads nested too deep cut: `_within_depth`)."""
    active = run.status in Run.ACTIVE
    record = {
        "id": run.pk,
        "workflow": run.workflow_name,
        "workflow_version_id": run.version_id,
        "workflow_version": run.version.number,
        "status": run.status,
        "caller": run.caller,
        "arguments": run.arguments,
        "result": run.result,
        "error": run.error or None,
        "error_node_id": run.error_node_id or None,
        # Written when the run ends; page the node executions of an active run to count them.
        "node_count": None if active else run.node_count,
        "truncated": run.truncated,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "duration_ms": run.duration_ms,
        "rerun_of": run.rerun_of_id,
        "rerun_from": run.rerun_from,
        # Only a paused run has one, read with one more query.
        "paused_at": _paused_at(run.pk) if run.status == Run.Status.PAUSED else None,
    }
    return _within_depth(record, ("arguments", "result"))


def _paused_at(run_id: int) -> dict[str, Any] | None:
    """Where a paused run stands: the node it paused before, and until when it stays."""
    pause = pause_of(run_id)
    if pause is None:
        return None
    return {
        "node": pause.node_id,
        "index": pause.index,
        "iteration": pause.iteration,
        "expires_at": pause.expires_at,
    }


def execution_record(step: Step) -> dict[str, Any]:
    """A node execution as API clients see it, with its input (the previous execution's
    output, or the run's arguments for the first)."""
    execution: NodeExecution = step.execution
    finished_at = None
    if execution.duration_ms is not None and execution.status != NodeExecution.Status.RUNNING:
        finished_at = execution.started_at + timedelta(milliseconds=execution.duration_ms)
    record = {
        "index": execution.index,
        "node_id": execution.node_id,
        "node_type": execution.node_type,
        "iteration": execution.iteration,
        "status": execution.status,
        "input": step.input,
        "detail": execution.detail,
        "output": execution.output,
        "error": execution.error or None,
        "attempts": execution.attempts,
        "truncated": execution.truncated,
        "started_at": execution.started_at,
        "finished_at": finished_at,
        "duration_ms": execution.duration_ms,
    }
    return _within_depth(record, ("input", "detail", "output"))


def _within_depth(record: dict[str, Any], payloads: tuple[str, ...]) -> dict[str, Any]:
    """`record` with each of its `payloads` nested deeper than the history shows cut there,
    the part left out marked, and then `truncated`: a row stored before the bound (or by a
    run that built so deep a value) is still served to every reader
    (graphs/engine/nesting.py)."""
    for name in payloads:
        record[name], cut = cut_to_depth(record[name])
        record["truncated"] = record["truncated"] or cut
    return record
