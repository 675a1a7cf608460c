"""The reviewer pages: parse the request, call the selectors, format. Staff only."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.utils.safestring import mark_safe
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_POST

from graphs.execution import control
from graphs.execution.approvals.decisions import DecisionError, decide, decider_of
from graphs.execution.approvals.waits import waiting_for, waiting_runs
from graphs.execution.resuming.pauses import pause_of
from graphs.execution.tracing import trace_url
from graphs.history import selectors
from graphs.history.annotations import annotation_of
from graphs.history.drawing import draw_graph
from graphs.models import Approval, Run
from graphs.pages import downloads
from graphs.pages.approval_forms import FormField, form_fields, submitted_values
from graphs.pages.display import PageBudget, step_link, step_links, timeline, wait_length
from graphs.pages.forms import RunFilterForm, step_start
from nodespecs.admin.audit import admin_user
from nodespecs.callers import caller_user

# How often the page of a run still in progress reloads itself.
REFRESH_SECONDS = 2
# The most re-runs a run's page links to: the first ones.
MAX_RERUNS_SHOWN = 20
FILTER_KEYS = ("run", "workflow", "status", "caller", "since", "until", "verdict", "tag", "tests")

View = Callable[..., HttpResponse]


def staff_required(view: View) -> View:
    """Anonymous users go to the admin's login; signed-in users who are not staff are refused
    with a page saying why (the history holds every caller's arguments and results)."""

    @wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), reverse("admin:login"))
        if not request.user.is_staff:
            return render(request, "graphs/refused.html", status=403)
        return view(request, *args, **kwargs)

    return guarded


# Who may approve or reject a waiting run (Approval.Meta.permissions); superusers have it.
DECIDE_PERMISSION = "graphs.decide_approval"


def decide_required(view: View) -> View:
    """Staff, as every history page, who also hold the permission to decide; staff without it
    are refused with a page naming it and how to get it."""

    @wraps(view)
    @staff_required
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.has_perm(DECIDE_PERMISSION):
            return render(request, "graphs/refused.html", {"permission": True}, status=403)
        return view(request, *args, **kwargs)

    return guarded


def _page_link(query: dict[str, str], **cursor: str) -> str:
    return "?" + urlencode({**query, **cursor})


@staff_required
def run_list(request: HttpRequest) -> HttpResponse:
    """Runs, newest first, filtered, a keyset page at a time."""
    form = RunFilterForm(request.GET, workflows=selectors.workflow_choices())
    page = None
    older_link = newer_link = newest_link = ""
    if form.is_valid():
        page = selectors.run_list(
            filters=form.filters(),
            before=form.cleaned_data["before"],
            after=form.cleaned_data["after"],
        )
        # The filters as the user gave them, so the links keep them and drop only the cursor.
        query = {key: request.GET[key] for key in FILTER_KEYS if request.GET.get(key)}
        if page.older is not None:
            older_link = _page_link(query, before=page.older.token())
        if page.newer is not None:
            newer_link = _page_link(query, after=page.newer.token())
            newest_link = _page_link(query)
    return render(
        request,
        "graphs/run_list.html",
        {
            "form": form,
            "page": page,
            "older_link": older_link,
            "newer_link": newer_link,
            "newest_link": newest_link,
            "filtered": any(request.GET.get(key) for key in FILTER_KEYS),
            "nav": "runs",
        },
    )


@staff_required
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    """A run: its outcome, the path it took drawn on the graph, and a page of its node
    executions (`?from=<index>`)."""
    try:
        run = selectors.run_get(run_id=run_id)
    except Run.DoesNotExist:
        raise Http404(f"No run {run_id}; it may have been deleted.") from None
    start = step_start(request.GET)
    steps = selectors.run_steps(run=run, start=start)
    path = selectors.run_path(run=run)
    pages = selectors.step_pages(start=start, executions=path.executions)
    # A limit breach fails the run before its node executes: no row failed, the run names it.
    failed = path.failed or run.error_node_id
    nodes = run.version.definition.get("nodes", [])
    drawing = draw_graph(
        nodes,
        visited=path.visited,
        taken=path.taken,
        failed=failed,
    )
    in_progress = run.status in Run.ACTIVE
    waiting = run.status == Run.Status.WAITING
    paused = run.status == Run.Status.PAUSED
    now = timezone.now()
    # Only a graph with an approval node can have waited: no query for the others.
    waits = (
        [_wait(approval, run, now) for approval in selectors.run_approvals(run_id=run.pk)]
        if any(isinstance(node, dict) and node.get("type") == "approval" for node in nodes)
        else []
    )
    return render(
        request,
        "graphs/run_detail.html",
        {
            "run": run,
            # A reviewer's verdict, note and tags, read with the run (their tags only if any).
            "annotation": annotation_of(run),
            # Each wait of the run at an approval node, and the decision it got.
            "waits": waits,
            "decision_fields": _decision_fields(request, run, waits),
            # A run's count is written when it ends; until then, the rows so far.
            "node_count": path.executions if in_progress else run.node_count,
            # draw_graph escapes every text it writes.
            "drawing": mark_safe(drawing),
            "failed_node": failed,
            "failed_link": step_link(pages, path.failed_index),
            # Nodes run more than once (loops) get their iteration numbers shown.
            "looping": path.looping,
            "rows": timeline(steps, now=now),
            # What the page's payloads may still take (graphs/pages/display.py).
            "payload_budget": PageBudget(),
            "pages": pages,
            **step_links(pages),
            # A waiting run is not reloaded: it would wipe a decision being written. Nor is a
            # paused one: nothing happens until someone continues, steps or stops it.
            "refresh_seconds": REFRESH_SECONDS if in_progress and not (waiting or paused) else 0,
            # A paused run has its own Stop button.
            "cancellable": in_progress and not run.cancel_reason and not paused,
            # Where a run paused at a breakpoint stands (graphs/pages/steps.py acts on it).
            "pause": pause_of(run.pk) if paused else None,
            # Its re-runs, read only when it has some (selectors.run_get says).
            "reruns": (
                list(run.reruns.order_by("pk").values_list("pk", flat=True)[:MAX_RERUNS_SHOWN])
                if getattr(run, "has_reruns", False)
                else []
            ),
            # The operator's trace viewer, when TRACE_URL_TEMPLATE says where it is.
            "trace_url": trace_url(run.trace_id),
            # Only a run the reaper queued again after losing its worker has any.
            "earlier_attempts": (
                list(run.earlier_attempts.order_by("pk").values_list("pk", flat=True))
                if run.retries
                else []
            ),
            "nav": "runs",
        },
    )


def _wait(approval: Approval, run: Run, now: datetime) -> dict[str, Any]:
    """A wait as the run page shows it: until the decision, or the run's end when it ended
    undecided (cancelled), or now while it waits."""
    until = approval.decided_at or (run.finished_at if run.status in Run.FINISHED else None)
    waited = ((until or now) - approval.created_at).total_seconds()
    return {"approval": approval, "until": until, "waited": wait_length(waited)}


def _decision_fields(
    request: HttpRequest, run: Run, waits: list[dict[str, Any]]
) -> list[FormField] | None:
    """The decision form's fields, when this run waits for reviewers and this user may
    decide; None otherwise."""
    if run.status != Run.Status.WAITING or not waits:
        return None
    approval = waits[-1]["approval"]
    if approval.decision or approval.approvers != "reviewers":
        return None
    if not request.user.has_perm(DECIDE_PERMISSION):
        return None
    return form_fields(approval.form)


@decide_required
def approvals(request: HttpRequest) -> HttpResponse:
    """The runs waiting for reviewers, oldest wait first, each with its decision form."""
    now = timezone.now()
    entries = [
        {
            "run": run,
            "waiting": waiting,
            "fields": form_fields(waiting.form),
            "waited": wait_length((now - waiting.since).total_seconds()),
            "times_out_in": (
                wait_length((waiting.timeout_at - now).total_seconds())
                if waiting.timeout_at
                else ""
            ),
        }
        for run, waiting in waiting_runs()
    ]
    return render(request, "graphs/approvals.html", {"entries": entries, "nav": "approvals"})


@require_POST
@decide_required
@csrf_protect
def approval_decide(request: HttpRequest, run_id: int) -> HttpResponse:
    """Approve or reject a waiting run (the Approvals page's and the run page's buttons),
    then back to the page it came from saying what happened, or why nothing did."""
    back = (
        redirect("graphs:run_detail", run_id=run_id)
        if request.POST.get("back") == "run"
        else redirect("graphs:approvals")
    )
    waiting = waiting_for(run_id)
    try:
        decided = decide(
            run_id,
            request.POST.get("decision", ""),
            # Signed in: decide_required let no one else in.
            decider_of(caller_user(admin_user(request))),
            comment=request.POST.get("comment", "").strip(),
            form=submitted_values(waiting.form if waiting else None, request.POST),
        )
    except DecisionError as refused:
        messages.error(request, refused.message)
        return back
    by = decided.by or {}
    messages.success(
        request,
        f"Run {run_id} {decided.decision} by {by.get('name', '?')} ({by.get('kind', '?')}): "
        f"it goes on along its {decided.decision} route.",
    )
    return back


@staff_required
def run_payload(request: HttpRequest, run_id: int, part: str) -> HttpResponse:
    """One payload of a run whole, as a JSON file: where a page's preview of it links."""
    try:
        value = downloads.run_payload(run_id=run_id, part=part)
    except downloads.NoSuchPayload:
        raise Http404(f"Run {run_id} has no {part}; it may have been deleted.") from None
    response = HttpResponse(
        json.dumps(value, ensure_ascii=False), content_type="application/json; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="run-{run_id}-{part}.json"'
    return response


@require_POST
@staff_required
@csrf_protect
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run page's Cancel button: cancel the run, then back to its page saying what
    happened. The reason names who cancelled it."""
    try:
        cancellation = control.run_cancel(
            run_id=run_id,
            reason=f"Cancelled by {request.user.get_username()} from the run page",
        )
    except control.RunNotFound:
        raise Http404(f"No run {run_id}; it may have been deleted.") from None
    # The message says what happened: cancelled, stopping, or already ended.
    messages.info(request, cancellation.message)
    return redirect("graphs:run_detail", run_id=run_id)


@staff_required
def workflow_list(request: HttpRequest) -> HttpResponse:
    """Each workflow: its current graph, latest versions and figures over its latest runs."""
    workflows = selectors.workflow_overview()
    figures = selectors.recent_run_figures(workflow_ids=[w.pk for w in workflows])
    entries = [
        {
            "workflow": workflow,
            "drawing": mark_safe(
                draw_graph(workflow.current_version.definition.get("nodes", []))
                if workflow.current_version
                else ""
            ),
            "figures": figures.get(workflow.pk),
        }
        for workflow in workflows
    ]
    return render(
        request,
        "graphs/workflow_list.html",
        {"entries": entries, "window": selectors.RECENT_RUNS, "nav": "workflows"},
    )
