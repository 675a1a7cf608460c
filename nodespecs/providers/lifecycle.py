"""Providers: external MCP servers whose tools become TOOL node specs.

`provider_refresh` lists a provider's tools and writes one spec per tool through
`spec_save`, so each change leaves a revision and every process's registry sees it. A tool
the server no longer offers is marked unavailable (agents are told so; search leaves it
out) and comes back when the server offers it again. Provider specs are generated: a
refresh overwrites edits made to them in the admin.

Every save of a provider's settings goes through `provider_save`, which checks the caller's right to
make the server start a process (`nodespecs.downstream.process_rights`) and records the change in
the audit trail.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from nodespecs.audit import Action, audit_record
from nodespecs.callers import Caller
from nodespecs.downstream import client
from nodespecs.downstream.process_rights import PROCESS_FIELDS, command_refusal, stdio_refusal
from nodespecs.knowledge.specformat import SpecFormatError
from nodespecs.knowledge.specs import spec_save
from nodespecs.models import NodeSpec, Provider
from nodespecs.providers import builder_access
from nodespecs.providers.tool_specs import tool_document
from nodespecs.reports import RefreshReport
from nodespecs.secrets import UnreadableSecrets

# Settings that make two providers the same server (everything but name, title, state), in
# the order the admin shows them.
SERVER_SETTINGS = (
    "transport",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "timeout_seconds",
    "sse_read_timeout",
)
# The fields a person sets: a change to any of them is recorded in the audit trail.
_EDITABLE = ("name", "title", "enabled", "open_to_builders", *SERVER_SETTINGS)


class ProviderRefreshError(Exception):
    """A provider's tools could not be listed; the message says why and what to check."""


def _settings_of(connection: client.Connection) -> dict[str, Any]:
    """A connection's settings as Provider field values."""
    return {
        "transport": connection.transport,
        "command": connection.command,
        "args": list(connection.args),
        "env": dict(connection.env),
        "cwd": connection.cwd,
        "url": connection.url,
        "headers": dict(connection.headers),
        "timeout_seconds": connection.timeout_seconds,
        "sse_read_timeout": connection.sse_read_timeout,
    }


def _differs(new: Any, old: Any) -> bool:
    # A stored secret no key decrypts (`UnreadableSecrets`) cannot be compared: it is
    # unchanged while the provider still holds that same unreadable value, changed once
    # anything else replaces it.
    if isinstance(new, UnreadableSecrets) or isinstance(old, UnreadableSecrets):
        return not (isinstance(new, UnreadableSecrets) and isinstance(old, UnreadableSecrets))
    return new != old


def provider_changes(provider: Provider) -> list[str]:
    """The names of the fields `provider` (not saved yet) changes: those that differ from
    the stored provider, or, for a new one, from an empty provider's defaults."""
    stored = Provider.objects.filter(pk=provider.pk).first() if provider.pk else None
    before = stored if stored is not None else Provider()
    return [name for name in _EDITABLE if _differs(getattr(provider, name), getattr(before, name))]


def provider_check(*, provider: Provider, caller: Caller, changes: list[str]) -> None:
    """Refuse a save `caller` may not make; `changes` is `provider_changes(provider)`.

    A new stdio provider, or one with any of its process fields changed, needs a caller who
    may start processes, and a command that `PROVIDER_ALLOWED_COMMANDS` allows. Anything
    else (an HTTP provider, a stdio provider's name, title, timeout or `enabled`) anyone
    with the model permissions may change. Raises `ValidationError` saying why and what to
    do instead.
    """
    if provider.transport != Provider.Transport.STDIO:
        return
    if provider.pk is not None and not set(changes) & set(PROCESS_FIELDS):
        return  # a stdio provider's name, title, timeout or `enabled`
    if not caller.may_start_processes:
        raise ValidationError(stdio_refusal(server=provider.name, command=provider.command))
    env = provider.env
    refusal = command_refusal(provider.command, () if isinstance(env, UnreadableSecrets) else env)
    if refusal is not None:
        raise ValidationError(f"Provider {provider.name!r}: {refusal}")


@transaction.atomic
def provider_save(*, provider: Provider, caller: Caller) -> list[str]:
    """Create or change a provider: the one way every save of its settings goes (the
    admin, graph imports, commands), so each is checked against `caller`'s rights
    (`provider_check`), validated, and recorded in the audit trail with the names of the
    changed fields (never their values). Returns those names; nothing is recorded when
    nothing changed.

    Raises `django.core.exceptions.ValidationError` when the caller may not make the change
    or the settings are invalid.
    """
    changes = provider_changes(provider)
    provider_check(provider=provider, caller=caller, changes=changes)
    provider.full_clean()
    created = provider.pk is None
    provider.save()
    if changes:
        action = Action.CREATED if created else Action.CHANGED
        audit_record(actor=caller.trail_name, action=action, target=provider, fields=changes)
    return changes


def provider_find(connection: client.Connection) -> Provider | None:
    """The registered provider with exactly the settings of `connection`, whatever its name."""
    return next(iter(_matches(connection)), None)


def _matches(connection: client.Connection) -> list[Provider]:
    """Every provider with exactly the settings of `connection`."""
    settings = _settings_of(connection)
    exact = {key: settings[key] for key in ("transport", "command", "cwd", "url")}
    providers = Provider.objects.filter(**exact, timeout_seconds=connection.timeout_seconds)
    # args, env and headers are JSON: compared here, where dict order does not matter.
    return [
        p for p in providers if all(getattr(p, key) == settings[key] for key in SERVER_SETTINGS)
    ]


def provider_reused(connection: client.Connection, caller: Caller) -> Provider | None:
    """The existing provider a definition's server is for `caller`, if any: one with exactly
    its settings; for an API caller's HTTP or SSE server, only one that caller declared
    before, never an operator's provider that happens to have the same address."""
    matches = _matches(connection)
    if builder_access.declares_servers(caller) and connection.transport != Provider.Transport.STDIO:
        matches = [p for p in matches if builder_access.is_own_declared(p, caller)]
    return matches[0] if matches else None


def provider_get_or_create(*, name: str, connection: client.Connection, caller: Caller) -> Provider:
    """The provider for a server a definition names: an existing one with identical settings,
    whatever its name, else a new one named after `name` (made a valid provider name; `-2`,
    `-3`... appended when another server has it), saved by `provider_save` for `caller`.

    For an API caller (`builder_access.declares_servers`) an HTTP or SSE server is one of its
    own declared servers, reused when it declared the same before, never an operator's
    provider that happens to have the same address; a stdio server must be a registered
    provider the caller may use.

    Raises `django.core.exceptions.ValidationError` when the settings are invalid or the
    caller may not register or use this server.
    """
    existing = provider_reused(connection, caller)
    if existing is not None:
        refusal = builder_access.provider_refusal(existing, caller, name)
        if refusal is not None:
            raise ValidationError(refusal)
        return existing
    declares = builder_access.declares_servers(caller)
    if declares and connection.transport != Provider.Transport.STDIO:
        refusal = builder_access.declared_server_refusal(caller)
        if refusal is not None:
            raise ValidationError(refusal)
    base = slugify(name).lower()[:30] or "server"
    taken = set(Provider.objects.filter(name__startswith=base).values_list("name", flat=True))
    candidate, number = base, 1
    while candidate in taken:
        number += 1
        candidate = f"{base}-{number}"
    provider = Provider(name=candidate, title=name, **_settings_of(connection))
    if declares:
        provider.declared_by, provider.declared_for_id = caller.actor, caller.user_id
    provider_save(provider=provider, caller=caller)
    return provider


def _mark_failed(provider: Provider, message: str) -> None:
    # The specs are left as they were: only the reason is recorded.
    provider.last_error = message
    provider.tools_refresh_state = Provider.RefreshState.FAILED
    provider.tools_refresh_at = timezone.now()
    provider.save(
        update_fields=["last_error", "tools_refresh_state", "tools_refresh_at", "updated_at"]
    )


def provider_refresh(*, provider: Provider) -> RefreshReport:
    """List the provider's tools and create, update or mark unavailable their specs.

    On failure to reach the server, records the error on the provider, changes nothing
    else and raises `ProviderRefreshError`. A tool whose spec cannot be written (its name
    clashes with another spec's) is reported in `failed`; the others are still written.
    """
    if not provider.enabled:
        message = f"Provider {provider.name!r} is disabled: enable it to refresh its tools."
        raise ProviderRefreshError(message)
    if provider.declared_by:
        raise ProviderRefreshError(
            f"Provider {provider.name!r} is a server {provider.declared_by} declared in its "
            "workflow: its tools never enter the catalog. To offer them to every builder, "
            "register the server as a provider of your own and refresh that."
        )
    try:
        tools = client.list_tools(provider.connection())
    except client.DownstreamError as exc:
        _mark_failed(provider, str(exc))
        raise ProviderRefreshError(str(exc)) from None
    report = RefreshReport(provider=provider.name)
    with transaction.atomic():
        existing = {spec.provider_tool: spec for spec in provider.specs.all()}
        offered: set[str] = set()
        for tool in tools:
            if tool.name not in offered:
                offered.add(tool.name)
                _write_tool_spec(provider, tool, existing.get(tool.name), report)
        for tool_name, spec in existing.items():
            if tool_name in offered:
                continue
            if spec.available:
                spec.available = False
                spec_save(spec=spec, comment="The provider no longer offers this tool")
            report.unavailable.append(spec.display_name)
        provider.last_refreshed_at = provider.tools_refresh_at = timezone.now()
        provider.tools_refresh_state = Provider.RefreshState.REFRESHED
        provider.last_error = "; ".join(f"{n}: {m}" for n, m in report.failed.items())
        provider.save(
            update_fields=[
                "last_refreshed_at",
                "last_error",
                "tools_refresh_state",
                "tools_refresh_at",
                "updated_at",
            ]
        )
    return report


def _write_tool_spec(
    provider: Provider, tool: Any, spec: NodeSpec | None, report: RefreshReport
) -> None:
    try:
        document = tool_document(provider=provider.name, provider_title=provider.title, tool=tool)
    except SpecFormatError as exc:
        report.failed[tool.name] = f"cannot be described as a node spec: {exc}"
        return
    name = document["display_name"]
    if spec is not None and spec.available and spec.document() == document:
        report.unchanged.append(name)
        return
    clashes = NodeSpec.objects.filter(node_type=document["node_type"], subtype=document["subtype"])
    if spec is not None:
        clashes = clashes.exclude(pk=spec.pk)
    clash = clashes.first()
    if clash is not None:
        report.failed[name] = (
            f"its subtype {document['subtype']} is already taken by {clash}; "
            "rename this provider to tell them apart"
        )
        return
    created = spec is None
    if spec is None:
        spec = NodeSpec(source=NodeSpec.Source.PROVIDER, provider=provider, provider_tool=tool.name)
    spec.set_document(document)
    spec.available = True
    comment = "Created from the provider's tool" if created else "Updated from the provider's tool"
    try:
        spec_save(spec=spec, comment=comment)
    except ValidationError as exc:
        report.failed[name] = "; ".join(exc.messages)
        return
    (report.created if created else report.updated).append(name)
