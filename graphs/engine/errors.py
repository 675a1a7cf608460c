"""The two kinds of failure the engine reports: a bad definition, and a run that failed."""

from __future__ import annotations

from collections.abc import Iterable

#: What a failed run can be blamed on; callers map these to run statuses and messages.
RUN_ERROR_KINDS = ("limit", "expression", "tool", "cancelled", "definition", "output")


class DefinitionError(ValueError):
    """A graph definition that cannot run, with every problem found (not just the first).

    Each problem names the tool, node and field it is about, so an author can fix them all
    in one pass; ``str(exc)`` lists them one per line.
    """

    def __init__(self, problems: Iterable[str] | str) -> None:
        self.problems: list[str] = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class GraphRunError(Exception):
    """A run that stopped before its exit node: why, where, and what kind of failure it was."""

    def __init__(
        self, message: str, node_id: str | None, kind: str, *, limit: str | None = None
    ) -> None:
        if kind not in RUN_ERROR_KINDS:
            raise ValueError(f"unknown run error kind {kind!r}; use one of {RUN_ERROR_KINDS}")
        super().__init__(message)
        self.message = message
        self.node_id = node_id
        self.kind = kind
        #: With kind "limit": which one, "maxNodeExecutions" or "maxExecutionTimeMs".
        self.limit = limit


class RunCancelled(GraphRunError):
    """A run stopped because its cancel token was cancelled."""

    def __init__(self, message: str, node_id: str | None) -> None:
        super().__init__(message, node_id, "cancelled")


def located(tool: str, node: str | None = None, field: str | None = None) -> str:
    """Where a problem is, as every definition message starts: tool, node, field."""
    parts = [f"tool {tool!r}"]
    if node is not None:
        parts.append(f"node {node!r}")
    if field is not None:
        parts.append(f"field {field!r}")
    return ", ".join(parts)
