"""Graph files in the YAML format of mcpGraph: import them as workflows, export them back.

A file holds `server` metadata (a `WorkflowGroup`), `executionLimits`, `mcpServers` (each
becomes a registered provider, or reuses an identical one) and `tools` (each a `Workflow`).
Exporting a group writes a file that imports back to the same workflows.

An import names its caller: only one who may start processes (a superuser, an operator's
command) may bring in a stdio server that is not already a registered provider
(`graphs.services.workflow_providers`), and the workflows it writes are recorded in the
audit trail under the caller's name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from graphs.engine import (
    ServerConfig,
    ToolGraph,
    dump_yaml,
    parse_definition,
    server_to_dict,
    tool_to_dict,
)
from graphs.models import Workflow, WorkflowGroup
from graphs.services import (
    LIMIT_KEYS,
    group_save,
    workflow_providers,
    workflow_save,
    workflow_tool_mapping,
)
from nodespecs.audit import Caller, audit_report
from nodespecs.mcp_client import Connection
from nodespecs.models import Provider
from nodespecs.reports import ChangeReport


class GraphFileError(ValueError):
    """A graph file could not be imported or exported; the message says why and how to fix it."""


@dataclass
class GraphImportReport(ChangeReport):
    """The workflows of one file by outcome, and the provider each server name became."""

    group: str = ""
    # Server name → provider name.
    providers: dict[str, str] = field(default_factory=dict, metadata={"outcome": False})

    def summary(self) -> str:
        return f"{self.group}: {ChangeReport.summary(self)}"


def _connection(server: ServerConfig, base_dir: Path | None) -> Connection:
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
    )


@transaction.atomic
def graph_import(*, text: str, caller: Caller, base_dir: Path | None = None) -> GraphImportReport:
    """Create or update the workflows of a graph file for `caller`; all or nothing.

    Raises `GraphFileError` listing every problem when the file is invalid, or names a
    stdio server the caller may not add.
    """
    try:
        definition = parse_definition(text)
    except ValueError as exc:
        raise GraphFileError(str(exc)) from None
    meta = definition.server
    group = WorkflowGroup.objects.filter(name=meta.name).first() or WorkflowGroup(name=meta.name)
    group.version, group.title, group.instructions = meta.version, meta.title, meta.instructions
    group_save(group)
    report = GraphImportReport(group=group.name)
    connections = {
        name: _connection(server, base_dir) for name, server in definition.mcp_servers.items()
    }
    try:
        providers = workflow_providers(servers=connections, caller=caller)
    except ValidationError as exc:
        raise GraphFileError("\n".join(exc.messages)) from None
    servers = {name: provider.pk for name, provider in providers.items()}
    report.providers = {name: provider.name for name, provider in providers.items()}
    limits = {key: getattr(definition.limits, attr) for key, attr in LIMIT_KEYS.items()}
    for tool in definition.tools:
        workflow = Workflow.objects.filter(name=tool.name).first()
        created = workflow is None
        if workflow is None:
            workflow = Workflow(name=tool.name)
        workflow.group = group
        workflow.description = tool.description
        workflow.input_schema = tool.input_schema
        workflow.output_schema = tool.output_schema
        workflow.nodes = tool_to_dict(tool)["nodes"]
        workflow.limits = limits
        workflow.servers = {name: pk for name, pk in servers.items() if _uses(tool, name)}
        try:
            version = workflow_save(
                workflow=workflow, author=caller.user, comment="Imported from YAML"
            )
        except ValidationError as exc:
            raise GraphFileError(f"tool {tool.name!r}: " + "; ".join(exc.messages)) from None
        if created:
            report.created.append(tool.name)
        elif version is None:
            report.unchanged.append(tool.name)
        else:
            report.updated.append(tool.name)
    changed = Workflow.objects.filter(name__in=report.created + report.updated)
    audit_report(actor=caller.actor, report=report, objects=changed)
    return report


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
    provider_ids = {pk for w in workflows for pk in w.servers.values()}
    providers = Provider.objects.in_bulk(provider_ids)
    servers: dict[str, Any] = {}
    for workflow in workflows:
        for server_name, pk in workflow.servers.items():
            servers[server_name] = server_to_dict(_server_config(server_name, providers[pk]))
    document: dict[str, Any] = {
        "version": "1.0",
        "server": {
            "name": group.name,
            "version": group.version,
            "title": group.title or group.name,
            **({"instructions": group.instructions} if group.instructions else {}),
        },
        "executionLimits": workflows[0].limits,
        "mcpServers": servers,
        "tools": [workflow_tool_mapping(workflow) for workflow in workflows],
    }
    # A comment, so the file imports back as it was: where the group's MCP server is.
    served = f"# The MCP server of this file is served at /mcp/{group.slug}\n"
    return served + dump_yaml(document)  # multi-line expressions as block scalars


def _server_config(name: str, provider: Provider) -> ServerConfig:
    return ServerConfig(
        name=name,
        transport=provider.transport,
        command=provider.command,
        args=tuple(provider.args),
        env=dict(provider.env),
        cwd=provider.cwd,
        url=provider.url,
        headers=dict(provider.headers),
        timeout_seconds=provider.timeout_seconds,
    )
