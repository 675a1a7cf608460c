"""Runs to review step by step, for the suites of the step REST routes, the step pages and the
browser: `tidy` (transforms and a switch, no downstream server) run to its end, paused at a
breakpoint, or with a secret in its arguments; and a run sent on in a thread of the test's
process waited for until it stands still again."""

from __future__ import annotations

from graphs.authoring.files import graph_import
from graphs.execution.resuming.going_on import resumed_runs_wait
from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import Run
from tests.graph_files import OPERATOR

GRAPH = """
version: "1.0"
server: {name: "tidying", version: "1.0.0"}
tools:
  - name: tidy
    description: Uppercases words, counts them and says whether they are few or many
    inputSchema:
      type: object
      properties:
        words: {type: array, items: {type: string}}
        token: {type: string, format: password}
      required: [words]
    nodes:
      - {id: entry, type: entry, next: upper}
      - id: upper
        type: transform
        transform:
          expr: '{"words": [$.entry.words.$uppercase($)], "token": $.entry.token}'
        next: count
      - id: count
        type: transform
        transform:
          expr: '{"n": $count($.upper.words), "first": $.upper.words[0]}'
        next: size
      - id: size
        type: switch
        conditions:
          - rule: {">": [{var: "$.count.n"}, 2]}
            target: many
          - target: few
      - id: many
        type: transform
        transform: {expr: '{"size": "many", "n": $.count.n, "first": $.count.first}'}
        next: exit
      - id: few
        type: transform
        transform: {expr: '{"size": "few", "n": $.count.n, "first": $.count.first}'}
        next: exit
      - {id: exit, type: exit}
"""

WORDS = {"words": ["pear", "fig", "plum"]}
# The steps of a run of WORDS: entry, upper, count, size, many, exit.
PATH = ["entry", "upper", "count", "size", "many", "exit"]


def tidy_import() -> None:
    graph_import(text=GRAPH, caller=OPERATOR)


def tidy_run(
    arguments: dict | None = None, *, caller: str = "key:owner", breakpoints: tuple[str, ...] = ()
) -> Run:
    """A run of `tidy`, to its end or to its first breakpoint."""
    outcome = workflow_call(
        RunRequest(
            name="tidy",
            arguments=WORDS if arguments is None else arguments,
            caller=caller,
            breakpoints=breakpoints,
        )
    )
    return Run.objects.get(pk=outcome.run_id)


def settled(run_id: int, seconds: float = 20) -> Run:
    """The run once the threads sending runs on here have stopped (it ended, or paused again).
    Waited for without reading the database meanwhile: the in-memory test SQLite refuses a
    write beside a read (tests/approval_runs.py)."""
    assert resumed_runs_wait(seconds), f"run {run_id} still going after {seconds} s"
    return Run.objects.get(pk=run_id)
