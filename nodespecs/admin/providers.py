"""Admin for providers: register MCP servers, test their connection, refresh their tools, keep
their secrets hidden.

Saving a provider refreshes its tools (`nodespecs.providers.refreshing`: in the background when
the server is slow, the state shown on its page); "Test connection" on its page reaches the server
as saved and lists its tools, changing nothing (`nodespecs.providers.connection_check`).

`env` and `headers` are edited as text, one `NAME=value` (env) or `Name: value` (headers)
per line. Their stored values are never sent to the browser: the form shows the names
alone, a line with nothing after the separator keeps the stored value, a line with a value
replaces it, and a deleted line removes it.

A stdio provider is a command Switchyard runs on its host: only a superuser may register one or
change what it runs (`nodespecs.providers.lifecycle.provider_check`). Other staff see its command,
args and working directory read-only and not its env, and are told why if they ask for one.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, TypedDict

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, Q, QuerySet
from django.forms.models import construct_instance
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import escape, format_html_join

from nodespecs.admin.audit import AuditedAdmin, admin_user
from nodespecs.audit import Action, audit_record, audit_refresh
from nodespecs.callers import Caller, actor_user, caller_user
from nodespecs.models import Provider
from nodespecs.providers.connection_check import provider_connection_test
from nodespecs.providers.lifecycle import (
    SERVER_SETTINGS,
    ProviderRefreshError,
    provider_changes,
    provider_check,
    provider_refresh,
    provider_save,
)
from nodespecs.providers.refreshing import provider_refresh_after_save, refresh_state_text
from nodespecs.secrets import UnreadableSecrets

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations  # django-stubs' helper: types only

_TEXTAREA = {"rows": 4, "cols": 80, "class": "vLargeTextField"}
# How long saving a provider waits for the refresh of its tools before going on while it ends
# in the background: long enough for a local server, short enough for a page.
REFRESH_WAIT_SECONDS = 3.0
SECRET_FIELDS = ("env", "headers")


class LinesField(forms.Field):
    """A list of strings edited one per line (blank lines are dropped)."""

    widget = forms.Textarea(attrs=_TEXTAREA)

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str]:
        return [line.strip() for line in (value or "").splitlines() if line.strip()]


class SecretMapField(forms.Field):
    """A mapping of names to secret values, one `NAME<separator>value` per line.

    Cleans to {name: value}, where an empty value means "keep the stored one" (the form
    resolves it). Only names are ever rendered, whether from the stored mapping or from
    what was just submitted.
    """

    widget = forms.Textarea(attrs=_TEXTAREA)

    def __init__(self, *, separator: str, example: str, **kwargs: Any) -> None:
        self.separator = separator
        self.example = example
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, dict):
            names = list(value)
        else:
            names = [
                line.partition(self.separator)[0].strip() for line in (value or "").splitlines()
            ]
        return "\n".join(f"{name}{self.separator}" for name in names if name)

    def to_python(self, value: Any) -> dict[str, str]:
        pairs: dict[str, str] = {}
        for number, line in enumerate((value or "").splitlines(), start=1):
            if not line.strip():
                continue
            name, separator, secret = line.partition(self.separator)
            if not separator or not name.strip():
                raise forms.ValidationError(
                    f"Line {number} is not in the form {self.example}: write one per line."
                )
            pairs[name.strip()] = secret.strip()
        return pairs

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            submitted = self.to_python(data)
        except forms.ValidationError:
            return True
        return set(submitted) != set(initial or {}) or any(submitted.values())


# How a provider reaches its server: the form's fields after the name, and one fieldset.
SERVER_FIELDS = SERVER_SETTINGS
# Who may use the provider in a workflow they build (nodespecs/providers/builder_access.py).
BUILDER_FIELDS = ("open_to_builders", "builders")
# What a user who may not start processes sees of a stdio server's settings, read-only.
# `env` is left out altogether: its values are secrets, and a read-only field shows values.
STDIO_READONLY_FIELDS = ("command", "args", "cwd")


class ProviderForm(forms.ModelForm):
    # Who is saving; ProviderAdmin.get_form sets it per request. The default has no rights.
    caller = Caller(actor="")
    args = LinesField(required=False, help_text="stdio: the command's arguments, one per line.")
    env = SecretMapField(
        separator="=",
        example="NAME=value",
        help_text="stdio: environment variables, one NAME=value per line. Stored values are "
        "never shown: NAME= (nothing after =) keeps the stored value, NAME=new replaces it, "
        "deleting the line removes it.",
    )
    headers = SecretMapField(
        separator=":",
        example="Name: value",
        help_text="HTTP: request headers, one Name: value per line, e.g. Authorization: "
        "Bearer …. Stored values are never shown: Name: (nothing after :) keeps the stored "
        "value, Name: new replaces it, deleting the line removes it.",
    )

    class Meta:
        model = Provider
        fields = ("name", "title", "enabled", *SERVER_FIELDS, *BUILDER_FIELDS)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "sse_read_timeout" in self.fields:
            self.fields["sse_read_timeout"].required = False
        # Stored values no key decrypts: the form starts empty and says why; entering the
        # values again stores them under the current key.
        for field in SECRET_FIELDS:
            stored = getattr(self.instance, field)
            if isinstance(stored, UnreadableSecrets):
                self.initial[field] = {}
                help_text = self.fields[field].help_text
                self.fields[field].help_text = f"{escape(stored.problem())} {help_text}"

    def clean_sse_read_timeout(self) -> float:
        # Left empty (or not sent, by a form from before the field existed): the value it had.
        value = self.cleaned_data.get("sse_read_timeout")
        return self.instance.sse_read_timeout if value is None else value

    def _with_stored(self, field: str) -> dict[str, str]:
        """The submitted mapping with each empty value replaced by the stored one."""
        stored = getattr(self.instance, field)
        if isinstance(stored, UnreadableSecrets):
            stored = {}
        merged = {}
        for name, value in self.cleaned_data[field].items():
            if value:
                merged[name] = value
            elif name in stored:
                merged[name] = stored[name]
            else:
                raise forms.ValidationError(f"{name} has no value: give one after the separator.")
        return merged

    def clean_env(self) -> dict[str, str]:
        return self._with_stored("env")

    def clean_headers(self) -> dict[str, str]:
        return self._with_stored("headers")

    def _post_clean(self) -> None:
        # The caller's rights first, on a copy holding the submitted values. A refused change
        # is not validated further: the model would speak of fields this user sees read-only
        # (a stdio provider's empty command), which a form cannot show beside them.
        submitted = construct_instance(self, copy.copy(self.instance), self._meta.fields)
        try:
            changes = provider_changes(submitted)
            provider_check(provider=submitted, caller=self.caller, changes=changes)
        except ValidationError as exc:
            self.add_error(None, exc)  # above the form, for the same reason
            return
        # Puts the submitted values on self.instance and validates it. The stubs leave out
        # this private method of BaseModelForm.
        super()._post_clean()  # type: ignore[misc]


class _ToolCounts(TypedDict):
    """What ProviderAdmin.get_queryset annotates each provider with."""

    tool_total: int
    tool_available: int


class DeclaredFilter(admin.SimpleListFilter):
    """Operators' providers apart from the servers builders declared in their workflows."""

    title = "registered by"
    parameter_name = "declared"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("no", "an operator (catalog)"), ("yes", "a builder's workflow")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Provider]) -> QuerySet[Provider]:
        if self.value() == "no":
            return queryset.filter(declared_by="")
        if self.value() == "yes":
            return queryset.exclude(declared_by="")
        return queryset


@admin.register(Provider)
class ProviderAdmin(AuditedAdmin):
    form = ProviderForm
    list_display = (
        "name",
        "title",
        "transport",
        "enabled",
        "tool_count",
        "refresh_state",
        "error",
    )
    list_filter = ("enabled", "transport", "open_to_builders", DeclaredFilter)
    search_fields = ("name", "title", "command", "url", "declared_by")
    actions = ["refresh_tools"]
    readonly_fields = (
        "refresh_state",
        "last_refreshed_at",
        "last_error",
        "tools",
        "declared_by",
        "declared_for",
        "created_at",
        "updated_at",
    )
    filter_horizontal = ("builders",)
    fieldsets = (
        (None, {"fields": ("name", "title", "enabled")}),
        (
            "Server",
            {"fields": SERVER_FIELDS},
        ),
        (
            "Builders",
            {
                "fields": (*BUILDER_FIELDS, "declared_by", "declared_for"),
                "description": "Which API keys may call this provider's tools in the "
                "workflows they build (keys with workflows:admin always may). A server a "
                "builder declared belongs to its workflows only.",
            },
        ),
        (
            "Tools",
            {
                "fields": ("refresh_state", "last_refreshed_at", "last_error", "tools"),
                "description": "Saving the provider refreshes its tools in the background; "
                "“Test connection” (above) lists them without changing anything.",
            },
        ),
        ("Record", {"fields": ("created_at", "updated_at")}),
    )

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path(
                "<int:pk>/test-connection/",
                wrap(self.connection_test_view),
                name="nodespecs_provider_test_connection",
            ),
            *super().get_urls(),
        ]

    def connection_test_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Test the saved provider's connection and show what was found. POST only, by those
        who may change the provider: it starts a stdio server, or sends requests to a remote
        one; a GET goes back to the provider's page."""
        provider = get_object_or_404(Provider, pk=pk)
        if not self.has_change_permission(request, provider):
            raise PermissionDenied
        if request.method != "POST":
            return HttpResponseRedirect(reverse("admin:nodespecs_provider_change", args=[pk]))
        report = provider_connection_test(provider=provider)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Connection test of {provider.name}",
            "provider": provider,
            "report": report,
        }
        return TemplateResponse(request, "admin/nodespecs/provider/connection_test.html", context)

    def get_fieldsets(self, request: HttpRequest, obj: Provider | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if caller_user(admin_user(request)).may_start_processes:
            return fieldsets
        return [
            (title, {**options, "fields": [f for f in options["fields"] if f != "env"]})
            for title, options in fieldsets
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: Provider | None = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        if caller_user(admin_user(request)).may_start_processes:
            return fields
        return fields + STDIO_READONLY_FIELDS

    def get_form(
        self, request: HttpRequest, obj: Provider | None = None, change: bool = False, **kwargs
    ) -> type[forms.ModelForm]:
        form = super().get_form(request, obj, change, **kwargs)
        caller = caller_user(admin_user(request))
        # `env` is a declared field, which a ModelForm keeps whatever its fields list says:
        # None removes it for a user the fieldsets do not show it to.
        attrs: dict[str, Any] = {"caller": caller}
        if not caller.may_start_processes:
            attrs["env"] = None
        return type(form.__name__, (form,), attrs)

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        initial = super().get_changeform_initial_data(request)
        if not caller_user(admin_user(request)).may_start_processes:
            # The model's default is stdio, which this user may not register.
            initial.setdefault("transport", Provider.Transport.STREAMABLE_HTTP)
        return initial

    def save_model(
        self, request: HttpRequest, obj: Provider, form: forms.ModelForm, change: bool
    ) -> None:
        # The service checks the rights again, validates, and records the audit event.
        provider_save(provider=obj, caller=caller_user(admin_user(request)))
        provider_refresh_after_save(
            provider=obj, actor=actor_user(admin_user(request)), wait_seconds=REFRESH_WAIT_SECONDS
        )

    def save_related(
        self, request: HttpRequest, form: forms.ModelForm, formsets: Any, change: bool
    ) -> None:
        # Skips AuditedAdmin's event: provider_save recorded this change already, but for
        # its builders, which are saved only now.
        super(AuditedAdmin, self).save_related(request, form, formsets, change)
        if "builders" in form.changed_data:
            audit_record(
                actor=actor_user(admin_user(request)),
                action=Action.CHANGED,
                target=form.instance,
                fields=["builders"],
            )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Provider]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                tool_total=Count("specs"),
                tool_available=Count("specs", filter=Q(specs__available=True)),
            )
        )

    @admin.display(description="tools", ordering="tool_available")
    def tool_count(self, provider: WithAnnotations[Provider, _ToolCounts]) -> str:
        missing = provider.tool_total - provider.tool_available
        suffix = f" ({missing} unavailable)" if missing else ""
        return f"{provider.tool_available}{suffix}"

    @admin.display(description="tools refresh")
    def refresh_state(self, provider: Provider) -> str:
        return refresh_state_text(provider)

    @admin.display(description="last error")
    def error(self, provider: Provider) -> str:
        text = provider.last_error
        return text if len(text) <= 80 else text[:77] + "..."

    @admin.display(description="node specs")
    def tools(self, provider: Provider) -> str:
        specs = list(provider.specs.order_by("display_name")) if provider.pk else []
        if not specs:
            return "None yet: save the provider, or use the “Refresh tools” action on the list."
        return format_html_join(
            "",
            '<div><a href="{}">{}</a>{}</div>',
            (
                (
                    reverse("admin:nodespecs_nodespec_change", args=[spec.pk]),
                    spec.display_name,
                    "" if spec.available else " (unavailable)",
                )
                for spec in specs
            ),
        )

    @admin.action(
        description="Refresh tools: list each server's tools into node specs",
        permissions=["change"],
    )
    def refresh_tools(self, request: HttpRequest, queryset: QuerySet[Provider]) -> None:
        for provider in queryset:
            try:
                report = provider_refresh(provider=provider)
            except ProviderRefreshError as exc:
                self.message_user(
                    request, f"Could not refresh {provider.name}: {exc}", messages.ERROR
                )
                continue
            audit_refresh(actor=actor_user(admin_user(request)), provider=provider, report=report)
            level = messages.WARNING if report.failed else messages.SUCCESS
            self.message_user(request, f"Refreshed {provider.name}: {report.summary()}.", level)
            for name, reason in report.failed.items():
                self.message_user(request, f"Not written: {name}: {reason}.", messages.WARNING)
