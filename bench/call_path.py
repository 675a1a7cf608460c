"""The cost of one request through the lean ASGI app, in process: no socket, no client, so the
figure is the call path's own (admission, the protocol core, the answer written).

    .venv/bin/python bench/call_path.py                      # a modern tools/list
    .venv/bin/python bench/call_path.py --method tools/call  # get_node_details
    .venv/bin/python bench/call_path.py --method tools/call --count-calls  # Python calls
    cd /tmp/before && PYTHONPATH=/tmp/before /work/main/.venv/bin/python \
        /work/main/bench/call_path.py                        # a worktree of an older commit

Runs on a throwaway SQLite file with the catalog loaded and one API key; prints the best of
`--rounds` rounds of `--calls` requests, in microseconds per request; with `--count-calls`,
the Python function calls a request makes (cProfile's count), which a loaded machine does not
move. The imports fall back to
the layout before issue 26, so that the same script measures a worktree of an older commit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", choices=("tools/list", "tools/call"), default="tools/list")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count-calls", action="store_true")
    options = parser.parse_args()
    database = os.path.join(tempfile.mkdtemp(prefix="call-path-"), "db.sqlite3")
    os.environ["DATABASE_URL"] = f"sqlite:///{database}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("load_node_specs", verbosity=0)
    try:
        from mcp_endpoint.access.keys import api_key_create
        from mcp_endpoint.transports import asgi
    except ImportError:  # before issue 26
        from mcp_endpoint.keys import api_key_create  # type: ignore[no-redef]

        from mcp_endpoint import asgi  # type: ignore[no-redef]

    _, key = api_key_create(
        name="bench", scopes=["tools:read", "tools:execute"], rate_limit_per_minute=10**9
    )
    params: dict[str, Any] = {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    }
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json"),
        (b"authorization", f"Bearer {key}".encode()),
        (b"mcp-protocol-version", b"2026-07-28"),
        (b"mcp-method", options.method.encode()),
    ]
    if options.method == "tools/call":
        params |= {
            "name": "get_node_details",
            "arguments": {"nodes": [{"node_type": "ACTION", "subtype": "HTTP_REQUEST"}]},
        }
        headers.append((b"mcp-name", b"get_node_details"))
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": options.method, "params": params})
    encoded = body.encode()
    headers.append((b"content-length", str(len(encoded)).encode()))
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers,
             "client": ("127.0.0.1", 5000)}  # fmt: skip
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": encoded, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async def measure() -> float:
        for _ in range(300):  # warm-up: snapshots, caches, the remembered key
            await asgi.mcp_app(scope, receive, send)
        if set(statuses) != {200}:
            raise SystemExit(f"the app answered {sorted(set(statuses))}, not 200")
        best = float("inf")
        for _ in range(options.rounds):
            started = time.perf_counter()
            for _ in range(options.calls):
                await asgi.mcp_app(scope, receive, send)
            best = min(best, (time.perf_counter() - started) / options.calls * 1e6)
        return best

    async def count() -> float:
        import cProfile
        import pstats

        await measure()
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(options.calls):
            await asgi.mcp_app(scope, receive, send)
        profile.disable()
        return pstats.Stats(profile).total_calls / options.calls  # type: ignore[attr-defined]

    if options.count_calls:
        print(f"{options.method}: {asyncio.run(count()):.1f} function calls per request")
        return
    print(f"{options.method}: {asyncio.run(measure()):.1f} us per request "
          f"(best of {options.rounds} x {options.calls})")  # fmt: skip


if __name__ == "__main__":
    main()
