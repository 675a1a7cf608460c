"""A small MCP server for tests, built with the official SDK: tools that make faults easy.

Tools:

- `echo(value)`: returns `value` as text (a string unchanged, anything else as JSON text).
- `add(a, b)`: returns `{"sum": a + b}` as structured content (with an output schema).
- `sleep(seconds)`: waits, then returns `"slept {seconds}"`; for timeout tests.
- `pid()`: returns this server's process id; tells a reused server from a restarted one.
- `crash()`: writes a line to stderr and exits the process at once with code 3.
- `fail(message)`: returns an `isError` result whose text contains `message`.

Fault tools, offered only when `ECHO_SERVER_FAULTS=1` (or named in `ECHO_SERVER_TOOLS`), so
the listing above stays what other tests expect:

- `hang()`: blocks the whole server (its event loop sleeps), so it answers nothing any more.
- `garbage(kind)`: answers a call with something that is not a valid answer, then never
  answers it properly. Over stdio: `bytes` (a line that is not JSON at all), `malformed` (a
  JSON-RPC response whose `result` is not an object), `not_a_result` (a response whose
  `result` is no CallToolResult). Over HTTP the request is answered instead with `html` (200
  with an HTML page) or `http_500` (a 500 error).
- `huge(megabytes)`: returns a text of that many MB (1 MB = 1,000,000 characters).
- `trickle(megabytes, per_second, sse=False)`: answers with a text of that many MB written
  slowly, `per_second` MB a second, as a server streaming a long answer would. Over stdio it
  writes the JSON-RPC answer itself, in pieces; over Streamable HTTP the POST is answered
  with a body (or, with `sse`, one event) streamed in pieces. It then never answers properly.
- `exit(code)`: ends the process with `code` before answering, without a word on stderr.

Probes, offered only when named in `ECHO_SERVER_TOOLS`:

- `tally(value)`: counts the call in this server process and returns `{"value": value,
  "calls": how many tally calls it has answered}`; `tallied()` returns that count without
  counting, so a test reads off the server itself how often a workflow called it.

- `meta()`: returns `{"meta": the call's _meta, "traceparent": its HTTP traceparent header
  (None over stdio), "lineage": its Switchyard-Lineage header}`, for the tracing and lineage
  tests.

Run it over stdio with `python tests/peers/echo_server.py` (use `sys.executable`), or over
Streamable HTTP on 127.0.0.1 with `--http PORT` (at /mcp; with `--sse`, the SSE transport
at /sse instead). `--require-token TOKEN` then answers 401 to a request without
`Authorization: Bearer TOKEN`.

Environment: `ECHO_SERVER_TOOLS` (comma-separated names) limits the tools it offers, so a
test can make a tool disappear; `ECHO_SERVER_PAGE_SIZE` lists tools that many per page,
with cursors.

Leaking secrets, for the redaction tests: with `ECHO_SERVER_LEAK_ENV=NAME` the server writes
the value of the variable NAME to stderr, as a server whose credentials were refused might,
and exits with code 1 before answering anything. `--reject-authorization STATUS` (with
`--http`) answers every POST with that HTTP status and a JSON-RPC error that quotes the
request's Authorization header, as a careless gateway does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, TypedDict

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

CRASH_EXIT_CODE = 3
LEAK_EXIT_CODE = 1


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


# Over stdio: a descriptor of the pipe the SDK sends its messages on. The SDK points fd 1 at
# stderr while it serves, so `garbage` writes its lines here.
_wire_fd: int | None = None
# The `garbage` kinds that the HTTP wrapper answers for (see `_http_faults`).
HTTP_GARBAGE = {"html", "http_500"}


async def hang() -> str:
    """Block the whole server: no call, ping or anything else is answered any more."""
    time.sleep(3600)  # on purpose in the event loop: a wedged server, not a slow tool
    return "woke up"


async def garbage(kind: str, ctx: Context) -> str:
    """Answer this call with something that is not a valid answer, then never properly."""
    answers = {
        "bytes": "this is not JSON-RPC \x00\x01 at all",
        "malformed": json.dumps({"jsonrpc": "2.0", "id": int(ctx.request_id), "result": 42}),
        "not_a_result": json.dumps(
            {"jsonrpc": "2.0", "id": int(ctx.request_id), "result": {"content": "not a list"}}
        ),
    }
    if kind not in answers or _wire_fd is None:
        raise ToolError(f"garbage kind {kind!r} needs stdio; over HTTP use {sorted(HTTP_GARBAGE)}")
    os.write(_wire_fd, (answers[kind] + "\n").encode())
    await anyio.sleep_forever()
    return "unreachable"


def meta(ctx: Context) -> str:
    """Return the `_meta` this call came with and, over HTTP, its `traceparent` and
    `Switchyard-Lineage` headers."""
    received = ctx.request_context.meta
    if received is not None and not isinstance(received, dict):
        received = received.model_dump(by_alias=True, mode="json")
    headers = ctx.headers or {}
    return json.dumps(
        {
            "meta": received,
            "traceparent": headers.get("traceparent"),
            "lineage": headers.get("switchyard-lineage"),
        }
    )


def huge(megabytes: float) -> str:
    """A text of `megabytes` million characters."""
    return "x" * int(megabytes * 1_000_000)


# Pieces of a trickled answer, and the JSON-RPC around its text (the answer is written by hand
# to control how fast it goes out).
_TRICKLE_PIECE = 64 * 1024


def _trickled_answer(request_id: Any, megabytes: float) -> bytes:
    text = "x" * int(megabytes * 1_000_000)
    result = {"content": [{"type": "text", "text": text}], "resultType": "complete"}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


async def trickle(megabytes: float, per_second: float, ctx: Context, sse: bool = False) -> str:
    """Answer with `megabytes` MB of text, `per_second` MB a second (stdio; HTTP: see
    `_http_faults`), then never properly."""
    if _wire_fd is None:
        raise ToolError("trickle is answered by the HTTP wrapper over HTTP")
    answer = _trickled_answer(int(ctx.request_id), megabytes) + b"\n"
    pause = _TRICKLE_PIECE / (per_second * 1_000_000)
    for start in range(0, len(answer), _TRICKLE_PIECE):
        await _write_all(_wire_fd, answer[start : start + _TRICKLE_PIECE])
        await anyio.sleep(pause)
    await anyio.sleep_forever()
    return "unreachable"


async def _write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd`, which the SDK may have made non-blocking."""
    while data:
        try:
            data = data[os.write(fd, data) :]
        except BlockingIOError:
            await anyio.sleep(0.005)


def exit_process(code: int) -> str:
    """End the process with `code` before answering, saying nothing on stderr."""
    os._exit(code)


TOOLS = {tool.__name__: tool for tool in (echo, add, sleep, pid, crash, fail)}
FAULT_TOOLS = {
    "hang": hang,
    "garbage": garbage,
    "huge": huge,
    "trickle": trickle,
    "exit": exit_process,
}
_tallies = 0


def tally(value: Any) -> dict[str, Any]:
    """Count this call and return the value with the count so far."""
    global _tallies
    _tallies += 1
    return {"value": value, "calls": _tallies}


def tallied() -> int:
    """How many tally calls this server has answered."""
    return _tallies


# Offered only when ECHO_SERVER_TOOLS names them.
PROBE_TOOLS = {"meta": meta, "tally": tally, "tallied": tallied}


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
    known = TOOLS | FAULT_TOOLS | PROBE_TOOLS
    offered = known if os.environ.get("ECHO_SERVER_FAULTS") == "1" else TOOLS
    wanted = os.environ.get("ECHO_SERVER_TOOLS", "").strip()
    names = [name.strip() for name in wanted.split(",") if name.strip()] if wanted else offered
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise SystemExit(f"ECHO_SERVER_TOOLS names unknown tools {unknown}; known: {sorted(known)}")
    server = MCPServer(
        "echo", instructions="Test peer with fault-injection tools.", middleware=[paginate_tools]
    )
    for name in names:
        server.add_tool(known[name], name=name, structured_output=name in ("add", "pid"))
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


def _http_faults(app: Any) -> Any:
    """Wrap an ASGI app so that a `garbage` call with an HTTP kind gets that HTTP answer, and
    a `trickle` call its slow answer."""

    async def faulty(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        messages, body = [], b""
        while not messages or messages[-1].get("more_body"):
            messages.append(await receive())
            body += messages[-1].get("body", b"")
        try:
            request = json.loads(body)
            params = request.get("params") or {}
            called = params.get("name") == "garbage"
            kind = params.get("arguments", {}).get("kind") if called else ""
        except (ValueError, AttributeError):
            request, params, kind = {}, {}, ""
        if params.get("name") == "trickle":
            await _trickle_over_http(send, receive, request.get("id"), **params["arguments"])
            return
        if kind in HTTP_GARBAGE:
            status, content_type, page = (
                (200, b"text/html", b"<html><body>Welcome to nginx!</body></html>")
                if kind == "html"
                else (500, b"text/plain", b"Internal Server Error")
            )
            headers = [(b"content-type", content_type)]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": page})
            return
        replay = iter(messages)

        async def replayed() -> Any:
            return next(replay, None) or await receive()

        await app(scope, replayed, send)

    return faulty


async def _trickle_over_http(
    send: Any,
    receive: Any,
    request_id: Any,
    megabytes: float,
    per_second: float,
    sse: bool = False,
) -> None:
    """Answer a `trickle` call: its JSON-RPC answer as the body, or as one SSE event, sent
    `per_second` MB a second until it ends or the client hangs up."""
    answer = _trickled_answer(request_id, megabytes)
    content_type = b"application/json"
    if sse:
        answer, content_type = b"event: message\ndata: " + answer + b"\n\n", b"text/event-stream"
    headers = [(b"content-type", content_type)]
    pause = _TRICKLE_PIECE / (per_second * 1_000_000)
    async with anyio.create_task_group() as tasks:

        async def stop_when_the_client_hangs_up() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tasks.cancel_scope.cancel()

        tasks.start_soon(stop_when_the_client_hangs_up)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for start in range(0, len(answer), _TRICKLE_PIECE):
            piece = answer[start : start + _TRICKLE_PIECE]
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            await anyio.sleep(pause)
        await send({"type": "http.response.body", "body": b""})
        tasks.cancel_scope.cancel()


def _reject_authorization(status: int) -> Any:
    """An ASGI app that answers every POST with `status` and a JSON-RPC error quoting the
    request's Authorization header."""

    async def reject(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        try:
            request_id = json.loads(body).get("id")
        except (ValueError, AttributeError):
            request_id = None
        header = dict(scope["headers"]).get(b"authorization", b"").decode()
        error = {"code": -32001, "message": f"Authorization: {header} is not a valid credential"}
        answer = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return reject


def _leak_env_and_exit(name: str) -> None:
    sys.stderr.write(f"echo_server: the upstream API refused the token {os.environ.get(name)}\n")
    sys.stderr.flush()
    os._exit(LEAK_EXIT_CODE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP")
    parser.add_argument("--sse", action="store_true", help="with --http: serve SSE instead")
    parser.add_argument("--require-token", metavar="TOKEN", help="with --http: demand a token")
    parser.add_argument(
        "--reject-authorization", type=int, metavar="STATUS", help="with --http: see above"
    )
    options = parser.parse_args()
    if os.environ.get("ECHO_SERVER_LEAK_ENV"):
        _leak_env_and_exit(os.environ["ECHO_SERVER_LEAK_ENV"])
    server = build_server()
    if options.http is None:
        global _wire_fd
        _wire_fd = os.dup(1)
        server.run()
        return
    import uvicorn

    app = _http_faults(server.sse_app() if options.sse else server.streamable_http_app())
    if options.require_token:
        app = _require_token(app, options.require_token)
    if options.reject_authorization:
        app = _reject_authorization(options.reject_authorization)
    uvicorn.run(app, host="127.0.0.1", port=options.http, log_level="warning")


if __name__ == "__main__":
    main()
