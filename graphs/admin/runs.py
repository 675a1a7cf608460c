"""The run admin, read-only: runs, their path drawn on the graph, and their node executions
a page at a time (a run may have thousands). Registered by `graphs.admin`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import admin
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.timezone import localtime

from graphs.admin.display import DrawingMedia, drawing_html, run_payload_html
from graphs.history import selectors
from graphs.history.drawing import draw_graph
from graphs.models import NodeExecution, Run
from graphs.pages.display import duration, step_links
from graphs.pages.forms import step_start


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
        if row.detail is None:
            return "—"
        return run_payload_html(row.detail, row.run_id, f"detail-{row.index}", as_yaml=True)

    @admin.display(description="output")
    def output_json(self, row: NodeExecution) -> str:
        return run_payload_html(row.output, row.run_id, f"output-{row.index}")


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
        return run_payload_html(run.arguments, run.pk, "arguments")

    @admin.display(description="result")
    def result_json(self, run: Run) -> str:
        return run_payload_html(run.result, run.pk, "result")
