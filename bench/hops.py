"""A workflow call's thread hand-offs, in process: `python bench/hops.py`.

    .venv/bin/python bench/hops.py                      # both sections, 400 calls each
    .venv/bin/python bench/hops.py --sections downstream --calls 1000

Sections (docs/benchmarks.md, "Issue 31, item 2"):

- downstream: a pooled `list_directory` to the filesystem server (`bash
  .ci/install-mcp-peers.sh`) made from the pool's own event loop, against the same call made
  as a run makes it, from a run thread (`client.call_tool` on an executor thread, an event loop
  idle on the main thread as uvicorn's is), alternating in rounds; p50 of each, the ratio, and
  the two hand-offs of the thread's call alone; back to back, and 3 ms apart.
- handoffs: `chain10` and `count_files` called through the lean ASGI app
  (`mcp_endpoint.transports.asgi.mcp_app`, 2026-07-28, API key, history on PostgreSQL:
  DATABASE_URL, default postgresql://postgres@127.0.0.1:5432/switchyard_hops, created if
  missing), driven from this process's event loop. Counts each hand-off of a call between the
  event loop and a thread, and its p50 latency: work given to the run or the short threads
  (from the submission to its start on a thread), the threads' posts back to the loop
  (`call_soon_threadsafe`, from the call to its callback running) and the run's downstream
  calls (each one to the pool's loop and back). No socket: HTTP's own cost is not in it.

The switch interval is set as the production start sets it (config/asgi.py).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.call_profile import _graph_file, use_bench_database  # noqa: E402
from bench.graphs import META, MODERN, _filesystem_server  # noqa: E402

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/switchyard_hops"
ROUNDS = 4
# Calls back to back, as bench/graphs.py's pool section makes them, and spaced as a short
# run's are by its other work: a call after an idle gap costs more wherever it is made from.
GAPS = (0.0, 0.003)


def _p50(samples: list[float]) -> float:
    return statistics.median(samples) if samples else float("nan")


def bench_downstream(calls: int) -> list[str]:
    """A pooled list_directory from the pool's loop against the same call from a run thread."""
    from nodespecs.downstream import client
    from nodespecs.downstream import pool as pool_module

    directory = Path(tempfile.mkdtemp(prefix="hops-"))
    for index in range(7):
        (directory / f"file{index}.txt").write_text("x")
    command = _filesystem_server()
    server = (*command[1:], str(directory))
    connection = client.Connection(
        name="filesystem", transport="stdio", command=command[0], args=server
    )
    arguments = {"path": str(directory)}
    client.call_tool(connection, "list_directory", arguments)  # starts the server
    pool = pool_module._current_pool()

    async def send(session: Any) -> Any:
        return await session.call_tool("list_directory", arguments)

    async def from_loop(count: int, gap: float) -> list[float]:
        samples = []
        for _ in range(count):
            await asyncio.sleep(gap)
            started = time.perf_counter()
            await pool.request(connection, "tools/call 'list_directory'", send, 10)
            samples.append((time.perf_counter() - started) * 1000)
        return samples

    def from_thread(count: int, gap: float) -> list[float]:
        samples = []
        for _ in range(count):
            time.sleep(gap)
            started = time.perf_counter()
            client.call_tool(connection, "list_directory", arguments)
            samples.append((time.perf_counter() - started) * 1000)
        return samples

    def hand_offs(count: int, gap: float) -> list[float]:
        """The call as `pool.request` makes it from a thread, less its time on the loop: the
        hand-off to the pool's loop (until the call starts there) and back (from its end
        until this thread goes on)."""
        on_loop: dict[str, float] = {}

        async def timed() -> Any:
            on_loop["start"] = time.perf_counter()
            try:
                return await pool.request(connection, "tools/call 'list_directory'", send, 10)
            finally:
                on_loop["end"] = time.perf_counter()

        samples = []
        for _ in range(count):
            time.sleep(gap)
            started = time.perf_counter()
            pool.run(timed(), 10)
            ended = time.perf_counter()
            samples.append((on_loop["start"] - started + ended - on_loop["end"]) * 1000)
        return samples

    async def on_run_thread(
        measure: Callable[[int, float], list[float]], count: int, gap: float
    ) -> list[float]:
        with ThreadPoolExecutor(1, thread_name_prefix="run") as runs:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(runs, measure, count, gap)

    lines = [
        "| downstream list_directory, pooled | from the pool's loop, p50 ms "
        "| from a run thread, p50 ms | run thread / pool's loop "
        "| the two hand-offs alone, p50 ms | calls each |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for gap in GAPS:
        on_loop: list[float] = []
        on_thread: list[float] = []
        handing: list[float] = []
        for _ in range(ROUNDS):
            on_loop += asyncio.run_coroutine_threadsafe(
                from_loop(calls // ROUNDS, gap), pool.loop
            ).result()
            on_thread += asyncio.run(on_run_thread(from_thread, calls // ROUNDS, gap))
            handing += asyncio.run(on_run_thread(hand_offs, calls // ROUNDS, gap))
        a, b = _p50(on_loop), _p50(on_thread)
        spacing = f"{gap * 1000:g} ms after the last call" if gap else "back to back"
        lines.append(
            f"| {spacing} | {a:.3f} | {b:.3f} | {b / a:.2f} | {_p50(handing):.3f} "
            f"| {len(on_loop)} |"
        )
    client.close_all()
    return lines


class _Hands:
    """Each hand-off of the calls being measured, by kind: its latencies in ms."""

    def __init__(self) -> None:
        self.latencies: dict[str, list[float]] = collections.defaultdict(list)
        self.lock = threading.Lock()

    def add(self, kind: str, since: float) -> None:
        with self.lock:
            self.latencies[kind].append((time.perf_counter() - since) * 1000)


class _CountingExecutor(ThreadPoolExecutor):
    """An executor that notes how long each piece of work waited to start on a thread."""

    def __init__(self, hands: _Hands, kind: str, workers: int) -> None:
        super().__init__(workers, thread_name_prefix=kind)
        self.hands, self.kind = hands, kind

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        submitted = time.perf_counter()

        def started() -> Any:
            self.hands.add(f"loop -> {self.kind} thread", submitted)
            return fn(*args, **kwargs)

        return super().submit(started)


def _noting_posts(loop: asyncio.AbstractEventLoop, hands: _Hands) -> None:
    """Note each callback a thread posts to `loop`, and how long it waited to run."""
    original = loop.call_soon_threadsafe
    loop_thread = threading.get_ident()

    def call_soon_threadsafe(callback: Callable[..., Any], *args: Any, context: Any = None) -> Any:
        if threading.get_ident() == loop_thread:
            return original(callback, *args, context=context)
        posted, by = time.perf_counter(), threading.current_thread().name.split("_")[0]

        def run(*arguments: Any) -> Any:
            hands.add(f"{by} thread -> loop", posted)
            return callback(*arguments)

        return original(run, *args, context=context)

    loop.call_soon_threadsafe = call_soon_threadsafe  # type: ignore[method-assign]


def _noting_downstream(hands: _Hands) -> Callable[..., Any]:
    """Note each downstream call sent to the pool's loop (there and back: two hand-offs);
    what to put back."""
    from nodespecs.downstream import pool as pool_module

    original = pool_module._Pool.run

    def run(self: Any, coroutine: Any, timeout: float) -> Any:
        started = time.perf_counter()
        try:
            return original(self, coroutine, timeout)
        finally:
            hands.add("run thread -> pool's loop -> run thread (the whole call)", started)

    pool_module._Pool.run = run  # type: ignore[method-assign]
    return original


def _key() -> str:
    manage = [sys.executable, str(ROOT / "manage.py")]
    done = subprocess.run(
        [*manage, "create_api_key", "--name", "hops", "--rate-limit", "1000000"],
        capture_output=True,
        text=True,
        env=os.environ,
        check=True,
        timeout=120,
    )
    return done.stdout.strip().splitlines()[-1]


def tool_call_request(
    key: str, name: str, arguments: dict[str, Any]
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a 2026-07-28 `tools/call` of `name` with the API key `key`."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": META},
        }
    ).encode()
    headers = {
        "host": "localhost",
        "content-type": "application/json",
        "content-length": str(len(body)),
        "accept": "application/json, text/event-stream",
        "authorization": f"Bearer {key}",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    return body, headers


async def post(body: bytes, headers: dict[str, str]) -> bytes:
    """One POST to /mcp through the ASGI app, as uvicorn would hand it over; the body."""
    from mcp_endpoint.transports import asgi

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "query_string": b"",
        "headers": [(name.encode(), value.encode()) for name, value in headers.items()],
        "client": ("127.0.0.1", 5000),
    }
    delivered = False
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client stays until the answer
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message.get("body"):
            chunks.append(message["body"])

    await asgi.mcp_app(scope, receive, send)
    return b"".join(chunks)


def bench_handoffs(workflow: str, calls: int, workdir: Path) -> list[str]:
    """A call's hand-offs through the ASGI app: how many of each kind, and their latency."""
    from graphs.authoring.files import graph_import
    from mcp_endpoint.transports import asgi
    from nodespecs.callers import caller_command
    from nodespecs.downstream import client
    from nodespecs.downstream import pool as pool_module

    path, arguments = _graph_file(workflow, workdir / workflow)
    graph_import(text=path.read_text(), base_dir=path.parent, caller=caller_command("bench"))
    hands = _Hands()
    asgi._RUNS = _CountingExecutor(hands, "run", 8)
    asgi._POOL = _CountingExecutor(hands, "short", 4)
    body, headers = tool_call_request(_key(), workflow, arguments)

    async def measure() -> list[float]:
        _noting_posts(asyncio.get_running_loop(), hands)
        answer = json.loads(await post(body, headers))
        if answer.get("result", {}).get("isError", True):
            raise SystemExit(f"{workflow} failed: {answer}")
        for _ in range(20):
            await post(body, headers)
        hands.latencies.clear()
        totals = []
        for _ in range(calls):
            started = time.perf_counter()
            await post(body, headers)
            totals.append((time.perf_counter() - started) * 1000)
        return totals

    original = _noting_downstream(hands)
    try:
        totals = asyncio.run(measure())
    finally:
        pool_module._Pool.run = original  # type: ignore[method-assign]
    client.close_all()
    lines = [
        f"{workflow} through mcp_app: p50 {_p50(totals):.2f} ms a call ({calls} calls)",
        "",
        "| hand-off | per call | p50 latency ms |",
        "| --- | ---: | ---: |",
    ]
    for kind, latencies in sorted(hands.latencies.items()):
        lines.append(f"| {kind} | {len(latencies) / calls:g} | {_p50(latencies):.3f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--sections", default="downstream,handoffs")
    options = parser.parse_args()
    sections = options.sections.split(",")
    use_bench_database(
        os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL), ALLOWED_HOSTS="localhost"
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    sys.setswitchinterval(0.001)  # as config/asgi.py sets it
    print(f"# bench/hops.py, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores\n")
    if "downstream" in sections:
        print(*bench_downstream(options.calls), "", sep="\n")
    if "handoffs" in sections:
        with tempfile.TemporaryDirectory(prefix="hops-") as tmp:
            for workflow in ("chain10", "count_files"):
                print(*bench_handoffs(workflow, options.calls, Path(tmp)), "", sep="\n")


if __name__ == "__main__":
    main()
