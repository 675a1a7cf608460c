"""What the protocol learned of a request while answering it, reported for its log line and
metrics by every transport (HTTP and stdio alike): never read to decide anything."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Facts:
    """What the protocol learned of a request while answering it, for its log line and its
    metrics (mcp_endpoint/observability/request_metrics.py). Reported, never read to decide
    anything."""

    # The JSON-RPC method, and a tools/call's tool name, as sent ("" when there was none).
    method: str = ""
    tool: str = ""
    # Whether that tool is one this server serves (only those name a metric's label).
    tool_known: bool = False
    # "2026-07-28" (stateless) or "2025" (sessions); "" when the request got no further.
    era: str = ""
    # The JSON-RPC id, as sent.
    request_id: Any = None
    # The caller's identity (`key:<prefix>`, never the key), once admitted.
    key: str = ""
    # The trace of the request's span, when tracing is on (`CallContext.trace_id`).
    trace_id: str = ""

    def note(self, message: dict[str, Any]) -> None:
        """Report a message's method, id and tool (a tools/call's)."""
        method = message.get("method")
        if isinstance(method, str):
            self.method = method
            if method == "tools/call":
                params = message.get("params")
                name = params.get("name") if isinstance(params, dict) else None
                self.tool = name if isinstance(name, str) else ""
        self.request_id = message.get("id")


def response_outcome(message: dict[str, Any]) -> tuple[int | None, bool]:
    """A JSON-RPC response's error code (None for a result), and whether its result is a
    tool's own error (`isError: true`)."""
    error, result = message.get("error"), message.get("result")
    code = error.get("code") if isinstance(error, dict) else None
    return code, isinstance(result, dict) and result.get("isError") is True
