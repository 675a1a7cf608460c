"""A stdio transport for downstream MCP servers that reads each message in time linear in its
length and gives up on one as soon as it passes a size limit.

The SDK's `stdio_client` keeps the line being received as text and joins every chunk to it
(`(buffer + chunk).split("\\n")`): a line of n bytes costs about n²/chunk of copying, and is
measured only once whole. A 50 MB answer took 42 s of CPU on the pool's loop, past the call's
timeout, and an answer arriving slowly held its memory until its end. Here the pending bytes
grow in one bytearray scanned for a newline only from where the last scan stopped, and a
message longer than `max_message_bytes` (complete or not) ends the connection at once.

Otherwise it does what the SDK's does: the server runs in a new session (its own process
group); each line is parsed as JSON-RPC into a `SessionMessage`, and a line that is not valid
JSON-RPC is delivered as its exception (the session skips it, our read stream notes it); the
shutdown closes stdin, waits, then terminates the process group, draining stdout meanwhile so
that a server blocked on a full pipe can exit. Used by `nodespecs.downstream.transports`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import IO, Any

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process
from mcp.client._transport import TransportStreams
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter

logger = logging.getLogger("nodespecs.downstream.client")

# The SDK's shutdown timings: time for the writer to flush what it accepted, for the server to
# exit once its stdin closes, between SIGTERM and SIGKILL, and for a killed one to be reaped.
_FLUSH_SECONDS = 0.5
_EXIT_SECONDS = 2.0
_TERMINATE_SECONDS = 2.0
_REAP_SECONDS = 2.0
_EXIT_POLL_SECONDS = 0.01


class MessageTooLarge(Exception):
    """A line from the server passed the size limit before its end."""


class LineSplitter:
    """Splits a byte stream into lines, in time linear in its length, refusing a line longer
    than `limit` bytes as soon as that many bytes of it have arrived."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> list[bytearray]:
        """The lines that `chunk` completes (without their newline); raises MessageTooLarge
        when a line is over the limit, whether it is complete or not."""
        pending = self._pending
        # The bytes before this chunk hold no newline: only the new ones are scanned.
        start = len(pending)
        pending += chunk
        lines = []
        while (end := pending.find(b"\n", start)) >= 0:
            if end > self._limit:
                raise MessageTooLarge(end)
            lines.append(pending[:end])
            # Deleting from the front of a bytearray is cheap: it moves its start only.
            del pending[: end + 1]
            start = 0
        if len(pending) > self._limit:
            raise MessageTooLarge(len(pending))
        return lines


def _parse(line: bytearray) -> SessionMessage | Exception:
    """One line as a message, or the reason it is none (delivered to the session as such)."""
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # pydantic's ValidationError, invalid UTF-8 or JSON included
        return exc


@asynccontextmanager
async def stdio_transport(
    command: list[str],
    *,
    env: dict[str, str],
    cwd: str | None,
    stderr: IO[Any],
    max_message_bytes: int,
    on_too_large: Callable[[], None],
) -> AsyncIterator[TransportStreams]:
    """Start `command` and exchange JSON-RPC lines with it over its stdin and stdout.

    A line from the server longer than `max_message_bytes` calls `on_too_large`, then ends the
    read stream: the session fails the calls in flight and the server is stopped when the
    transport is left. `stderr` is where the server's stderr goes.
    """
    process = await anyio.open_process(
        command, env=env, cwd=cwd, stderr=stderr, start_new_session=True
    )
    # No await between the start and the task group below: a cancellation there would leave
    # the process running.
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    assert process.stdin is not None
    assert process.stdout is not None

    async def read_stdout(stdout: ByteReceiveStream) -> None:
        lines = LineSplitter(max_message_bytes)
        async with read_writer:
            try:
                async for chunk in stdout:
                    for line in lines.feed(chunk):
                        await read_writer.send(_parse(line))
            except MessageTooLarge:
                # Noted before the read stream ends, so the failures that follow can say why.
                on_too_large()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                pass  # the session or our shutdown closed a stream: only the drain remains
        await _drain(stdout)

    async def write_stdin(stdin: ByteSendStream) -> None:
        try:
            async with write_reader:
                async for message in write_reader:
                    line = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send(line.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server no longer reads: end the read stream, or a call would wait forever.
            await read_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        # Unblock the reader into its drain, then give the writer a moment to flush.
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(_FLUSH_SECONDS):
            await writer_done.wait()
        await _stop(process)
        for stream in (read_stream, write_stream, read_writer, write_reader):
            await stream.aclose()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_stdout, process.stdout)
        tasks.start_soon(write_stdin, process.stdin)
        try:
            yield read_stream, write_stream
        finally:
            # The server must be stopped even when the caller is cancelled; every wait in
            # the shutdown is bounded.
            with anyio.CancelScope(shield=True):
                await shutdown()
            tasks.cancel_scope.cancel()


async def _drain(stdout: ByteReceiveStream) -> None:
    """Read and drop the rest of stdout until it ends or the shutdown closes it, so that a
    server writing a long answer is not blocked on a full pipe and can exit."""
    with (
        anyio.CancelScope(shield=True),
        suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError),
    ):
        while True:
            await stdout.receive()


async def _stop(process: Process) -> None:
    """Close the server's stdin, give it time to exit, then terminate its process group
    (the server and anything it started)."""
    assert process.stdin is not None
    assert process.stdout is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, _EXIT_SECONDS):
        await terminate_posix_process_tree(process, _TERMINATE_SECONDS)
        if not await _exited(process, _REAP_SECONDS):
            logger.warning("MCP server process %d survived SIGKILL; abandoning it", process.pid)
    # Ends the drain, even if something the server started still holds the pipe open.
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()


async def _exited(process: Process, seconds: float) -> bool:
    """Whether the process exits within `seconds`. Polled: `process.wait()` also waits for the
    pipes to close, which a child the server left behind can hold open."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:
            await anyio.sleep(_EXIT_POLL_SECONDS)
        return True
    return False
