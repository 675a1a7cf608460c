"""Examples: reviewed runs a workflow keeps so that a new version must still give their
results before it is published.

`example_create` copies what a run that succeeded was called with, what each of its mcp nodes
answered (by node id, in order: a loop calling a node three times leaves three outputs),
what its approval nodes decided and its result, into a `WorkflowExample`; the run may be
deleted later, the example keeps its copies. It refuses a run whose copies would not be what
happened (a value masked as a secret or cut over GRAPHS_MAX_PAYLOAD_BYTES), and one that does
not replay on its own version (it must pass there, or it would block every publication).

`examples_check` (graphs/authoring/example_checks.py) runs a version against every example of
its workflow in process, answering the mcp nodes and approval nodes from the example's copies,
never calling a server and recording no run; publishing runs it first (`examples_publish`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, OuterRef, Prefetch, Q, QuerySet, Subquery

from graphs.authoring.example_checks import (
    CHECK_BUDGET_SECONDS,
    MAX_EXAMPLES_PER_WORKFLOW,
    ExampleRefused,
    ExamplesFailed,
    ExamplesReport,
    check_of_example,
    examples_check,
    examples_publish,
    examples_test,
)
from graphs.authoring.rights import group_change_refusal
from graphs.execution.mocks import own_actors
from graphs.execution.payloads import holds_secret_or_cut
from graphs.models import (
    ExampleCheck,
    NodeExecution,
    Run,
    Workflow,
    WorkflowExample,
    WorkflowVersion,
)
from nodespecs.audit import Action, audit_record
from nodespecs.callers import Caller

#: The most one example's copies (arguments, outputs, decisions, result) take, as JSON.
MAX_EXAMPLE_BYTES = 2 * 1024 * 1024
#: The longest note a reviewer gives an example.
MAX_NOTE_CHARS = 2000
#: The node types whose outputs an example keeps: what the check cannot compute itself.
_KEPT_TYPES = ("mcp", "approval")

# The checks live in example_checks.py (publishing imports them without the rest); this
# module is where callers find everything about examples.
__all__ = [
    "MAX_EXAMPLES_PER_WORKFLOW",
    "MAX_NOTE_CHARS",
    "ExampleRefused",
    "ExamplesFailed",
    "ExamplesReport",
    "VersionExamples",
    "example_as_json",
    "example_create",
    "example_delete",
    "example_discard",
    "examples_check",
    "examples_of_workflow",
    "examples_publish",
    "examples_test",
    "version_examples",
    "version_examples_text",
    "versions_with_example_results",
]


def _readable_run(run_id: int, caller: Caller) -> Run:
    """Run `run_id` when `caller` may read it (any run with runs:read, else its own: those
    started by its key or another key of its user, as test_workflow's `from_run` decides)."""
    runs = Run.objects.select_related("workflow__group").filter(pk=run_id)
    actors = own_actors(caller)
    if actors is not None:
        runs = runs.filter(caller__in=actors)
    run = runs.first()
    if run is None:
        # One answer for a run that does not exist and one the caller may not read.
        raise ExampleRefused(
            404,
            f"No run {run_id} that you may read. A key reads the runs it started (or another "
            "key of its user did); any run needs the runs:read scope.",
        )
    return run


def _may_keep(run: Run, caller: Caller) -> None:
    """Refuse an API caller without workflows:write or the right to change the workflow's
    group (people in the pages and the admin are reviewers: the views let only staff in)."""
    if caller.is_api_caller and not caller.has_scope("workflows:write"):
        raise ExampleRefused(403, "Forbidden: keeping examples needs the scope workflows:write.")
    refusal = group_change_refusal(run.workflow.group, caller, "keep or remove examples")
    if refusal is not None:
        raise ExampleRefused(403, refusal)


def _finished_with_result(run: Run) -> None:
    """Refuse a run that has not succeeded: only a result can guard publishing."""
    kind = "test run" if run.is_test else "run"
    if run.status in Run.ACTIVE:
        raise ExampleRefused(
            409,
            f"Run {run.pk} is still {run.status}: keep it as an example once it has succeeded.",
        )
    if run.status != Run.Status.SUCCEEDED:
        raise ExampleRefused(
            400,
            f"{kind.capitalize()} {run.pk} {run.status.replace('_', ' ')}, so it has no result "
            "to keep: an example is a run that succeeded, whose result every new version must "
            "still give. Keep a run that succeeded.",
        )


def _copied(value: Any, what: str, run_id: int) -> Any:
    """`value` as the run's history holds it, refused when it is not what was produced."""
    if holds_secret_or_cut(value):
        raise ExampleRefused(
            400,
            f"Run {run_id}'s {what} was stored masked (a secret) or cut (over "
            "GRAPHS_MAX_PAYLOAD_BYTES), so it is not what happened and cannot be replayed. "
            "Keep a run whose values were stored whole.",
        )
    return value


def _recorded(run: Run) -> tuple[dict[str, list[Any]], dict[str, list[Any]], int]:
    """The outputs of the run's mcp nodes and its approvals' decisions, by node id in order,
    and the bytes they take as JSON; refused past MAX_EXAMPLE_BYTES."""
    calls: dict[str, list[Any]] = {}
    decisions: dict[str, list[Any]] = {}
    size = 0
    rows = (
        NodeExecution.objects.filter(
            run_id=run.pk, node_type__in=_KEPT_TYPES, status=NodeExecution.Status.SUCCEEDED
        )
        .order_by("index")
        .values_list("node_id", "node_type", "output")
    )
    # Row by row: a loop may have thousands, each up to GRAPHS_MAX_PAYLOAD_BYTES.
    for node_id, node_type, output in rows.iterator(chunk_size=100):
        # Not `NodeExecution.truncated`: it also says the node's detail (its call's arguments)
        # was cut, which the example does not keep; a cut output holds the cut's mark.
        _copied(output, f"output of {node_type} node {node_id!r}", run.pk)
        size += len(json.dumps(output, ensure_ascii=False))
        if size > MAX_EXAMPLE_BYTES:
            raise ExampleRefused(
                400,
                f"Run {run.pk}'s mcp outputs and decisions take over {MAX_EXAMPLE_BYTES} bytes "
                "as JSON, more than an example keeps. Keep a smaller run.",
            )
        (calls if node_type == "mcp" else decisions).setdefault(node_id, []).append(output)
    return calls, decisions, size


def _at_most_examples(workflow: Workflow) -> None:
    count = WorkflowExample.objects.filter(workflow=workflow).count()
    if count >= MAX_EXAMPLES_PER_WORKFLOW:
        raise ExampleRefused(
            409,
            f"{workflow.name!r} keeps {count} examples, the most a workflow may "
            f"({MAX_EXAMPLES_PER_WORKFLOW}): every publication runs them all. Remove one it "
            "no longer needs first.",
        )


def example_create(run_id: int, caller: Caller, note: str = "") -> WorkflowExample:
    """Keep run `run_id` as an example of its workflow, for `caller`: its arguments, each mcp
    node's outputs and each approval's decisions in order, and its result; recorded in the
    audit trail. The run must have succeeded, hold no masked or cut value, and replay on its
    own version with the copies (else the example would fail on every version).

    Raises `ExampleRefused` (with an HTTP status) saying what was wrong; nothing is kept then.
    """
    if len(note) > MAX_NOTE_CHARS:
        raise ExampleRefused(400, f"The note has {len(note)} characters; at most {MAX_NOTE_CHARS}.")
    run = _readable_run(run_id, caller)
    _may_keep(run, caller)
    _finished_with_result(run)
    if WorkflowExample.objects.filter(run_id=run.pk).exists():
        raise ExampleRefused(409, f"Run {run.pk} is already an example of {run.workflow_name!r}.")
    _at_most_examples(run.workflow)
    arguments = _copied(run.arguments, "arguments", run.pk)
    calls, decisions, size = _recorded(run)
    result = _copied(run.result, "result", run.pk)
    if size + len(json.dumps([arguments, result], ensure_ascii=False)) > MAX_EXAMPLE_BYTES:
        raise ExampleRefused(
            400, f"Run {run.pk} takes over {MAX_EXAMPLE_BYTES} bytes as JSON, more than an "
            "example keeps. Keep a smaller run."
        )  # fmt: skip
    example = WorkflowExample(
        workflow=run.workflow,
        run=run,
        arguments=arguments,
        calls=calls,
        decisions=decisions,
        result=result,
        note=note,
        created_by=caller.trail_name[:200],
    )
    # Replayed on its own version before it is kept: a run that depends on something the
    # copies do not hold (the time, a node the history did not record) is refused here.
    deadline = time.monotonic() + CHECK_BUDGET_SECONDS
    outcome = check_of_example(run.version, example, deadline=deadline)
    if not outcome.passed:
        raise ExampleRefused(
            400,
            f"Run {run.pk} does not replay on its own version {run.version.number} from its "
            f"recorded outputs ({outcome.summary()}), so it cannot guard publishing. Keep a "
            "run whose result depends only on its arguments, tool outputs and decisions.",
        )
    try:
        with transaction.atomic():
            # The workflow's row, locked: two reviewers keeping runs at once stay in bound.
            Workflow.objects.select_for_update().filter(pk=run.workflow_id).first()
            _at_most_examples(run.workflow)
            example.save()
            ExampleCheck.objects.create(
                example=example, version=run.version, passed=True, differences=[]
            )
            audit_record(actor=caller.trail_name, action=Action.CREATED, target=example)
    except IntegrityError:  # kept by someone else meanwhile (one example per run)
        raise ExampleRefused(
            409, f"Run {run.pk} is already an example of {run.workflow_name!r}."
        ) from None
    return example


def example_delete(run_id: int, caller: Caller) -> WorkflowExample:
    """Remove the example made from run `run_id`, for `caller` (recorded in the audit
    trail); the removed example, as it was. Raises `ExampleRefused`."""
    run = _readable_run(run_id, caller)
    _may_keep(run, caller)
    example = WorkflowExample.objects.select_related("workflow").filter(run_id=run.pk).first()
    if example is None:
        raise ExampleRefused(404, f"Run {run.pk} is not an example: there is nothing to remove.")
    pk = example.pk
    example_discard(example, caller)
    example.pk = pk  # Django clears it on delete; the answer names what was removed
    return example


def example_discard(example: WorkflowExample, caller: Caller) -> None:
    """Remove `example` (found by whoever may, e.g. the admin by its id), recorded in the
    audit trail for `caller`; its checks go with it."""
    with transaction.atomic():
        audit_record(actor=caller.trail_name, action=Action.DELETED, target=example)
        example.delete()


def example_as_json(example: WorkflowExample) -> dict[str, Any]:
    """An example as the REST API answers it: what it keeps, counted, not its values."""
    return {
        "example": example.pk,
        "workflow": example.workflow.name,
        "run_id": example.run_id,
        "note": example.note,
        "created_by": example.created_by,
        "created_at": example.created_at,
        "calls": {node_id: len(outputs) for node_id, outputs in example.calls.items()},
        "decisions": {node_id: len(outputs) for node_id, outputs in example.decisions.items()},
    }


def examples_of_workflow(workflow_id: int) -> QuerySet[WorkflowExample]:
    """A workflow's examples, oldest first, without their copies (for lists)."""
    return (
        WorkflowExample.objects.filter(workflow_id=workflow_id)
        .only("pk", "workflow_id", "run_id", "note", "created_by", "created_at")
        .order_by("pk")
    )


@dataclass(frozen=True)
class VersionExamples:
    """How a version did against its workflow's examples when last checked."""

    total: int
    passed: int
    # The ids of the examples it failed.
    failed: list[int]

    @property
    def unchecked(self) -> int:
        """Examples kept since the version was last checked (publishing checks them)."""
        return max(self.total - self.passed - len(self.failed), 0)

    def text(self) -> str:
        """As the workflow page shows it: "examples: 3/3 passed", or which failed."""
        if not self.total:
            return "no examples"
        parts = [f"examples: {self.passed}/{self.total} passed"]
        if self.failed:
            parts.append("failed: " + ", ".join(f"#{pk}" for pk in self.failed))
        if self.unchecked:
            parts.append(f"{self.unchecked} not checked")
        return "; ".join(parts)


def versions_with_example_results(
    versions: QuerySet[WorkflowVersion],
) -> QuerySet[WorkflowVersion]:
    """`versions` (WorkflowVersion rows) with what `version_examples` reads, in two queries
    for all of them: their checks' counts and the workflow's examples in the rows, the failed
    checks prefetched."""
    examples = (
        WorkflowExample.objects.filter(workflow=OuterRef("workflow"))
        .order_by()
        .values("workflow")
        .annotate(count=Count("pk"))
        .values("count")
    )
    return versions.annotate(
        examples_total=Subquery(examples),
        examples_passed=Count("example_checks", filter=Q(example_checks__passed=True)),
    ).prefetch_related(
        Prefetch(
            "example_checks",
            queryset=ExampleCheck.objects.filter(passed=False).order_by("example_id"),
            to_attr="failed_example_checks",
        )
    )


def version_examples(version: WorkflowVersion) -> VersionExamples:
    """A version's example results, from a row of `versions_with_example_results`."""
    # Set by the annotations and the prefetch above; mypy does not know of them.
    return VersionExamples(
        total=getattr(version, "examples_total", None) or 0,
        passed=getattr(version, "examples_passed", 0),
        failed=[check.example_id for check in getattr(version, "failed_example_checks", [])],
    )


def version_examples_text(version: WorkflowVersion) -> str:
    """How `version` did against its workflow's examples when last checked, as one line
    ("examples: 3/3 passed"; publishing answers it)."""
    row = versions_with_example_results(WorkflowVersion.objects.filter(pk=version.pk)).get()
    return version_examples(row).text()
