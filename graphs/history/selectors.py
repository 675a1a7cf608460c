"""Reads of the run history for the reviewer pages, each with its joins and columns chosen.

The runs list pages by keyset (graphs/history/keyset.py): nothing counts the table or skips by
OFFSET, so a page costs the same at row 5,000,000 as at row 1.

A run's node executions are paged the same way, by their index in the run (`run_steps`), and
its path is read as the first and last execution of each node of its graph (`run_path`), so a
run's page costs the same at 300,000 executions as at 10: nothing reads or counts them all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import Permission
from django.db.models import Count, Exists, F, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce, Left

from graphs.history.drawing import graph_edges
from graphs.history.keyset import Cursor, RunPage, run_page
from graphs.models import Approval, NodeExecution, Run, Workflow, WorkflowVersion

RUNS_PER_PAGE = 50
# Node executions a page, on the run page and in the admin: rendering one costs about 0.5 ms
# (its input, detail and output pretty-printed), so a page stays well under 200 ms.
STEPS_PER_PAGE = 100
# The workflows page's figures are over each workflow's latest runs, not all of them, so the
# page costs the same whatever the history's size.
RECENT_RUNS = 1000
VERSIONS_SHOWN = 5
ERROR_SUMMARY_CHARS = 200


@dataclass(frozen=True)
class RunFilters:
    workflow_id: int | None = None
    status: str = ""
    caller: str = ""
    since: datetime | None = None
    until: datetime | None = None
    run_id: int | None = None
    # Test runs (test_workflow): "only" them, "hide" them, or "" for every run.
    tests: str = ""
    # A reviewer's verdict (graphs/history/annotations.py): "good", "bad", "none" for the runs
    # without one, or "" for every run; and a tag the runs carry.
    verdict: str = ""
    tag: str = ""


def runs_filtered(filters: RunFilters) -> QuerySet[Run]:
    conditions = Q()
    if filters.run_id is not None:
        conditions &= Q(pk=filters.run_id)
    if filters.workflow_id is not None:
        conditions &= Q(workflow_id=filters.workflow_id)
    if filters.status:
        conditions &= Q(status=filters.status)
    if filters.caller:
        conditions &= Q(caller=filters.caller)
    if filters.since is not None:
        conditions &= Q(created_at__gte=filters.since)
    if filters.until is not None:
        conditions &= Q(created_at__lt=filters.until)
    if filters.tests:
        conditions &= Q(is_test=filters.tests == "only")
    if filters.verdict == "none":
        conditions &= Q(annotation__isnull=True) | Q(annotation__verdict="")
    elif filters.verdict:
        conditions &= Q(annotation__verdict=filters.verdict)
    if filters.tag:
        # A run holds a tag once (RunTag's unique constraint): the join repeats no run.
        conditions &= Q(tags__tag=filters.tag)
    return Run.objects.filter(conditions)


def run_list(
    *,
    filters: RunFilters,
    before: Cursor | None = None,
    after: Cursor | None = None,
    size: int = RUNS_PER_PAGE,
) -> RunPage:
    """A page of runs, newest first: the newest, those older than `before`, or those newer
    than `after`. One query; each run has its version, a short `error_summary` and its
    reviewer's `verdict` (None or "" for none)."""
    runs = (
        runs_filtered(filters)
        .select_related("version")
        .only(
            "workflow_id",
            "workflow_name",
            "status",
            "caller",
            "node_count",
            "truncated",
            "created_at",
            "duration_ms",
            "error_node_id",
            "is_test",
            "version__number",
        )
        .annotate(
            error_summary=Left("error", ERROR_SUMMARY_CHARS), verdict=F("annotation__verdict")
        )
    )
    return run_page(runs, before=before, after=after, size=size)


def workflow_choices() -> list[tuple[int, str]]:
    """(id, name) of every workflow, for the runs filter."""
    return list(Workflow.objects.order_by("name").values_list("id", "name"))


def run_execution_counts(*, run_ids: Sequence[int]) -> dict[int, int]:
    """How many node executions each run has, counted by the database, never loaded (for
    what deleting runs deletes)."""
    counts = (
        NodeExecution.objects.filter(run_id__in=run_ids)
        .order_by()
        .values_list("run_id")
        .annotate(count=Count("pk"))
    )
    return dict(counts)


def run_get(*, run_id: int) -> Run:
    """A run with the version it ran (whose definition the drawing needs) and its reviewer's
    annotation, if any (`annotations.annotation_of` reads it without a query), and whether it
    was re-run (`has_reruns`: only then does its page read its re-runs)."""
    return (
        Run.objects.select_related("version", "annotation", "example")
        .annotate(has_reruns=Exists(Run.objects.filter(rerun_of=OuterRef("pk"))))
        .get(pk=run_id)
    )


@dataclass(frozen=True)
class RunPath:
    """The path a run took through its graph, as the drawing and the run page show it."""

    visited: set[str]
    taken: set[tuple[str, str]]
    # Nodes executed more than once (loops): their iteration numbers are worth showing.
    looping: set[str]
    # The node whose execution failed, and that execution's index; a failed execution is
    # always a run's last (the run ends there).
    failed: str = ""
    failed_index: int | None = None
    # Executions recorded so far: the last one's index + 1.
    executions: int = 0


def run_path(*, run: Run) -> RunPath:
    """The nodes a run visited, the edges it took and the node that failed, in two queries
    whose cost does not grow with the run's length.

    The first reads each graph node's first and last execution (two seeks each in the
    (run, node_id, index) index). An edge source → target was taken if some execution of the
    target directly follows one of the source; the second query asks that of each edge whose
    ends both ran, looking only at executions of the target between the source's first and
    last: for a source that is not a switch the first one answers, since every execution of
    it but the run's last is followed by its `next`; a switch's edge may read more, within
    the run's ceiling. The second query also reads the status of the run's last execution.
    """
    nodes = run.version.definition.get("nodes", [])
    executions = NodeExecution.objects.filter(run_id=OuterRef("pk"))
    ends = {}
    for position, node in enumerate(nodes):
        of_node = executions.filter(node_id=node["id"]).values("index")
        ends[f"first_{position}"] = Subquery(of_node.order_by("index")[:1])
        ends[f"last_{position}"] = Subquery(of_node.order_by("-index")[:1])
    if not ends:
        return RunPath(set(), set(), set())
    # Keys named at run time, which the plugin cannot see: it types values(**ends) as a
    # TypedDict without keys.
    row: Mapping[str, Any] = Run.objects.filter(pk=run.pk).order_by().values(**ends).get()
    first, last = {}, {}
    for position, node in enumerate(nodes):
        if row[f"first_{position}"] is not None:
            first[node["id"]] = row[f"first_{position}"]
            last[node["id"]] = row[f"last_{position}"]
    if not first:
        return RunPath(set(), set(), set())
    final = max(last.values())
    edges = [
        edge
        for edge in set(graph_edges(nodes))
        if edge.source in first and edge.target in first and first[edge.source] < last[edge.target]
    ]
    checks: dict[str, Any] = {
        "final_status": Subquery(executions.filter(index=final).values("status")[:1])
    }
    for position, edge in enumerate(edges):
        before = NodeExecution.objects.filter(
            run_id=OuterRef("run_id"), index=OuterRef("index") - 1, node_id=edge.source
        )
        checks[f"edge_{position}"] = Exists(
            executions.filter(
                node_id=edge.target,
                index__gt=first[edge.source],
                index__lte=last[edge.source] + 1,
            ).filter(Exists(before))
        )
    found: Mapping[str, Any] = Run.objects.filter(pk=run.pk).order_by().values(**checks).get()
    failed = ""
    if found["final_status"] == NodeExecution.Status.FAILED:
        failed = next(node_id for node_id, index in last.items() if index == final)
    return RunPath(
        visited=set(first),
        taken={
            (edge.source, edge.target)
            for position, edge in enumerate(edges)
            if found[f"edge_{position}"]
        },
        looping={node_id for node_id in first if first[node_id] != last[node_id]},
        failed=failed,
        failed_index=final if failed else None,
        executions=final + 1,
    )


@dataclass(frozen=True)
class StepPages:
    """Where a page of a run's executions starts, and where its neighbours and the last page
    start (None where there is no such page)."""

    start: int
    end: int  # one past the last execution shown
    executions: int
    size: int
    earlier: int | None
    later: int | None
    final: int | None

    def holding(self, index: int) -> int:
        """The start of the page, counting from 0 in steps of `size`, that shows execution
        `index`."""
        return index - index % self.size


def step_pages(*, start: int, executions: int, size: int = STEPS_PER_PAGE) -> StepPages:
    """The page of a run's `executions` that starts at `start`, and its neighbours'."""
    final = max(executions - 1, 0) // size * size
    return StepPages(
        start=start,
        end=min(start + size, executions),
        executions=executions,
        size=size,
        earlier=max(start - size, 0) if start > 0 else None,
        later=start + size if start + size < executions else None,
        final=final if final > start else None,
    )


@dataclass(frozen=True)
class Step:
    """One node execution and its input: the output of the one before, or the arguments."""

    execution: NodeExecution
    input: Any


def run_steps(*, run: Run, start: int = 0, size: int = STEPS_PER_PAGE) -> list[Step]:
    """The executions of a run from index `start`, at most `size`, with their inputs.

    One query reads the page and the execution before it, whose output is the first input:
    a range of the (run, index) unique index, however deep `start` is.
    """
    rows = list(
        run.node_executions.filter(index__gte=start - 1, index__lt=start + size).order_by("index")
    )
    previous: Any = run.arguments
    steps = []
    for row in rows:
        if row.index >= start:
            steps.append(Step(row, previous))
        previous = row.output
    return steps


@dataclass(frozen=True)
class RunFigures:
    """Figures over a workflow's latest runs (at most `RECENT_RUNS` of them)."""

    runs: int
    since: datetime | None
    finished: int
    succeeded: int
    p50_ms: float | None
    p95_ms: float | None

    @property
    def success_rate(self) -> float | None:
        return self.succeeded / self.finished if self.finished else None


def percentile(ordered: Sequence[float], fraction: float) -> float | None:
    """The value at `fraction` (0..1) of sorted values, interpolated between neighbours."""
    if not ordered:
        return None
    position = (len(ordered) - 1) * fraction
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def workflow_overview() -> list[Workflow]:
    """Every workflow with its current version and its latest versions (`recent_versions`)."""
    versions = WorkflowVersion.objects.only(
        "workflow_id", "number", "created_at", "author_name", "comment"
    ).order_by("-number")[:VERSIONS_SHOWN]
    return list(
        Workflow.objects.select_related("current_version")
        .prefetch_related(Prefetch("versions", queryset=versions, to_attr="recent_versions"))
        .order_by("name")
    )


def recent_run_figures(
    *, workflow_ids: Sequence[int], window: int = RECENT_RUNS
) -> dict[int, RunFigures]:
    """Figures of each workflow over its latest `window` runs, in one query; test runs
    (test_workflow) are left out: they say how drafts behaved, not the workflow served.

    Each workflow's latest runs come from its index (a bounded range scan), joined in one
    UNION ALL; the percentiles are computed here over at most `window` durations each.
    """
    if not workflow_ids:
        return {}
    parts = [
        Run.objects.filter(
            pk__in=Run.objects.filter(workflow_id=workflow_id, is_test=False)
            .order_by("-created_at", "-id")
            .values("pk")[:window]
        )
        .order_by()  # a member of a UNION may not be ordered (SQLite)
        .values_list("workflow_id", "status", "duration_ms", "created_at")
        for workflow_id in workflow_ids
    ]
    rows = parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]
    collected: dict[int, list[tuple[str, float | None, datetime]]] = {}
    for workflow_id, status, duration_ms, created_at in rows:
        collected.setdefault(workflow_id, []).append((status, duration_ms, created_at))
    figures = {}
    for workflow_id, runs in collected.items():
        finished = [(s, d) for s, d, _ in runs if s in Run.FINISHED]
        durations = sorted(d for _, d in finished if d is not None)
        figures[workflow_id] = RunFigures(
            runs=len(runs),
            since=min(created_at for _, _, created_at in runs),
            finished=len(finished),
            succeeded=sum(1 for s, _ in finished if s == Run.Status.SUCCEEDED),
            p50_ms=percentile(durations, 0.5),
            p95_ms=percentile(durations, 0.95),
        )
    return figures


def _waiting() -> QuerySet[Approval]:
    return Approval.objects.filter(
        decision="", run__status=Run.Status.WAITING, approvers="reviewers"
    )


def waiting_count() -> int:
    """How many runs wait for reviewers now. Undecided approvals are few: the count reads
    only them."""
    return _waiting().count()


def approvals_nav(*, user: Any) -> int | None:
    """For the pages' header: how many runs wait for reviewers, when `user` may decide them
    (`graphs.decide_approval`, held by the user or one of their groups, as the model backend
    reads it; a superuser holds every permission); None when they may not. One query
    whichever: every history page shows it."""
    if not user.is_active:
        return None
    if user.is_superuser:
        return waiting_count()
    count = _waiting().order_by().values("decision").annotate(count=Count("pk")).values("count")[:1]
    held = (
        Permission.objects.filter(
            Q(user=user) | Q(group__user=user),
            content_type__app_label="graphs",
            codename="decide_approval",
        )
        .annotate(waiting=Coalesce(Subquery(count), 0))
        .values_list("waiting", flat=True)
    )
    return held.first()


def run_approvals(*, run_id: int) -> list[Approval]:
    """Every approval of a run, in the order the run reached them, without the engine's
    saved state (encrypted, and not shown)."""
    return list(Approval.objects.filter(run_id=run_id).defer("state").order_by("index"))
