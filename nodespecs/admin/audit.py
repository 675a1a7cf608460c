"""The audit trail in the admin: a mixin that records saves and deletes, and the read-only
list of events.

Admin classes of audited models (node specs, providers, workflows, API keys) derive from
`AuditedAdmin` instead of `admin.ModelAdmin`. Each change page then links its own events
("Audit", beside "History").
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

from nodespecs.audit import Action, audit_record, audit_records
from nodespecs.callers import actor_user
from nodespecs.models import AuditEvent


def admin_user(request: HttpRequest) -> AbstractBaseUser:
    """The signed-in user of an admin request (the admin site lets no one else in)."""
    user = request.user
    if isinstance(user, AnonymousUser):
        raise PermissionDenied("Sign in to the admin first.")
    return user


def audit_url(model: type[models.Model], object_id: Any) -> str:
    """The audit list filtered to one object."""
    query = urlencode({"object_type": model._meta.label_lower, "object_id": str(object_id)})
    return f"{reverse('admin:nodespecs_auditevent_changelist')}?{query}"


class AuditedAdmin(admin.ModelAdmin):
    """A ModelAdmin that records who created, changed or deleted an object through it, and
    which fields (names only) they changed."""

    def save_related(
        self, request: HttpRequest, form: forms.ModelForm, formsets: Any, change: bool
    ) -> None:
        # Called once the object and its inlines are saved, with the form, on add and change.
        super().save_related(request, form, formsets, change)
        if change and not form.has_changed() and not any(f.has_changed() for f in formsets):
            return  # "Save" pressed with nothing changed
        audit_record(
            actor=actor_user(admin_user(request)),
            action=Action.CHANGED if change else Action.CREATED,
            target=form.instance,
            fields=form.changed_data,
        )

    def delete_model(self, request: HttpRequest, obj: models.Model) -> None:
        audit_record(actor=actor_user(admin_user(request)), action=Action.DELETED, target=obj)
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        audit_records(
            actor=actor_user(admin_user(request)), action=Action.DELETED, targets=queryset
        )
        super().delete_queryset(request, queryset)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        context = {**(extra_context or {}), "audit_url": audit_url(self.model, object_id)}
        return super().change_view(request, object_id, form_url, context)


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: events are written by the code that makes the changes, never by hand."""

    list_display = ("created_at", "actor", "action", "object_type", "object", "field_list")
    list_filter = ("object_type", "action")
    search_fields = ("actor", "object_label")
    show_full_result_count = False
    readonly_fields = (
        "created_at",
        "actor",
        "action",
        "object_type",
        "object_id",
        "object",
        "field_list",
    )
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="object", ordering="object_label")
    def object(self, event: AuditEvent) -> str:
        app_label, _, model_name = event.object_type.partition(".")
        try:
            url = reverse(f"admin:{app_label}_{model_name}_change", args=[event.object_id])
        except NoReverseMatch:
            return event.object_label
        return format_html('<a href="{}">{}</a>', url, event.object_label)

    @admin.display(description="fields")
    def field_list(self, event: AuditEvent) -> str:
        return ", ".join(event.fields)
