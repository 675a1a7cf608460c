"""The floor of `bench/mcp_endpoint.py`: what the machine allows an answer over HTTP to cost.

A bare ASGI app (no Django, no framework, no MCP) under the same uvicorn as ours, answering
every request with bytes captured from ours: each request's body is read, as any server must,
and the same answer is written back. Ours over the floor is the share of what the machine
allows that ours answers; what is missing to 1.0 is ours' own work.

    .venv/bin/uvicorn bench.floor_server:app --host 127.0.0.1 --port 8802

`PUT /floor/answer` with a body sets the answer (the bench sends ours' answer to a cell's
request before measuring the cell); until then the answer is `{}`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

ANSWER_PATH = "/floor/answer"
_JSON = (b"content-type", b"application/json")
_answer = b"{}"
_headers = [_JSON, (b"content-length", b"2")]


async def app(
    scope: dict[str, Any],
    receive: Callable[[], Awaitable[dict[str, Any]]],
    send: Callable[[dict[str, Any]], Awaitable[None]],
) -> None:
    """Answer every HTTP request with the captured answer (or take a new one)."""
    global _answer, _headers
    if scope["type"] != "http":
        return  # lifespan: nothing to start
    chunks, more = [], True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    if scope["method"] == "PUT" and scope["path"] == ANSWER_PATH:
        _answer = b"".join(chunks)
        _headers = [_JSON, (b"content-length", str(len(_answer)).encode())]
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    await send({"type": "http.response.start", "status": 200, "headers": _headers})
    await send({"type": "http.response.body", "body": _answer})
