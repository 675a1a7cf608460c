"""What a method may know of its request (`CallContext`), built once by the protocol core.

The context is whole when a method first sees it: the caller, the era, the session's log level
and capabilities, the lineage of workflow runs that led to the call, the request's trace. A
method adds only the notifications it makes while answering (`log`, `progress`), which the core
sends before its response.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from mcp_endpoint.jsonrpc.results import Era
from nodespecs.callers import Caller
from nodespecs.downstream.call_lineage import Lineage

SERVER_NAME = "switchyard"
SERVER_VERSION = "0.1.0"

# Log levels in increasing severity (RFC 5424 names, as MCP uses them).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass
class CallContext:
    """What a method may know of its request, and where it queues the notifications it makes.
    Every field is set when the core builds it; only `notifications` grows afterwards."""

    era: Era
    caller: Caller
    progress_token: str | int | None = None
    # The lowest level of log message the client asked for; None sends none.
    log_level: str | None = None
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    session_id: str = ""
    # The request's JSON-RPC id, as sent.
    request_id: Any = None
    # The workflow group whose endpoint (/mcp/<slug>) was called, by its slug; None for /mcp.
    group: str | None = None
    # The trace of the request's span (32 hex digits) when tracing is on; "" otherwise.
    trace_id: str = ""
    # The workflow runs whose calls led to this request (its `_meta` or HTTP header said so:
    # nodespecs/downstream/call_lineage.py); empty for a call from outside.
    lineage: Lineage = ()
    # Whether the client takes messages before the response (an event stream, stdio): a
    # call may then send it requests midway. False for JSON answers only and REST.
    streams: bool = True
    notifications: list[dict[str, Any]] = field(default_factory=list)

    @property
    def protocol_version(self) -> str:
        return self.era.version

    @property
    def stateless(self) -> bool:
        return self.era.version in MODERN_PROTOCOL_VERSIONS

    def log(self, level: str, data: Any) -> None:
        """Queue a `notifications/message` if the client asked for this level or lower."""
        if self.log_level is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(self.log_level):
            return
        self.notifications.append(
            {
                "method": "notifications/message",
                "params": {"level": level, "logger": SERVER_NAME, "data": data},
            }
        )

    def progress(self, progress: float, total: float | None, message: str) -> None:
        """Queue a `notifications/progress` when the client sent a progress token (`total`
        None when the amount of work is unknown, as in a graph that loops)."""
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        params["message"] = message
        self.notifications.append({"method": "notifications/progress", "params": params})
