"""How much a downstream MCP server may send in one message, checked while the message arrives.

`MCP_CLIENT_MAX_RESULT_BYTES` bounds a tool's result. Each transport applies it, plus
`ENVELOPE_BYTES` for the JSON-RPC around a result, to every message as its bytes arrive: a
stdio line (`nodespecs.downstream.stdio`), an HTTP response body or one event of an SSE stream
(`count_as_it_arrives`). As soon as a message passes the limit, however slowly it comes, it is
given up: the memory and time spent on it stay bounded, and the call fails at once saying the
answer is too large, instead of at its timeout or after holding it all. A result within the
envelope's margin of the limit gets through and is measured exactly once parsed
(`mcp_client._check_size`).

Used by `nodespecs.downstream.transports`, which turns what is noted here into the error message.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncGenerator, Callable

import httpx2

# A tool's result travels inside `{"jsonrpc": "2.0", "id": ..., "result": ...}`: a message may
# pass MCP_CLIENT_MAX_RESULT_BYTES by this much, so that every result within the limit gets
# through whatever its envelope (an id may be a long string; `_meta` adds a little).
ENVELOPE_BYTES = 64 * 1024

# The MCP SDK's legacy SSE client reads its event stream with a fixed limit per event
# (`mcp.shared._httpx_utils.sse_within_origin`'s `max_event_size`, which `sse_client` does not
# let us set); an answer over it cannot arrive over that transport, whatever our setting says.
# tests/nodespecs/test_mcp_client.py checks that the SDK still says so.
SDK_SSE_EVENT_BYTES = 1024 * 1024

# What marks a failure as ours wherever the SDK quotes it (a JSON-RPC error it makes up for the
# request whose answer we stopped reading), so that the error message can say what happened.
TOO_LARGE_MARK = "[switchyard] answer over the size limit"


class BodyTooLarge(httpx2.StreamError):
    """An HTTP response body passed the limit. A StreamError, because the SDK answers the
    request with a PARSE_ERROR quoting it (rather than failing the whole connection)."""


class EventTooLarge(httpx2.SSEError):
    """An SSE event passed the limit. An SSEError, because the SDK then fails the request at
    once quoting it (rather than reconnecting to be sent the same event again)."""


def message_limit(max_result_bytes: int, transport: str) -> int:
    """The most bytes one message may hold on `transport` for a result of at most
    `max_result_bytes`."""
    limit = max_result_bytes + ENVELOPE_BYTES
    return min(limit, SDK_SSE_EVENT_BYTES) if transport == "sse" else limit


class _EventSize:
    """The size of the SSE event being received: the bytes since the last empty line.

    An empty line is two line ends in a row, each of them CRLF, LF or CR; the atomic groups
    keep a CRLF from counting as two. The last few bytes of a chunk are kept, because an empty
    line can be split across chunks.
    """

    _EVENT_END = re.compile(rb"(?>\r\n|\r|\n)(?>\r\n|\r|\n)")
    _KEEP = 3  # "\r\n\r\n" less its last byte

    def __init__(self) -> None:
        self.size = 0
        self._tail = b""

    def add(self, chunk: bytes) -> int:
        """Count `chunk` in; returns the size of the event now being received."""
        window = self._tail + chunk
        last_end = None
        for match in self._EVENT_END.finditer(window):
            last_end = match.end()
        if last_end is not None and last_end > len(self._tail):
            self.size = len(window) - last_end
        else:
            self.size += len(chunk)
        self._tail = window[-self._KEEP :]
        return self.size


class _BodySize:
    """The size of a response body so far."""

    def __init__(self) -> None:
        self.size = 0

    def add(self, chunk: bytes) -> int:
        """Count `chunk` in; returns the size so far."""
        self.size += len(chunk)
        return self.size


def count_as_it_arrives(
    response: httpx2.Response, limit: int, on_too_large: Callable[[], None]
) -> None:
    """Make reading `response` fail as soon as its body (or, for an event stream, one event)
    passes `limit` bytes, calling `on_too_large` first.

    The bytes counted are the decoded ones, so that a compressed answer counts at its real
    size: every way the SDK reads a body (`aread`, `aiter_text` under its SSE parser) goes
    through `aiter_bytes`, which is replaced on this response for that.
    """
    content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    is_event_stream = content_type == "text/event-stream"
    counter = _EventSize() if is_event_stream else _BodySize()
    error = EventTooLarge if is_event_stream else BodyTooLarge
    read = response.aiter_bytes

    async def counted(chunk_size: int | None = None) -> AsyncGenerator[bytes, None]:
        async with contextlib.aclosing(read(chunk_size)) as chunks:
            async for chunk in chunks:
                if counter.add(chunk) > limit:
                    on_too_large()
                    raise error(f"{TOO_LARGE_MARK}: more than {limit:,} bytes")
                yield chunk

    response.aiter_bytes = counted  # type: ignore[method-assign]
