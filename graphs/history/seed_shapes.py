"""What seeded run history is made of: the five workflows `seed_history` imports (a graph
file, as an operator would import it) and the ways their runs go.

A `Shape` is one way a run of a workflow goes: its arguments, node executions (payloads
already encoded) and outcome. `build_shapes` makes a pool of them per workflow, with failures,
time-outs and cancellations mixed in at their shares (`OUTCOMES`); the writer
(`graphs.history.seed`) gives each run a shape from the pool and times of its own.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from graphs.models import Run

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

# (status, error, error node) of runs that did not succeed, and their share of all runs.
OUTCOMES = {"failed": 0.06, "timed_out": 0.01, "cancelled": 0.005}


def to_json(value: Any) -> str:
    """A payload as the history stores it."""
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
    return Node(node_id, "mcp", it, to_json(detail), to_json(output))


def _transform(node_id: str, expr: str, output: Any, it: int = 1) -> Node:
    return Node(node_id, "transform", it, to_json({"expr": expr}), to_json(output))


def _switch(node_id: str, target: str, matched: Any, it: int = 1) -> Node:
    return Node(
        node_id, "switch", it, to_json({"target": target, "matched": matched}), to_json(target)
    )


def _edge(node_id: str, value: Any) -> Node:
    kind = "entry" if node_id == "entry" else "exit"
    return Node(node_id, kind, 1, None, to_json(value))


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
        listing = to_json({"entries": [f"scan-{i:06d}.tif" for i in range(40_000)]})
        output = {"_truncated": True, "bytes": len(listing), "preview": listing[:4000]}
    count = 40_000 if big else len(entries)
    nodes = (
        _edge("entry", {"directory": directory}),
        Node(
            "list",
            "mcp",
            1,
            to_json(
                {"server": "files", "tool": "list_directory", "arguments": {"path": directory}}
            ),
            to_json(output),
            truncated=big,
        ),
        _transform("count", '{"count": $count($.list.entries)}', {"count": count}),
        _edge("exit", {"count": count}),
    )
    return Shape(
        to_json({"directory": directory}), nodes, result=to_json({"count": count}), truncated=big
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
    priority = severity * 2
    score = {"priority": priority, "subject": subject}
    urgent = priority >= 8
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
    return Shape(to_json({"ticket": ticket}), nodes, result=to_json(result))


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
    return Shape(to_json({"report": report}), tuple(nodes), result=to_json(result))


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
    return Shape(to_json({"n": n}), tuple(nodes), result=to_json({"sum": total}))


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
    return Shape(to_json({"amount": amount}), nodes, result=to_json(size))


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
