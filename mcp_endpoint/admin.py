"""Admin for API keys: create (the key is shown once), see use, revoke."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from mcp_endpoint.access.keys import api_key_create, api_key_revoke
from mcp_endpoint.models import ApiKey, Scope
from nodespecs.admin.audit import AuditedAdmin, admin_user
from nodespecs.audit import Action, audit_record
from nodespecs.callers import actor_user


class ApiKeyForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices, widget=forms.CheckboxSelectMultiple, required=True
    )

    class Meta:
        model = ApiKey
        fields = ("name", "owner", "scopes", "expires_at", "rate_limit_per_minute")


@admin.register(ApiKey)
class ApiKeyAdmin(AuditedAdmin):
    form = ApiKeyForm
    list_display = ("name", "prefix", "scope_list", "owner", "status", "last_used_at", "created_at")
    list_filter = ("revoked_at", "expires_at")
    search_fields = ("name", "prefix")
    readonly_fields = ("prefix", "revoked_at", "last_used_at", "created_at")
    raw_id_fields = ("owner",)
    actions = ["revoke"]

    @admin.display(description="scopes")
    def scope_list(self, key: ApiKey) -> str:
        return ", ".join(key.scopes)

    @admin.display(description="status")
    def status(self, key: ApiKey) -> str:
        if key.is_revoked:
            return "revoked"
        return "expired" if key.is_expired() else "active"

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        key, secret = api_key_create(
            name=obj.name,
            scopes=form.cleaned_data["scopes"],
            owner=obj.owner or admin_user(request),
            expires_at=obj.expires_at,
            rate_limit_per_minute=obj.rate_limit_per_minute,
        )
        obj.pk, obj.prefix = key.pk, key.prefix
        messages.warning(
            request,
            f"The new API key is {secret} — copy it now: it is stored hashed and will not be "
            "shown again.",
        )

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset:
            api_key_revoke(key=key)
            audit_record(actor=actor_user(admin_user(request)), action=Action.REVOKED, target=key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).", messages.SUCCESS)
