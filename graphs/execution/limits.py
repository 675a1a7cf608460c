"""The server's ceilings on a workflow's `executionLimits`, which no author can exceed.

An author sets `maxNodeExecutions` and `maxExecutionTimeMs` per workflow; the operator sets
the highest values any workflow may ask for (`GRAPHS_MAX_NODE_EXECUTIONS_CEILING`,
`GRAPHS_MAX_EXECUTION_TIME_MS_CEILING`). Every save, from the admin or an imported file, goes
through `graphs.authoring.services.workflow_check`, which refuses limits above them
(`limits_above_ceilings`). A workflow stored before a ceiling was lowered is not refused at
run time but capped (`limits_for_run`): it still runs, and no run goes past the ceiling in
force, which is what bounds a run's history rows and memory. The engine never reads settings:
it is given the capped limits as plain values.

An approval node's `timeoutMs` has its ceiling too (`GRAPHS_MAX_APPROVAL_TIMEOUT_MS`), refused
on save and import (`approval_timeouts_above_ceiling`) and in validation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from graphs.engine import ExecutionLimits, GraphRunError, ToolGraph
from graphs.engine.checks.all_checks import limit_above_ceiling_message
from graphs.engine.checks.approval_nodes import timeout_above_ceiling
from graphs.engine.checks.structure import default_layouts
from graphs.engine.format.sections import LIMIT_KEYS


@dataclass(frozen=True)
class Ceiling:
    """One limit: its key in `executionLimits`, its `ExecutionLimits` field, its setting."""

    key: str
    field: str
    setting: str


CEILINGS = (
    Ceiling("maxNodeExecutions", "max_node_executions", "GRAPHS_MAX_NODE_EXECUTIONS_CEILING"),
    Ceiling("maxExecutionTimeMs", "max_execution_time_ms", "GRAPHS_MAX_EXECUTION_TIME_MS_CEILING"),
)


#: The setting bounding how long an approval node may wait (its `timeoutMs`).
APPROVAL_TIMEOUT_SETTING = "GRAPHS_MAX_APPROVAL_TIMEOUT_MS"


def approval_timeout_ceiling() -> int:
    """The longest `timeoutMs` an approval node may have, in milliseconds, as the settings
    say now."""
    return int(getattr(settings, APPROVAL_TIMEOUT_SETTING))


def approval_timeouts_above_ceiling(tool: ToolGraph) -> list[str]:
    """What is wrong with the approval nodes of `tool` that would wait longer than the
    ceiling: each message names the node, its timeoutMs, the ceiling and its setting."""
    highest = approval_timeout_ceiling()
    keys = default_layouts(tool)
    return [
        found.text
        for node, layout in zip(tool.nodes, keys, strict=True)
        if (
            found := timeout_above_ceiling(
                tool.name, node, layout.keys, highest, APPROVAL_TIMEOUT_SETTING
            )
        )
        is not None
    ]


def limit_ceilings() -> ExecutionLimits:
    """The highest limits a workflow may have, as the settings say now."""
    return ExecutionLimits(**{c.field: getattr(settings, c.setting) for c in CEILINGS})


def limits_above_ceilings(limits: ExecutionLimits) -> list[str]:
    """What is wrong with `limits` that exceed a ceiling: each message names the field, its
    value, the ceiling and its setting. Empty when all are within."""
    ceilings = limit_ceilings()
    problems = []
    for ceiling in CEILINGS:
        value, highest = getattr(limits, ceiling.field), getattr(ceilings, ceiling.field)
        if value > highest:
            problems.append(
                limit_above_ceiling_message(ceiling.key, value, highest, ceiling.setting)
            )
    return problems


def limits_for_run(limits: ExecutionLimits) -> ExecutionLimits:
    """The limits a run of a stored workflow gets: its own, capped at the ceilings in force."""
    return limits.capped(limit_ceilings())


def ceiling_explained(
    error: GraphRunError, asked: ExecutionLimits, used: ExecutionLimits
) -> GraphRunError:
    """`error`, saying so when the limit it reached is a ceiling that capped the workflow's
    own: the engine's advice to raise the limit cannot help past the ceiling."""
    ceiling = next((c for c in CEILINGS if c.key == error.limit), None)
    if ceiling is None or getattr(asked, ceiling.field) == getattr(used, ceiling.field):
        return error
    message = (
        f"{error.message} (the workflow sets {ceiling.key} to {getattr(asked, ceiling.field)}, "
        f"but this server caps it at {getattr(used, ceiling.field)}, its {ceiling.setting})"
    )
    return GraphRunError(message, error.node_id, error.kind, limit=error.limit)


def limits_from_mapping(raw: dict[str, Any] | None) -> ExecutionLimits:
    """`executionLimits` as the engine takes them; a bad value says which and how to fix it."""
    raw = raw or {}
    unknown = sorted(set(raw) - set(LIMIT_KEYS))
    if unknown:
        raise ValidationError(
            {"limits": f"Unknown limit {', '.join(unknown)}; use {', '.join(LIMIT_KEYS)}."}
        )
    values = {}
    for key, field in LIMIT_KEYS.items():
        if key not in raw:
            continue
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValidationError(
                {"limits": f"{key} must be a whole number above 0, not {value!r}."}
            )
        values[field] = value
    return ExecutionLimits(**values)
