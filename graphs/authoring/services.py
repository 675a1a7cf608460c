"""Writes to workflows: every change goes through `workflow_save`, so each one is validated by
the engine and frozen into a new `WorkflowVersion`, whether it comes from the admin or from an
imported graph file (graphs/authoring/files.py)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from django.apps import apps
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from graphs.authoring.slugs import slug_base, slug_for
from graphs.authoring.version_storage import charge_storage, prune_drafts
from graphs.engine import DefinitionError, ToolGraph, parse_tool, tool_to_dict
from graphs.execution import toolset
from graphs.execution.limits import (
    approval_timeouts_above_ceiling,
    limits_above_ceilings,
    limits_from_mapping,
)
from graphs.models import Workflow, WorkflowGroup, WorkflowVersion
from nodespecs.audit import Action, audit_record, audit_records
from nodespecs.callers import Caller
from nodespecs.downstream.client import Connection
from nodespecs.downstream.process_rights import command_refusal, stdio_refusal
from nodespecs.models import Provider
from nodespecs.providers.lifecycle import provider_find, provider_get_or_create


def reserved_tool_names() -> frozenset[str]:
    """The tool names the apps above serve themselves (the MCP endpoint's own tools), which no
    workflow may take. Each installed app that serves tools says which, as its AppConfig's
    `reserved_tool_names()`: graphs asks, and imports none of them."""
    names: set[str] = set()
    for config in apps.get_app_configs():
        reserved = getattr(config, "reserved_tool_names", None)
        if callable(reserved):
            names.update(reserved())
    return frozenset(names)


def workflow_tool_mapping(workflow: Workflow) -> dict[str, Any]:
    """The workflow as a tool mapping of the graph YAML format (what the engine parses)."""
    mapping: dict[str, Any] = {
        "name": workflow.name,
        "description": workflow.description,
        "inputSchema": workflow.input_schema,
    }
    if workflow.output_schema is not None:
        mapping["outputSchema"] = workflow.output_schema
    mapping["nodes"] = workflow.nodes
    return mapping


def workflow_check(workflow: Workflow) -> ToolGraph:
    """Check a workflow as the engine will run it; `ValidationError` keyed by model field."""
    if workflow.name in reserved_tool_names():
        raise ValidationError(
            {"name": f"{workflow.name!r} is a built-in tool of this server; choose another name."}
        )
    above = limits_above_ceilings(limits_from_mapping(workflow.limits))
    if above:
        raise ValidationError({"limits": above})
    if not isinstance(workflow.servers, dict):
        raise ValidationError({"servers": "Map each server name the nodes use to a provider id."})
    if workflow.servers:
        bound = set(workflow.servers.values())
        known = set(Provider.objects.filter(pk__in=bound).values_list("pk", flat=True))
        missing = sorted(name for name, pk in workflow.servers.items() if pk not in known)
        if missing:
            raise ValidationError(
                {"servers": f"No provider for server {', '.join(missing)}: register it first."}
            )
    try:
        tool = parse_tool(workflow_tool_mapping(workflow), server_names=workflow.servers.keys())
    except DefinitionError as exc:
        raise ValidationError({"nodes": exc.problems}) from None
    waits_too_long = approval_timeouts_above_ceiling(tool)
    if waits_too_long:
        raise ValidationError({"nodes": waits_too_long})
    return tool


@transaction.atomic
def workflow_save(
    *, workflow: Workflow, author: AbstractBaseUser | None = None, comment: str = ""
) -> WorkflowVersion | None:
    """Validate and save a workflow, and publish it: freeze a new version, served at once,
    when its graph changed (the admin's Save, and imported files).

    Returns the new version, or None when only non-graph fields (such as `enabled`) changed.
    Raises `ValidationError` keyed by field when the workflow is invalid.
    """
    definition, digest, _ = _checked(workflow)
    workflow.save()
    toolset.workflows_changed()
    current = workflow.current_version
    if current is not None and current.digest == digest:
        return None
    version = _freeze(
        workflow,
        definition,
        digest,
        published_at=timezone.now(),
        authored=WorkflowVersion.authored(author, comment),
    )
    workflow.current_version = version
    workflow.save(update_fields=["current_version"])
    prune_drafts(workflow, keep=version)
    return version


@transaction.atomic
def workflow_save_draft(
    *, workflow: Workflow, caller: Caller, comment: str = ""
) -> WorkflowVersion:
    """Validate a workflow as edited and freeze it as a draft version, which is not served.

    The workflow's own row (what it serves) changes only when it is new: it is then created with no
    published version, so it serves nothing until one is published. Saving the same graph as the
    latest draft again returns that draft. Raises `ValidationError` as `workflow_save` does, and
    when the version would take an API caller past its bytes of a day
    (graphs/authoring/version_storage.py); the workflow's oldest drafts past the cap on versions are
    pruned."""
    definition, digest, size = _checked(workflow)
    if workflow.pk is None:
        workflow.save()
    latest = workflow.versions.order_by("-number").first()
    if latest is not None and latest.digest == digest and latest.published_at is None:
        return latest
    charge_storage(caller, size)
    authored = WorkflowVersion.authored(caller.user, comment, actor=caller.trail_name)
    version = _freeze(workflow, definition, digest, published_at=None, authored=authored)
    prune_drafts(workflow, keep=version)
    return version


def _checked(workflow: Workflow) -> tuple[dict[str, Any], str, int]:
    """A workflow's graph as a version keeps it, and the digest and size in bytes of what a
    version stores (graph, limits, servers as canonical JSON); `ValidationError` when the
    engine would refuse it."""
    definition = tool_to_dict(workflow_check(workflow))
    parts = (definition, workflow.limits, workflow.servers)
    stored = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return definition, hashlib.sha256(stored).hexdigest(), len(stored)


def _freeze(
    workflow: Workflow,
    definition: dict[str, Any],
    digest: str,
    *,
    published_at: datetime | None,
    authored: dict[str, Any],
) -> WorkflowVersion:
    """A new version of `workflow` holding its graph, limits and servers as they are."""
    return WorkflowVersion.objects.create(
        workflow=workflow,
        number=WorkflowVersion.next_number(workflow.versions),
        definition=definition,
        limits=workflow.limits,
        servers=workflow.servers,
        digest=digest,
        published_at=published_at,
        **authored,
    )


@transaction.atomic
def workflow_publish(*, version: WorkflowVersion, caller: Caller) -> Workflow:
    """Serve `version` of its workflow from now on (a draft, or an earlier published version
    to roll back to), after checking it again as the engine will run it: its providers must
    still be registered and its limits within today's ceilings; recorded in the audit trail
    for `caller`. Raises `ValidationError`."""
    workflow = Workflow.objects.select_for_update().get(pk=version.workflow_id)
    definition = version.definition
    workflow.description = definition.get("description", "")
    workflow.input_schema = definition.get("inputSchema", {})
    workflow.output_schema = definition.get("outputSchema")
    workflow.nodes = definition.get("nodes", [])
    workflow.limits = version.limits
    workflow.servers = version.servers
    workflow_check(workflow)
    workflow.current_version = version
    workflow.save()
    if version.published_at is None:
        version.published_at = timezone.now()
        version.save(update_fields=["published_at"])
    audit_record(
        actor=caller.trail_name, action=Action.CHANGED, target=workflow, fields=["current_version"]
    )
    toolset.workflows_changed()
    return workflow


def group_save(group: WorkflowGroup) -> WorkflowGroup:
    """Save a workflow group (its `server` metadata); a new one gets its endpoint's slug.

    Every MCP client of the group sees the change: its name, title, version and instructions
    are what its endpoint answers `initialize` with."""
    if group.slug:  # kept through renames, so the endpoint does not move under its clients
        group.save()
    else:
        _save_with_new_slug(group)
    toolset.workflows_changed()
    return group


# How many slugs a new group tries before giving up. Each further try follows a concurrent
# save that took the chosen slug between the read of the taken slugs and the insert.
SLUG_ATTEMPTS = 5


def _taken_slugs(group: WorkflowGroup) -> set[str]:
    """The other groups' slugs that one chosen from `group`'s name could clash with, in one
    query: those starting with its base. (A query per candidate suffix cost 1+2+...+n queries
    for n groups whose names reduce to the same base, and agents can create groups.)"""
    others = WorkflowGroup.objects.exclude(pk=group.pk) if group.pk else WorkflowGroup.objects
    return set(others.filter(slug__startswith=slug_base(group.name)).values_list("slug", flat=True))


def _save_with_new_slug(group: WorkflowGroup) -> None:
    """Save `group` with the first free slug for its name. Another save may take that slug
    between the read and the insert: the insert then fails on the unique slug, and the slug
    is chosen again from the taken slugs read anew. The insert runs in a savepoint, which
    PostgreSQL needs to go on after the failure inside an enclosing transaction (an import).
    Raises `IntegrityError` for any other clash (a taken name), or when every attempt lost
    its slug."""
    taken = _taken_slugs(group)
    for _ in range(SLUG_ATTEMPTS):
        group.slug = slug_for(group.name, taken.__contains__)
        try:
            with transaction.atomic():
                group.save()
            return
        except IntegrityError:
            taken = _taken_slugs(group)
            if group.slug not in taken:  # not the slug that clashed
                group.slug = ""
                raise
    group.slug = ""
    raise IntegrityError(
        f"No free slug for the workflow group {group.name!r}: other saves took each of the "
        f"{SLUG_ATTEMPTS} slugs chosen for it. Save it again."
    )


def workflow_set_enabled(*, workflow: Workflow, enabled: bool) -> None:
    """Enable or disable a workflow; `tools/list` changes at once."""
    workflow.enabled = enabled
    workflow.save(update_fields=["enabled", "updated_at"])
    toolset.workflows_changed()


@transaction.atomic
def workflows_retire(*, workflows: list[Workflow], caller: Caller) -> None:
    """Stop serving `workflows` (unpublish them): each keeps its versions, its published one
    now retired, and its runs, and publishing a version serves it again. `tools/list`
    changes at once; each is recorded in the audit trail for `caller`."""
    if not workflows:
        return
    Workflow.objects.filter(pk__in=[workflow.pk for workflow in workflows]).update(
        current_version=None, updated_at=timezone.now()
    )
    audit_records(
        actor=caller.trail_name,
        action=Action.CHANGED,
        targets=workflows,
        fields=["current_version"],
    )
    toolset.workflows_changed()


def workflow_providers(*, servers: dict[str, Connection], caller: Caller) -> dict[str, Provider]:
    """The registered provider for each server a definition's `mcpServers` names, registering
    the missing ones for `caller`: the one way servers enter a workflow from a definition
    (graph files, and any API that accepts one), so the rights are checked whoever calls.

    A stdio server is a process this host starts. Unless a registered provider has exactly
    its settings (command, args, env, working directory), only a caller who may start
    processes (a superuser, an operator's command) may add it; everyone else names a
    registered one or an HTTP/SSE server. With `PROVIDER_ALLOWED_COMMANDS` set, every stdio
    server must run an allowed command, whoever adds it. Raises `ValidationError` keyed
    `servers`, naming each refused server and how to fix it.
    """
    problems = []
    for name, connection in servers.items():
        if connection.transport != Provider.Transport.STDIO:
            continue
        refusal = command_refusal(connection.command, [key for key, _ in connection.env])
        if refusal is not None:
            problems.append(f"server {name!r}: {refusal}")
        elif not caller.may_start_processes and provider_find(connection) is None:
            problems.append(
                stdio_refusal(server=name, command=connection.command)
                + " A registered provider is used when its command, args, env and working "
                "directory are exactly those of the server."
            )
    if problems:
        raise ValidationError({"servers": problems})
    providers = {}
    for name, connection in servers.items():
        try:
            providers[name] = provider_get_or_create(
                name=name, connection=connection, caller=caller
            )
        except ValidationError as exc:
            message = f"server {name!r}: {'; '.join(exc.messages)}"
            raise ValidationError({"servers": message}) from None
    return providers
