"""Graph files in the YAML format of mcpGraph: import them as workflows, export them back.

A file holds `server` metadata (a `WorkflowGroup`), `executionLimits`, `mcpServers` (each
becomes a registered provider, or reuses an identical one) and `tools` (each a `Workflow`).
Exporting a group writes a file that imports back to the same workflows.

An import names its caller: only one who may start processes (a superuser, an operator's command)
may bring in a stdio server that is not already a registered provider
(`graphs.authoring.services.workflow_providers`); an API caller changes only the groups it owns
(graphs/authoring/rights.py), owns the groups it creates, and uses only the providers open to it
(nodespecs/providers/builder_access.py). The workflows it writes are recorded in the audit trail
under the caller's name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from graphs.authoring.rights import group_change_refusal, group_take_ownership
from graphs.authoring.services import (
    group_save,
    workflow_providers,
    workflow_save,
    workflow_save_draft,
    workflow_tool_mapping,
    workflows_retire,
)
from graphs.engine import (
    GraphDefinition,
    ServerConfig,
    ToolGraph,
    dump_yaml,
    parse_definition,
    server_to_dict,
    tool_to_dict,
)
from graphs.engine.format.sections import LIMIT_KEYS
from graphs.models import Workflow, WorkflowGroup, WorkflowVersion
from nodespecs.audit import audit_report
from nodespecs.callers import Caller
from nodespecs.downstream.client import Connection
from nodespecs.downstream.connection import SSE_READ_TIMEOUT_DEFAULT
from nodespecs.models import Provider
from nodespecs.providers.builder_access import provider_refusal
from nodespecs.reports import ChangeReport
from nodespecs.secrets import CREDENTIAL_MASK, mask_command_args, mask_credentials


class GraphFileError(ValueError):
    """A graph file could not be imported or exported; the message says why and how to fix it."""


#: Why a workflow of the file's group is retired, or kept, by its import.
NOT_IN_FILE = "not in the file"


@dataclass
class GraphImportReport(ChangeReport):
    """The workflows of one file by outcome, and the provider each server name became;
    `retired` (or with `keep`, `kept`): the workflows its group served that the file no
    longer defines."""

    group: str = ""
    retired: dict[str, str] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
    # Server name → provider name.
    providers: dict[str, str] = field(default_factory=dict, metadata={"outcome": False})
    # Tool name → the number of the draft version saved for it (an import without publishing).
    drafts: dict[str, int] = field(default_factory=dict, metadata={"outcome": False})

    def summary(self) -> str:
        return f"{self.group}: {ChangeReport.summary(self)}"


def server_connection(server: ServerConfig, base_dir: Path | None) -> Connection:
    # Relative paths in a file (`./tests/counting`, a relative `cwd`) mean "beside the
    # file", as they do when mcpGraph runs the file from its own folder.
    cwd = ""
    if server.transport == "stdio" and (base_dir is not None or server.cwd):
        cwd = str(((base_dir or Path.cwd()) / server.cwd).resolve())
    return Connection(
        name=server.name,
        transport=server.transport,
        command=server.command,
        args=tuple(server.args),
        env=tuple(sorted(dict(server.env).items())),
        cwd=cwd,
        url=server.url,
        headers=tuple(sorted(dict(server.headers).items())),
        timeout_seconds=server.timeout_seconds or 30.0,
        sse_read_timeout=server.sse_read_timeout or SSE_READ_TIMEOUT_DEFAULT,
    )


@transaction.atomic
def graph_import(
    *,
    text: str | Mapping[str, Any],
    caller: Caller,
    base_dir: Path | None = None,
    publish: bool = True,
    keep: bool = False,
    comment: str = "Imported from YAML",
) -> GraphImportReport:
    """Create or update the workflows of a graph file (YAML text, or a document already
    read) for `caller`; all or nothing. Each changed workflow is published at once, or with
    `publish` False saved as a draft version that is not served (`report.drafts`).

    A published import makes the group serve what the file defines: the group's served
    workflows the file no longer defines are retired (unpublished, keeping their versions
    and runs: `report.retired`), unless `keep` (`report.kept`). Retiring is a change of the
    group, which only its owners may make (the check that lets the import in).

    An `mcpServers` entry equal to a registered provider's as `graph_document` shows it
    (secrets masked) names that provider. Raises `GraphFileError` listing every problem when
    the file is invalid, or names a stdio server the caller may not add.
    """
    try:
        definition = parse_definition(text)
    except ValueError as exc:
        raise GraphFileError(str(exc)) from None
    meta = definition.server
    group = WorkflowGroup.objects.filter(name=meta.name).first() or WorkflowGroup(name=meta.name)
    is_new_group = group.pk is None
    if not is_new_group:
        _refuse(group_change_refusal(group, caller, "create, change or retire workflows"))
    if publish or is_new_group:  # a draft leaves the served group's metadata alone
        group.version, group.title = meta.version, meta.title
        group.instructions = meta.instructions
        group_save(group)
    if is_new_group:
        group_take_ownership(group, caller)
    report = GraphImportReport(group=group.name)
    registered = {
        name: provider
        for name, server in definition.mcp_servers.items()
        if (provider := registered_as(server)) is not None
    }
    registered |= _sent_back_masked(definition, registered)
    for name, provider in registered.items():
        _refuse(provider_refusal(provider, caller, name))
    connections = {
        name: server_connection(server, base_dir)
        for name, server in definition.mcp_servers.items()
        if name not in registered
    }
    try:
        providers = {**workflow_providers(servers=connections, caller=caller), **registered}
    except ValidationError as exc:
        raise GraphFileError("\n".join(exc.messages)) from None
    servers = {name: provider.pk for name, provider in providers.items()}
    report.providers = {name: provider.name for name, provider in providers.items()}
    limits = {key: getattr(definition.limits, attr) for key, attr in LIMIT_KEYS.items()}
    for tool in definition.tools:
        workflow = Workflow.objects.select_related("group").filter(name=tool.name).first()
        created = workflow is None
        if workflow is not None and workflow.group_id != group.pk:
            _refuse(group_change_refusal(workflow.group, caller, "move workflows"))
        if workflow is None:
            workflow = Workflow(name=tool.name, group=group)
        elif publish:
            workflow.group = group
        workflow.description = tool.description
        workflow.input_schema = tool.input_schema
        workflow.output_schema = tool.output_schema
        workflow.nodes = tool_to_dict(tool)["nodes"]
        workflow.limits = limits
        workflow.servers = {name: pk for name, pk in servers.items() if _uses(tool, name)}
        try:
            if publish:
                version = workflow_save(workflow=workflow, author=caller.user, comment=comment)
            else:
                version = workflow_save_draft(workflow=workflow, caller=caller, comment=comment)
                report.drafts[tool.name] = version.number
        except ValidationError as exc:
            raise GraphFileError(f"tool {tool.name!r}: " + "; ".join(exc.messages)) from None
        if created:
            report.created.append(tool.name)
        elif version is None:
            report.unchanged.append(tool.name)
        else:
            report.updated.append(tool.name)
    if publish and not is_new_group:
        _retire_absent(group, definition, caller, report, keep=keep)
    changed = Workflow.objects.filter(name__in=report.created + report.updated)
    audit_report(actor=caller.trail_name, report=report, objects=changed)
    return report


def _retire_absent(
    group: WorkflowGroup,
    definition: GraphDefinition,
    caller: Caller,
    report: GraphImportReport,
    *,
    keep: bool,
) -> None:
    """Retire the workflows `group` serves that `definition` does not define (or with
    `keep`, only name them in the report)."""
    absent = list(
        Workflow.objects.filter(group=group, current_version__isnull=False)
        .exclude(name__in=[tool.name for tool in definition.tools])
        .order_by("name")
    )
    if keep:
        report.kept = dict.fromkeys((workflow.name for workflow in absent), NOT_IN_FILE)
        return
    workflows_retire(workflows=absent, caller=caller)
    report.retired = dict.fromkeys((workflow.name for workflow in absent), NOT_IN_FILE)


def _refuse(refusal: str | None) -> None:
    """Stop the import with `refusal`, when there is one."""
    if refusal is not None:
        raise GraphFileError(refusal)


def _holds_mask(server: ServerConfig) -> bool:
    """Whether an entry holds a value `graph_document` masked (an agent sent it back)."""
    values = [server.url, *server.args, *dict(server.env).values(), *dict(server.headers).values()]
    return any(SECRET_MASK in value for value in values)


def _sent_back_masked(
    definition: GraphDefinition, registered: Mapping[str, Provider]
) -> dict[str, Provider]:
    """The provider of each entry holding a masked value that does not name a provider by
    its own name: the one a version of the same workflow bound under that server name, when
    the entry is that provider's as shown (`graph_document` names servers by the workflow's
    names, which need not be the providers'). `GraphFileError` for any other such entry: a
    masked value is never stored as a server's setting."""
    masked = {
        name: server
        for name, server in definition.mcp_servers.items()
        if name not in registered and _holds_mask(server)
    }
    if not masked:
        return {}
    bound: dict[str, set[int]] = {name: set() for name in masked}
    tools = [tool.name for tool in definition.tools]
    recent = WorkflowVersion.objects.filter(workflow__name__in=tools).order_by("-pk")
    for servers in recent.values_list("servers", flat=True)[:_VERSIONS_SEARCHED]:
        for name, ids in bound.items():
            if isinstance(servers, dict) and isinstance(servers.get(name), int):
                ids.add(servers[name])
    candidates = Provider.objects.in_bulk({pk for ids in bound.values() for pk in ids})
    found: dict[str, Provider] = {}
    for name, server in masked.items():
        used = [candidates[pk] for pk in sorted(bound[name]) if pk in candidates]
        provider = next((p for p in used if _server_config(name, p, masked=True) == server), None)
        if provider is None:
            raise GraphFileError(
                f"server {name!r}: its settings hold {SECRET_MASK}, a value get_workflow "
                "masked, but they are not the masked settings of the server this workflow "
                "used under that name. Send the entry exactly as get_workflow showed it (it "
                "then keeps its server), or write the real values."
            )
        found[name] = provider
    return found


def registered_as(server: ServerConfig) -> Provider | None:
    """The registered provider named as `server` is, when `server` is its entry as
    `graph_document` shows it (secrets masked): an agent sends back what it was shown."""
    provider = Provider.objects.filter(name=server.name).first()
    if provider is None or _server_config(server.name, provider, masked=True) != server:
        return None
    return provider


def _uses(tool: ToolGraph, server: str) -> bool:
    return any(node.server == server for node in tool.nodes)


def graph_export(*, name: str) -> str:
    """The YAML of a workflow group, or of a single workflow, that imports back unchanged."""
    group = WorkflowGroup.objects.filter(name=name).first()
    if group is not None:
        workflows = list(group.workflows.order_by("name"))
    else:
        workflows = list(Workflow.objects.filter(name=name).select_related("group"))
        if not workflows:
            groups = ", ".join(WorkflowGroup.objects.values_list("name", flat=True)) or "none"
            raise GraphFileError(
                f"No workflow or group named {name!r}. Groups: {groups}; "
                "`python manage.py export_graph --list` lists the workflows."
            )
        group = workflows[0].group
    limits = {json.dumps(w.limits, sort_keys=True) for w in workflows}
    if len(limits) > 1:
        raise GraphFileError(
            f"The workflows of {group.name!r} have different execution limits, which one file "
            "cannot hold: export them one by one."
        )
    servers = {name: pk for w in workflows for name, pk in w.servers.items()}
    tools = [workflow_tool_mapping(workflow) for workflow in workflows]
    document = graph_document(group, tools, workflows[0].limits, servers, masked=False)
    # A comment, so the file imports back as it was: where the group's MCP server is.
    served = f"# The MCP server of this file is served at /mcp/{group.slug}\n"
    return served + dump_yaml(document)  # multi-line expressions as block scalars


def graph_document(
    group: WorkflowGroup,
    tools: list[dict[str, Any]],
    limits: dict[str, Any],
    servers: dict[str, int],
    *,
    masked: bool,
) -> dict[str, Any]:
    """A graph file's document: `group`'s server block, the limits, an `mcpServers` entry
    for each server name bound to a provider (`servers`: name → provider id) and the tool
    mappings. `masked` writes each env and header value as SECRET_MASK, and the credentials
    in the URL and the stdio args (user info, secret-like query values and flags), for
    callers who must not read them (an entry so masked still names its provider on
    import)."""
    providers = Provider.objects.in_bulk(set(servers.values()))
    entries = {
        name: server_to_dict(_server_config(name, providers[pk], masked=masked))
        for name, pk in servers.items()
    }
    return {
        "version": "1.0",
        "server": {
            "name": group.name,
            "version": group.version,
            "title": group.title or group.name,
            **({"instructions": group.instructions} if group.instructions else {}),
        },
        "executionLimits": limits,
        "mcpServers": entries,
        "tools": tools,
    }


# What an env or header value, or a credential in a URL or args, reads as where its secret
# must not be shown.
SECRET_MASK = CREDENTIAL_MASK
# How many of a workflow's newest versions are searched for the server a masked entry sent
# back was shown for.
_VERSIONS_SEARCHED = 100


def provider_entry(provider: Provider) -> dict[str, Any]:
    """A registered provider's `mcpServers` entry under its own name, secrets masked: what a
    definition that names the provider without declaring it is read with."""
    return server_to_dict(_server_config(provider.name, provider, masked=True))


def _server_config(name: str, provider: Provider, *, masked: bool = False) -> ServerConfig:
    def shown(values: dict[str, str]) -> dict[str, str]:
        return {key: SECRET_MASK for key in values} if masked else dict(values)

    return ServerConfig(
        name=name,
        transport=provider.transport,
        command=provider.command,
        args=mask_command_args(provider.args) if masked else tuple(provider.args),
        env=shown(provider.env),
        cwd=provider.cwd,
        url=mask_credentials(provider.url) if masked else provider.url,
        headers=shown(provider.headers),
        timeout_seconds=provider.timeout_seconds,
        # HTTP and SSE only, and only when not the default: a file without it reads back so.
        sse_read_timeout=(
            None
            if provider.transport == Provider.Transport.STDIO
            or provider.sse_read_timeout == SSE_READ_TIMEOUT_DEFAULT
            else provider.sse_read_timeout
        ),
    )
