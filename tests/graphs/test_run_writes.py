"""How a run's history reaches the database (graphs/execution/recorder.py): a short run in one
round trip when it ends, a run that calls out before its call and at its end, a long one as it
goes; its id reserved before its first node, so that it is named, and cancelled, before its row
exists. Counted on the database the tests run on: SQLite by default, PostgreSQL with
DATABASE_URL (a round trip is one statement there, one transaction on SQLite)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections

from graphs.authoring.files import graph_import
from graphs.execution import recorder
from graphs.execution.control import (
    RunNotFound,
    run_cancel,
    run_cancel_request,
    session_runs_cancel,
)
from graphs.execution.runs import RunRequest, WorkflowCallError, workflow_call
from graphs.execution.toolset import workflow_tools
from graphs.models import NodeExecution, Run
from tests.graph_files import OPERATOR, import_file
from tests.nodespecs.providers_helpers import servers  # noqa: F401
from tests.peers import echo_server_command

pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db(transaction=True)]

RESERVE = "reserve the run's id"
# add_one: the echo peer's `add` once, then a transform of its answer.
ECHO_GRAPH = """
version: "1.0"
server: {{name: writeTests, version: "1.0.0"}}
mcpServers:
  echo: {server}
tools:
  - name: add_one
    inputSchema: {{type: object, properties: {{a: {{type: number}}}}, required: [a]}}
    nodes:
      - {{id: entry, type: entry, next: add}}
      - {{id: add, type: mcp, server: echo, tool: add, args: {{a: $.entry.a, b: 1}}, next: done}}
      - {{id: done, type: transform, transform: {{expr: '{{"sum": $.add.sum}}'}}, next: exit}}
      - {{id: exit, type: exit}}
"""


COMMIT = "COMMIT"


# spin_on: a slow transform (0.1 s or more) a hundred times, unless it is stopped first.
SPIN_GRAPH = """
version: "1.0"
server: {name: spinTests, version: "1.0.0"}
executionLimits: {maxNodeExecutions: 1000, maxExecutionTimeMs: 30000}
tools:
  - name: spin_on
    inputSchema: {type: object}
    nodes:
      - {id: entry, type: entry, next: spin}
      - id: spin
        type: transform
        transform: {expr: '{"n": $executionCount("spin") + 1, "sum": $sum([1..20000].($ * 2))}'}
        next: again
      - id: again
        type: switch
        conditions: [{rule: {"<": [{var: "$.spin.n"}, 100]}, target: spin}]
        default: exit
      - {id: exit, type: exit}
"""


@dataclass
class Written:
    """The statements a block made and its commits, each with how many nodes had ended."""

    statements: list[tuple[str, bool, int]] = field(default_factory=list)

    def round_trips(self) -> list[tuple[int, list[str]]]:
        """The writes, each as (nodes ended before it, what it wrote): a statement outside a
        transaction (on PostgreSQL, each), or the statements of one transaction (SQLite's)."""
        trips: list[tuple[int, list[str]]] = []
        transaction: list[str] | None = None
        for sql, atomic, ended in self.statements:
            if sql == COMMIT:
                transaction = None
            elif what := _written(sql):
                if not atomic:
                    trips.append((ended, what))
                elif transaction is None:
                    transaction = list(what)
                    trips.append((ended, transaction))
                else:
                    transaction.extend(what)
        return trips


def _written(sql: str) -> list[str]:
    """What a statement writes, by table ("INSERT graphs_run", ...), or reserves."""
    if "nextval(" in sql or "sqlite_sequence" in sql:
        return [RESERVE]
    return [
        f"{verb.split()[0]} {table}"
        for verb, table in re.findall(r'(INSERT INTO|UPDATE) "?(\w+)"?', sql)
    ]


@contextmanager
def writes() -> Iterator[tuple[Written, Callable[[int, str], None]]]:
    """Record each statement and commit of the block with the number of nodes ended before
    it, which the progress function yielded counts."""
    written = Written()
    ended = [0]
    wrapper = connections[DEFAULT_DB_ALIAS]
    commit = wrapper.commit

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        written.statements.append((sql, connection.in_atomic_block, ended[0]))
        return execute(sql, params, many, context)

    def committing() -> None:
        written.statements.append((COMMIT, False, ended[0]))
        commit()

    def progress(done: int, message: str) -> None:
        ended[0] = done

    wrapper.commit = committing  # the end of each transaction, which atomic() commits
    try:
        with connection.execute_wrapper(record):
            yield written, progress
    finally:
        del wrapper.commit


def known(name: str) -> tuple[int, str]:
    """The version of `name` as tools/list shows it (a version run before needs no query)."""
    tool = workflow_tools()[name]
    return tool.version_id, tool.digest


@pytest.fixture
def add_one(servers):  # noqa: F811
    command, *args = echo_server_command()
    server = json.dumps({"command": command, "args": args})
    graph_import(text=ECHO_GRAPH.format(server=server), caller=OPERATOR)


def test_a_short_run_is_written_in_one_round_trip_when_it_ends(monkeypatch):
    import_file("loops.yaml")
    monkeypatch.setattr(recorder, "FLUSH_SECONDS", 60)  # short, however slow the machine
    request = RunRequest(name="sum_to", arguments={"n": 30}, version=known("sum_to"))
    workflow_call(request)

    with writes() as (written, progress):
        outcome = workflow_call(request, progress=progress)

    assert outcome.result == {"sum": 465, "steps": 30}
    # Nothing between the id and the end; then the run, its 63 executions and its outcome.
    assert written.round_trips() == [
        (0, [RESERVE]),
        (63, ["INSERT graphs_run", "INSERT graphs_nodeexecution"]),
    ]
    if connection.vendor == "postgresql":
        assert [sql.split()[0] for sql, _, _ in written.statements] == ["SELECT", "WITH"]
    run = Run.objects.get(pk=outcome.run_id)
    assert (run.status, run.result, run.node_count) == ("succeeded", outcome.result, 63)
    assert run.finished_at is not None
    assert run.duration_ms > 0
    rows = list(run.node_executions.order_by("index"))
    assert [row.index for row in rows] == list(range(63))
    assert rows[-2].output == {"sum": 465, "steps": 30}
    assert rows[2].detail == {"target": "step", "matched": 0}


def test_a_short_run_of_many_rows_is_written_in_one_transaction_its_rows_by_copy(monkeypatch):
    import_file("loops.yaml")
    monkeypatch.setattr(recorder, "FLUSH_SECONDS", 60)
    request = RunRequest(name="sum_to", arguments={"n": 100}, version=known("sum_to"))
    workflow_call(request)

    with writes() as (written, progress):
        outcome = workflow_call(request, progress=progress)

    # 203 rows: past ROWS_IN_STATEMENT, so on PostgreSQL they go by COPY (which Django does
    # not see), in the transaction of the run's row; one commit either way.
    rows = [] if connection.vendor == "postgresql" else ["INSERT graphs_nodeexecution"]
    assert written.round_trips() == [(0, [RESERVE]), (203, ["INSERT graphs_run", *rows])]
    assert [sql for sql, _, _ in written.statements].count(COMMIT) == 1
    run = Run.objects.get(pk=outcome.run_id)
    assert (run.status, run.node_count, run.node_executions.count()) == ("succeeded", 203, 203)


def test_a_run_that_calls_out_is_written_before_its_call_and_when_it_ends(add_one):
    request = RunRequest(name="add_one", arguments={"a": 41}, version=known("add_one"))
    workflow_call(request)  # the server started, the providers read

    with writes() as (written, progress):
        outcome = workflow_call(request, progress=progress)

    assert outcome.result == {"sum": 42}
    assert written.round_trips() == [
        (0, [RESERVE]),
        # The run and its entry, and the call's row, running, before the call goes out.
        (1, ["INSERT graphs_run", "INSERT graphs_nodeexecution"]),
        # The call's row completed, the rest, and the outcome.
        (4, ["INSERT graphs_nodeexecution", "UPDATE graphs_nodeexecution", "UPDATE graphs_run"]),
    ]
    # The providers come from their snapshot: at most its once-a-second look at the table.
    read = [sql for sql, _, _ in written.statements if "nodespecs_provider" in sql]
    assert all("COUNT(" in sql for sql in read), read
    rows = Run.objects.get(pk=outcome.run_id).node_executions.order_by("index")
    assert [(row.node_id, row.status) for row in rows] == [
        ("entry", "succeeded"), ("add", "succeeded"), ("done", "succeeded"), ("exit", "succeeded"),
    ]  # fmt: skip
    assert rows[1].output == {"sum": 42}


def test_a_run_past_the_window_is_written_as_it_goes(monkeypatch):
    import_file("loops.yaml")
    monkeypatch.setattr(recorder, "FLUSH_SECONDS", 0)  # every node is past it
    seen = []

    def look(done: int, message: str) -> None:
        row = Run.objects.filter(pk=started[0]).values_list("status", flat=True).first()
        seen.append((done, row, NodeExecution.objects.filter(run_id=started[0]).count()))

    started: list[int] = []
    outcome = workflow_call(
        RunRequest(name="sum_to", arguments={"n": 2}), progress=look, started=started.append
    )

    assert outcome.succeeded
    assert seen == [(done, "running", done) for done in range(1, 8)]
    assert Run.objects.get(pk=outcome.run_id).status == "succeeded"


def test_a_run_not_written_yet_is_cancelled_by_its_id_by_its_caller_only(monkeypatch):
    import_file("loops.yaml")
    monkeypatch.setattr(recorder, "FLUSH_SECONDS", 60)
    started: list[int] = []
    asked: list[Any] = []

    def cancel_at_three(done: int, message: str) -> None:
        if done == 3 and not asked:
            asked.append(Run.objects.filter(pk=started[0]).exists())
            with pytest.raises(RunNotFound, match="started with your key"):
                run_cancel(run_id=started[0], reason="not mine", caller="key:other")
            asked.append(run_cancel(run_id=started[0], reason="mine to stop", caller="key:me"))

    outcome = workflow_call(
        RunRequest(name="sum_to", arguments={"n": 50}, caller="key:me"),
        progress=cancel_at_three,
        started=started.append,
    )

    exists, cancellation = asked
    assert exists is False
    assert cancellation.status == "running"
    assert "will stop before its next node" in cancellation.message
    assert outcome.status == "cancelled"
    run = Run.objects.get(pk=started[0])
    assert (run.status, run.cancel_reason, run.node_executions.count()) == (
        "cancelled",
        "mine to stop",
        3,
    )
    assert "mine to stop" in run.error


def test_a_call_that_cannot_run_reserves_no_id(monkeypatch):
    import_file("loops.yaml")
    with writes() as (written, _), pytest.raises(WorkflowCallError, match="Invalid arguments"):
        workflow_call(RunRequest(name="sum_to", arguments={"n": "ten"}))
    assert written.round_trips() == []


@pytest.mark.parametrize(
    "elsewhere",
    [
        lambda: run_cancel_request(
            caller="key:me", session_id="s1", request_id="7", reason="cancelled elsewhere"
        ),
        lambda: session_runs_cancel(session_id="s1", reason="cancelled elsewhere"),
    ],
    ids=["notifications/cancelled", "the session's end"],
)
def test_a_run_not_written_yet_stops_when_another_instance_cancelled_it(
    monkeypatch, settings, elsewhere
):
    graph_import(text=SPIN_GRAPH, caller=OPERATOR)
    monkeypatch.setattr(recorder, "FLUSH_SECONDS", 60)
    settings.GRAPHS_HEARTBEAT_SECONDS = 0.1

    def cancel_at_entry(done: int, message: str) -> None:
        if done == 1:  # no row of the run, no ticket here: as on another instance
            elsewhere()

    outcome = workflow_call(
        RunRequest(name="spin_on", arguments={}, caller="key:me", session_id="s1", request_id="7"),
        progress=cancel_at_entry,
    )

    # Its process read the note with a heartbeat, and the run stopped before its next node.
    assert outcome.status == "cancelled", outcome
    run = Run.objects.get(pk=outcome.run_id)
    assert (run.status, run.cancel_reason) == ("cancelled", "cancelled elsewhere")
    assert run.node_count < 100
