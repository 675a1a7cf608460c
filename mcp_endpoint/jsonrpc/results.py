"""A method's result in the shape its request's era expects: the one place a result is shaped.

The 2025 revisions take the SDK's serialisation as it is; 2026-07-28 adds `resultType`, the
server's identity in `_meta` and, for lists and reads that any client may share, how long it
may keep them (`ttlMs`, `cacheScope`). Every answer goes through `Era.shape`: the core's for
each method, a workflow call's when its run ends (mcp_endpoint/calls/workflow_calls.py), a
2025 call's that asked its client for input (mcp_endpoint/protocol/client_requests.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp import types
from mcp.types import methods
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from mcp_endpoint.jsonrpc.encoding import encode_json

# How long a client may cache each list or read result (2026-07-28 `ttlMs`); the answers
# are the same for every caller, so `cacheScope` is public. tools/list is not among them:
# it shows what the caller may call, and says how long itself (dispatch._list_tools).
CACHE_HINTS: dict[str, int] = {
    "server/discover": 300_000,
    "prompts/list": 300_000,
    "resources/templates/list": 300_000,
    "resources/list": 60_000,
    "resources/read": 60_000,
}


@dataclass(frozen=True)
class Era:
    """The protocol version a request is answered in, and for 2026-07-28 the identity of the
    server answering (its `_meta` `serverInfo`: Switchyard at `/mcp`, a group's own at
    `/mcp/<slug>`)."""

    version: str
    server_info: dict[str, Any] = field(default_factory=dict)

    @property
    def modern(self) -> bool:
        return self.version in MODERN_PROTOCOL_VERSIONS

    def shape(self, method: str, result: types.Result) -> dict[str, Any]:
        """`result` of `method` as this era serialises it."""
        dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        if self.modern:
            dumped = self.shape_modern(method, dumped)
            if isinstance(result, types.CacheableResult) and "ttl_ms" in result.model_fields_set:
                # The handler chose (a run:// read: never cached): its choice wins, as in the SDK.
                dumped.update(ttlMs=result.ttl_ms, cacheScope=result.cache_scope)
        if dumped.get("resultType") == "task":
            # SEP-2663's flat task handle (task_extension.CreateTaskResult), which the SDK's
            # result surfaces do not know: sent as it is.
            return dumped
        return methods.serialize_server_result(method, self.version, dumped)

    def shape_modern(self, method: str, dumped: dict[str, Any]) -> dict[str, Any]:
        """A 2026-07-28 result already dumped: its cache hints, `resultType` and `_meta`."""
        if method in CACHE_HINTS:
            dumped["ttlMs"] = CACHE_HINTS[method]
            dumped["cacheScope"] = "public"
        dumped.setdefault("resultType", "complete")
        meta = dumped.setdefault("_meta", {})
        meta[types.SERVER_INFO_META_KEY] = self.server_info
        return dumped


class EncodedResult(dict[str, Any]):
    """A serialised result that also keeps its JSON (`encoded`), so the transport can send a
    cached answer without encoding it again. Never mutated once built."""

    def __init__(self, result: dict[str, Any]):
        super().__init__(result)
        self.encoded = encode_json(result)
