"""What to say when a downstream MCP server fails: whatever the SDK or a transport raised,
turned into a `DownstreamError` that names the server, says what went wrong and what to check,
from what the connection's transport saw (`nodespecs.downstream.diagnostics.Diagnostics`): a stdio
server's exit code and last stderr lines, an HTTP status, an answer over the size limit.
What the server said is quoted with the connection's secrets redacted.

A connection marked `egress_checked` (a server an agent declared) is told only the class of its
failure: refused by the egress policy (which class of address, which setting would allow it),
unreachable (no HTTP answer came back: refused, reset, closed, no such host), timed out, not an MCP
server (HTTP answers came, but no usable MCP), or an answer over the size limit; never what the
server said (bodies, reason phrases, headers), nor whether a connection was refused or reset, nor an
HTTP status, which would make the service a port scanner of whatever the agent names. The full
explanation goes to the log (`nodespecs.downstream.client`), for operators.

Used by `nodespecs.downstream.pool`, `nodespecs.downstream.client` and
`nodespecs.downstream.transports`.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from enum import StrEnum

import anyio
import httpx2
import pydantic
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR

from nodespecs.downstream.connection import Connection
from nodespecs.downstream.diagnostics import Diagnostics
from nodespecs.downstream.egress import EgressRefused
from nodespecs.downstream.limits import SDK_SSE_EVENT_BYTES, TOO_LARGE_MARK, message_limit

logger = logging.getLogger("nodespecs.downstream.client")

# How long to wait for a dead server's last stderr output before explaining its death.
STDERR_SETTLE_SECONDS = 1.0


class DownstreamError(Exception):
    """A downstream MCP server could not be reached or failed; the message names the server
    and says what to check."""


class DownstreamTimeout(DownstreamError):
    """A downstream MCP server did not answer (or start) in time."""


class CommandUnavailable(DownstreamError):
    """A stdio server's command cannot be run: not found, not executable, or not one that
    `PROVIDER_ALLOWED_COMMANDS` allows (`refused`)."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


# JSON-RPC errors that say the answer was not MCP at all: one the client could not parse
# (-32700) or whose content type was no JSON or event stream (-32600, made up by the SDK's
# transport), or a JSON-RPC server that knows no MCP method (-32601).
_NOT_MCP_CODES = frozenset({PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND})


class Failure(StrEnum):
    """The class of a failure to reach a server, as a person is told it plainly."""

    REFUSED = "refused"  # nothing listens at the address
    UNREACHABLE = "unreachable"  # no such host, reset, no route
    TIMED_OUT = "timed out"
    NOT_MCP = "not an MCP server"  # it answered, but not MCP
    AUTHENTICATION = "authentication failed"  # HTTP 401 or 403
    SERVER_ERROR = "server error"  # an HTTP 5xx, or a JSON-RPC error to initialize
    COMMAND_NOT_FOUND = "command not found"
    COMMAND_NOT_ALLOWED = "command not allowed"
    EXITED = "process exited"
    EGRESS_REFUSED = "refused by the egress policy"
    TOO_LARGE = "answer too large"
    OTHER = "failed"


def _too_large(connection: Connection, diagnostics: Diagnostics, during: str) -> DownstreamError:
    """An answer passed the limit while it arrived: which limit, and what to do."""
    where = connection.describe()
    limit = diagnostics.max_result_bytes
    if message_limit(limit, connection.transport) == SDK_SSE_EVENT_BYTES:
        return DownstreamError(
            f"{where} sent an answer over the {SDK_SSE_EVENT_BYTES:,} bytes that the MCP SDK "
            f"allows in one event of the legacy SSE transport {during} "
            f"(MCP_CLIENT_MAX_RESULT_BYTES allows {limit:,}); ask the tool for less (a page, a "
            "filter), or reach the server over Streamable HTTP."
        )
    return DownstreamError(
        f"{where} sent an answer over the {limit:,} bytes that MCP_CLIENT_MAX_RESULT_BYTES "
        f"allows {during}; ask the tool for less (a page, a filter), or raise "
        "MCP_CLIENT_MAX_RESULT_BYTES."
    )


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or the exception itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


async def _gone(connection: Connection, diagnostics: Diagnostics, during: str) -> str:
    """Why a server stopped answering: its exit code and stderr, or its HTTP status."""
    where = connection.describe()
    tail = diagnostics.stderr
    if tail is not None:
        with anyio.move_on_after(STDERR_SETTLE_SECONDS):
            await tail.closed.wait()
        code = tail.exit_code()
        how = "exited" if code is None else f"exited with code {code}"
        return f"{where} {how} {during}; {tail.quote()}."
    if diagnostics.http_error:
        return _http_problem(where, *diagnostics.http_error, during=during)
    return f"{where} closed the connection {during}."


def _http_problem(where: str, status: int, reason: str, *, during: str) -> str:
    """An HTTP error status and what to check about it."""
    if status in (401, 403):
        hint = "check the credentials in the provider's headers (e.g. Authorization)"
    elif status == 404:
        hint = "check the provider's URL (the MCP endpoint's path, e.g. /mcp)"
    else:
        hint = "check the server's logs"
    return f"{where} answered HTTP {status} {reason} {during}; {hint}."


def _network_errno(exc: BaseException) -> int | None:
    """The operating system's error number behind a network failure, found in the
    exception's chain (HTTP clients wrap it), or None."""
    cause: BaseException | None = exc
    for _ in range(10):
        if cause is None:
            break
        if isinstance(cause, OSError) and cause.errno:
            return cause.errno
        cause = cause.__cause__ or cause.__context__
    return None


def _network_reason(exc: BaseException) -> str:
    """The operating system's words for a network failure ("Connection refused"), found in
    the exception's chain; HTTP clients wrap it in vaguer messages."""
    number = _network_errno(exc)
    if number is not None:
        return os.strerror(number)
    return str(exc).rstrip(".") or type(exc).__name__


async def explain(
    exc: BaseException, connection: Connection, diagnostics: Diagnostics, *, during: str
) -> DownstreamError:
    """Turn whatever the SDK or a transport raised into a DownstreamError that says what
    went wrong and what to check. `during` says when, e.g. "while starting". What the server
    or the transport said is quoted with the connection's secrets redacted; for an
    egress-checked connection, only the class of the failure is said, and the full
    explanation is logged."""
    detailed = await _explain_in_detail(exc, connection, diagnostics, during=during)
    if not connection.egress_checked:
        return detailed
    logger.warning("egress-checked server failed: %s", detailed)
    return _failure_class(exc, connection, diagnostics, detailed, during=during)


def _egress_refusal(exc: BaseException, diagnostics: Diagnostics) -> EgressRefused | None:
    """The egress policy's refusal behind a failure: noted by the transport, or found among
    the exceptions and their causes."""
    if diagnostics.egress_refusal is not None:
        return diagnostics.egress_refusal
    for leaf in _leaves(exc):
        cause: BaseException | None = leaf
        for _ in range(10):
            if cause is None:
                break
            if isinstance(cause, EgressRefused):
                return cause
            cause = cause.__cause__ or cause.__context__
    return None


def _failure_class(
    exc: BaseException,
    connection: Connection,
    diagnostics: Diagnostics,
    detailed: DownstreamError,
    *,
    during: str,
) -> DownstreamError:
    """What an egress-checked connection's caller is told: the class of the failure only."""
    where = connection.describe()
    details = "the details are in this service's log, for its operators"
    refusal = _egress_refusal(exc, diagnostics)
    if refusal is not None:
        return DownstreamError(
            f"{where} was not contacted {during}: refused by the egress policy ({refusal.reason})."
        )
    if diagnostics.too_large or TOO_LARGE_MARK in str(detailed):
        return detailed  # our own limit, and nothing the server said
    leaves = [
        leaf for leaf in _leaves(exc) if not isinstance(leaf, anyio.get_cancelled_exc_class())
    ]
    leaf = leaves[0] if leaves else exc
    if isinstance(detailed, DownstreamTimeout) or isinstance(
        leaf, (httpx2.TimeoutException, TimeoutError)
    ):
        return DownstreamTimeout(
            f"{where} failed {during}: timed out. Check that the server answers at its URL, "
            f"or raise the timeout; {details}."
        )
    if not diagnostics.http_answered:
        # Refused, reset, closed before an answer, no such host: one class, so that an open
        # port that is not HTTP cannot be told from a closed one.
        return DownstreamError(
            f"{where} failed {during}: unreachable. Check the URL, and that the server is up "
            f"at a public address; {details}."
        )
    return DownstreamError(
        f"{where} failed {during}: not an MCP server, or it failed the request. Check the URL "
        f"(the MCP endpoint, e.g. /mcp) and the server; {details}."
    )


async def _explain_in_detail(
    exc: BaseException, connection: Connection, diagnostics: Diagnostics, *, during: str
) -> DownstreamError:
    """`explain`'s message with everything the transport saw."""
    said = diagnostics.redact
    leaves = [
        leaf for leaf in _leaves(exc) if not isinstance(leaf, anyio.get_cancelled_exc_class())
    ]
    leaf = leaves[0] if leaves else exc
    where = connection.describe()
    if isinstance(leaf, DownstreamError):
        return leaf
    if diagnostics.too_large or (
        isinstance(leaf, MCPError) and TOO_LARGE_MARK in leaf.error.message
    ):
        return _too_large(connection, diagnostics, during)
    if (isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED) or diagnostics.stream_ended:
        return DownstreamError(await _gone(connection, diagnostics, during))
    if isinstance(leaf, MCPError) and diagnostics.http_error:
        return DownstreamError(_http_problem(where, *diagnostics.http_error, during=during))
    if isinstance(leaf, MCPError):
        return DownstreamError(
            f"{where} answered with error {leaf.code} {during}: {said(leaf.error.message)}"
        )
    if isinstance(leaf, pydantic.ValidationError):
        problems = "; ".join(
            f"{'.'.join(map(str, error['loc'])) or 'message'}: {error['msg']}"
            for error in leaf.errors()[:3]
        )
        return DownstreamError(
            f"{where} sent an answer that is not valid MCP {during} ({said(problems)}); the server "
            "does not follow the protocol: check its version, or report it to its authors."
        )
    if isinstance(leaf, httpx2.HTTPStatusError):
        response = leaf.response
        return DownstreamError(
            _http_problem(where, response.status_code, said(response.reason_phrase), during=during)
        )
    if isinstance(leaf, httpx2.TimeoutException):
        return DownstreamTimeout(
            f"{where} did not answer over HTTP {during} in time ({said(str(leaf))})."
        )
    if isinstance(leaf, httpx2.SSEError):
        return DownstreamError(
            f"{where} answered, but not with an event stream, {during} ({said(str(leaf))}); "
            "check that the URL is the server's SSE endpoint (often /sse), or that the server "
            "speaks Streamable HTTP and choose that transport."
        )
    if isinstance(leaf, httpx2.TransportError):
        return DownstreamError(
            f"{where} cannot be reached {during}: {said(_network_reason(leaf))}. "
            "Check that the server is running and that the provider's URL is right."
        )
    if isinstance(leaf, OSError):
        return DownstreamError(f"{where} cannot start: {said(str(leaf))}.")
    return DownstreamError(f"{where} failed {during}: {type(leaf).__name__}: {said(str(leaf))}")


def failure_kind(exc: BaseException, connection: Connection, diagnostics: Diagnostics) -> Failure:
    """The class of a failure to reach or use a server, from what was raised and what its
    transport saw. For an egress-checked connection only the classes its caller may be told
    (`explain`): refused and unreachable are one, and so are every answer that was not usable
    MCP."""
    failure = _failure_in_detail(exc, diagnostics)
    if not connection.egress_checked:
        return failure
    if failure in (Failure.REFUSED, Failure.EXITED):
        return Failure.UNREACHABLE
    if failure in (Failure.AUTHENTICATION, Failure.SERVER_ERROR, Failure.OTHER):
        return Failure.NOT_MCP if diagnostics.http_answered else Failure.UNREACHABLE
    return failure


def _failure_in_detail(exc: BaseException, diagnostics: Diagnostics) -> Failure:
    if _egress_refusal(exc, diagnostics) is not None:
        return Failure.EGRESS_REFUSED
    # Called outside the event loop too (a probe's caller classifies a probe that overran):
    # asyncio's cancellation, which is anyio's on the only backend used here.
    leaves = [leaf for leaf in _leaves(exc) if not isinstance(leaf, asyncio.CancelledError)]
    leaf = leaves[0] if leaves else exc
    if diagnostics.too_large or TOO_LARGE_MARK in str(leaf):
        return Failure.TOO_LARGE
    if isinstance(leaf, CommandUnavailable):
        return Failure.COMMAND_NOT_ALLOWED if leaf.refused else Failure.COMMAND_NOT_FOUND
    if diagnostics.unreadable or isinstance(leaf, pydantic.ValidationError):
        return Failure.NOT_MCP  # it wrote something that is not JSON-RPC, or not MCP's
    if diagnostics.http_error is not None:
        status = diagnostics.http_error[0]
        if status in (401, 403):
            return Failure.AUTHENTICATION
        return Failure.SERVER_ERROR if status >= 500 else Failure.NOT_MCP
    if isinstance(leaf, (DownstreamTimeout, TimeoutError, httpx2.TimeoutException)):
        return Failure.TIMED_OUT
    stderr = diagnostics.stderr
    if stderr is not None and (diagnostics.stream_ended or stderr.closed.is_set()):
        return Failure.EXITED
    if isinstance(leaf, httpx2.SSEError):
        return Failure.NOT_MCP  # an answer, but no event stream
    if isinstance(leaf, httpx2.TransportError):
        refused = _network_errno(leaf) == errno.ECONNREFUSED
        return Failure.REFUSED if refused else Failure.UNREACHABLE
    if isinstance(leaf, MCPError) and leaf.code in _NOT_MCP_CODES:
        return Failure.NOT_MCP
    if isinstance(leaf, MCPError) and leaf.code != CONNECTION_CLOSED:
        return Failure.SERVER_ERROR
    if diagnostics.http_answered:
        return Failure.NOT_MCP
    return Failure.OTHER
