"""`manage.py seed_history --runs N`: realistic run history for scale tests of the pages.

Five workflows (imported once, as a graph file would be) and N runs spread over the past
weeks, oldest first: mostly successes, failures with an error on an mcp node, time-outs,
cancellations, loops of a few to a hundred iterations, the newest few still running. About
ten node executions a run on average. Rows go in by COPY on PostgreSQL (bulk_create
elsewhere), a batch per transaction; one million runs take minutes (docs/history.md).
Run it on a database of its own: it reserves a block of run ids as it starts.
"""

from __future__ import annotations

import bisect
import itertools
import json
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import connection, transaction
from django.db.models import F, JSONField, Max

from graphs.files import graph_import
from graphs.history import copy_rows, write_rows
from graphs.models import Run, Workflow
from nodespecs.audit import caller_command

GRAPH_FILE = """
version: "1.0"
server: {name: "history_seed", version: "1.0.0", title: "Seeded history"}
executionLimits: {maxNodeExecutions: 500, maxExecutionTimeMs: 30000}
mcpServers:
  files: {command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "/data"]}
  tickets: {type: "streamableHttp", url: "http://tickets.internal.example/mcp"}
  reports: {type: "streamableHttp", url: "http://reports.internal.example/mcp"}
tools:
  - name: count_files
    description: "Counts the files of a folder."
    inputSchema: {type: object, properties: {directory: {type: string}}, required: [directory]}
    nodes:
      - {id: entry, type: entry, next: list}
      - {id: list, type: mcp, server: files, tool: list_directory,
         args: {path: "$.entry.directory"}, next: count}
      - {id: count, type: transform, transform: {expr: '{"count": $count($.list.entries)}'},
         next: exit}
      - {id: exit, type: exit}
  - name: triage_ticket
    description: "Scores a support ticket; escalates urgent ones to the on-call chat."
    inputSchema: {type: object, properties: {ticket: {type: integer}}, required: [ticket]}
    nodes:
      - {id: entry, type: entry, next: fetch}
      - {id: fetch, type: mcp, server: tickets, tool: get_ticket, args: {id: "$.entry.ticket"},
         next: score}
      - {id: score, type: transform, next: route,
         transform: {expr: '{"priority": $.fetch.severity * 2, "subject": $.fetch.subject}'}}
      - {id: route, type: switch, default: close,
         conditions: [{rule: {">=": [{var: "$.score.priority"}, 8]}, target: escalate}]}
      - {id: escalate, type: mcp, server: tickets, tool: page_on_call,
         args: {subject: "$.score.subject"}, next: exit}
      - {id: close, type: mcp, server: tickets, tool: close_ticket, args: {id: "$.entry.ticket"},
         next: exit}
      - {id: exit, type: exit}
  - name: poll_report
    description: "Starts a report and polls until it is ready."
    inputSchema: {type: object, properties: {report: {type: string}}, required: [report]}
    nodes:
      - {id: entry, type: entry, next: submit}
      - {id: submit, type: mcp, server: reports, tool: submit, args: {name: "$.entry.report"},
         next: poll}
      - {id: poll, type: mcp, server: reports, tool: status, args: {job: "$.submit.job"},
         next: ready}
      - {id: ready, type: switch, default: poll,
         conditions: [{rule: {"==": [{var: "$.poll.state"}, "done"]}, target: summarise}]}
      - {id: summarise, type: transform, next: exit,
         transform: {expr: '{"rows": $.poll.rows, "polls": $executionCount("poll")}'}}
      - {id: exit, type: exit}
  - name: sum_series
    description: "Adds 1 + 2 + ... + n by looping over a counter."
    inputSchema: {type: object, properties: {n: {type: integer, minimum: 1}}, required: [n]}
    nodes:
      - {id: entry, type: entry, next: step}
      - {id: step, type: transform, next: more, transform: {expr: '$executionCount("step") = 0
          ? {"i": 1, "sum": 1} : {"i": $nodeExecution("step", -1).i + 1,
          "sum": $nodeExecution("step", -1).sum + $nodeExecution("step", -1).i + 1}'}}
      - {id: more, type: switch, default: result,
         conditions: [{rule: {"<": [{var: "$.step.i"}, {var: "$.entry.n"}]}, target: step}]}
      - {id: result, type: transform, transform: {expr: '{"sum": $.step.sum}'}, next: exit}
      - {id: exit, type: exit}
  - name: classify_amount
    description: "Says whether an amount is small, medium or large."
    inputSchema: {type: object, properties: {amount: {type: number}}, required: [amount]}
    nodes:
      - {id: entry, type: entry, next: size}
      - {id: size, type: switch, default: large, conditions: [
          {rule: {"<": [{var: "$.entry.amount"}, 10]}, target: small},
          {rule: {"<": [{var: "$.entry.amount"}, 100]}, target: medium}]}
      - {id: small, type: transform, transform: {expr: '"small"'}, next: exit}
      - {id: medium, type: transform, transform: {expr: '"medium"'}, next: exit}
      - {id: large, type: transform, transform: {expr: '"large"'}, next: exit}
      - {id: exit, type: exit}
"""

RUN_COLUMNS = (
    "id",
    "workflow_id",
    "version_id",
    "workflow_name",
    "status",
    "arguments",
    "result",
    "error",
    "error_node_id",
    "caller",
    "session_id",
    "node_count",
    "truncated",
    "created_at",
    "started_at",
    "finished_at",
    "duration_ms",
)
RUN_JSON_COLUMNS = ("arguments", "result")


def _other_run_columns() -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """The Run columns the seed does not fill, with their model defaults: COPY applies no
    Django default, and fields added to Run later must not break the seed."""
    fields = [field for field in Run._meta.concrete_fields if field.attname not in RUN_COLUMNS]
    return (
        tuple(field.attname for field in fields),
        tuple(
            _json(field.get_default()) if isinstance(field, JSONField) else field.get_default()
            for field in fields
        ),
    )


CALLERS = (
    ["key:agent-prod"] * 6
    + ["key:agent-staging"] * 2
    + ["key:nightly-ci", "user:alice", "user:bob", "admin test run by carol"]
)
# (status, error, error node) of runs that did not succeed, and their share of all runs.
OUTCOMES = {"failed": 0.06, "timed_out": 0.01, "cancelled": 0.005}
# Median milliseconds of a node of each type; durations are log-normal around them.
MEDIAN_MS = {"entry": 0.01, "exit": 0.01, "transform": 0.25, "switch": 0.06, "mcp": 90.0}
# How many of the newest runs may still be running (those that call an mcp server).
RUNNING_TAIL = 3


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class Node:
    """One execution in a shape: what it evaluated and returned, already encoded."""

    node_id: str
    node_type: str
    iteration: int
    detail: str | None
    output: str | None
    error: str = ""
    truncated: bool = False


@dataclass(frozen=True)
class Shape:
    """A way a run of a workflow goes: its arguments, node executions and outcome. Runs reuse
    shapes with their own times, so a million runs cost a million timings, not payloads."""

    arguments: str
    nodes: tuple[Node, ...]
    status: str = Run.Status.SUCCEEDED
    result: str | None = None
    error: str = ""
    error_node_id: str = ""
    truncated: bool = False


def _mcp(node_id: str, server: str, tool: str, arguments: Any, output: Any, it: int = 1) -> Node:
    detail = {"server": server, "tool": tool, "arguments": arguments}
    return Node(node_id, "mcp", it, _json(detail), _json(output))


def _transform(node_id: str, expr: str, output: Any, it: int = 1) -> Node:
    return Node(node_id, "transform", it, _json({"expr": expr}), _json(output))


def _switch(node_id: str, target: str, matched: Any, it: int = 1) -> Node:
    return Node(node_id, "switch", it, _json({"target": target, "matched": matched}), _json(target))


def _edge(node_id: str, value: Any) -> Node:
    kind = "entry" if node_id == "entry" else "exit"
    return Node(node_id, kind, 1, None, _json(value))


def _fail(shape: Shape, at: int, status: str, error: str) -> Shape:
    """The shape cut at its node `at`, which failed with `error` (an mcp node) or, for a
    time-out or cancellation, was the next to run."""
    nodes = list(shape.nodes[:at])
    node_id = shape.nodes[at].node_id
    if status == Run.Status.FAILED:
        failed = shape.nodes[at]
        nodes.append(
            Node(failed.node_id, failed.node_type, failed.iteration, failed.detail, None, error)
        )
    return Shape(shape.arguments, tuple(nodes), status, None, error, node_id)


def _count_files(rng: random.Random) -> Shape:
    directory = rng.choice(["/data/inbox", "/data/exports", "/data/logs", "/data/archive/2026"])
    entries = [f"{rng.choice(['report', 'scan', 'invoice'])}-{i:04d}.pdf" for i in range(30)]
    entries = entries[: rng.randint(0, 30)]
    big = rng.random() < 0.02
    output: Any = {"entries": entries}
    if big:
        # A folder listing over the payload cap: the history keeps a marked preview.
        listing = _json({"entries": [f"scan-{i:06d}.tif" for i in range(40_000)]})
        output = {"_truncated": True, "bytes": len(listing), "preview": listing[:4000]}
    count = 40_000 if big else len(entries)
    nodes = (
        _edge("entry", {"directory": directory}),
        Node(
            "list",
            "mcp",
            1,
            _json({"server": "files", "tool": "list_directory", "arguments": {"path": directory}}),
            _json(output),
            truncated=big,
        ),
        _transform("count", '{"count": $count($.list.entries)}', {"count": count}),
        _edge("exit", {"count": count}),
    )
    return Shape(
        _json({"directory": directory}), nodes, result=_json({"count": count}), truncated=big
    )


SUBJECTS = [
    "Printer on fire in building 2",
    "Password reset link expired",
    "<b>Invoice</b> totals wrong <script>alert('x')</script>",
    "VPN drops every 10 minutes",
    "Request: new laptop",
]


def _triage_ticket(rng: random.Random) -> Shape:
    ticket = rng.randint(1000, 99999)
    severity = rng.randint(1, 5)
    subject = rng.choice(SUBJECTS)
    score = {"priority": severity * 2, "subject": subject}
    urgent = score["priority"] >= 8
    last = (
        _mcp("escalate", "tickets", "page_on_call", {"subject": subject}, {"paged": "oncall-1"})
        if urgent
        else _mcp("close", "tickets", "close_ticket", {"id": ticket}, {"closed": True})
    )
    result = {"paged": "oncall-1"} if urgent else {"closed": True}
    fetched = {"id": ticket, "severity": severity, "subject": subject, "reporter": "dana"}
    nodes = (
        _edge("entry", {"ticket": ticket}),
        _mcp("fetch", "tickets", "get_ticket", {"id": ticket}, fetched),
        _transform(
            "score", '{"priority": $.fetch.severity * 2, "subject": $.fetch.subject}', score
        ),
        _switch("route", "escalate" if urgent else "close", 0 if urgent else "default"),
        last,
        _edge("exit", result),
    )
    return Shape(_json({"ticket": ticket}), nodes, result=_json(result))


def _poll_report(rng: random.Random) -> Shape:
    # Most reports are ready after a few polls; a few take many, up to 98 (200 executions).
    polls = rng.randint(1, 6) if rng.random() < 0.95 else rng.choice([12, 25, 50, 98])
    report = rng.choice(["sales-weekly", "churn", "inventory", "ledger"])
    job = f"job-{rng.randint(1, 10**6)}"
    nodes = [
        _edge("entry", {"report": report}),
        _mcp("submit", "reports", "submit", {"name": report}, {"job": job}),
    ]
    rows = rng.randint(10, 5000)
    for poll in range(1, polls + 1):
        done = poll == polls
        state = {"state": "done", "rows": rows} if done else {"state": "running", "progress": poll}
        nodes.append(_mcp("poll", "reports", "status", {"job": job}, state, poll))
        nodes.append(
            _switch("ready", "summarise" if done else "poll", 0 if done else "default", poll)
        )
    result = {"rows": rows, "polls": polls}
    nodes.append(
        _transform("summarise", '{"rows": $.poll.rows, "polls": $executionCount("poll")}', result)
    )
    nodes.append(_edge("exit", result))
    return Shape(_json({"report": report}), tuple(nodes), result=_json(result))


def _sum_series(rng: random.Random) -> Shape:
    n = rng.randint(1, 16)
    nodes = [_edge("entry", {"n": n})]
    total = 0
    for i in range(1, n + 1):
        total += i
        nodes.append(_transform("step", "$executionCount(...) ...", {"i": i, "sum": total}, i))
        nodes.append(_switch("more", "step" if i < n else "result", 0 if i < n else "default", i))
    nodes.append(_transform("result", '{"sum": $.step.sum}', {"sum": total}))
    nodes.append(_edge("exit", {"sum": total}))
    return Shape(_json({"n": n}), tuple(nodes), result=_json({"sum": total}))


def _classify_amount(rng: random.Random) -> Shape:
    amount = round(rng.lognormvariate(3.5, 1.5), 2)
    size = "small" if amount < 10 else "medium" if amount < 100 else "large"
    matched = {"small": 0, "medium": 1, "large": "default"}[size]
    nodes = (
        _edge("entry", {"amount": amount}),
        _switch("size", size, matched),
        _transform(size, f'"{size}"', size),
        _edge("exit", size),
    )
    return Shape(_json({"amount": amount}), nodes, result=_json(size))


# Workflow name → (share of runs, shape maker, errors its mcp nodes fail with).
WORKFLOWS = {
    "count_files": (
        0.2,
        _count_files,
        ["ENOENT: no such file or directory, scandir", "EACCES: permission denied, scandir"],
    ),
    "triage_ticket": (
        0.2,
        _triage_ticket,
        ["HTTP 503 from tickets.internal.example: upstream connect error", "Timed out after 30 s"],
    ),
    "poll_report": (0.2, _poll_report, ["Tool status failed: the job was evicted from the queue"]),
    "sum_series": (0.25, _sum_series, []),
    "classify_amount": (0.15, _classify_amount, []),
}
SHAPES_PER_WORKFLOW = 400


def build_shapes(rng: random.Random) -> dict[str, list[Shape]]:
    """A pool of shapes per workflow, with failures, time-outs and cancellations mixed in at
    their shares."""
    pools: dict[str, list[Shape]] = {}
    for name, (_, make, errors) in WORKFLOWS.items():
        pool = []
        for _ in range(SHAPES_PER_WORKFLOW):
            shape = make(rng)
            roll = rng.random()
            mcp_at = [i for i, node in enumerate(shape.nodes) if node.node_type == "mcp"]
            if errors and roll < OUTCOMES["failed"]:
                at = rng.choice(mcp_at)
                error = rng.choice(errors)
                shape = _fail(shape, at, Run.Status.FAILED, error)
            elif roll < OUTCOMES["failed"] + OUTCOMES["timed_out"] and len(shape.nodes) > 2:
                at = rng.randrange(1, len(shape.nodes) - 1)
                node = shape.nodes[at].node_id
                error = f"maxExecutionTimeMs (30000) reached before node '{node}' ran."
                shape = _fail(shape, at, Run.Status.TIMED_OUT, error)
            elif roll < sum(OUTCOMES.values()) and len(shape.nodes) > 2:
                at = rng.randrange(1, len(shape.nodes) - 1)
                error = "The call was cancelled by the client."
                shape = _fail(shape, at, Run.Status.CANCELLED, error)
            pool.append(shape)
        pools[name] = pool
    return pools


class Command(BaseCommand):
    help = "Generate realistic run history (runs and node executions) for scale tests."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs", type=int, required=True, help="How many runs to add.")
        parser.add_argument("--weeks", type=float, default=6.0, help="Spread over the past N.")
        parser.add_argument("--batch", type=int, default=5000, help="Runs per transaction.")
        parser.add_argument("--seed", type=int, default=1, help="Random seed (repeatable).")

    def handle(self, *args: Any, runs: int, weeks: float, batch: int, seed: int, **options: Any):
        rng = random.Random(seed)
        if not Workflow.objects.filter(name__in=WORKFLOWS).exists():
            # Two versions of each, so the history shows runs of an older one too.
            caller = caller_command("seed_history")
            graph_import(text=GRAPH_FILE, caller=caller)
            graph_import(
                text=GRAPH_FILE.replace("maxExecutionTimeMs: 30000", "maxExecutionTimeMs: 60000"),
                caller=caller,
            )
        workflows = {
            w.name: (w, list(w.versions.order_by("number").values_list("pk", flat=True)))
            for w in Workflow.objects.filter(name__in=WORKFLOWS)
        }
        pools = build_shapes(rng)
        names = list(WORKFLOWS)
        cumulative = list(itertools.accumulate(WORKFLOWS[name][0] for name in names))
        first_id = self._reserve_ids(runs)
        other_columns, other_values = _other_run_columns()
        now = datetime.now(UTC)
        start = now - timedelta(weeks=weeks)
        step = (now - start) / max(runs, 1)
        started = time.monotonic()
        executions = 0
        for offset in range(0, runs, batch):
            run_rows, node_rows = [], []
            for position in range(offset, min(offset + batch, runs)):
                name = names[bisect.bisect(cumulative, rng.random() * cumulative[-1])]
                workflow, versions = workflows[name]
                # The first half of the history ran the first version, the rest the latest.
                version = versions[0] if position < runs // 2 else versions[-1]
                shape = rng.choice(pools[name])
                created = start + step * position
                running = position >= runs - RUNNING_TAIL and any(
                    node.node_type == "mcp" for node in shape.nodes
                )
                run, nodes = _rows(
                    first_id + position, workflow, version, shape, created, rng, running
                )
                run_rows.append(run + other_values)
                node_rows.extend(nodes)
            with transaction.atomic():
                copy_rows(Run, RUN_COLUMNS + other_columns, RUN_JSON_COLUMNS, run_rows)
                if connection.vendor != "postgresql":
                    # bulk_create stamps auto_now_add fields with the current time.
                    Run.objects.filter(pk__gte=run_rows[0][0], pk__lte=run_rows[-1][0]).update(
                        created_at=F("started_at")
                    )
                write_rows(node_rows)
            executions += len(node_rows)
            done = offset + len(run_rows)
            elapsed = time.monotonic() - started
            self.stdout.write(
                f"{done:,}/{runs:,} runs, {executions:,} node executions, {elapsed:.1f} s "
                f"({done / elapsed:,.0f} runs/s)"
            )
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE graphs_run; ANALYZE graphs_nodeexecution")
        self.stdout.write(
            self.style.SUCCESS(
                f"Added {runs:,} runs and {executions:,} node executions in "
                f"{time.monotonic() - started:.1f} s."
            )
        )

    def _reserve_ids(self, count: int) -> int:
        """The first of `count` run ids that no other insert will take."""
        if connection.vendor != "postgresql":
            return (Run.objects.aggregate(last=Max("id"))["last"] or 0) + 1
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_get_serial_sequence('graphs_run', 'id')")
            (sequence,) = cursor.fetchone()
            cursor.execute(
                "SELECT setval(%s, GREATEST(nextval(%s), "
                "(SELECT COALESCE(MAX(id), 0) + 1 FROM graphs_run)) + %s - 1)",
                [sequence, sequence, count],
            )
            (last,) = cursor.fetchone()
        return last - count + 1


def _rows(
    run_id: int,
    workflow: Workflow,
    version_id: int,
    shape: Shape,
    created: datetime,
    rng: random.Random,
    running: bool,
) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    """A run's row (RUN_COLUMNS) and its node executions' (graphs.history.COLUMNS), with
    times of their own. A running run stops at its last mcp node, still running."""
    nodes = list(shape.nodes)
    if running:
        last_mcp = max(i for i, n in enumerate(nodes) if n.node_type == "mcp")
        nodes = nodes[: last_mcp + 1]
    node_rows = []
    at = created
    for index, node in enumerate(nodes):
        still = running and index == len(nodes) - 1
        # Log-normal around the type's median; a failing call waits for its time-out.
        duration_ms = rng.lognormvariate(0, 0.8) * MEDIAN_MS[node.node_type]
        duration_ms *= 20 if node.error else 1
        node_rows.append(
            (
                run_id,
                index,
                node.node_id,
                node.node_type,
                node.iteration,
                "running" if still else "failed" if node.error else "succeeded",
                node.detail,
                None if still else node.output,
                node.error,
                1,
                node.truncated,
                at,
                None if still else duration_ms,
            )
        )
        at += timedelta(milliseconds=duration_ms)
    total = (at - created) / timedelta(milliseconds=1) + rng.uniform(0.5, 3.0)
    if shape.status == Run.Status.TIMED_OUT:
        # The limit it breached: maxExecutionTimeMs.
        total = max(total, 30_000 + rng.uniform(0, 50))
    caller = rng.choice(CALLERS)
    run_row = (
        run_id,
        workflow.pk,
        version_id,
        workflow.name,
        Run.Status.RUNNING if running else shape.status,
        shape.arguments,
        None if running else shape.result,
        "" if running else shape.error,
        "" if running else shape.error_node_id,
        caller,
        f"{rng.getrandbits(64):016x}" if caller.startswith("key:agent") else "",
        len(nodes) - running,
        shape.truncated,
        created,
        created,
        None if running else created + timedelta(milliseconds=total),
        None if running else total,
    )
    return run_row, node_rows
