"""Admin for spec authors: edit with validation, preview what agents see, revisions, YAML."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.defaultfilters import pluralize
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from nodespecs.admin import providers  # noqa: F401  (registers the Provider admin)
from nodespecs.admin.audit import AuditedAdmin, admin_user
from nodespecs.admin.forms import ImportForm, NodeSpecForm
from nodespecs.audit import Action, audit_record, audit_report, specs_named
from nodespecs.callers import actor_user
from nodespecs.knowledge.serialization import serialize_spec
from nodespecs.knowledge.specs import spec_restore, spec_save, specs_import, specs_to_yaml
from nodespecs.models import NodeSpec, NodeSpecRevision

#: Tags offered in the change list's filter.
TAGS_LISTED = 25


class TagFilter(admin.SimpleListFilter):
    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        # The most used tags only: listing all of them (about 300 in the catalog) made the
        # page 6,400 px tall. Any tag can still be chosen with ?tag= or found by search.
        counts = Counter(
            tag for row in NodeSpec.objects.values_list("tags", flat=True) for tag in row or []
        )
        shown = {tag for tag, _ in counts.most_common(TAGS_LISTED)}
        if self.value():
            shown.add(self.value())
        return [(tag, tag) for tag in sorted(shown)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[NodeSpec]) -> QuerySet[NodeSpec]:
        tag = self.value()
        if not tag:
            return queryset
        # JSON containment is not portable to SQLite; the catalog is small enough to scan.
        ids = [pk for pk, tags in queryset.values_list("pk", "tags") if tag in (tags or [])]
        return queryset.filter(pk__in=ids)


@admin.register(NodeSpec)
class NodeSpecAdmin(AuditedAdmin):
    form = NodeSpecForm
    # The name carries the type (ACTION/HTTP_REQUEST); fewer columns fit beside the filters.
    list_display = ("name", "display_name", "source", "version")
    list_filter = ("node_type", "source", "available", TagFilter)
    search_fields = ("subtype", "display_name", "description", "tags")
    ordering = ("node_type", "subtype")
    actions = ["export_yaml"]
    readonly_fields = (
        "source",
        "provider",
        "available",
        "created_at",
        "updated_at",
        "revision_history",
        "agent_preview",
    )
    fieldsets = (
        (None, {"fields": ("node_type", "subtype", "version", "display_name", "description")}),
        ("Parameters", {"fields": ("configurations", "input_params", "output_params")}),
        (
            "Discovery",
            {"fields": ("tags", "aliases", "attached_nodes", "examples")},
        ),
        ("Legacy ports", {"fields": ("input_ports", "output_ports"), "classes": ("collapse",)}),
        (
            "Record",
            {
                # Three to a line: read-only facts, not worth a screen of their own.
                "fields": (
                    ("source", "provider", "available"),
                    ("created_at", "updated_at", "revision_history"),
                )
            },
        ),
        # Collapsed (Django renders it as <details>): the preview is as long as the spec.
        (
            "What an agent receives from get_node_details",
            {"fields": ("agent_preview",), "classes": ("collapse",)},
        ),
    )

    @admin.display(description="node", ordering="subtype")
    def name(self, spec: NodeSpec) -> str:
        return str(spec)

    @admin.display(description="preview")
    def agent_preview(self, spec: NodeSpec) -> str:
        if spec.pk is None:
            return "Save the spec to see the preview."
        # The saved spec, not the form's unsaved (possibly invalid) edits: this is what
        # agents are served right now.
        saved = NodeSpec.objects.get(pk=spec.pk)
        preview = json.dumps(serialize_spec(saved.document()), indent=2, ensure_ascii=False)
        return format_html('<pre class="agent-preview">{}</pre>', preview)

    @admin.display(description="revisions")
    def revision_history(self, spec: NodeSpec) -> str:
        if spec.pk is None:
            return "-"
        url = reverse("admin:nodespecs_nodespec_revisions", args=[spec.pk])
        count = spec.revisions.count()
        label = f"{count} revision{pluralize(count)}: see and restore"
        return format_html('<a href="{}">{}</a>', url, label)

    def save_model(
        self, request: HttpRequest, obj: NodeSpec, form: forms.ModelForm, change: bool
    ) -> None:
        if not change:
            obj.source = NodeSpec.Source.CUSTOM
        comment = "Changed " + ", ".join(form.changed_data) if change else "Created"
        spec_save(spec=obj, author=admin_user(request), comment=comment)

    @admin.action(description="Export selected specs as YAML")
    def export_yaml(self, request: HttpRequest, queryset: QuerySet[NodeSpec]) -> HttpResponse:
        response = HttpResponse(specs_to_yaml(list(queryset)), content_type="application/yaml")
        response["Content-Disposition"] = 'attachment; filename="node-specs.yaml"'
        return response

    def get_urls(self) -> list:
        wrap = self.admin_site.admin_view
        return [
            path("import/", wrap(self.import_view), name="nodespecs_nodespec_import"),
            path(
                "<int:pk>/revisions/",
                wrap(self.revisions_view),
                name="nodespecs_nodespec_revisions",
            ),
            path(
                "<int:pk>/revisions/<int:number>/restore/",
                wrap(self.restore_view),
                name="nodespecs_nodespec_restore",
            ),
            *super().get_urls(),
        ]

    def _context(self, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": title,
            **extra,
        }

    def import_view(self, request: HttpRequest) -> HttpResponse:
        if not (self.has_add_permission(request) and self.has_change_permission(request)):
            raise PermissionDenied
        form = ImportForm(request.POST or None, request.FILES or None)
        report = None
        if request.method == "POST" and form.is_valid():
            user = admin_user(request)
            report = specs_import(documents=form.cleaned_data["documents"], author=user)
            names = report.created + report.updated
            audit_report(actor=actor_user(user), report=report, objects=specs_named(names))
            level = messages.WARNING if report.failed else messages.SUCCESS
            self.message_user(request, f"Import: {report.summary()}.", level)
        context = self._context(request, "Import node specs from YAML", form=form, report=report)
        return TemplateResponse(request, "admin/nodespecs/nodespec/import.html", context)

    def revisions_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        spec = get_object_or_404(NodeSpec, pk=pk)
        if not self.has_view_permission(request, spec):
            raise PermissionDenied
        revisions = spec.revisions.select_related("author").order_by("-number")
        context = self._context(
            request,
            f"Revisions of {spec}",
            spec=spec,
            revisions=[
                (revision, json.dumps(revision.document, indent=2, ensure_ascii=False))
                for revision in revisions
            ],
            can_restore=self.has_change_permission(request, spec),
        )
        return TemplateResponse(request, "admin/nodespecs/nodespec/revisions.html", context)

    def restore_view(self, request: HttpRequest, pk: int, number: int) -> HttpResponse:
        revision = get_object_or_404(NodeSpecRevision, spec_id=pk, number=number)
        if not self.has_change_permission(request, revision.spec):
            raise PermissionDenied
        if request.method != "POST":
            return HttpResponseRedirect(reverse("admin:nodespecs_nodespec_revisions", args=[pk]))
        user = admin_user(request)
        try:
            spec_restore(revision=revision, author=user)
        except ValidationError as exc:
            self.message_user(
                request,
                f"Revision {number} no longer passes validation, so it was not restored: "
                f"{'; '.join(exc.messages)}. Edit the spec by hand instead.",
                messages.ERROR,
            )
            return HttpResponseRedirect(reverse("admin:nodespecs_nodespec_revisions", args=[pk]))
        audit_record(actor=actor_user(user), action=Action.RESTORED, target=revision.spec)
        self.message_user(
            request, f"Restored {revision.spec} to revision {number}.", messages.SUCCESS
        )
        return HttpResponseRedirect(reverse("admin:nodespecs_nodespec_change", args=[pk]))
