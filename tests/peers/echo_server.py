"""A small MCP server for tests, built with the official SDK: tools that make faults easy.

Tools:

- `echo(value)`: returns `value` as text (a string unchanged, anything else as JSON text).
- `add(a, b)`: returns `{"sum": a + b}` as structured content (with an output schema).
- `sleep(seconds)`: waits, then returns `"slept {seconds}"`; for timeout tests.
- `pid()`: returns this server's process id; tells a reused server from a restarted one.
- `crash()`: writes a line to stderr and exits the process at once with code 3.
- `fail(message)`: returns an `isError` result whose text contains `message`.

Run it over stdio with `python tests/peers/echo_server.py` (use `sys.executable`), or over
Streamable HTTP on 127.0.0.1 with `--http PORT` (at /mcp; with `--sse`, the SSE transport
at /sse instead). `--require-token TOKEN` then answers 401 to a request without
`Authorization: Bearer TOKEN`.

Environment: `ECHO_SERVER_TOOLS` (comma-separated names) limits the tools it offers, so a
test can make a tool disappear; `ECHO_SERVER_PAGE_SIZE` lists tools that many per page,
with cursors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, TypedDict

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

CRASH_EXIT_CODE = 3


class Sum(TypedDict):
    sum: float


def echo(value: Any) -> str:
    """Return the value unchanged: a string as it is, anything else as JSON text."""
    return value if isinstance(value, str) else json.dumps(value)


def add(a: float, b: float) -> Sum:
    """Add two numbers and return their sum as structured content."""
    return {"sum": a + b}


async def sleep(seconds: float) -> str:
    """Wait for the given number of seconds, then say so."""
    await anyio.sleep(seconds)
    return f"slept {seconds}"


def pid() -> int:
    """The process id of this server."""
    return os.getpid()


def crash() -> str:
    """Exit the server process abruptly, as a crashing server would."""
    sys.stderr.write(f"echo_server: crash() called, exiting with code {CRASH_EXIT_CODE}\n")
    sys.stderr.flush()
    os._exit(CRASH_EXIT_CODE)


def fail(message: str) -> str:
    """Return a tool error (an isError result) carrying the message."""
    raise ToolError(message)


TOOLS = {tool.__name__: tool for tool in (echo, add, sleep, pid, crash, fail)}


async def paginate_tools(ctx: Any, call_next: Any) -> Any:
    """Middleware: serve tools/list in pages of ECHO_SERVER_PAGE_SIZE, the cursor being the
    index of the page's first tool."""
    result = await call_next(ctx)
    size = int(os.environ.get("ECHO_SERVER_PAGE_SIZE") or 0)
    if ctx.method != "tools/list" or not size:
        return result
    listing = result if isinstance(result, dict) else result.model_dump(by_alias=True)
    start = int((ctx.params or {}).get("cursor") or 0)
    page = {**listing, "tools": listing["tools"][start : start + size]}
    if start + size < len(listing["tools"]):
        page["nextCursor"] = str(start + size)
    return page


def build_server() -> MCPServer:
    """The server with the tools `ECHO_SERVER_TOOLS` names (all of them when unset)."""
    wanted = os.environ.get("ECHO_SERVER_TOOLS", "").strip()
    names = [name.strip() for name in wanted.split(",") if name.strip()] if wanted else TOOLS
    unknown = sorted(set(names) - set(TOOLS))
    if unknown:
        raise SystemExit(f"ECHO_SERVER_TOOLS names unknown tools {unknown}; known: {sorted(TOOLS)}")
    server = MCPServer(
        "echo", instructions="Test peer with fault-injection tools.", middleware=[paginate_tools]
    )
    for name in names:
        server.add_tool(TOOLS[name], structured_output=name in ("add", "pid"))
    return server


def _require_token(app: Any, token: str) -> Any:
    """Wrap an ASGI app so HTTP requests without the bearer token get 401."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"missing or wrong token"})
            return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP")
    parser.add_argument("--sse", action="store_true", help="with --http: serve SSE instead")
    parser.add_argument("--require-token", metavar="TOKEN", help="with --http: demand a token")
    options = parser.parse_args()
    server = build_server()
    if options.http is None:
        server.run()
        return
    import uvicorn

    app = server.sse_app() if options.sse else server.streamable_http_app()
    if options.require_token:
        app = _require_token(app, options.require_token)
    uvicorn.run(app, host="127.0.0.1", port=options.http, log_level="warning")


if __name__ == "__main__":
    main()
