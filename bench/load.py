"""Mixed MCP traffic against the production start, bounded in time and requests:
`python bench/load.py`.

    .venv/bin/python bench/load.py [--duration 60] [--concurrency 32] [--workflow-share 0.2]
        [--max-requests 200000] [--warmup 5] [--n 10] [--max-rss-growth 0.25]
        [--database-url ...] [--redis-url ...] [--broker-url ...] [--markdown]

Starts the documented production start on loopback (bench/cluster.py): two web instances in
EXECUTION_MODE=queued, two Celery workers and beat (the reaper), on PostgreSQL and Redis.
Then `--concurrency` clients send requests for `--duration` seconds (or until
`--max-requests`), each to the web instances in turn, as JSON-RPC POSTs to /mcp in the
2026-07-28 revision with an API key: knowledge calls (`tools/list` and `tools/call` of
`get_node_types`, `get_node_details`, `search_nodes`, in equal shares) and, with probability
`--workflow-share`, a workflow call (`sum_to_n` of bench/graph_files/loop.yaml, 2n+3 node
executions). Every answer is checked for its content; anything else is an error, printed
once per distinct message with its count.
`--warmup` seconds of the same traffic come first (their errors and runs count, their
latencies do not).

It reports requests, errors, throughput and p50/p99 per kind; runs started (workflow calls
sent) against runs found, succeeded and with their complete history (bench/queued.py's
check: one run per call, 2n+3 node executions); and the resident memory of each process (with
its children) after the warm-up and at the end. It exits non-zero on any error, any lost,
duplicated or incomplete run, or a process whose memory grew by more than
`--max-rss-growth` (a fraction). Loopback only: the servers listen on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

from bench.cluster import Cluster, keep_logs_on_failure, prepare, stop_on_sigterm  # noqa: E402
from bench.queued import (  # noqa: E402
    GRAPH_FILE,
    WORKFLOW,
    Agent,
    CallFailed,
    HistoryCheck,
    Sample,
    drive,
    history_check,
    loop_rows,
    p50_ms,
    p99_ms,
    service_arguments,
    services_of,
    table,
    timed,
    workflow_call,
)

SEARCHES = (
    "send a message to my team when a form is submitted",
    "call an HTTP API",
    "wait for a human to approve",
    "summarise a document with an AI model",
)
KNOWLEDGE = ("tools/list", "get_node_types", "get_node_details", "search_nodes")


async def knowledge_call(agent: Agent, url: str, request_id: str, kind: str, index: int) -> None:
    """One knowledge request of `kind`, its answer checked; raises `CallFailed`."""
    if kind == "tools/list":
        result = await agent.request(url, "tools/list", {}, request_id)
        names = {tool.get("name") for tool in result.get("tools", [])}
        if not {WORKFLOW, "search_nodes"} <= names:
            raise CallFailed(f"tools/list: {WORKFLOW} or search_nodes missing from {names}")
        return
    arguments = {
        "get_node_types": {},
        "get_node_details": {"nodes": [{"node_type": "ACTION", "subtype": "HTTP_REQUEST"}]},
        "search_nodes": {"query": SEARCHES[index % len(SEARCHES)]},
    }[kind]
    result = await agent.request(
        url, "tools/call", {"name": kind, "arguments": arguments}, request_id
    )
    content = result.get("structuredContent") or {}
    answered = {
        "get_node_types": "ACTION" in content,
        "get_node_details": (content.get("nodes") or [{}])[0].get("subtype") == "HTTP_REQUEST",
        "search_nodes": bool(content.get("results")),
    }[kind]
    if not answered:
        raise CallFailed(f"{kind}: unexpected answer {str(result)[:300]}")


@dataclass
class LoadResult:
    """What a load run saw."""

    samples: list[Sample] = field(default_factory=list)  # measured requests
    seconds: float = 0.0
    warmup_errors: list[str] = field(default_factory=list)
    client_cpu_seconds: float = 0.0
    calls: dict[str, int | None] = field(default_factory=dict)  # workflow calls, warm-up too
    history: HistoryCheck = field(default_factory=HistoryCheck)
    rss_start: dict[str, int] = field(default_factory=dict)
    rss_end: dict[str, int] = field(default_factory=dict)
    server_cpu_seconds: dict[str, float] = field(default_factory=dict)  # measured part

    @property
    def errors(self) -> list[str]:
        return self.warmup_errors + [s.error for s in self.samples if s.error]

    def rss_growth(self) -> dict[str, float]:
        """Each process's growth from start to end, as a fraction of its start."""
        return {
            label: (self.rss_end.get(label, 0) - start) / start
            for label, start in self.rss_start.items()
            if start
        }

    def failures(self, max_rss_growth: float) -> list[str]:
        """Why this run fails its bounds (none: it passes)."""
        failures = [f"{len(self.errors)} requests failed"] if self.errors else []
        if not self.history.ok:
            failures.append(
                f"{self.history.calls - self.history.complete} of {self.history.calls} "
                "workflow calls without exactly one succeeded run with its complete history"
            )
        failures += [
            f"{label} memory grew {growth:.0%} (limit {max_rss_growth:.0%})"
            for label, growth in self.rss_growth().items()
            if growth > max_rss_growth
        ]
        return failures


async def run_load(
    cluster: Cluster,
    key: str,
    database_url: str,
    *,
    duration: float,
    concurrency: int,
    workflow_share: float = 0.2,
    max_requests: int = 200_000,
    warmup: float = 5.0,
    n: int = 10,
    seed: int = 7,
) -> LoadResult:
    """Warm up, sample memory, send mixed traffic for `duration` seconds (at most
    `max_requests`), let the runs settle, check their history, sample memory again."""
    tag = f"load-{secrets.token_hex(4)}"
    choose = random.Random(seed)
    result = LoadResult()
    agent = Agent(key, concurrency)

    def sender(phase: str) -> Callable[[int], Awaitable[Sample]]:
        async def send(index: int) -> Sample:
            url = cluster.urls[index % len(cluster.urls)]
            request_id = f"{tag}-{phase}-{index}"
            if choose.random() < workflow_share:
                sample = await timed(WORKFLOW, workflow_call(agent, url, request_id, n))
                result.calls[request_id] = sample.run_id
                return sample
            kind = KNOWLEDGE[index % len(KNOWLEDGE)]
            return await timed(kind, knowledge_call(agent, url, request_id, kind, index))

        return send

    try:
        if warmup > 0:
            until = time.monotonic() + warmup
            samples, _ = await drive(
                sender("warmup"), concurrency=concurrency, total=max_requests, until=until
            )
            result.warmup_errors = [s.error for s in samples if s.error]
        result.rss_start = cluster.rss_kib()
        server_cpu, client_cpu = cluster.cpu_seconds(), time.process_time()
        until = time.monotonic() + duration
        result.samples, result.seconds = await drive(
            sender("load"), concurrency=concurrency, total=max_requests, until=until
        )
        result.client_cpu_seconds = time.process_time() - client_cpu
        result.server_cpu_seconds = {
            label: seconds - server_cpu[label] for label, seconds in cluster.cpu_seconds().items()
        }
    finally:
        await agent.close()
    result.history = await asyncio.to_thread(
        history_check, database_url, result.calls, loop_rows(n)
    )
    result.rss_end = cluster.rss_kib()
    return result


def report(result: LoadResult, *, concurrency: int, markdown: bool) -> str:
    """Per kind and in total: requests, errors, throughput, p50, p99; then runs and memory."""
    kinds = [*KNOWLEDGE, WORKFLOW]
    rows = []
    for kind in [*kinds, "all"]:
        samples = [s for s in result.samples if kind in ("all", s.kind)]
        rows.append([
            kind, str(len(samples)), str(sum(1 for s in samples if s.error)),
            f"{len(samples) / result.seconds:.1f}" if result.seconds else "0",
            f"{p50_ms(samples):.1f}", f"{p99_ms(samples):.1f}",
        ])  # fmt: skip
    server_cpu = sum(result.server_cpu_seconds.values())
    lines = [
        f"{len(result.samples)} requests in {result.seconds:.1f} s at concurrency "
        f"{concurrency}; the servers used {server_cpu:.1f} s of CPU "
        f"({1000 * server_cpu / max(1, len(result.samples)):.1f} ms per request), the load "
        f"generator {result.client_cpu_seconds:.1f} s",
        "",
        *table(["kind", "requests", "errors", "req/s", "p50 ms", "p99 ms"], rows, markdown),
        "",
    ]
    history = result.history
    lines += table(
        ["runs started", "found", "succeeded", "complete history", "problems"],
        [[str(history.calls), str(history.runs), str(history.succeeded),
          str(history.complete), str(len(history.problems))]],
        markdown,
    )  # fmt: skip
    lines.append("")
    growth = result.rss_growth()
    lines += table(
        ["process", "RSS start MiB", "RSS end MiB", "growth", "CPU s"],
        [
            [label, f"{start / 1024:.1f}", f"{result.rss_end.get(label, 0) / 1024:.1f}",
             f"{growth.get(label, 0):+.1%}", f"{result.server_cpu_seconds.get(label, 0):.1f}"]
            for label, start in result.rss_start.items()
        ],
        markdown,
    )  # fmt: skip
    for error, count in Counter(result.errors).most_common():
        lines.append(f"error ({count}x): {error}")
    lines += [f"history: {problem}" for problem in history.problems[:20]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60, help="measured seconds")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workflow-share", type=float, default=0.2,
                        help="fraction of requests that are workflow calls")  # fmt: skip
    parser.add_argument("--max-requests", type=int, default=200_000,
                        help="stop earlier once this many were sent")  # fmt: skip
    parser.add_argument("--warmup", type=float, default=5, help="seconds before measuring")
    parser.add_argument("--n", type=int, default=10, help="loop iterations per workflow call")
    parser.add_argument("--max-rss-growth", type=float, default=0.25,
                        help="fail when a process's memory grows more (a fraction)")  # fmt: skip
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    service_arguments(parser)
    options = parser.parse_args()
    stop_on_sigterm()
    services = services_of(options)
    print(f"# bench/load.py, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    workdir = Path(tempfile.mkdtemp(prefix="bench-load-"))
    with keep_logs_on_failure(workdir):
        key = prepare(services, [GRAPH_FILE])
        with Cluster(
            services, workdir, webs=2, workers=2, beat=True, mode="queued", name="load"
        ) as cluster:
            result = asyncio.run(
                run_load(
                    cluster, key, services.database_url,
                    duration=options.duration, concurrency=options.concurrency,
                    workflow_share=options.workflow_share, max_requests=options.max_requests,
                    warmup=options.warmup, n=options.n,
                )
            )  # fmt: skip
        print(report(result, concurrency=options.concurrency, markdown=options.markdown))
        failures = result.failures(options.max_rss_growth)
        if failures:
            print("FAILED: " + "; ".join(failures))
            sys.exit(1)
        print(f"passed: no error, no run lost, memory within +{options.max_rss_growth:.0%}")


if __name__ == "__main__":
    main()
