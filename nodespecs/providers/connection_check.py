"""The admin's "Test connection" of a provider: reach its server as saved, list its tools, time
it, and say plainly what went wrong when it does not work.

The test connects afresh (`nodespecs.downstream.probe`), never through the pool that graph runs
share, so it tells whether the server starts and answers now, and disturbs no live session. It is
bounded: the provider's own timeout, at most `MAX_TEST_SECONDS`, so a server that hangs is cut
off and the page that asked gets its answer. Whatever the server sends (an HTML page, JSON that is
not JSON-RPC, nothing at all) becomes a report, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodespecs.downstream import client
from nodespecs.downstream.errors import Failure
from nodespecs.downstream.probe import ProbeFailed, probe
from nodespecs.models import Provider

# The longest a connection test waits, whatever the provider's timeout: someone is looking at
# the page, and a server that needs longer to answer its first request is worth knowing about.
MAX_TEST_SECONDS = 10.0

# The most characters of the explanation shown: a server's error may quote a whole page.
_PROBLEM_CHARS = 1200

# What each class of failure is called on the page: a few plain words, the message after them
# says what happened and what to check.
_HEADLINES: dict[Failure, str] = {
    Failure.REFUSED: "Connection refused: nothing listens at that address",
    Failure.UNREACHABLE: "Cannot be reached",
    Failure.TIMED_OUT: "Timed out",
    Failure.NOT_MCP: "Not an MCP server: it answered, but not in MCP",
    Failure.AUTHENTICATION: "Authentication failed",
    Failure.SERVER_ERROR: "The server failed",
    Failure.COMMAND_NOT_FOUND: "Command not found",
    Failure.COMMAND_NOT_ALLOWED: "Command not allowed",
    Failure.EXITED: "The process exited before it answered",
    Failure.EGRESS_REFUSED: "Refused by the egress policy",
    Failure.TOO_LARGE: "Answer too large",
    Failure.OTHER: "Failed",
}


@dataclass(frozen=True)
class ToolLine:
    """One tool as the test lists it."""

    name: str
    description: str


@dataclass(frozen=True)
class ConnectionReport:
    """What a connection test found. When it worked (`ok`): the server's name and version as
    its initialize result gives them, the protocol version, its tools, and how long connecting
    (starting the server, initialize) and listing the tools took. When it did not: `failure`,
    the class of the failure in plain words, and `problem`, what happened and what to check.
    `elapsed_ms` is how long the test ran either way; `timeout` the deadline it had."""

    provider: str
    timeout: float
    elapsed_ms: float
    ok: bool
    server_name: str = ""
    server_version: str = ""
    protocol_version: str = ""
    connect_ms: float = 0.0
    list_ms: float = 0.0
    tools: tuple[ToolLine, ...] = ()
    failure: str = ""
    problem: str = ""


def check_timeout(provider: Provider) -> float:
    """How long a connection test of `provider` may take: its own timeout, at most
    `MAX_TEST_SECONDS`."""
    return min(provider.timeout_seconds, MAX_TEST_SECONDS)


def provider_connection_test(*, provider: Provider) -> ConnectionReport:
    """Connect to the provider's server as saved, initialize and list its tools, within
    `check_timeout(provider)` seconds; report what was found, or what went wrong."""
    timeout = check_timeout(provider)
    try:
        connection = provider.connection()
    except client.DownstreamError as exc:  # secrets no key decrypts
        return ConnectionReport(
            provider=provider.name,
            timeout=timeout,
            elapsed_ms=0.0,
            ok=False,
            failure=_HEADLINES[Failure.OTHER],
            problem=str(exc),
        )
    try:
        probed = probe(connection, timeout=timeout)
    except ProbeFailed as exc:
        return ConnectionReport(
            provider=provider.name,
            timeout=timeout,
            elapsed_ms=exc.elapsed_ms,
            ok=False,
            failure=_HEADLINES[exc.failure],
            problem=_shortened(str(exc)),
        )
    return ConnectionReport(
        provider=provider.name,
        timeout=timeout,
        elapsed_ms=probed.connect_ms + probed.list_ms,
        ok=True,
        server_name=probed.server_name,
        server_version=probed.server_version,
        protocol_version=probed.protocol_version,
        connect_ms=probed.connect_ms,
        list_ms=probed.list_ms,
        tools=tuple(
            ToolLine(tool.name, (tool.description or tool.title or "").strip())
            for tool in probed.tools
        ),
    )


def _shortened(text: str) -> str:
    return text if len(text) <= _PROBLEM_CHARS else text[: _PROBLEM_CHARS - 1] + "…"
