"""The floors of `bench/mcp_endpoint.py`: what the machine allows an answer over HTTP to cost.

A bare ASGI app (no Django, no framework, no MCP) under the same uvicorn as ours, answering
every request with bytes captured from ours: each request's body is read, as any server must,
and the same answer is written back. Ours over the floor is the share of what the machine
allows that ours answers; what is missing to 1.0 is ours' own work.

    .venv/bin/uvicorn bench.floor_server:app --host 127.0.0.1 --port 8802

`PUT /floor/answer` with a body sets the answer (the bench sends ours' answer to a cell's
request before measuring the cell); until then the answer is `{}`.

With `FLOOR_CHECKS=true` (and `FLOOR_KEY`, the API key the bench's requests carry) it is the
checked floor: the same app doing, in as few Python steps as they take, the steps no server
that answers this call as ours must can leave out: the headers read, the Host checked, the
bearer key hashed and looked up with its scope, a per-key and per-minute count, the body
parsed as JSON, the JSON-RPC envelope and the routing headers checked against it, the answer
found by the call's params and the request's id put in it, and the request counted and timed
in prometheus-client as ours does. Ours over the checked floor is the share of a lean but
honest server's speed that ours reaches; the checked floor over the floor is what those rules
cost in Python, which no work of ours can take below.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

ANSWER_PATH = "/floor/answer"
_JSON = (b"content-type", b"application/json")
_answer = b"{}"
_headers = [_JSON, (b"content-length", b"2")]

CHECKS = os.environ.get("FLOOR_CHECKS", "").lower() == "true"
_KEYS = {
    hashlib.sha256(os.environ.get("FLOOR_KEY", "").encode()).hexdigest(): frozenset(
        {"tools:read", "tools:execute"}
    )
}
_HOSTS = frozenset({"127.0.0.1", "localhost"})
_counts: dict[tuple[str, int], int] = {}
# The answer by its params' JSON, as the parts before and after the request's id.
_answers: dict[str, tuple[bytes, bytes]] = {}
_registry = CollectorRegistry()
_REQUESTS = Counter("floor_requests", "Requests", ["method", "outcome"], registry=_registry)
_SECONDS = Histogram("floor_seconds", "Seconds", ["method", "outcome"], registry=_registry)


async def app(
    scope: dict[str, Any],
    receive: Callable[[], Awaitable[dict[str, Any]]],
    send: Callable[[dict[str, Any]], Awaitable[None]],
) -> None:
    """Answer every HTTP request with the captured answer (or take a new one)."""
    global _answer, _headers
    if scope["type"] != "http":
        return  # lifespan: nothing to start
    started = time.perf_counter()
    chunks, more = [], True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    if scope["method"] == "PUT" and scope["path"] == ANSWER_PATH:
        _answer = b"".join(chunks)
        _headers = [_JSON, (b"content-length", str(len(_answer)).encode())]
        _answers.clear()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    if CHECKS:
        status, body = _checked(scope, b"".join(chunks))
        headers = [_JSON, (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        outcome = "ok" if status == 200 else "refused"
        _REQUESTS.labels("tools/call", outcome).inc()
        _SECONDS.labels("tools/call", outcome).observe(time.perf_counter() - started)
        return
    await send({"type": "http.response.start", "status": 200, "headers": _headers})
    await send({"type": "http.response.body", "body": _answer})


def _refused(status: int, message: str) -> tuple[int, bytes]:
    return status, json.dumps({"error": message}).encode()


def _checked(scope: dict[str, Any], raw: bytes) -> tuple[int, bytes]:
    """The checked floor's answer: each step once, none that a conforming server may skip."""
    headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
    if headers.get("host", "").partition(":")[0] not in _HOSTS:
        return _refused(400, "host")
    scheme, _, key = headers.get("authorization", "").partition(" ")
    scopes = _KEYS.get(hashlib.sha256(key.encode()).hexdigest()) if scheme == "Bearer" else None
    if scopes is None:
        return _refused(401, "key")
    window = (key[:12], int(time.time() // 60))
    _counts[window] = _counts.get(window, 0) + 1
    if not headers.get("content-type", "").startswith("application/json"):
        return _refused(415, "content type")
    if "application/json" not in headers.get("accept", "application/json"):
        return _refused(406, "accept")
    message = json.loads(raw)
    if "id" not in message:  # a notification (`notifications/initialized`): accepted
        return 202, b""
    request_id, method, params = message.get("id"), message.get("method"), message.get("params")
    if (
        message.get("jsonrpc") != "2.0"
        or not isinstance(request_id, (int, str))
        or not isinstance(params, dict)
        or method != headers.get("mcp-method", method)
        or params.get("name") != headers.get("mcp-name", params.get("name"))
    ):
        return _refused(400, "envelope")
    version = (params.get("_meta") or {}).get("io.modelcontextprotocol/protocolVersion")
    if version is not None and version != headers.get("mcp-protocol-version"):
        return _refused(400, "version")
    if "tools:execute" not in scopes:
        return _refused(403, "scope")
    params_key = json.dumps(params, sort_keys=True, separators=(",", ":"))
    parts = _answers.get(params_key)
    if parts is None:
        before, found, after = _answer.partition(b'"id":')
        if not found:  # not an answer captured from ours (`initialize` before any is set)
            return 200, _answer
        parts = _answers[params_key] = (before + found, after[after.index(b",") :])
    return 200, parts[0] + json.dumps(request_id).encode() + parts[1]
