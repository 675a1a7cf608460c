"""Admin for workflow authors: edit a workflow's graph as YAML, see it drawn, test-run it,
browse its versions; runs and their node executions, read-only, a page of executions at a
time (a run may have thousands)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse, reverse_lazy
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.timezone import localtime

from graphs import selectors
from graphs.drawing import draw_graph
from graphs.engine import DefinitionError, dump_yaml, load_yaml
from graphs.models import NodeExecution, Run, Workflow, WorkflowGroup, WorkflowVersion
from graphs.pages.display import duration, step_links
from graphs.pages.forms import step_start
from graphs.runs import RunRequest, WorkflowCallError, workflow_call
from graphs.services import workflow_save, workflow_validate
from nodespecs.admin_audit import AuditedAdmin
from nodespecs.models import Provider


def drawing_html(svg: str) -> str:
    """A drawing from `draw_graph` (which escapes every label), scaled down to fit the form,
    scrolling when it is wider still (graphs/static/graphs/admin.css)."""
    return format_html('<div class="graph-drawing">{}</div>', mark_safe(svg))


class DrawingMedia:
    """The stylesheet of the admin pages that show drawings and JSON payloads."""

    css = {"all": ["graphs/admin.css"]}


# The admin's "View site" link leads reviewers to the history pages, which link back here.
admin.site.site_url = reverse_lazy("graphs:run_list")

# The keys of the YAML editor, each mapped to the model field it edits.
EDITOR_FIELDS = {
    "description": "description",
    "inputSchema": "input_schema",
    "outputSchema": "output_schema",
    "executionLimits": "limits",
    "servers": "servers",
    "nodes": "nodes",
}
FIELD_KEYS = {field: key for key, field in EDITOR_FIELDS.items()}


def editor_text(workflow: Workflow) -> str:
    """The workflow as the editor shows it; servers by provider name, not id. Generated from
    the stored JSON each time (multi-line strings as `|` blocks): saving it unchanged stores
    the same definition."""
    names = dict(
        Provider.objects.filter(pk__in=workflow.servers.values()).values_list("pk", "name")
    )
    document = {
        "description": workflow.description,
        "inputSchema": workflow.input_schema,
        "outputSchema": workflow.output_schema,
        "executionLimits": workflow.limits,
        "servers": {
            server: names.get(pk, f"<missing provider {pk}>")
            for server, pk in workflow.servers.items()
        },
        "nodes": workflow.nodes,
    }
    return dump_yaml(document)


class WorkflowForm(forms.ModelForm):
    graph = forms.CharField(
        label="Graph (YAML)",
        widget=forms.Textarea(
            attrs={"rows": 30, "cols": 110, "class": "vLargeTextField", "spellcheck": "false"}
        ),
        help_text=(
            "description, inputSchema, outputSchema, executionLimits, servers (server name → "
            "provider name) and nodes, in the graph file format (docs/graphs.md)."
        ),
    )

    class Meta:
        model = Workflow
        fields = ["name", "group", "enabled", "retry_on_worker_loss"]

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if self.instance.pk and not self.is_bound:
            self.initial["graph"] = editor_text(self.instance)
        # Tall enough for the whole graph up to a point, shown again with its errors too:
        # scrolling inside a box within the page hides the part being edited.
        text = self.data.get("graph", "") if self.is_bound else self.initial.get("graph", "")
        lines = str(text).count("\n") + 2
        self.fields["graph"].widget.attrs["rows"] = min(max(lines, 30), 80)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        try:
            document = load_yaml(cleaned.get("graph", ""))
        except DefinitionError as exc:
            raise ValidationError({"graph": exc.problems}) from None
        if not isinstance(document, dict):
            raise ValidationError({"graph": "The graph must be a YAML mapping with nodes."})
        unknown = sorted(set(document) - set(EDITOR_FIELDS))
        if unknown:
            raise ValidationError(
                {"graph": f"Unknown key {', '.join(unknown)}; use {', '.join(EDITOR_FIELDS)}."}
            )
        workflow = self.instance
        for key, field in EDITOR_FIELDS.items():
            setattr(
                workflow, field, document.get(key, Workflow._meta.get_field(field).get_default())
            )
        workflow.description = workflow.description or ""
        workflow.servers = self._servers(document.get("servers") or {})
        workflow.name = cleaned.get("name", workflow.name)
        try:
            workflow_validate(workflow)
        except ValidationError as exc:
            raise ValidationError(
                {
                    "graph" if key in FIELD_KEYS else key: [
                        f"{FIELD_KEYS.get(key, key)}: {m}" for m in messages_
                    ]
                    for key, messages_ in exc.message_dict.items()
                }
            ) from None
        return cleaned

    def _servers(self, raw: Any) -> dict[str, int]:
        if not isinstance(raw, dict):
            raise ValidationError({"graph": "servers must map server names to provider names."})
        providers = dict(
            Provider.objects.filter(name__in=[str(v) for v in raw.values()]).values_list(
                "name", "pk"
            )
        )
        missing = sorted(
            f"{server} → {name}" for server, name in raw.items() if str(name) not in providers
        )
        if missing:
            raise ValidationError(
                {
                    "graph": f"servers: no provider named {', '.join(missing)}; register it "
                    "under Providers first."
                }
            )
        return {str(server): providers[str(name)] for server, name in raw.items()}


class VersionInline(admin.TabularInline):
    model = WorkflowVersion
    fields = ("number", "created_at", "author_name", "comment", "digest")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TestRunForm(forms.Form):
    arguments = forms.JSONField(
        initial=dict,
        widget=forms.Textarea(attrs={"rows": 8, "cols": 80}),
        help_text="Sample arguments as a JSON object, checked against the input schema.",
    )


@admin.register(Workflow)
class WorkflowAdmin(AuditedAdmin):
    form = WorkflowForm
    list_display = ("name", "group", "enabled", "current_version", "updated_at")
    list_filter = ("enabled", "group")
    search_fields = ("name", "description")
    readonly_fields = ("drawing", "current_version")
    fields = (
        "name",
        "group",
        "enabled",
        "retry_on_worker_loss",
        "graph",
        "drawing",
        "current_version",
    )
    inlines = [VersionInline]
    change_form_template = "admin/graphs/workflow/change_form.html"
    Media = DrawingMedia

    @admin.display(description="Graph")
    def drawing(self, workflow: Workflow) -> str:
        return drawing_html(draw_graph(workflow.nodes))

    def save_model(self, request: HttpRequest, obj: Workflow, form: Any, change: bool) -> None:
        workflow_save(workflow=obj, author=request.user, comment="Edited in the admin")

    def get_urls(self) -> list[Any]:
        return [
            path(
                "<int:workflow_id>/test-run/",
                self.admin_site.admin_view(self.test_run_view),
                name="graphs_workflow_test_run",
            ),
            *super().get_urls(),
        ]

    def test_run_view(self, request: HttpRequest, workflow_id: int) -> HttpResponse:
        """Run the workflow with sample arguments; the run's history page shows what it did."""
        workflow = get_object_or_404(Workflow, pk=workflow_id)
        if not self.has_change_permission(request, workflow):
            return HttpResponseRedirect(reverse("admin:index"))
        form = TestRunForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                outcome = workflow_call(
                    RunRequest(
                        name=workflow.name,
                        arguments=form.cleaned_data["arguments"],
                        caller=f"admin test run by {request.user.get_username()}",
                    )
                )
            except WorkflowCallError as exc:
                form.add_error("arguments", str(exc))
            else:
                level = messages.SUCCESS if outcome.succeeded else messages.ERROR
                self.message_user(request, f"Run {outcome.run_id} {outcome.status}.", level)
                return HttpResponseRedirect(
                    reverse("admin:graphs_run_change", args=[outcome.run_id])
                )
        context = {
            **self.admin_site.each_context(request),
            "title": f"Test run of {workflow.name}",
            "workflow": workflow,
            "form": form,
            "opts": self.model._meta,
            "input_schema": json.dumps(workflow.input_schema, indent=2),
        }
        return TemplateResponse(request, "admin/graphs/workflow/test_run.html", context)


@admin.register(WorkflowGroup)
class WorkflowGroupAdmin(admin.ModelAdmin):
    list_display = ("name", "title", "version")
    search_fields = ("name", "title")


@admin.register(WorkflowVersion)
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
        return format_html('<pre class="payload">{}</pre>', dump_yaml(version.definition))


def _timestamp(moment: datetime | None) -> str:
    return date_format(localtime(moment), "Y-m-d H:i:s.u") if moment else "—"


# Node executions a page of a run's admin page: the admin renders each as a form, at about
# 2 ms a row, so a page is smaller than the run page's.
EXECUTIONS_PER_PAGE = 25


class NodeExecutionInline(admin.TabularInline):
    model = NodeExecution
    # Node, type and iteration in one column, status and attempts in another: as ten
    # columns, the narrow ones left the detail and output a few letters wide.
    fields = ("index", "node", "outcome", "took", "error", "detail_json", "output_json")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> Any:
        # One page (`?from=<index>`), as a range of the (run, index) index: the formset
        # filters it by run afterwards, so it cannot be a slice.
        start = step_start(request.GET)
        page = super().get_queryset(request)
        return page.filter(index__gte=start, index__lt=start + EXECUTIONS_PER_PAGE)

    @staticmethod
    def _json(value: Any) -> str:
        return format_html(
            '<pre class="payload">{}</pre>', json.dumps(value, indent=2, ensure_ascii=False)
        )

    @admin.display(description="node")
    def node(self, row: NodeExecution) -> str:
        return format_html(
            '<strong>{}</strong><br><span class="quiet">{}, iteration {}</span>',
            row.node_id,
            row.node_type,
            row.iteration,
        )

    @admin.display(description="status")
    def outcome(self, row: NodeExecution) -> str:
        attempts = f", {row.attempts} attempts" if row.attempts > 1 else ""
        return f"{row.get_status_display()}{attempts}"

    @admin.display(description="took")
    def took(self, row: NodeExecution) -> str:
        return duration(row.duration_ms)

    @admin.display(description="detail")
    def detail_json(self, row: NodeExecution) -> str:
        # In the graph's own format, so a transform's expression reads as its author wrote
        # it, a line a line, not one JSON string of \n escapes.
        if row.detail is None:
            return "—"
        return format_html('<pre class="payload">{}</pre>', dump_yaml(row.detail))

    @admin.display(description="output")
    def output_json(self, row: NodeExecution) -> str:
        return self._json(row.output)


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "workflow_name",
        "status",
        "created_at",
        "took",
        "node_count",
        "caller",
    )
    list_filter = ("status",)
    search_fields = ("=id", "workflow_name")
    show_full_result_count = False
    readonly_fields = (
        "workflow_name",
        "version",
        "status",
        "arguments_json",
        "result_json",
        "error",
        "error_node_id",
        "caller",
        "session_id",
        "node_count",
        "truncated",
        "created",
        "started",
        "finished",
        "took",
    )
    fields = readonly_fields
    inlines = [NodeExecutionInline]
    # Adds the path taken, and links between the pages of node executions.
    change_form_template = "admin/graphs/run/change_form.html"
    Media = DrawingMedia

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).select_related("version")

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Run | None = None,
    ) -> HttpResponse:
        if obj is not None:
            path = selectors.run_path(run=obj)
            pages = selectors.step_pages(
                start=step_start(request.GET), executions=path.executions, size=EXECUTIONS_PER_PAGE
            )
            nodes = obj.version.definition.get("nodes", [])
            failed = path.failed or obj.error_node_id
            drawing = draw_graph(nodes, visited=path.visited, taken=path.taken, failed=failed)
            context.update(drawing=drawing_html(drawing), pages=pages, **step_links(pages))
        return super().render_change_form(request, context, add, change, form_url, obj)

    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        """What deleting these runs deletes: each run (and the lost attempts that go with it)
        with the number of its node executions. Django's own list loads and links every
        execution (30 s for a run of 300,000); deleting them is one DELETE either way."""
        chosen = [run.pk for run in objs]
        runs = list(Run.objects.filter(Q(pk__in=chosen) | Q(attempt_of__in=chosen)))
        counts = selectors.run_execution_counts(run_ids=[run.pk for run in runs])
        deleted: list[Any] = []
        for run in runs:
            link = reverse("admin:graphs_run_change", args=[run.pk])
            deleted += [
                format_html('Run: <a href="{}">{}</a>', link, run),
                [f"{counts.get(run.pk, 0)} node executions"],
            ]
        return deleted, {"runs": len(runs), "node executions": sum(counts.values())}, set(), []

    @admin.display(description="duration", ordering="duration_ms")
    def took(self, run: Run) -> str:
        return duration(run.duration_ms)

    # To the microsecond, as the history pages show them: a run of a few milliseconds
    # created, started and finished within the same minute.
    @admin.display(description="created")
    def created(self, run: Run) -> str:
        return _timestamp(run.created_at)

    @admin.display(description="started")
    def started(self, run: Run) -> str:
        return _timestamp(run.started_at)

    @admin.display(description="finished")
    def finished(self, run: Run) -> str:
        return _timestamp(run.finished_at)

    @admin.display(description="arguments")
    def arguments_json(self, run: Run) -> str:
        return NodeExecutionInline._json(run.arguments)

    @admin.display(description="result")
    def result_json(self, run: Run) -> str:
        return NodeExecutionInline._json(run.result)
