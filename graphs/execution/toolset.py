"""The enabled workflows as MCP tools, and each workflow group as an MCP server of its own:
a snapshot read on every `tools/list` and `tools/call`.

Reading the table on every request would put a query on the endpoint's hottest path, so each
process keeps a snapshot (nodespecs/snapshots.py) and rebuilds it when a workflow changes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Max

from graphs.models import Workflow, WorkflowGroup
from nodespecs.snapshots import StampedSnapshot


@dataclass(frozen=True)
class WorkflowTool:
    """What `tools/list` shows of a workflow, and which version a call runs."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    workflow_id: int
    version_id: int
    # Names the version's content: ids alone can come back after a database reset.
    digest: str
    # The slug of its group, whose endpoint (/mcp/<slug>) serves it too.
    group: str
    # Whether it has an approval node that asks its caller (approvers: caller): a call of it
    # may need to ask the client midway.
    asks_caller: bool = False


@dataclass(frozen=True)
class WorkflowServer:
    """A workflow group as an MCP server of its own: what `/mcp/<slug>` answers."""

    slug: str
    name: str
    title: str
    version: str
    instructions: str
    # Its enabled workflows by tool name, in name order.
    tools: dict[str, WorkflowTool]
    # Changes whenever the tool list its clients see does (`notifications/tools/list_changed`).
    fingerprint: str


@dataclass(frozen=True)
class Toolset:
    """Every enabled workflow, and every group's server."""

    tools: dict[str, WorkflowTool]
    servers: dict[str, WorkflowServer]
    fingerprint: str


def list_fingerprint(tools: dict[str, WorkflowTool]) -> str:
    """A digest of what `tools/list` shows of these workflows (not which version runs)."""
    shown = [
        [tool.name, tool.description, tool.input_schema, tool.output_schema]
        for tool in tools.values()
    ]
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()


def _table_stamp() -> str:
    stamps = [
        model.objects.aggregate(count=Count("id"), changed=Max("updated_at"))
        for model in (Workflow, WorkflowGroup)
    ]
    return ";".join(f"{stamp['count']}:{stamp['changed']}" for stamp in stamps)


def _asks_caller(definition: Any) -> bool:
    nodes = definition.get("nodes") if isinstance(definition, dict) else None
    return any(
        isinstance(node, dict)
        and node.get("type") == "approval"
        and node.get("approvers") == "caller"
        for node in nodes or ()
    )


def _build() -> Toolset:
    rows = Workflow.objects.filter(enabled=True, current_version__isnull=False).values_list(
        "name",
        "description",
        "input_schema",
        "output_schema",
        "id",
        "current_version_id",
        "current_version__digest",
        "group__slug",
        "current_version__definition",
    )
    tools = {
        row[0]: WorkflowTool(*row[:-1], asks_caller=_asks_caller(row[-1]))
        for row in sorted(rows, key=lambda row: row[0])
    }
    by_group: dict[str, dict[str, WorkflowTool]] = {}
    for name, tool in tools.items():
        by_group.setdefault(tool.group, {})[name] = tool
    servers = {}
    for group in WorkflowGroup.objects.order_by("slug"):
        served = by_group.get(group.slug, {})
        servers[group.slug] = WorkflowServer(
            slug=group.slug,
            name=group.name,
            title=group.title or group.name,
            version=group.version,
            instructions=group.instructions,
            tools=served,
            fingerprint=list_fingerprint(served),
        )
    return Toolset(tools=tools, servers=servers, fingerprint=list_fingerprint(tools))


# The cache key whose value changes with every announced change of the workflows.
GENERATION_KEY = "graphs:workflows-generation"
_snapshot = StampedSnapshot(GENERATION_KEY, _table_stamp, _build)


def workflows_changed() -> None:
    """Tell every process that the workflows changed, once the change is committed."""
    _snapshot.changed()


def needs_database() -> bool:
    """Whether the next `workflow_tools()` may query the database."""
    return _snapshot.needs_database()


def workflow_tools(group: str | None = None) -> dict[str, WorkflowTool]:
    """The enabled workflows by tool name, in name order, as they are now: all of them, or
    those of the group whose slug is `group` (none for an unknown slug)."""
    toolset = _snapshot.get()
    if group is None:
        return toolset.tools
    found = toolset.servers.get(group)
    return found.tools if found is not None else {}


def workflow_server(slug: str) -> WorkflowServer | None:
    """The group served at `/mcp/<slug>`, or None when there is none."""
    return _snapshot.get().servers.get(slug)


def workflow_servers() -> dict[str, WorkflowServer]:
    """Every group's server, by slug."""
    return _snapshot.get().servers


def tool_list_fingerprint(group: str | None = None) -> str | None:
    """What `workflow_tools(group)` shows, as a digest that changes when it does (None for an
    unknown slug). May query: call it from a thread that may."""
    toolset = _snapshot.refresh()
    if group is None:
        return toolset.fingerprint
    found = toolset.servers.get(group)
    return found.fingerprint if found is not None else None


def refresh_workflow_tools() -> dict[str, WorkflowTool]:
    """`workflow_tools()`, checking the table as soon as `needs_database()` asks for it
    (for threads that may query)."""
    return _snapshot.refresh().tools


def workflow_tools_token() -> str:
    """A token that changes whenever `workflow_tools()` does (for caches of its answers)."""
    return _snapshot.token()
