"""The workflow admin's examples (graphs/authoring/examples.py): the workflow's examples
listed with a link to remove each, and the publish page that refuses a version failing one
unless published anyway (each version's results are in the versions list of workflows.py).
Used by `graphs.admin.workflows`."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from graphs.authoring.examples import (
    ExamplesFailed,
    example_discard,
    examples_of_workflow,
    examples_publish,
)
from graphs.models import Workflow, WorkflowExample, WorkflowVersion
from nodespecs.admin.audit import admin_user
from nodespecs.callers import caller_user

#: The page that removes an example, and the publish page showing a refusal.
REMOVE_TEMPLATE = "admin/graphs/workflow/example_remove.html"
PUBLISH_TEMPLATE = "admin/graphs/workflow/publish.html"


def examples_html(workflow: Workflow) -> str:
    """The workflow's examples as a table (one query, without their copies): the run each
    was kept from, its note, who kept it and when, and a link to remove it (a page of its
    own: the change form cannot hold another form). Not an inline: its management form
    would be one more thing every save of the workflow form must send."""
    if workflow.pk is None:
        return "—"
    rows = format_html_join(
        "",
        "<tr><td>#{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        '<td><a class="deletelink" href="{}">Remove…</a></td></tr>',
        (
            (
                example.pk,
                _kept_from(example),
                example.note or "—",
                example.created_by or "?",
                example.created_at.strftime("%Y-%m-%d %H:%M"),
                reverse("admin:graphs_workflow_example_remove", args=[workflow.pk, example.pk]),
            )
            for example in examples_of_workflow(workflow.pk)
        ),
    )
    if not rows:
        return (
            "None yet. Keep a run that succeeded as an example from its page (or POST "
            "/api/v1/runs/<id>/example): every version must then give its result before it "
            "is published."
        )
    return format_html(
        '<table class="workflow-examples"><thead><tr><th>Example</th><th>Kept from</th>'
        "<th>Note</th><th>By</th><th>When</th><th></th></tr></thead><tbody>{}</tbody></table>",
        rows,
    )


def _kept_from(example: WorkflowExample) -> str:
    if example.run_id is None:
        return "(run deleted; the example keeps its copies)"
    url = reverse("graphs:run_detail", args=[example.run_id])
    return format_html('<a href="{}">run {}</a>', url, example.run_id)


def example_remove_view(
    model_admin: admin.ModelAdmin, request: HttpRequest, workflow_id: int, example_id: int
) -> HttpResponse:
    """Confirm, then stop keeping an example (recorded in the audit trail)."""
    workflow = get_object_or_404(Workflow, pk=workflow_id)
    if not model_admin.has_change_permission(request, workflow):
        return HttpResponseRedirect(reverse("admin:index"))
    example = get_object_or_404(examples_of_workflow(workflow.pk), pk=example_id)
    change_url = reverse("admin:graphs_workflow_change", args=[workflow.pk])
    if request.method == "POST":
        example_discard(example, caller_user(admin_user(request)))
        model_admin.message_user(
            request, f"Example {example_id} removed: publishing no longer checks it."
        )
        return HttpResponseRedirect(change_url)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Remove example {example_id} of {workflow.name}",
        "workflow": workflow,
        "example": example,
        "opts": model_admin.model._meta,
    }
    return TemplateResponse(request, REMOVE_TEMPLATE, context)


def publish_submitted(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    version: WorkflowVersion,
    context: dict[str, Any],
) -> HttpResponse:
    """The publish page's POST: check the examples and publish, or show the examples the
    version fails with the button that publishes it anyway ("force": audited)."""
    number = version.number
    change_url = reverse("admin:graphs_workflow_change", args=[version.workflow_id])
    force = request.POST.get("force") == "1"
    try:
        _, report = examples_publish(
            version=version, caller=caller_user(admin_user(request)), force=force
        )
    except ExamplesFailed as refused:
        context = {**context, "refused": refused.report, "refusal": refused.message}
        return TemplateResponse(request, PUBLISH_TEMPLATE, context)
    except ValidationError as exc:
        model_admin.message_user(
            request,
            f"Version {number} cannot be published: {'; '.join(exc.messages)}",
            messages.ERROR,
        )
        return HttpResponseRedirect(change_url)
    failed = ", ".join(f"#{outcome.example_id}" for outcome in report.failures)
    if failed:
        model_admin.message_user(
            request,
            f"Version {number} is served now, although it fails example(s) {failed}; this is "
            "recorded in the audit trail.",
            messages.WARNING,
        )
    else:
        checked = f" It passed all {len(report.outcomes)} examples." if report.outcomes else ""
        model_admin.message_user(
            request, f"Version {number} is served now.{checked}", messages.SUCCESS
        )
    return HttpResponseRedirect(change_url)
