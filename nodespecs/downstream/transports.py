"""How each kind of downstream MCP server is reached, and what its transport saw.

Used by `nodespecs.downstream.pool` only. A transport here is the SDK's own
(`streamable_http_client`, `sse_client`), or for stdio ours (`nodespecs.downstream.stdio`, which
reads long lines in linear time), wrapped so that a failure can be explained
(`nodespecs.downstream.errors.explain`): a stdio server's stderr is kept (the last few KiB) and its
exit status recorded, an HTTP server's last error status is remembered, and the end of the server's
message stream is noticed so the pool can restart a dead server before sending it anything. What the
server says is redacted (`nodespecs.secrets.redact`) of the connection's secrets before it
enters a message or a log line: a server may print its own token, or echo the Authorization header.

Every message is measured as it arrives, against MCP_CLIENT_MAX_RESULT_BYTES
(`nodespecs.downstream.limits`): one over it fails its call at once as too large. A stdio or legacy
SSE connection is then given up (the rest of the stream cannot be trusted to resynchronise);
over Streamable HTTP only that request fails.

A connection marked `egress_checked` (a server an agent declared) connects only where the
egress policy allows (`nodespecs.downstream.egress.CheckedTransport` under its HTTP client: every
connection, redirects and reconnections included, is judged after DNS and made to the judged
address), never through a proxy from the environment; what its server said is logged for
operators rather than kept for messages, which say only the class of a failure.

A stdio server gets the SDK's safe environment (PATH, HOME...), this process's
`npm_config_*` variables and the connection's own `env`, nothing else of ours.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from mcp.client._transport import TransportStreams
from mcp.client.sse import sse_client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from opentelemetry.propagate import inject

from nodespecs.downstream.call_lineage import carry_lineage
from nodespecs.downstream.connection import Connection
from nodespecs.downstream.diagnostics import EXIT_MARK, Diagnostics, StderrTail
from nodespecs.downstream.egress import CheckedTransport, EgressPolicy
from nodespecs.downstream.errors import STDERR_SETTLE_SECONDS, CommandUnavailable
from nodespecs.downstream.limits import count_as_it_arrives, message_limit
from nodespecs.downstream.process_rights import command_refusal
from nodespecs.downstream.stdio import stdio_transport

logger = logging.getLogger("nodespecs.downstream.client")


# The server runs under `sh`, which reports the server's exit status on stderr when it ends
# (read back by `StderrTail.exit_code`): the SDK keeps the process object to itself.
_REPORT_EXIT = f'"$@"; code=$?; echo "{EXIT_MARK}$code" >&2; exit $code'


class _WatchedReadStream:
    """The transport's read stream, calling `on_end` when it ends (the server hung up) and
    noting the messages the transport could not read."""

    def __init__(self, stream: Any, on_end: Callable[[], None], diagnostics: Diagnostics) -> None:
        self._stream = stream
        self._on_end = on_end
        self._diagnostics = diagnostics

    async def receive(self) -> Any:
        try:
            item = await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise
        if isinstance(item, Exception):
            self._diagnostics.note_unreadable(item)
        return item

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        # `last_context` and anything else the SDK's dispatcher looks up on its stream.
        return getattr(self._stream, name)


def _resolve_command(connection: Connection) -> str:
    """The executable's full path, or a DownstreamError saying why there is none."""
    command = connection.command
    # Checked here too, at the last moment, so a provider saved before the operator set
    # PROVIDER_ALLOWED_COMMANDS does not start either.
    refusal = command_refusal(command, [name for name, _ in connection.env])
    if refusal is not None:
        raise CommandUnavailable(f"{connection.describe()} cannot start: {refusal}", refused=True)
    if os.sep in command:
        path = os.path.join(connection.cwd or os.getcwd(), command)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        raise CommandUnavailable(
            f"{connection.describe()} cannot start: {path} is not an executable file. "
            "Check the provider's command and working directory."
        )
    search_path = dict(connection.env).get("PATH") or os.environ.get("PATH", os.defpath)
    found = shutil.which(command, path=search_path)
    if found is None:
        raise CommandUnavailable(
            f"{connection.describe()} cannot start: command {command!r} was not found on PATH "
            f"({search_path}). Install it, or give its full path as the provider's command."
        )
    return found


def _inherited_npm_config() -> dict[str, str]:
    """This process's `npm_config_*` variables, which stdio servers inherit on top of the
    SDK's short list of safe variables: servers started with `npx` then follow the operator's
    npm settings (a registry mirror, an offline cache)."""
    return {
        name: value for name, value in os.environ.items() if name.lower().startswith("npm_config_")
    }


@asynccontextmanager
async def _stdio(connection: Connection, diagnostics: Diagnostics) -> AsyncIterator[Any]:
    command = _resolve_command(connection)
    read_fd, write_fd = os.pipe()
    diagnostics.stderr = stderr = StderrTail(connection.name, diagnostics.secrets)
    pipe, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: stderr, os.fdopen(read_fd, "rb", buffering=0)
    )
    errlog = os.fdopen(write_fd, "w")
    try:
        async with stdio_transport(
            ["/bin/sh", "-c", _REPORT_EXIT, "sh", command, *connection.args],
            env=get_default_environment() | _inherited_npm_config() | dict(connection.env),
            cwd=connection.cwd or None,
            stderr=errlog,
            max_message_bytes=message_limit(diagnostics.max_result_bytes, "stdio"),
            on_too_large=diagnostics.note_too_large,
        ) as streams:
            # The server holds its own copy now; closing ours lets the pipe end when it exits.
            errlog.close()
            yield streams
    finally:
        errlog.close()
        if not diagnostics.stderr.closed.is_set():
            # A server that is still alive here was killed by the transport; its pipe ends
            # with it.
            with anyio.move_on_after(STDERR_SETTLE_SECONDS):
                await diagnostics.stderr.closed.wait()
        pipe.close()


def _http_client(connection: Connection, diagnostics: Diagnostics, **kwargs: Any) -> Any:
    """An HTTP client that remembers the last error status, for error messages, and stops
    reading an answer (a body, an SSE event) as soon as it passes the size limit."""
    limit = message_limit(diagnostics.max_result_bytes, connection.transport)
    # The legacy SSE client gives up its whole connection when reading an event fails: every
    # call in flight fails with it. Over Streamable HTTP only the one request fails, and the
    # error the SDK makes up for it quotes ours.
    on_too_large = diagnostics.note_too_large if connection.transport == "sse" else lambda: None

    async def note_status(response: httpx2.Response) -> None:
        diagnostics.http_answered = True
        diagnostics.http_error = (
            (response.status_code, diagnostics.redact(response.reason_phrase))
            if response.status_code >= 400
            else None
        )
        if diagnostics.class_only and response.status_code >= 300:
            logger.info(
                "%s answered HTTP %s %s",
                connection.describe(),
                response.status_code,
                diagnostics.redact(response.reason_phrase),
            )
        count_as_it_arrives(response, limit, on_too_large)

    async def carry_trace(request: httpx2.Request) -> None:
        # The SDK sends each message in its sender's context, where the span of the call is
        # current (it put the same traceparent in the message's `_meta`); nothing without one.
        inject(request.headers)

    if connection.egress_checked:
        # A transport of our own also keeps proxies from the environment out: through a
        # proxy, the address judged would be the proxy's.
        kwargs["transport"] = CheckedTransport(
            EgressPolicy.from_settings(), on_refused=diagnostics.note_refused
        )
    return httpx2.AsyncClient(
        **{"headers": dict(connection.headers), **kwargs},
        event_hooks={"request": [carry_trace, carry_lineage], "response": [note_status]},
    )


def open_transport(
    connection: Connection, diagnostics: Diagnostics, *, on_end: Callable[[], None]
) -> Any:
    """The SDK transport for `connection` (an async context manager of its streams);
    `on_end` is called when the server's side of it ends."""

    diagnostics.class_only = connection.egress_checked

    @asynccontextmanager
    async def watched() -> AsyncIterator[TransportStreams]:
        def ended() -> None:
            diagnostics.stream_ended = True
            on_end()

        async with _transport(connection, diagnostics) as (read_stream, write_stream):
            yield _WatchedReadStream(read_stream, ended, diagnostics), write_stream

    return watched()


def _transport(connection: Connection, diagnostics: Diagnostics) -> Any:
    if connection.transport == "stdio":
        return _stdio(connection, diagnostics)
    # The read timeout is the connection's `sse_read_timeout`: a server may hold a response
    # stream open for long, and each call has its own deadline on top of this.
    timeout = httpx2.Timeout(connection.timeout_seconds, read=connection.sse_read_timeout)
    if connection.transport == "sse":

        def sse_http_client(
            headers: Any = None, timeout: Any = timeout, auth: Any = None
        ) -> httpx2.AsyncClient:
            return _http_client(connection, diagnostics, timeout=timeout, auth=auth)

        return sse_client(
            connection.url,
            timeout=connection.timeout_seconds,
            sse_read_timeout=connection.sse_read_timeout,
            httpx_client_factory=sse_http_client,
        )
    return _streamable_http(connection, diagnostics, timeout)


@asynccontextmanager
async def _streamable_http(
    connection: Connection, diagnostics: Diagnostics, timeout: httpx2.Timeout
) -> AsyncIterator[Any]:
    # The SDK's own limit on an SSE event (1 MiB by default) is set to ours, so that an answer
    # MCP_CLIENT_MAX_RESULT_BYTES allows is not refused for coming as an event; ours counts
    # the same bytes and more (line ends), so it is the one that trips, with our message.
    limit = message_limit(diagnostics.max_result_bytes, connection.transport)
    # The SDK leaves a client it is given open: this one is closed here.
    async with (
        _http_client(connection, diagnostics, timeout=timeout) as http_client,
        streamable_http_client(
            connection.url, http_client=http_client, max_sse_event_size=limit
        ) as streams,
    ):
        yield streams
