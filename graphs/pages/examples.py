"""The run page's example buttons: keep a run that succeeded as an example of its workflow,
or stop keeping it (graphs/authoring/examples.py does the work). Staff only."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_POST

from graphs.authoring.examples import ExampleRefused, example_create, example_delete
from graphs.pages.views import staff_required
from nodespecs.admin.audit import admin_user
from nodespecs.callers import caller_user


@require_POST
@staff_required
@csrf_protect
def run_example_keep(request: HttpRequest, run_id: int) -> HttpResponse:
    """Keep the run as an example (with the note typed), then back to the run page saying
    so, or why not."""
    try:
        example = example_create(
            run_id, caller_user(admin_user(request)), note=request.POST.get("note", "").strip()
        )
    except ExampleRefused as refused:
        messages.error(request, f"Not kept as an example: {refused.message}")
    else:
        messages.success(
            request,
            f"Kept as example {example.pk} of {example.workflow.name}: a version that does "
            "not give this result is refused when it is published.",
        )
    return redirect("graphs:run_detail", run_id=run_id)


@require_POST
@staff_required
@csrf_protect
def run_example_remove(request: HttpRequest, run_id: int) -> HttpResponse:
    """Stop keeping the run as an example, then back to the run page."""
    try:
        example = example_delete(run_id, caller_user(admin_user(request)))
    except ExampleRefused as refused:
        messages.error(request, f"Example not removed: {refused.message}")
    else:
        messages.success(
            request, f"Example {example.pk} removed: publishing no longer checks this run."
        )
    return redirect("graphs:run_detail", run_id=run_id)
