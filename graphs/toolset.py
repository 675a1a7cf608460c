"""The enabled workflows as MCP tools: a snapshot read on every `tools/list` and `tools/call`.

Reading the table on every request would put a query on the endpoint's hottest path, so each
process keeps a snapshot (nodespecs/snapshots.py) and rebuilds it when a workflow changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Max

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


def _table_stamp() -> str:
    from graphs.models import Workflow

    stamp = Workflow.objects.aggregate(count=Count("id"), changed=Max("updated_at"))
    return f"{stamp['count']}:{stamp['changed']}"


def _build() -> dict[str, WorkflowTool]:
    from graphs.models import Workflow

    rows = Workflow.objects.filter(enabled=True, current_version__isnull=False).values_list(
        "name",
        "description",
        "input_schema",
        "output_schema",
        "id",
        "current_version_id",
        "current_version__digest",
    )
    return {row[0]: WorkflowTool(*row) for row in sorted(rows)}


# The cache key whose value changes with every announced change of the workflows.
GENERATION_KEY = "graphs:workflows-generation"
_snapshot = StampedSnapshot(GENERATION_KEY, _table_stamp, _build)


def workflows_changed() -> None:
    """Tell every process that the workflows changed, once the change is committed."""
    _snapshot.changed()


def needs_database() -> bool:
    """Whether the next `workflow_tools()` may query the database."""
    return _snapshot.needs_database()


def workflow_tools() -> dict[str, WorkflowTool]:
    """The enabled workflows by tool name, in name order, as they are now."""
    return _snapshot.get()


def refresh_workflow_tools() -> dict[str, WorkflowTool]:
    """`workflow_tools()`, checking the table as soon as `needs_database()` asks for it
    (for threads that may query)."""
    return _snapshot.refresh()


def workflow_tools_token() -> str:
    """A token that changes whenever `workflow_tools()` does (for caches of its answers)."""
    return _snapshot.token()
