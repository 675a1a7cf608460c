"""Ordinary callers while hostile ones try their worst: `python bench/hostile.py`.

    .venv/bin/python bench/hostile.py [--duration 60] [--warmup 20] [--ordinary 4]
        [--hostile 2] [--database-url sqlite:///...|postgresql://...] [--markdown]

Needs: the project's venv only (the start command's is enough; SQLite unless
`--database-url`). With the defaults it takes about two minutes; `--duration 5 --warmup 3`
is a quick check.

Starts the production start on loopback (bench/cluster.py): one uvicorn web instance in
EXECUTION_MODE=direct on SQLite (a file in a temporary folder; `--database-url` for
PostgreSQL) with the cache in local memory, the start issue 13 was found on. Imports
bench/graph_files/loop.yaml and bench/graph_files/hostile.yaml.

`--ordinary` clients call, in turn, `get_node_types`, the workflow `sum_to_n` (n=3) and
`get_node_details`, and one more pings, one every 50 ms, each of 100 2025 sessions opened
before the warm-up in turn (each idle 5 s between its pings), every answer checked, with a
10 s timeout, with a key of their own; `--hostile` clients meanwhile send, in turn, with
other keys, the worst case of each class of issue 13:

- `regex_on_input`: a workflow applying `/^(a+)+$/` to 10,000 x "a" + "!" from the caller;
- `regex_constant`: `$match("a" x 36 + "!", /(a+)+$/)`, which once held the process for
  minutes;
- `search_huge`: `search_nodes` with 120,000 distinct words (about 840 KB);
- `search_at_cap`: the longest query `search_nodes` accepts (`--search-chars`);
- `endless_loop`: a loop stopped by its `maxNodeExecutions`, 10,000 node executions, the
  default ceiling (GRAPHS_MAX_NODE_EXECUTIONS_CEILING);
- `rest_body`: a 3 MB body to `POST /api/v1/mcp/invoke`; `mcp_body`: a 2 MB body to `/mcp`;

and of issue 25's bounds at admission:

- `validation_flood`: `validate_workflow` of 660 KB, 6,000 nodes (under the byte limit);
- `validation_at_cap`: `validate_workflow` of 1,990 nodes, read and checked whole;
- `session_flood`: 50 `initialize` in a row by a key with only `health:check` (each opens a
  session);
- `nested_arguments`: a workflow call whose arguments nest 1,000 levels;
- `nested_result`: `burrow`, whose result nests 300 levels (built by a loop).

A hostile call may be answered or refused (a tool error, a JSON-RPC error, a 413): either is
fine, and the table says which with the first words of the answer. A 5xx, a dropped
connection or a timeout is the service failing. It reports the ordinary callers' p50/p99 and
errors per kind, what each hostile kind got, and the web process's resident memory after the
warm-up (`--warmup` seconds of both kinds of traffic, so that every path has run) and at the
end. Exits non-zero when an ordinary call failed, an ordinary p99 is over
`--max-p99-ms` (1,000), a hostile call got a 5xx or no answer, or memory grew by more than
`--max-rss-growth` (0.25).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable
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
    production_env,
    stop_on_sigterm,
)
from bench.hostile_inputs import (  # noqa: E402
    HOSTILE_FILE,
    initialize_text,
    many_nodes,
    nested_text,
    tool_call_text,
)
from bench.queued import (  # noqa: E402
    GRAPH_FILE,
    MODERN,
    Agent,
    CallFailed,
    Sample,
    drive,
    p50_ms,
    p99_ms,
    table,
    timed,
    workflow_call,
)

ORDINARY = ("get_node_types", "sum_to_n", "get_node_details", "session_ping")
HOSTILE = (
    "regex_on_input",
    "regex_constant",
    "search_huge",
    "search_at_cap",
    "endless_loop",
    "rest_body",
    "mcp_body",
    "validation_flood",
    "validation_at_cap",
    "session_flood",
    "nested_arguments",
    "nested_result",
)
# Sent in turn by the ordinary clients; besides them, the ordinary callers' sessions (2025
# revisions), opened before the warm-up, are pinged one at a time, each idle for seconds
# between its pings, as an agent's session is while its model thinks (a session in use is
# the last a full local-memory cache culls).
DRIVEN = ("get_node_types", "sum_to_n", "get_node_details")
ORDINARY_SESSIONS = 100
SESSION_PING_SECONDS = 0.05
# Sessions one `session_flood` call opens, one after another (the key opened 400 in
# 9 s).
SESSIONS_PER_FLOOD = 50
NODE_DETAILS = {"nodes": [{"node_type": "ACTION", "subtype": "HTTP_REQUEST"}]}
ORDINARY_TIMEOUT_SECONDS = 10.0
HOSTILE_TIMEOUT_SECONDS = 60.0


def distinct_words(count: int, shape: str = "w{}") -> str:
    """`count` different made-up words: none is cached or stemmed like another."""
    return " ".join(shape.format(f"{index:x}") for index in range(count))


@dataclass
class Outcome:
    """What one hostile call got: `answer` is its first words; `failed` a 5xx or no answer."""

    kind: str
    seconds: float
    answer: str
    failed: bool = False


@dataclass(frozen=True)
class HostileRequest:
    """One hostile kind's request, built once: where it goes, what it sends, and as whom."""

    path: str
    body: bytes
    headers: dict[str, str]
    # Sent this many times in a row, as one call (its answer the last one's).
    repeat: int = 1


class Hostile:
    """Sends the hostile kinds, each built once: as `key`, but the session flood as
    `sessions_key` (a key with only health:check)."""

    def __init__(self, key: str, sessions_key: str, url: str, search_chars: int) -> None:
        self.url = url
        modern = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
        }
        self.http = httpx2.AsyncClient(timeout=HOSTILE_TIMEOUT_SECONDS)
        # Long words that stemming has work to do on, as many as fit under the cap.
        at_cap = distinct_words(search_chars, "connection{}ing")[:search_chars].rsplit(" ", 1)[0]

        def call(name: str, arguments: dict[str, Any] | str) -> HostileRequest:
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            headers = {**modern, "Mcp-Method": "tools/call", "Mcp-Name": name}
            return HostileRequest("/mcp", tool_call_text(name, text).encode(), headers)

        self.requests: dict[str, HostileRequest] = {
            "regex_on_input": call("regex_on_input", {"x": "a" * 10_000 + "!"}),
            "regex_constant": call("regex_constant", {}),
            "search_huge": call("search_nodes", {"query": distinct_words(120_000)}),
            "search_at_cap": call("search_nodes", {"query": at_cap}),
            "endless_loop": call("endless_loop", {}),
            "rest_body": HostileRequest(
                "/api/v1/mcp/invoke",
                json.dumps(
                    {"name": "search_nodes", "arguments": {"query": "a" * 3_000_000}}
                ).encode(),
                modern,
            ),
            "mcp_body": call("search_nodes", {"query": "a" * 2_000_000}),
            "validation_flood": call("validate_workflow", {"definition": many_nodes(6000)}),
            "validation_at_cap": call("validate_workflow", {"definition": many_nodes(1990)}),
            "session_flood": HostileRequest(
                "/mcp",
                initialize_text().encode(),
                {
                    "Authorization": f"Bearer {sessions_key}",
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                },
                repeat=SESSIONS_PER_FLOOD,
            ),
            "nested_arguments": call("burrow", '{"levels":1,"x":' + nested_text(1000) + "}"),
            "nested_result": call("burrow", {"levels": 300}),
        }

    async def send(self, kind: str) -> Outcome:
        """One hostile call of `kind`, classified."""
        request = self.requests[kind]
        started = time.perf_counter()
        for _ in range(request.repeat):
            try:
                response = await self.http.post(
                    self.url + request.path, content=request.body, headers=request.headers
                )
            except httpx2.HTTPError as exc:
                return Outcome(
                    kind, time.perf_counter() - started, f"no answer: {type(exc).__name__}", True
                )
            if response.status_code >= 500:
                seconds = time.perf_counter() - started
                return Outcome(kind, seconds, f"HTTP {response.status_code}", True)
        seconds = time.perf_counter() - started
        return Outcome(kind, seconds, f"HTTP {response.status_code}: {_gist(response)}")

    async def close(self) -> None:
        await self.http.aclose()


def _gist(response: httpx2.Response) -> str:
    """The first words of an answer: a tool's text, an error's message."""
    try:
        message = response.json()
    except ValueError:
        return response.text[:80]
    if "error" in message:
        error = message["error"]
        return str(error.get("message") if isinstance(error, dict) else error)[:80]
    result = message.get("result") or {}
    problems = (result.get("structuredContent") or {}).get("problems")
    if problems:  # validate_workflow's answer: the first problem's code
        return f"problems: {problems[0].get('code')}"
    if "protocolVersion" in result:
        return "a session opened"
    content = result.get("content") or [{}]
    prefix = "tool error: " if result.get("isError") else ""
    return prefix + str(content[0].get("text", result))[:80]


@dataclass
class HostileResult:
    ordinary: list[Sample] = field(default_factory=list)
    hostile: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    rss_start_kib: int = 0
    rss_end_kib: int = 0

    def failures(self, max_p99_ms: float, max_rss_growth: float) -> list[str]:
        found = []
        errors = [s for s in self.ordinary if s.error]
        if errors:
            found.append(f"{len(errors)} ordinary call(s) failed")
        for kind in ORDINARY:
            p99 = p99_ms([s for s in self.ordinary if s.kind == kind])
            if p99 > max_p99_ms:
                found.append(f"{kind} p99 {p99:.0f} ms > {max_p99_ms:.0f} ms")
        failed = [o for o in self.hostile if o.failed]
        if failed:
            found.append(f"{len(failed)} hostile call(s) got a 5xx or no answer")
        growth = self.rss_end_kib / max(1, self.rss_start_kib) - 1
        if growth > max_rss_growth:
            found.append(f"web memory grew {growth:+.0%}")
        return found


@dataclass(frozen=True)
class Keys:
    """The ordinary callers' key, and the hostile callers' two (one with only health:check)."""

    ordinary: str
    hostile: str
    sessions: str


async def run_hostile(
    cluster: Cluster, keys: Keys, *, kinds: list[str], duration: float, warmup: float,
    ordinary: int, hostile: int, search_chars: int,
) -> HostileResult:  # fmt: skip
    """Warm up with ordinary traffic, then both kinds of callers for `duration` seconds."""
    url = cluster.urls[0]
    agent = Agent(keys.ordinary, ordinary)
    agent.http.timeout = httpx2.Timeout(ORDINARY_TIMEOUT_SECONDS)
    attacker = Hostile(keys.hostile, keys.sessions, url, search_chars)
    result = HostileResult()
    sessions = [await _open_session(agent, url) for _ in range(ORDINARY_SESSIONS)]

    def ordinary_send(index: int) -> Awaitable[Sample]:
        kind = DRIVEN[index % len(DRIVEN)]
        request_id = f"o{index}"
        if kind == "sum_to_n":
            return timed(kind, workflow_call(agent, url, request_id, 3))
        if kind == "get_node_details":
            return timed(kind, _node_details(agent, url, request_id))
        return timed(kind, _node_types(agent, url, request_id))

    try:
        # Both kinds of callers: each path has run and the process has its working set.
        warm_until = time.monotonic() + warmup
        await asyncio.gather(
            drive(ordinary_send, concurrency=ordinary, total=10**9, until=warm_until),
            _session_pings(agent, url, sessions, warm_until),
            _hostile_clients(attacker, kinds, hostile, warm_until),
        )
        result.rss_start_kib = cluster.rss_kib()["web-1"]
        until = time.monotonic() + duration
        started = time.perf_counter()
        ordinary_run = drive(ordinary_send, concurrency=ordinary, total=10**9, until=until)
        pings = _session_pings(agent, url, sessions, until)
        hostile_run = _hostile_clients(attacker, kinds, hostile, until)
        (driven, _), pinged, result.hostile = await asyncio.gather(ordinary_run, pings, hostile_run)
        result.ordinary = driven + pinged
        result.seconds = time.perf_counter() - started
        result.rss_end_kib = cluster.rss_kib()["web-1"]
    finally:
        await agent.close()
        await attacker.close()
    return result


async def _node_types(agent: Agent, url: str, request_id: str) -> None:
    found = await agent.request(
        url, "tools/call", {"name": "get_node_types", "arguments": {}}, request_id
    )
    if "TRIGGER" not in json.dumps(found):
        raise CallFailed(f"get_node_types: no TRIGGER in {str(found)[:200]}")


async def _node_details(agent: Agent, url: str, request_id: str) -> None:
    found = await agent.request(
        url, "tools/call", {"name": "get_node_details", "arguments": NODE_DETAILS}, request_id
    )
    if "HTTP_REQUEST" not in json.dumps(found):
        raise CallFailed(f"get_node_details: no HTTP_REQUEST in {str(found)[:200]}")


def _legacy_headers(agent: Agent) -> dict[str, str]:
    """The agent's headers for the 2025 revisions: no version header before initialize."""
    return {name: value for name, value in agent.headers.items() if name != "MCP-Protocol-Version"}


async def _open_session(agent: Agent, url: str) -> str:
    """A 2025 session of the ordinary callers' key: its id."""
    response = await agent.http.post(
        f"{url}/mcp", content=initialize_text("ordinary"), headers=_legacy_headers(agent)
    )
    if response.status_code != 200 or "Mcp-Session-Id" not in response.headers:
        raise CallFailed(f"initialize: HTTP {response.status_code}: {response.text[:200]}")
    return response.headers["Mcp-Session-Id"]


async def _session_pings(agent: Agent, url: str, sessions: list[str], until: float) -> list[Sample]:
    """Ping the sessions in turn, one every SESSION_PING_SECONDS, until `until`."""
    samples = []
    for session_id in itertools.cycle(sessions):
        if time.monotonic() >= until:
            break
        samples.append(await timed("session_ping", _session_ping(agent, url, session_id)))
        await asyncio.sleep(SESSION_PING_SECONDS)
    return samples


async def _session_ping(agent: Agent, url: str, session_id: str) -> None:
    """A ping in a live session; a 404 (the session was lost) fails it."""
    headers = {**_legacy_headers(agent), "Mcp-Session-Id": session_id}
    try:
        response = await agent.http.post(
            f"{url}/mcp", content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}', headers=headers
        )
    except httpx2.HTTPError as exc:
        raise CallFailed(f"ping: {exc.__class__.__name__}: {exc}") from None
    if response.status_code != 200:
        raise CallFailed(f"ping in a session: HTTP {response.status_code}: {response.text[:200]}")


def hostile_keys(services: Services) -> tuple[str, str]:
    """Two keys for the hostile callers, each with a rate limit that never refuses: one that
    may build and call (tools:read, tools:execute, workflows:write), one with only
    health:check (it may open sessions, as any authenticated caller may)."""
    made = []
    for name, scopes in (
        ("hostile", "tools:read,tools:execute,workflows:write"),
        ("sessions", "health:check"),
    ):
        done = subprocess.run(
            [sys.executable, "manage.py", "create_api_key", "--name", name, "--scopes", scopes,
             "--rate-limit", "1000000000"],
            cwd=ROOT, env=production_env(services, "direct"), capture_output=True, text=True,
            timeout=120, check=True,
        )  # fmt: skip
        made.append(done.stdout.strip().splitlines()[-1].strip())
    return made[0], made[1]


async def _hostile_clients(
    attacker: Hostile, kinds: list[str], clients: int, until: float
) -> list[Outcome]:
    outcomes: list[Outcome] = []

    async def client(offset: int) -> None:
        index = offset
        while time.monotonic() < until:
            outcomes.append(await attacker.send(kinds[index % len(kinds)]))
            index += 1

    await asyncio.gather(*(client(offset) for offset in range(clients)))
    return outcomes


def report(result: HostileResult, markdown: bool) -> str:
    """The ordinary callers' figures, what each hostile kind got, and the web's memory."""
    rows = []
    for kind in [*ORDINARY, "all"]:
        samples = [s for s in result.ordinary if kind in ("all", s.kind)]
        rows.append([
            kind, str(len(samples)), str(sum(1 for s in samples if s.error)),
            f"{p50_ms(samples):.1f}", f"{p99_ms(samples):.1f}",
            f"{1000 * max((s.seconds for s in samples), default=0):.1f}",
        ])  # fmt: skip
    lines = [
        f"ordinary callers over {result.seconds:.1f} s:",
        "",
        *table(["kind", "calls", "errors", "p50 ms", "p99 ms", "max ms"], rows, markdown),
        "",
        "hostile callers:",
        "",
    ]
    hostile_rows = []
    for kind in sorted({o.kind for o in result.hostile}, key=HOSTILE.index):
        outcomes = [o for o in result.hostile if o.kind == kind]
        answers = Counter(o.answer for o in outcomes).most_common(1)
        hostile_rows.append([
            kind, str(len(outcomes)), str(sum(1 for o in outcomes if o.failed)),
            f"{1000 * max((o.seconds for o in outcomes), default=0):.0f}",
            answers[0][0].replace("|", "/") if answers else "",
        ])  # fmt: skip
    lines += table(["kind", "calls", "failed", "max ms", "answer"], hostile_rows, markdown)
    growth = result.rss_end_kib / max(1, result.rss_start_kib) - 1
    lines += [
        "",
        f"web RSS after warm-up {result.rss_start_kib / 1024:.0f} MiB, at the end "
        f"{result.rss_end_kib / 1024:.0f} MiB ({growth:+.1%})",
    ]
    for error, count in Counter(s.error for s in result.ordinary if s.error).most_common(5):
        lines.append(f"ordinary error ({count}x): {error[:200]}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=20,
                        help="seconds of both kinds of traffic first, not measured")  # fmt: skip
    parser.add_argument("--ordinary", type=int, default=4, help="ordinary clients")
    parser.add_argument("--hostile", type=int, default=2, help="hostile clients")
    parser.add_argument("--search-chars", type=int, default=1000,
                        help="KNOWLEDGE_MAX_QUERY_CHARACTERS")  # fmt: skip
    parser.add_argument("--kinds", default=",".join(HOSTILE),
                        help="hostile kinds to send, comma separated (default: all)")  # fmt: skip
    parser.add_argument("--max-p99-ms", type=float, default=1000.0)
    parser.add_argument("--max-rss-growth", type=float, default=0.25)
    parser.add_argument("--database-url", default="", help="default: SQLite in a temporary folder")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    options = parser.parse_args()
    kinds = options.kinds.split(",")
    if unknown := set(kinds) - set(HOSTILE):
        parser.error(f"unknown kinds {sorted(unknown)}; choose from {', '.join(HOSTILE)}")
    stop_on_sigterm()
    print(f"# bench/hostile.py, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    workdir = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    services = Services(options.database_url or f"sqlite:///{workdir / 'db.sqlite3'}", "", "")
    with keep_logs_on_failure(workdir):
        keys = Keys(
            prepare(services, [GRAPH_FILE, HOSTILE_FILE], mode="direct"), *hostile_keys(services)
        )
        with Cluster(
            services, workdir, webs=1, workers=0, mode="direct", name="hostile"
        ) as cluster:
            result = asyncio.run(
                run_hostile(
                    cluster, keys, kinds=kinds, duration=options.duration, warmup=options.warmup,
                    ordinary=options.ordinary, hostile=options.hostile,
                    search_chars=options.search_chars,
                )
            )  # fmt: skip
        print(report(result, options.markdown))
        failures = result.failures(options.max_p99_ms, options.max_rss_growth)
        if failures:
            print("FAILED: " + "; ".join(failures))
            sys.exit(1)
        print(f"passed: no ordinary error, p99 under {options.max_p99_ms:.0f} ms, memory flat")


if __name__ == "__main__":
    main()
