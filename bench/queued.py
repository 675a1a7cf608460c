"""Queued against direct execution under concurrent workflow calls: `python bench/queued.py`.

    .venv/bin/python bench/queued.py [--calls 200] [--concurrency 20] [--n 20] [--rounds 2]
        [--database-url postgresql://postgres@127.0.0.1:5432/switchyard_load]
        [--redis-url redis://127.0.0.1:6379/0] [--broker-url redis://127.0.0.1:6379/1]
        [--markdown]

Starts, in the same run, two production starts (bench/cluster.py) on one PostgreSQL database
and Redis: queued (EXECUTION_MODE=queued, two web instances, two Celery workers) and direct
(two web instances, runs in the web process). Sends `--calls` calls of the workflow
`sum_to_n` (bench/graph_files/loop.yaml: 2n+3 node executions per run) to each, as JSON-RPC
POSTs to /mcp in the 2026-07-28 revision (what an agent's stateless client sends: no
session), `--concurrency` at a time, spread evenly over both web instances; the modes take
turns, A B A B, `--rounds` rounds of calls/rounds each, so drift of a shared machine hits both
alike. Every answer must carry the right sum.

Then it checks in the database, by the JSON-RPC id each call carried (stored on its run),
that every call has exactly one run, the run the answer named, finished `succeeded` with
2n+3 node executions, each succeeded, indexes 0..2n+2 (none lost, none duplicated). It
prints throughput (calls/s), p50 and p99 latency per mode and the ratios queued / direct, and
exits non-zero when any call failed or any history is not complete.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

import httpx2  # noqa: E402

from bench.cluster import (  # noqa: E402
    Cluster,
    Services,
    keep_logs_on_failure,
    prepare,
    stop_on_sigterm,
)

GRAPH_FILE = ROOT / "bench" / "graph_files" / "loop.yaml"
WORKFLOW = "sum_to_n"
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
RUN_ID_META = "io.switchyard/runId"
# Longer than the web side's default wait for a queued run (GRAPHS_RUN_WAIT_SECONDS, 120 s),
# so that a slow run is reported by the server, not cut by the client.
REQUEST_TIMEOUT_SECONDS = 150.0
DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/switchyard_load"


class CallFailed(Exception):
    """A request that was not answered as expected; the message says how."""


@dataclass
class Sample:
    """One request: its kind, how long it took, and what went wrong (empty: nothing)."""

    kind: str
    seconds: float
    error: str = ""
    run_id: int | None = None


class Agent:
    """An MCP client speaking the 2026-07-28 revision over Streamable HTTP: one JSON-RPC POST
    per request, no session, the API key as a bearer token, keep-alive connections."""

    def __init__(self, key: str, concurrency: int) -> None:
        self.headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
        }
        self.http = httpx2.AsyncClient(
            timeout=REQUEST_TIMEOUT_SECONDS,
            limits=httpx2.Limits(
                max_connections=concurrency, max_keepalive_connections=concurrency
            ),
        )

    async def request(
        self, url: str, method: str, params: dict[str, Any], request_id: str
    ) -> dict[str, Any]:
        """The result of one request; raises `CallFailed` for anything but a JSON-RPC result
        (and for a tool result with `isError`)."""
        headers = {**self.headers, "Mcp-Method": method}
        if method == "tools/call":
            headers["Mcp-Name"] = params["name"]
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": {**params, "_meta": META},
        }
        try:
            response = await self.http.post(f"{url}/mcp", json=body, headers=headers)
        except httpx2.HTTPError as exc:
            raise CallFailed(f"{method}: {exc.__class__.__name__}: {exc}") from None
        if response.status_code != 200:
            raise CallFailed(f"{method}: HTTP {response.status_code}: {response.text[:300]}")
        try:
            message = response.json()
        except ValueError:
            raise CallFailed(f"{method}: not JSON: {response.text[:300]}") from None
        if "error" in message:
            raise CallFailed(f"{method}: JSON-RPC error {message['error']}")
        result = message.get("result") or {}
        if result.get("isError"):
            raise CallFailed(f"{method} {params.get('name', '')}: {result['content'][0]['text']}")
        return result

    async def close(self) -> None:
        await self.http.aclose()


async def timed(kind: str, work: Awaitable[int | None]) -> Sample:
    """Await `work` (which returns a run id or None) and time it; any failure becomes the
    sample's error, so one bad answer never stops the other clients."""
    started = time.perf_counter()
    try:
        run_id = await work
    except CallFailed as exc:
        return Sample(kind, time.perf_counter() - started, str(exc))
    return Sample(kind, time.perf_counter() - started, run_id=run_id)


async def workflow_call(agent: Agent, url: str, request_id: str, n: int) -> int:
    """Call `sum_to_n`; the id of its run. Raises `CallFailed` for a wrong sum."""
    result = await agent.request(
        url, "tools/call", {"name": WORKFLOW, "arguments": {"n": n}}, request_id
    )
    expected = {"sum": n * (n + 1) // 2}
    if result.get("structuredContent") != expected:
        raise CallFailed(f"{WORKFLOW}: expected {expected}, got {str(result)[:300]}")
    return (result.get("_meta") or {}).get(RUN_ID_META)


async def drive(
    send: Callable[[int], Awaitable[Sample]],
    *,
    concurrency: int,
    total: int,
    until: float | None = None,
) -> tuple[list[Sample], float]:
    """`concurrency` clients sending `send(0)`, `send(1)`, ... until `total` requests were
    sent or the monotonic clock passes `until`; the samples, in the order sent, and the
    seconds it took."""
    numbers = itertools.count()
    samples: dict[int, Sample] = {}

    async def client() -> None:
        for index in numbers:
            if index >= total or (until is not None and time.monotonic() >= until):
                return
            samples[index] = await send(index)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return [samples[index] for index in sorted(samples)], time.perf_counter() - started


def p50_ms(samples: list[Sample]) -> float:
    return 1000 * statistics.median(s.seconds for s in samples) if samples else 0.0


def p99_ms(samples: list[Sample]) -> float:
    if len(samples) < 2:
        return p50_ms(samples)
    return 1000 * statistics.quantiles((s.seconds for s in samples), n=100)[98]


# ---------------------------------------------------------------------------- history


def loop_rows(n: int) -> int:
    """Node executions of one `sum_to_n` run: entry, n x (step, again), done, exit."""
    return 2 * n + 3


@dataclass
class HistoryCheck:
    """Every call against the runs the database holds for it."""

    calls: int = 0
    runs: int = 0
    succeeded: int = 0
    complete: int = 0
    problems: list[str] = field(default_factory=list)  # one sentence per lost, extra, bad run

    @property
    def ok(self) -> bool:
        return not self.problems and self.complete == self.calls


def history_check(
    database_url: str, calls: dict[str, int | None], rows: int, settle_seconds: float = 30.0
) -> HistoryCheck:
    """Check that each call (JSON-RPC id → run id from its answer, None if none came) has
    exactly one run, that run, finished succeeded with `rows` node executions indexed
    0..rows-1, all succeeded. Waits up to `settle_seconds` for runs still going."""
    import psycopg

    stored = {f'"{request_id}"': request_id for request_id in calls}
    query = """
        SELECT r.request_id, r.id, r.status, count(n.id),
               count(n.id) FILTER (WHERE n.status = 'succeeded'),
               count(DISTINCT n."index"), coalesce(max(n."index"), -1)
        FROM graphs_run r LEFT JOIN graphs_nodeexecution n ON n.run_id = r.id
        WHERE r.request_id = ANY(%s)
        GROUP BY r.id
    """
    deadline = time.monotonic() + settle_seconds
    with psycopg.connect(database_url) as connection:
        while True:
            found = connection.execute(query, [list(stored)]).fetchall()
            connection.commit()
            going = [row for row in found if row[2] in ("queued", "running")]
            if not going or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    check = HistoryCheck(calls=len(calls), runs=len(found))
    by_call: dict[str, list[tuple]] = {}
    for row in found:
        by_call.setdefault(stored[row[0]], []).append(row)
    for request_id, answered_run in calls.items():
        runs = by_call.get(request_id, [])
        if not runs:
            check.problems.append(f"call {request_id}: no run (lost)")
            continue
        if len(runs) > 1:
            ids = ", ".join(str(run[1]) for run in runs)
            check.problems.append(f"call {request_id}: {len(runs)} runs ({ids}): duplicated")
            continue
        _, run_id, status, count, succeeded, distinct, highest = runs[0]
        if answered_run is not None and run_id != answered_run:
            check.problems.append(
                f"call {request_id}: answered run {answered_run}, stored {run_id}"
            )
        if status != "succeeded":
            check.problems.append(f"call {request_id}: run {run_id} is {status}")
            continue
        check.succeeded += 1
        if count == succeeded == distinct == rows and highest == rows - 1:
            check.complete += 1
        else:
            check.problems.append(
                f"call {request_id}: run {run_id} has {count} node executions ({succeeded} "
                f"succeeded, {distinct} distinct indexes up to {highest}), expected {rows}"
            )
    return check


# ---------------------------------------------------------------------------- the bench


@dataclass
class ModeResult:
    mode: str
    samples: list[Sample] = field(default_factory=list)
    seconds: float = 0.0
    server_cpu_seconds: float = 0.0  # of every process of the mode's cluster
    calls: dict[str, int | None] = field(default_factory=dict)  # JSON-RPC id → run id
    history: HistoryCheck | None = None

    @property
    def throughput(self) -> float:
        return len(self.samples) / self.seconds if self.seconds else 0.0

    @property
    def errors(self) -> list[str]:
        return [s.error for s in self.samples if s.error]


async def _round(
    agent: Agent, cluster: Cluster, result: ModeResult, tag: str, calls: int, concurrency: int,
    n: int,
) -> None:  # fmt: skip
    """One round of `calls` calls to one mode's instances, alternating between them."""
    ids = [f"{tag}-{result.mode}-{len(result.calls) + index}" for index in range(calls)]

    async def send(index: int) -> Sample:
        url = cluster.urls[index % len(cluster.urls)]
        return await timed(WORKFLOW, workflow_call(agent, url, ids[index], n))

    cpu = sum(cluster.cpu_seconds().values())
    samples, seconds = await drive(send, concurrency=concurrency, total=calls)
    result.server_cpu_seconds += sum(cluster.cpu_seconds().values()) - cpu
    for request_id, sample in zip(ids, samples, strict=True):
        result.calls[request_id] = sample.run_id
    result.samples += samples
    result.seconds += seconds


async def compare_modes(
    clusters: list[Cluster], key: str, *, calls: int, concurrency: int, n: int, rounds: int
) -> list[ModeResult]:
    """`calls` calls of `sum_to_n` to each cluster, in turns of calls/rounds; the samples'
    order within a round is not kept, only which JSON-RPC ids were sent."""
    tag = f"queued-bench-{secrets.token_hex(4)}"
    results = [ModeResult(cluster.mode) for cluster in clusters]
    agent = Agent(key, concurrency)
    try:
        # One call per instance first: the first call of a process loads the workflows.
        for cluster in clusters:
            for url in cluster.urls:
                await workflow_call(agent, url, f"{tag}-warmup-{url}", n)
        for round_number in range(rounds):
            size = calls // rounds + (1 if round_number < calls % rounds else 0)
            for cluster, result in zip(clusters, results, strict=True):
                await _round(agent, cluster, result, tag, size, concurrency, n)
    finally:
        await agent.close()
    return results


def report(results: list[ModeResult], concurrency: int, n: int, markdown: bool) -> str:
    header = ["mode", "calls", "c", "calls/s", "p50 ms", "p99 ms", "server CPU ms/call",
              "errors", "runs ok (one each, succeeded, 2n+3 rows)"]  # fmt: skip
    rows = []
    for result in results:
        history = result.history or HistoryCheck()
        rows.append([
            result.mode, str(len(result.samples)), str(concurrency),
            f"{result.throughput:.1f}", f"{p50_ms(result.samples):.1f}",
            f"{p99_ms(result.samples):.1f}",
            f"{1000 * result.server_cpu_seconds / max(1, len(result.samples)):.1f}",
            str(len(result.errors)),
            f"{history.complete}/{history.calls}",
        ])  # fmt: skip
    lines = table(header, rows, markdown)
    by_mode = {result.mode: result for result in results}
    if {"queued", "direct"} <= by_mode.keys():
        queued, direct = by_mode["queued"], by_mode["direct"]
        lines += [
            "",
            f"queued / direct: throughput {queued.throughput / direct.throughput:.2f}, "
            f"p50 {p50_ms(queued.samples) / p50_ms(direct.samples):.2f}, "
            f"p99 {p99_ms(queued.samples) / p99_ms(direct.samples):.2f} "
            f"(sum_to_n n={n}, {loop_rows(n)} node executions per run)",
        ]
    for result in results:
        for error in sorted(set(result.errors)):
            lines.append(f"{result.mode} error ({result.errors.count(error)}x): {error}")
        for problem in (result.history.problems if result.history else [])[:20]:
            lines.append(f"{result.mode} history: {problem}")
    return "\n".join(lines)


def table(header: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    """A table as Markdown or as aligned text (first column left, the others right)."""
    if markdown:
        return [
            "| " + " | ".join(header) + " |",
            "| " + " | ".join("---" if i == 0 else "---:" for i in range(len(header))) + " |",
            *("| " + " | ".join(row) + " |" for row in rows),
        ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(v.ljust(widths[i]) if i == 0 else v.rjust(widths[i]) for i, v in enumerate(row))
        for row in [header, *rows]
    ]


def service_arguments(parser: argparse.ArgumentParser) -> None:
    """The backing services' options, shared by the benches that start clusters."""
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL,
                        help="PostgreSQL database (created if missing, migrated)")  # fmt: skip
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0", help="the cache")
    parser.add_argument("--broker-url", default="redis://127.0.0.1:6379/1", help="Celery broker")


def services_of(options: argparse.Namespace) -> Services:
    return Services(options.database_url, options.redis_url, options.broker_url)


def compare(
    clusters: list[Cluster], key: str, database_url: str, *, calls: int, concurrency: int,
    n: int, rounds: int,
) -> list[ModeResult]:  # fmt: skip
    """The calls to each cluster (`compare_modes`), then each mode's history check."""
    results = asyncio.run(
        compare_modes(clusters, key, calls=calls, concurrency=concurrency, n=n, rounds=rounds)
    )
    for result in results:
        result.history = history_check(database_url, result.calls, loop_rows(n))
    return results


def run_bench(
    services: Services, workdir: Path, *, calls: int, concurrency: int, n: int, rounds: int
) -> list[ModeResult]:
    """The whole comparison: prepare the database, start both clusters, call, check."""
    key = prepare(services, [GRAPH_FILE])
    with (
        Cluster(services, workdir, webs=2, workers=2, mode="queued", name="queued") as queued,
        Cluster(services, workdir, webs=2, workers=0, mode="direct", name="direct") as direct,
    ):
        return compare(
            [queued, direct], key, services.database_url,
            calls=calls, concurrency=concurrency, n=n, rounds=rounds,
        )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="workflow calls per mode")
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--n", type=int, default=20, help="loop iterations per call")
    parser.add_argument("--rounds", type=int, default=2, help="A B A B turns")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    service_arguments(parser)
    options = parser.parse_args()
    stop_on_sigterm()
    print(f"# bench/queued.py, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    workdir = Path(tempfile.mkdtemp(prefix="bench-queued-"))
    with keep_logs_on_failure(workdir):
        results = run_bench(
            services_of(options), workdir,
            calls=options.calls, concurrency=options.concurrency, n=options.n,
            rounds=options.rounds,
        )  # fmt: skip
        print(report(results, options.concurrency, options.n, options.markdown))
        if any(result.errors or not result.history.ok for result in results):
            sys.exit(1)


if __name__ == "__main__":
    main()
