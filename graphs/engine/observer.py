"""How a run reports what it does: the only channel out of the engine.

Persistence (history pages), progress notifications and tests plug in here. The engine calls
the observer synchronously, in the run's thread, and gives each call its own ``NodeRecord``,
so an observer may keep records without copying them. An exception raised by an observer
stops the run and reaches the caller unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from graphs.engine.errors import GraphRunError


@dataclass
class NodeRecord:
    """One execution of one node.

    ``detail`` says what the node did: for mcp ``{"server", "tool", "arguments"}`` (the
    evaluated arguments; absent from ``node_started``, and from ``node_failed`` when they could
    not be evaluated), for transform ``{"expr"}``, for switch ``{"target", "matched"}`` where
    matched is the index of the condition that held or ``"default"`` (absent until it is
    decided); for approval ``{"message", "approvers", "form", "timeout_ms"}``; for entry and
    exit None.
    """

    index: int  # 0-based position in the run's execution order
    node_id: str
    node_type: str
    iteration: int  # 1-based: how many times this node has now run, this one included
    input: Any  # the previous node's output (the tool's arguments for the entry node)
    detail: dict[str, Any] | None
    output: Any = None
    error: str | None = None
    started_at: float = 0.0  # time.time()
    duration_ms: float = 0.0
    attempts: int = 0  # mcp: calls made, retries included; other nodes: 1 once run


class Observer(Protocol):
    """What the engine calls as a run goes."""

    def run_started(self, tool_name: str, arguments: dict[str, Any]) -> None: ...

    def node_started(self, record: NodeRecord) -> None: ...

    def node_finished(self, record: NodeRecord) -> None: ...

    def node_failed(self, record: NodeRecord) -> None: ...

    def node_waiting(self, record: NodeRecord) -> None: ...

    def run_finished(self, result: Any, error: GraphRunError | None) -> None: ...


class NullObserver:
    """An observer that ignores everything; subclass it to hear only some events."""

    def run_started(self, tool_name: str, arguments: dict[str, Any]) -> None:
        """A run of ``tool_name`` began with these arguments."""

    def node_started(self, record: NodeRecord) -> None:
        """A node is about to run (no output, duration or error yet)."""

    def node_finished(self, record: NodeRecord) -> None:
        """A node ran; ``record.output`` is its output."""

    def node_failed(self, record: NodeRecord) -> None:
        """A node failed; ``record.error`` says why, and the run ends after this."""

    def node_waiting(self, record: NodeRecord) -> None:
        """An approval node waits for a decision (``record.detail`` says what is asked); the
        run stops here, and ``execute`` returns a ``Paused``. When it is resumed, the same
        record (same index) ends with ``node_finished``."""

    def run_finished(self, result: Any, error: GraphRunError | None) -> None:
        """The run ended: with the exit's output, or with ``error`` (result is then None)."""
