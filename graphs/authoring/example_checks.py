"""Checking a workflow version against its workflow's examples (graphs/authoring/examples.py),
and publishing only a version that passes them, unless forced.

Each example runs in process with the graph engine, recording no run: its mcp nodes answered
from the example's copies (the k-th call of a node gets its k-th recorded output; a call beyond
them, or of a node the example recorded nothing of, fails the example naming the node: no
server is ever called), its approval nodes decided with the recorded decisions in order, under
the version's own limits. An example passes when the version's result equals the example's;
else its differences (graphs/engine/json_diff.py) or the run's error say what changed. Each
check is stored as an `ExampleCheck` per (example, version), for the workflow's admin page.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import transaction
from django.utils import timezone
from mcp.types import CallToolResult, TextContent

from graphs.authoring.rights import group_change_refusal
from graphs.authoring.services import workflow_publish
from graphs.engine import (
    GraphRunError,
    Node,
    execute,
)
from graphs.engine.json_diff import Differences, differences
from graphs.execution.limits import limits_for_run
from graphs.execution.runs import WorkflowCallError, check_arguments, prepared_version
from graphs.models import ExampleCheck, Workflow, WorkflowExample, WorkflowVersion
from nodespecs.audit import Action, audit_record
from nodespecs.callers import Caller

#: The most examples one workflow keeps: every publication runs them all.
MAX_EXAMPLES_PER_WORKFLOW = 50
#: How long one check of a version against all its examples may take, in seconds; each
#: example is also bounded by the version's maxExecutionTimeMs.
CHECK_BUDGET_SECONDS = 60.0
#: The most differences kept per example (in its check, the answers and the refusals).
MAX_DIFFERENCES_KEPT = 20
#: A difference's value longer than this as JSON is kept as a preview of that length.
MAX_VALUE_CHARS = 500
#: How many failing examples a refusal's message names (its `problems` list them all).
NAMED_IN_MESSAGE = 5


class ExampleRefused(Exception):
    """An example cannot be kept, removed or checked as asked: `status` is the HTTP status a
    REST route answers, `message` says what was wrong and how to fix it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class ExampleOutcome:
    """How one version did against one example."""

    example_id: int
    run_id: int | None
    passed: bool
    # What differs from the example's result (when the run ended), or why it did not end.
    differences: Differences | None = None
    error: str = ""

    def summary(self) -> str:
        """One line: the error, or the first difference and how many more."""
        if self.error:
            return f"failed: {self.error}"
        if self.differences is None or not self.differences.items:
            return "passed"
        first = self.differences.items[0]
        more = len(self.differences.items) - 1
        text = (
            f"result at {first['path'] or '/'}: example {_shown(first, 'a')}, now "
            f"{_shown(first, 'b')}"
        )
        if more or self.differences.cut:
            text += f" (and {more}{'+' if self.differences.cut else ''} more differences)"
        return text

    def difference_lines(self) -> list[str]:
        """Each difference as a line, for a page: "/total: example 7, now 8"."""
        if self.differences is None:
            return []
        lines = [
            f"{item['path'] or '/'}: example {_shown(item, 'a')}, now {_shown(item, 'b')}"
            for item in self.differences.items
        ]
        if self.differences.cut:
            lines.append(f"(more than {len(lines)} differences; the first are shown)")
        return lines

    def as_json(self) -> dict[str, Any]:
        """As test_workflow, the REST API and the refusals give it."""
        answer: dict[str, Any] = {
            "example": self.example_id,
            "run_id": self.run_id,
            "passed": self.passed,
        }
        if self.error:
            answer["error"] = self.error
        elif self.differences is not None and not self.passed:
            answer["differences"] = self.differences.as_json()
        return answer


def _shown(item: dict[str, Any], side: str) -> str:
    if side not in item:
        return "nothing"
    text = json.dumps(item[side], ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True)
class ExamplesReport:
    """A version checked against every example of its workflow."""

    workflow: str
    version: int
    outcomes: list[ExampleOutcome] = field(default_factory=list)

    @property
    def failures(self) -> list[ExampleOutcome]:
        return [outcome for outcome in self.outcomes if not outcome.passed]

    def as_json(self) -> dict[str, Any]:
        """test_workflow's answer with `examples: true`."""
        return {
            "workflow": self.workflow,
            "version": self.version,
            "checked": len(self.outcomes),
            "passed": len(self.outcomes) - len(self.failures),
            "examples": [outcome.as_json() for outcome in self.outcomes],
        }

    def refusal(self) -> str:
        """Why the version may not be published: each failing example (the first few) and
        its first difference or error, and the ways on."""
        failures = self.failures
        named = "; ".join(
            f"example {outcome.example_id} (run {outcome.run_id}) {outcome.summary()}"
            for outcome in failures[:NAMED_IN_MESSAGE]
        )
        if len(failures) > NAMED_IN_MESSAGE:
            named += f"; and {len(failures) - NAMED_IN_MESSAGE} more (see `problems`)"
        return (
            f"Version {self.version} of {self.workflow!r} does not give the results of "
            f"{len(failures)} of its {len(self.outcomes)} examples: {named}. Fix the version "
            "and check again (test_workflow with examples: true), remove an example that no "
            "longer holds (DELETE /api/v1/runs/<run id>/example), or publish anyway with "
            "force: true (recorded in the audit trail)."
        )

    def problems(self) -> list[dict[str, Any]]:
        """Each failing example, as a program reads the refusal."""
        return [
            {**outcome.as_json(), "message": f"example {outcome.example_id} {outcome.summary()}"}
            for outcome in self.failures
        ]


class ExamplesFailed(Exception):
    """A version refused publication: it fails examples of its workflow (`report`)."""

    def __init__(self, report: ExamplesReport) -> None:
        self.report = report
        self.message = report.refusal()
        self.problems = report.problems()
        super().__init__(self.message)


def _answer(value: Any) -> CallToolResult:
    """A recorded output as the tool's result again, which the engine turns back into the
    same output (graphs/engine/results.py): an object as structured content, anything else
    as its JSON text."""
    value = copy.deepcopy(value)  # the engine's run must not change the example's copy
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(value, ensure_ascii=False))],
        structured_content=value if isinstance(value, dict) else None,
    )


class _Replay:
    """The recorded answers of one example, handed out in order per node."""

    def __init__(self, example: WorkflowExample) -> None:
        self.calls: dict[str, list[Any]] = example.calls or {}
        self.decisions: dict[str, list[Any]] = example.decisions or {}
        self.taken: dict[str, int] = {}

    def _next(self, node: Node, recorded: dict[str, list[Any]], what: str) -> Any:
        outputs = recorded.get(node.id)
        index = self.taken.get(node.id, 0)
        self.taken[node.id] = index + 1
        if not outputs:
            raise GraphRunError(
                f"node {node.id!r}: the example recorded no {what} of it (its run never ran a "
                f"node {node.id!r}); examples never call a server, so the version must not "
                "reach nodes the example's run did not",
                node.id,
                "tool",
            )
        if index >= len(outputs):
            raise GraphRunError(
                f"node {node.id!r} ran a {index + 1}th time; the example recorded only "
                f"{len(outputs)} {what}(s) of it, and examples never call a server",
                node.id,
                "tool",
            )
        return outputs[index]

    def call(self, node: Node) -> CallToolResult:
        return _answer(self._next(node, self.calls, "output"))

    def decision(self, node: Node) -> dict[str, Any]:
        return dict(copy.deepcopy(self._next(node, self.decisions, "decision")))


def _no_server(server: str, tool: str, arguments: dict[str, Any], timeout: float | None) -> Any:
    # Never reached: every mcp node is answered from the example, or fails it.
    raise GraphRunError(f"examples never call a server (tool {tool!r} on {server!r})", None, "tool")


def _cut(value: Any) -> Any:
    text = json.dumps(value, ensure_ascii=False)
    if len(text) <= MAX_VALUE_CHARS:
        return value
    return {"_truncated": True, "preview": text[:MAX_VALUE_CHARS]}


def _bounded(found: Differences) -> Differences:
    """The differences with each value kept to a preview: a check stores them."""
    items = [
        {key: (_cut(value) if key in ("a", "b") else value) for key, value in item.items()}
        for item in found.items
    ]
    return Differences(items=items, cut=found.cut)


def check_of_example(
    version: WorkflowVersion, example: WorkflowExample, *, deadline: float | None
) -> ExampleOutcome:
    """Run `version` against `example` (nothing stored), prepared and its arguments checked
    as a call of it would be (graphs/execution/runs.py); `deadline` (time.monotonic) bounds
    it beyond the version's own maxExecutionTimeMs."""

    def failed(error: str) -> ExampleOutcome:
        return ExampleOutcome(example.pk, example.run_id, passed=False, error=error)

    try:
        prepared = prepared_version(version)
        check_arguments(version.workflow.name, prepared.validator, example.arguments)
    except WorkflowCallError as exc:  # the version would refuse this call, saying why
        return failed(str(exc))
    limits = limits_for_run(prepared.limits)
    if deadline is not None:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            return failed(
                f"not checked: checking all the examples took over {CHECK_BUDGET_SECONDS:g} "
                "seconds; make the version faster or keep fewer examples"
            )
        limits = replace(limits, max_execution_time_ms=min(limits.max_execution_time_ms, left_ms))
    replay = _Replay(example)
    try:
        result = execute(
            prepared.compiled,
            copy.deepcopy(example.arguments),
            call_tool=_no_server,
            limits=limits,
            mocked=replay.call,
            decided=replay.decision,
        )
    except GraphRunError as exc:
        return failed(exc.message)
    # As the run's history would hold it (JSON), so that equal values compare equal.
    result = json.loads(json.dumps(result, ensure_ascii=False, default=str))
    found = differences(example.result, result, limit=MAX_DIFFERENCES_KEPT)
    passed = not found.items
    return ExampleOutcome(example.pk, example.run_id, passed, _bounded(found))


def examples_check(
    version: WorkflowVersion, *, budget_seconds: float = CHECK_BUDGET_SECONDS
) -> ExamplesReport:
    """Run `version` against every example of its workflow (at most
    MAX_EXAMPLES_PER_WORKFLOW, `budget_seconds` in all) and store each outcome as the
    `ExampleCheck` of (example, version)."""
    deadline = time.monotonic() + budget_seconds
    outcomes = []
    examples = WorkflowExample.objects.filter(workflow_id=version.workflow_id).order_by("pk")
    # A few at a time: each holds its run's outputs.
    for example in examples[:MAX_EXAMPLES_PER_WORKFLOW].iterator(chunk_size=4):
        outcomes.append(check_of_example(version, example, deadline=deadline))
    _store(version, outcomes)
    return ExamplesReport(version.workflow.name, version.number, outcomes)


def _store(version: WorkflowVersion, outcomes: list[ExampleOutcome]) -> None:
    now = timezone.now()
    with transaction.atomic():
        # Examples removed while the check ran have no check to keep.
        kept = set(
            WorkflowExample.objects.filter(
                pk__in=[outcome.example_id for outcome in outcomes]
            ).values_list("pk", flat=True)
        )
        ExampleCheck.objects.bulk_create(
            [
                ExampleCheck(
                    example_id=outcome.example_id,
                    version=version,
                    passed=outcome.passed,
                    differences=(
                        outcome.differences.as_json() if outcome.differences is not None else []
                    ),
                    error=outcome.error,
                    checked_at=now,
                )
                for outcome in outcomes
                if outcome.example_id in kept
            ],
            update_conflicts=True,
            unique_fields=["example", "version"],
            update_fields=["passed", "differences", "error", "checked_at"],
        )


def examples_test(version: WorkflowVersion, caller: Caller) -> ExamplesReport:
    """`examples_check` for `caller` (test_workflow with examples): the examples hold other
    callers' runs, so only the owners of the workflow's group and workflows:admin may."""
    refusal = group_change_refusal(version.workflow.group, caller, "check examples")
    if refusal is not None:
        raise ExampleRefused(403, refusal)
    return examples_check(version)


def examples_publish(
    *, version: WorkflowVersion, caller: Caller, force: bool = False
) -> tuple[Workflow, ExamplesReport]:
    """Check `version` against its workflow's examples, then publish it
    (graphs/authoring/services.py `workflow_publish`): the workflow as published, and the
    report. A version that fails an example is refused (`ExamplesFailed`) unless `force`;
    forced, the audit trail records which examples it failed (Action.FORCED). Raises
    `ValidationError` as `workflow_publish` does."""
    # Checked before the transaction: the checks are kept even when publishing is refused.
    report = examples_check(version)
    failures = report.failures
    if failures and not force:
        raise ExamplesFailed(report)
    with transaction.atomic():
        workflow = workflow_publish(version=version, caller=caller)
        if failures:
            audit_record(
                actor=caller.trail_name,
                action=Action.FORCED,
                target=version,
                fields=[f"example {each.example_id} (run {each.run_id})" for each in failures],
            )
    return workflow, report
