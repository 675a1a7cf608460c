"""How to reach one downstream MCP server: the `Connection` that every call names, and the
transports it may use. Two connections with the same server settings share one live session
in the pool (`nodespecs.downstream.pool`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

TRANSPORTS: tuple[str, ...] = ("stdio", "streamable_http", "sse")
# How long an SSE or Streamable HTTP connection waits for the server's next event (or the next
# bytes of an answer) before it gives up: the MCP SDK's own default for `sse_read_timeout`.
SSE_READ_TIMEOUT_DEFAULT = 300.0


@dataclass(frozen=True)
class Connection:
    """How to reach one downstream MCP server.

    Connections with the same server settings share one live session: `name` (used in
    messages) and `timeout_seconds` (the default deadline of each call, and of starting the
    server) are not part of that identity. `env` and `headers` may hold secrets, so they are
    left out of the repr. `sse_read_timeout` (SSE and Streamable HTTP only) is how long the
    connection waits for the server's next event; it is part of the identity, since a live
    session keeps the value it started with.

    `egress_checked` (part of the identity: a checked and an unchecked connection to one URL never
    share a session) marks a server that an agent or another caller without the right to start
    processes declared: each of its connections, redirects and reconnections included, goes only to
    addresses the egress policy allows (`nodespecs.downstream.egress`), and its failures are told by
    their class only (`nodespecs.downstream.errors.explain`), the details going to the log.
    Operators' and superusers' providers are not checked.
    """

    name: str = field(compare=False)
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    cwd: str = ""
    url: str = ""
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    timeout_seconds: float = field(default=30.0, compare=False)
    egress_checked: bool = False
    sse_read_timeout: float = SSE_READ_TIMEOUT_DEFAULT

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise ValueError(
                f"Connection {self.name!r}: transport {self.transport!r} is not one of "
                f"{', '.join(TRANSPORTS)}."
            )
        if not self.timeout_seconds > 0:
            raise ValueError(f"Connection {self.name!r}: timeout_seconds must be positive.")
        if not self.sse_read_timeout > 0:
            raise ValueError(f"Connection {self.name!r}: sse_read_timeout must be positive.")

    def describe(self) -> str:
        """The server as error messages name it."""
        if self.transport == "stdio":
            command_line = " ".join([self.command, *self.args])
            if len(command_line) > 120:
                command_line = command_line[:117] + "..."
            return f"MCP server {self.name!r} (stdio: {command_line})"
        return f"MCP server {self.name!r} ({self.transport} {self.url})"

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values kept out of what the server says when it reaches our messages and logs:
        every env and header value, and a header's credentials on their own (the `X` of
        `Authorization: Bearer X`), which a server may echo without the scheme."""
        values = [value for _, value in (*self.env, *self.headers)]
        credentials = [value.split()[-1] for _, value in self.headers if len(value.split()) > 1]
        return (*values, *credentials)
