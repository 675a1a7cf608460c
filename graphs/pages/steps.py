"""A run's step page and what a reviewer does from it or from the run page: the context the
step's expressions saw and an expression evaluated there (graphs/history/step_context.py), a
re-run from the step's node (graphs/execution/resuming/reruns.py), and continue, step or stop
for a run paused at a breakpoint (graphs/execution/resuming/breakpoints.py). Staff only; these
views parse, call and format."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods, require_POST

from graphs.engine.checks.all_checks import MAX_EXPRESSION_CHARS
from graphs.engine.nesting import deeper_than
from graphs.execution.resuming.breakpoints import ACTIONS, PauseError, pause_end
from graphs.execution.resuming.pauses import pause_of
from graphs.execution.resuming.reruns import NOT_GIVEN, VERSIONS, RerunRefused, input_of, rerun
from graphs.history.step_context import (
    ExpressionRefused,
    StepContext,
    StepNotFound,
    step_context,
    step_evaluate,
)
from graphs.models import NodeExecution, Run
from graphs.pages.display import PageBudget
from graphs.pages.views import staff_required
from nodespecs.admin.audit import admin_user
from nodespecs.callers import actor_user

# What the run page says after each action at a breakpoint.
PAUSE_ENDED = {
    "continue": "continued: it goes on to its next breakpoint or its end",
    "step": "stepped: it runs the node it stood before, then pauses before the next",
    "stop": "stopped: it ended cancelled",
}


@dataclass
class RerunForm:
    """The re-run form as the page shows it: what was entered, and what was wrong."""

    version: str = "original"
    use_input: bool = False
    input_text: str = ""
    error: str = ""


@dataclass
class Evaluation:
    """The evaluate form as the page shows it: the expression, and its value or error."""

    expression: str = ""
    done: bool = False
    value: str = ""
    error: str = ""
    # Only the start of a long value is shown: its whole text is `chars` long.
    clipped: bool = False
    chars: int = 0


@dataclass(frozen=True)
class ContextEntry:
    """One node's output in a step's context, as the page shows it."""

    node: str
    text: str
    clipped: bool
    chars: int
    unfaithful: bool


@dataclass
class StepPage:
    evaluation: Evaluation = field(default_factory=Evaluation)
    rerun: RerunForm | None = None
    status: int = 200


@require_http_methods(["GET", "POST"])
@staff_required
@csrf_protect
def run_step(request: HttpRequest, run_id: int, index: int) -> HttpResponse:
    """A step of a run: its node, the context its expressions saw (each node's output as `$`
    held it, `$previousNode()`, `$executionCount`), and a form that evaluates a JSONata
    expression there (POST: the same page with its value or what was wrong)."""
    step = _step(run_id, index)
    page = StepPage()
    if request.method == "POST":
        page.evaluation = _evaluated(step, request.POST.get("expression", ""))
        page.status = 200 if not page.evaluation.error else 400
    return _render(request, step, page)


@require_POST
@staff_required
@csrf_protect
def run_rerun(request: HttpRequest, run_id: int, index: int) -> HttpResponse:
    """Re-run the run from this step's node (this execution of it), on the version chosen,
    with the edited input when asked; then the new run's page. A refusal, or an input that
    is not JSON, shows the step page again saying what was wrong, the input kept."""
    step = _step(run_id, index)
    form = RerunForm(
        version=request.POST.get("version", "original"),
        use_input=request.POST.get("use_input") == "on",
        input_text=request.POST.get("input", ""),
    )
    given, form.error = _input_given(form) if form.use_input else (NOT_GIVEN, "")
    if not form.error:
        try:
            made = rerun(
                run_id=run_id,
                from_node=step.node_id,
                iteration=_ordinal(step),
                input=given,
                version=form.version,
                caller=actor_user(admin_user(request)),
            )
        except RerunRefused as refused:
            form.error = str(refused)
        else:
            messages.success(
                request,
                f"Run {made.run_id} re-runs run {run_id} from node {made.from_node!r}: the "
                f"steps before it were replayed from run {run_id}.",
            )
            return redirect("graphs:run_detail", run_id=made.run_id)
    return _render(request, step, StepPage(rerun=form, status=400))


@require_POST
@staff_required
@csrf_protect
def run_breakpoint(request: HttpRequest, run_id: int) -> HttpResponse:
    """The paused run's Continue, Step and Stop buttons; then back to the run page saying what
    happened, or why nothing did."""
    action = request.POST.get("action", "")
    try:
        pause_end(run_id, action, actor_user(admin_user(request)))
    except PauseError as refused:
        if refused.status == 404:
            raise Http404(refused.message) from None
        messages.error(request, refused.message)
    else:
        messages.success(request, f"Run {run_id} {PAUSE_ENDED[action]}.")
    return redirect("graphs:run_detail", run_id=run_id)


def _step(run_id: int, index: int) -> StepContext:
    try:
        return step_context(run_id=run_id, index=index)
    except StepNotFound as exc:
        raise Http404(str(exc)) from None


def _evaluated(step: StepContext, expression: str) -> Evaluation:
    evaluation = Evaluation(expression=expression, done=True)
    if len(expression) > MAX_EXPRESSION_CHARS:
        evaluation.error = (
            f"The expression has {len(expression):,} characters; a node's expression holds at "
            f"most {MAX_EXPRESSION_CHARS:,}."
        )
        return evaluation
    try:
        value = step_evaluate(step, expression)
    except ExpressionRefused as refused:
        evaluation.error = str(refused)
    else:
        shown = PageBudget().show(value)
        evaluation.value, evaluation.clipped, evaluation.chars = (
            shown.text,
            shown.clipped,
            shown.chars,
        )
    return evaluation


def _input_given(form: RerunForm) -> tuple[Any, str]:
    """The edited input, or what is wrong with its text."""
    limit = settings.MCP_MAX_JSON_DEPTH
    too_deep = f"The input nests deeper than {limit} levels: send a flatter value."
    try:
        given = json.loads(form.input_text)
    except json.JSONDecodeError as exc:
        return NOT_GIVEN, (
            f"The input is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}. "
            "Fix it, or untick “use this input” to replay the node's own input."
        )
    except RecursionError:
        return NOT_GIVEN, too_deep
    if deeper_than(given, limit):
        return NOT_GIVEN, too_deep
    return given, ""


def _ordinal(step: StepContext) -> int:
    """Which execution of its node the step is, from 0, as a re-run counts them: how many
    times the node had run before it, which its context already holds."""
    return step.counts.get(step.node_id, 0)


def _render(request: HttpRequest, step: StepContext, page: StepPage) -> HttpResponse:
    run = Run.objects.select_related("version", "workflow__current_version").get(pk=step.run_id)
    budget = PageBudget()
    unfaithful = set(step.unfaithful)
    entries = []
    for node, value in step.context.items():
        shown = budget.show(value)
        entries.append(
            ContextEntry(node, shown.text, shown.clipped, shown.chars, node in unfaithful)
        )
    paused = step.status == "paused"
    form = page.rerun
    if form is None and not paused and run.status not in Run.ACTIVE:
        prefill = input_of(step.index, step.run_id)
        form = RerunForm(input_text=json.dumps(prefill, indent=2, ensure_ascii=False))
    current = run.workflow.current_version
    pause = pause_of(run.pk) if run.status == Run.Status.PAUSED else None
    return render(
        request,
        "graphs/run_step.html",
        {
            "run": run,
            "step": step,
            "context_entries": entries,
            "previous": budget.show(step.previous).text,
            "counts": sorted(step.counts.items()),
            "evaluation": page.evaluation,
            "rerun_form": form,
            "versions": VERSIONS,
            "current_version": current,
            "pause": pause,
            "actions": ACTIONS,
            "next_index": _next_index(run, step, pause),
            "nav": "runs",
        },
        status=page.status,
    )


def _next_index(run: Run, step: StepContext, pause: Any) -> int | None:
    """The step after this one, if the run has it (recorded, or the node it paused before)."""
    following = step.index + 1
    if pause is not None and pause.index == following:
        return following
    if run.status in Run.ACTIVE:
        exists = NodeExecution.objects.filter(run_id=run.pk, index=following).exists()
        return following if exists else None
    return following if following < run.node_count else None
