"""Answers of `tools/call` kept with their JSON, for this server's tools whose answer depends
on their arguments and a stamp alone, the same for every caller
(`ToolDefinition.answer_stamp`: the catalog's `get_node_details` and `get_node_types`, whose
stamp is the catalog's registry).

Building a knowledge call's answer (validating the request and its arguments, copying the
spec, shaping the result and encoding its 11 KB twice) was most of the call's time in
process (docs/benchmarks.md, issue 31 item 4). The core keeps the answer under the request's
exact params (their JSON: the arguments, and the `_meta` that decides its progress and log
messages), its protocol version and its session's log level, with the stamp it was built
under. A later request with the same key is answered with the same bytes, its own id spliced
in (`core.response_body`), once its caller's scopes are checked; a stamp that changed since
(an edit of the catalog makes a new registry) makes it a miss, so the call after an edit
builds its answer again.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, NamedTuple

import orjson

from mcp_endpoint.jsonrpc.results import EncodedResult

# Each distinct call is an entry of about an answer's size (11 KB for one node); past this
# many (a caller sending ever new arguments) they are all dropped and the next calls build
# theirs again, as every call did before.
KEPT = 512
# And past this many bytes of params and answers: fifty nodes in full detail answer about
# half a megabyte, so 512 such calls in ever new orders would otherwise hold 250 MB a process.
KEPT_BYTES = 8 * 1024 * 1024
# An answer larger than this is not kept: the calls worth keeping ask for one node or a few.
KEPT_ANSWER_BYTES = 64 * 1024


class Key(NamedTuple):
    """What a kept answer is found by."""

    version: str
    params: bytes
    session_log_level: str | None


_kept: dict[Key, tuple[Hashable, EncodedResult]] = {}
_kept_bytes = 0


def key_of(version: str, params: Any, session_log_level: str | None) -> Key | None:
    """The key of a `tools/call` with `params`; None when its params cannot be encoded as
    they are (orjson refuses an integer beyond 64 bits, a lone surrogate): never kept."""
    try:
        encoded = orjson.dumps(params)
    except (orjson.JSONEncodeError, TypeError):
        return None
    return Key(version, encoded, session_log_level)


def kept(key: Key, stamp: Hashable) -> EncodedResult | None:
    """The answer kept under `key`, if it was built under `stamp`."""
    entry = _kept.get(key)
    if entry is None or entry[0] != stamp:
        return None
    return entry[1]


def keep(key: Key, stamp: Hashable, result: dict[str, Any]) -> EncodedResult:
    """Keep `result` (shaped for the request's era) under `key` and `stamp`; returns it with
    its JSON."""
    global _kept_bytes
    encoded = EncodedResult(result)
    size = len(key.params) + len(encoded.encoded)
    if len(encoded.encoded) > KEPT_ANSWER_BYTES:
        return encoded
    if len(_kept) >= KEPT or _kept_bytes + size > KEPT_BYTES:
        _kept.clear()
        _kept_bytes = 0
    _kept[key] = (stamp, encoded)
    _kept_bytes += size
    return encoded
