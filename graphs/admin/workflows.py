"""The workflow admin, for workflow authors: edit a workflow's graph as YAML (the forms are
`graphs.admin.forms`), see it drawn, test-run it, browse its versions, which are read-only;
and workflow groups. Registered by `graphs.admin`."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from graphs.admin.canvas import canvas_urls
from graphs.admin.display import DrawingMedia, drawing_html, yaml_html
from graphs.admin.examples import example_remove_view, examples_html, publish_submitted
from graphs.admin.forms import TestRunForm, WorkflowForm
from graphs.authoring.examples import (
    version_examples,
    versions_with_example_results,
)
from graphs.authoring.rights import group_owner_names
from graphs.authoring.services import (
    group_save,
    workflow_save,
    workflow_save_draft,
)
from graphs.execution.resuming.pauses import pause_of
from graphs.execution.runs import RunOutcome, RunRequest, WorkflowCallError, workflow_call
from graphs.history.drawing import draw_graph
from graphs.models import Run, Workflow, WorkflowGroup, WorkflowVersion
from nodespecs.admin.audit import AuditedAdmin, admin_user
from nodespecs.callers import caller_user

# The change form's second save button: store a draft, do not publish.
SAVE_DRAFT = "_save_draft"


class VersionInline(admin.TabularInline):
    model = WorkflowVersion
    fields = ("number", "state", "examples", "created_at", "author_name", "comment", "digest")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[WorkflowVersion]:
        # Each version's status reads its workflow: joined, not one query a row; its example
        # results are counted in the same query, the failed ones prefetched in one more.
        return versions_with_example_results(
            super().get_queryset(request).select_related("workflow")
        )

    @admin.display(description="Examples")
    def examples(self, version: WorkflowVersion) -> str:
        """How it did against the workflow's examples when last checked (publishing checks)."""
        return version_examples(version).text()

    @admin.display(description="Status")
    def state(self, version: WorkflowVersion) -> str:
        """Published, retired, or a draft with the link that publishes it."""
        status = WorkflowVersion.Status(version.status)
        if status != WorkflowVersion.Status.DRAFT:
            return str(status.label)
        url = reverse("admin:graphs_workflow_publish", args=[version.workflow_id, version.number])
        return format_html('Draft · <a href="{}">Publish…</a>', url)


class WorkflowAdmin(AuditedAdmin):
    form = WorkflowForm
    list_display = ("name", "group", "enabled", "current_version", "updated_at")
    list_filter = ("enabled", "group")
    search_fields = ("name", "description")
    readonly_fields = ("drawing", "current_version", "examples")
    fields = (
        "name",
        "group",
        "enabled",
        "retry_on_worker_loss",
        "graph",
        "drawing",
        "current_version",
        "examples",
    )
    inlines = [VersionInline]
    change_form_template = "admin/graphs/workflow/change_form.html"
    Media = DrawingMedia

    @admin.display(description="Graph")
    def drawing(self, workflow: Workflow) -> str:
        return drawing_html(draw_graph(workflow.nodes))

    @admin.display(description="Examples")
    def examples(self, workflow: Workflow) -> str:
        """Runs whose results every version must still give (graphs/admin/examples.py)."""
        return examples_html(workflow)

    def save_model(self, request: HttpRequest, obj: Workflow, form: Any, change: bool) -> None:
        """Save and publish; or, with "Save as draft", store a draft version and leave the
        served one alone."""
        if SAVE_DRAFT in request.POST:
            version = workflow_save_draft(
                workflow=obj,
                caller=caller_user(admin_user(request)),
                comment="Saved as a draft in the admin",
            )
            self.message_user(
                request,
                f"Saved as draft version {version.number}; the published version is still "
                "served. Publish the draft from the versions below.",
                messages.WARNING,
            )
            return
        workflow_save(workflow=obj, author=admin_user(request), comment="Edited in the admin")

    def get_urls(self) -> list[Any]:
        return [
            *canvas_urls(self),
            path(
                "<int:workflow_id>/test-run/",
                self.admin_site.admin_view(self.test_run_view),
                name="graphs_workflow_test_run",
            ),
            path(
                "<int:workflow_id>/publish/<int:number>/",
                self.admin_site.admin_view(self.publish_view),
                name="graphs_workflow_publish",
            ),
            path(
                "<int:workflow_id>/examples/<int:example_id>/remove/",
                self.admin_site.admin_view(self.example_remove_view),
                name="graphs_workflow_example_remove",
            ),
            *super().get_urls(),
        ]

    def publish_view(self, request: HttpRequest, workflow_id: int, number: int) -> HttpResponse:
        """Confirm, then serve version `number` of the workflow from now on, once it passes
        the workflow's examples (or the author publishes it anyway: graphs/admin/examples.py)."""
        workflow = get_object_or_404(Workflow, pk=workflow_id)
        version = get_object_or_404(WorkflowVersion, workflow=workflow, number=number)
        if not self.has_change_permission(request, workflow):
            return HttpResponseRedirect(reverse("admin:index"))
        context = {
            **self.admin_site.each_context(request),
            "title": f"Publish version {number} of {workflow.name}",
            "workflow": workflow,
            "version": version,
            "opts": self.model._meta,
            "definition": yaml_html(version.definition),
            "example_count": workflow.examples.count(),
        }
        if request.method == "POST":
            return publish_submitted(self, request, version, context)
        return TemplateResponse(request, "admin/graphs/workflow/publish.html", context)

    def example_remove_view(
        self, request: HttpRequest, workflow_id: int, example_id: int
    ) -> HttpResponse:
        return example_remove_view(self, request, workflow_id, example_id)

    def test_run_view(self, request: HttpRequest, workflow_id: int) -> HttpResponse:
        """Run the workflow with sample arguments; the run's history page shows what it did.
        `?version=N` runs version N (a draft, from the canvas editor) as a test run; without
        it, the version served."""
        workflow = get_object_or_404(Workflow, pk=workflow_id)
        if not self.has_change_permission(request, workflow):
            return HttpResponseRedirect(reverse("admin:index"))
        chosen = _chosen_version(workflow, request.GET.get("version"))
        version = chosen or workflow.current_version
        nodes = version.definition.get("nodes", []) if version is not None else []
        node_ids = [node["id"] for node in nodes if isinstance(node, dict) and "id" in node]
        form = TestRunForm(request.POST or None, node_ids=node_ids)
        if request.method == "POST" and form.is_valid():
            breakpoints = form.cleaned_data["breakpoints"]
            try:
                outcome = workflow_call(
                    RunRequest(
                        name=workflow.name,
                        arguments=form.cleaned_data["arguments"],
                        caller=f"admin test run by {request.user.get_username()}",
                        breakpoints=breakpoints,
                        version=(chosen.pk, chosen.digest) if chosen else None,
                        is_test=chosen is not None,
                    )
                )
            except WorkflowCallError as exc:
                form.add_error("arguments", str(exc))
            else:
                return self._test_run_done(request, outcome, breakpoints)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Test run of {workflow.name}",
            "workflow": workflow,
            "version": chosen,
            "form": form,
            "opts": self.model._meta,
            "input_schema": json.dumps(
                version.definition.get("inputSchema") if version else workflow.input_schema,
                indent=2,
            ),
        }
        return TemplateResponse(request, "admin/graphs/workflow/test_run.html", context)

    def _test_run_done(
        self, request: HttpRequest, outcome: RunOutcome, breakpoints: tuple[str, ...]
    ) -> HttpResponse:
        """Say how the test run ended, and show it: a run with breakpoints on its history
        page, where it is continued, stepped or stopped; any other in the admin."""
        if outcome.status == Run.Status.PAUSED:
            pause = pause_of(outcome.run_id)
            where = f" before node {pause.node_id!r}" if pause is not None else ""
            self.message_user(
                request,
                f"Run {outcome.run_id} paused{where}: continue, step or stop it here.",
                messages.WARNING,
            )
        else:
            level = messages.SUCCESS if outcome.succeeded else messages.ERROR
            self.message_user(request, f"Run {outcome.run_id} {outcome.status}.", level)
        if breakpoints:
            return HttpResponseRedirect(reverse("graphs:run_detail", args=[outcome.run_id]))
        return HttpResponseRedirect(reverse("admin:graphs_run_change", args=[outcome.run_id]))


def _chosen_version(workflow: Workflow, number: str | None) -> WorkflowVersion | None:
    """Version `number` of the workflow, when the test run names one (None when it names
    none); a 404 naming the versions there are when it names one the workflow lacks."""
    if number is None:
        return None
    found = (
        workflow.versions.filter(number=int(number)).first()
        if number.isascii() and number.isdigit() and len(number) <= 9
        else None
    )
    if found is None:
        numbers = ", ".join(str(n) for n in workflow.versions.values_list("number", flat=True))
        raise Http404(f"{workflow.name!r} has no version {number!r}; its versions: {numbers}.")
    return found


class WorkflowGroupAdmin(AuditedAdmin):
    list_display = ("name", "title", "version", "endpoint", "owner_list")
    search_fields = ("name", "title", "slug")
    fields = ("name", "title", "version", "instructions", "endpoint", "owners", "owner_key")
    readonly_fields = ("endpoint", "owner_key")
    filter_horizontal = ("owners",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[WorkflowGroup]:
        return super().get_queryset(request).prefetch_related("owners")

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        # Whoever makes a group owns it, unless they choose otherwise.
        return {**super().get_changeform_initial_data(request), "owners": [request.user.pk]}

    @admin.display(description="owners")
    def owner_list(self, group: WorkflowGroup) -> str:
        return group_owner_names(group)

    @admin.display(description="MCP endpoint")
    def endpoint(self, group: WorkflowGroup) -> str:
        return f"/mcp/{group.slug}" if group.slug else "(chosen from the name when saved)"

    def save_model(self, request: HttpRequest, obj: WorkflowGroup, form: Any, change: bool) -> None:
        group_save(obj)


class WorkflowVersionAdmin(admin.ModelAdmin):
    list_display = ("workflow", "number", "created_at", "author_name", "comment")
    list_select_related = ("workflow",)
    readonly_fields = (
        "workflow",
        "number",
        "drawing",
        "definition_yaml",
        "limits",
        "servers",
        "digest",
        "author_name",
        "comment",
        "created_at",
    )
    fields = readonly_fields
    Media = DrawingMedia

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Graph")
    def drawing(self, version: WorkflowVersion) -> str:
        return drawing_html(draw_graph(version.definition.get("nodes", [])))

    @admin.display(description="Definition")
    def definition_yaml(self, version: WorkflowVersion) -> str:
        return yaml_html(version.definition)
