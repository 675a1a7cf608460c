"""What one live connection to a downstream MCP server saw, kept to explain its failures
(`nodespecs.downstream.errors.explain`): a stdio server's stderr tail and exit status, an HTTP
server's last error status, messages that were not JSON-RPC, an answer over the size limit, an
egress refusal. What the server said is redacted of the connection's secrets before it is kept
or logged. The transports (`nodespecs.downstream.transports`) fill it in."""

from __future__ import annotations

import asyncio
import logging

from nodespecs.downstream.egress import EgressRefused
from nodespecs.secrets import redact

logger = logging.getLogger("nodespecs.downstream.client")

# The server runs under `sh`, which reports the server's exit status on stderr when it ends:
# the SDK keeps the process object to itself, and the status is what tells an operator a
# crash (code 1, 139...) from a server that quit on purpose.
EXIT_MARK = "[switchyard] server exited with code "
# How much of a server's stderr is kept for error messages, and how many lines are quoted.
_STDERR_KEEP_BYTES = 8192
_STDERR_QUOTE_LINES = 8


class StderrTail(asyncio.Protocol):
    """Reads a stdio server's stderr pipe, keeping the end of it for error messages and
    logging it line by line, both with `secrets` redacted."""

    def __init__(self, name: str, secrets: tuple[str, ...] = ()) -> None:
        self._name = name
        self._secrets = secrets
        self._data = bytearray()
        # Whether the start of `_data` was dropped: its first line is then a fragment.
        self._trimmed = False
        # The start of a line not logged yet: a secret may arrive split between reads.
        self._unlogged = b""
        self.closed = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        self._data += data
        if len(self._data) > _STDERR_KEEP_BYTES:
            del self._data[: len(self._data) - _STDERR_KEEP_BYTES]
            self._trimmed = True
        *lines, self._unlogged = (self._unlogged + data).split(b"\n")
        if len(self._unlogged) > _STDERR_KEEP_BYTES:
            lines.append(self._unlogged)
            self._unlogged = b""
        self._log(lines)

    def connection_lost(self, exc: Exception | None) -> None:
        self._log([self._unlogged])
        self.closed.set()

    def _log(self, lines: list[bytes]) -> None:
        for line in lines:
            text = line.decode("utf-8", "replace").rstrip()
            if text:
                logger.debug("%s stderr: %s", self._name, redact(text, self._secrets))

    def exit_code(self) -> int | None:
        for line in reversed(self._lines()):
            if line.startswith(EXIT_MARK):
                return int(line[len(EXIT_MARK) :])
        return None

    def quote(self) -> str:
        lines = [line for line in self._lines() if not line.startswith(EXIT_MARK)]
        if not lines:
            return "it wrote nothing to stderr"
        return "its last stderr lines: " + " | ".join(lines[-_STDERR_QUOTE_LINES:])

    def _lines(self) -> list[str]:
        lines = redact(self._data.decode("utf-8", "replace"), self._secrets).splitlines()
        # A line cut by the trimming may hold the end of a secret, which no longer matches.
        kept = lines[1:] if self._trimmed else lines
        return [line.strip() for line in kept if line.strip()]


class Diagnostics:
    """What one live connection allows and what its transport saw, to explain its failures;
    what the server said is kept with `secrets` (the connection's) redacted. `max_result_bytes` is
    MCP_CLIENT_MAX_RESULT_BYTES as the connection started."""

    def __init__(self, secrets: tuple[str, ...] = (), *, max_result_bytes: int) -> None:
        self.secrets = secrets
        self.max_result_bytes = max_result_bytes
        # Set when the connection was given up because a message passed the limit: every
        # call failing with it is told so.
        self.too_large = False
        self.stderr: StderrTail | None = None
        # The last HTTP error answer (status, reason), cleared by a successful answer.
        self.http_error: tuple[int, str] | None = None
        self.stream_ended = False
        # Messages the transport could not read as JSON-RPC (the SDK skips them), and the
        # last one's error, which quotes the start of it.
        self.unreadable = 0
        self.last_unreadable = ""
        # For an egress-checked connection (set by `open_transport`): what the server said is
        # logged, and kept out of `oddities`; and the policy's refusal, if it refused one.
        self.class_only = False
        self.egress_refusal: EgressRefused | None = None
        # Whether the server ever answered over HTTP (whatever the status).
        self.http_answered = False

    def redact(self, text: str) -> str:
        """`text` (something the server said) without the connection's secrets."""
        return redact(text, self.secrets)

    def note_too_large(self) -> None:
        """The connection is being given up: a message from the server passed the limit."""
        self.too_large = True

    def note_unreadable(self, error: Exception) -> None:
        self.unreadable += 1
        text = self.redact(" ".join(str(error).split()))
        self.last_unreadable = text if len(text) <= 300 else text[:297] + "..."
        if self.class_only:
            logger.info("an egress-checked server sent a message that is not JSON-RPC: %s", text)

    def note_refused(self, refusal: EgressRefused) -> None:
        """The egress policy refused a connection (logged, and remembered for the error)."""
        self.egress_refusal = refusal
        logger.warning("egress policy: refused a connection: %s", refusal.for_log())

    def oddities(self) -> str:
        """What the server sent that was not a usable answer, as a clause for a timeout
        message ("; it sent ..."), or "" (always for an egress-checked connection, whose
        server's words are only logged)."""
        if self.class_only:
            return ""
        parts = []
        if self.unreadable:
            parts.append(
                f"it sent {self.unreadable} message(s) that are not valid JSON-RPC (a stdio "
                f"server must write only JSON-RPC lines on stdout), the last: "
                f"{self.last_unreadable}"
            )
        if self.http_error:
            parts.append(f"its last HTTP answer was {self.http_error[0]} {self.http_error[1]}")
        return "".join(f"; {part}" for part in parts)
