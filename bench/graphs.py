"""Benchmark of graph workflows against mcpGraph, the reference implementation of the format.

    .venv/bin/python bench/graphs.py [--calls 50] [--sections engine,endpoint,pool] [--sqlite]
        [--transport http|stdio]

Needs: the project's venv (the start command's is enough); Node and npm (mcpGraph is
installed from npm on first use); for `endpoint` and `pool`, PostgreSQL (`DATABASE_URL`,
default postgresql://postgres@127.0.0.1:5432/switchyard_bench; `--sqlite` runs ours on a
throwaway SQLite file instead, figures not comparable with docs/benchmarks.md); for `pool`,
the npm MCP servers of `bash .ci/install-mcp-peers.sh`. `--sections engine` needs none of it.
With the defaults it takes about two minutes; `--calls 200` for steady figures.

Sections:

- engine: the graph engine in-process, history observer off: µs per node of the loop
  `sum_to_n` (a transform and a switch per iteration) at n=1000, and of the ten-node chain.
  Target: under 200 µs per node.
- endpoint: end-to-end latency of `tools/call` through `/mcp` (2026-07-28, one POST per
  call, API key, history persisted) of `chain10` and of `sum_to_n` at n = 25, 50, 100, 200,
  against a production start of ours (uvicorn, DEBUG=false) on PostgreSQL (`DATABASE_URL`,
  default postgresql://postgres@127.0.0.1:5432/switchyard_bench, created if missing), and
  in the same run, alternating, against mcpGraph (npm `mcpgraph`, installed into
  /tmp/mcpgraph-peer on first use) serving the same unchanged files over stdio with its
  history in memory. Targets: chain10 p50 under 20 ms; n=100 under 60 ms; time linear in n.
- pool: `count_files` of seed 003, unchanged but for the folder, against the real
  `@modelcontextprotocol/server-filesystem` (`bash .ci/install-mcp-peers.sh`): a call
  through `/mcp` with the server's connection pooled, against mcpGraph's warm call, and a
  downstream `list_directory` through our pool against spawning the server for each call.

`--transport` chooses how `endpoint` and `pool` reach ours: `http` (the default, the production
figure) as above; `stdio`, `manage.py mcp_stdio` (the transport desktop clients start, with the
production start's environment: DEBUG=false, the same database) spoken to by the very client
that speaks to mcpGraph: like for like, both over stdio, both initialized with 2025-06-18.

Each server gets one thin client: one JSON-RPC request at a time, timed from send to answer.
Ratios are ours / mcpGraph in time (below 1: we are faster).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
# This file is bench/graphs.py: keep it from shadowing the `graphs` app.
sys.path[0] = str(ROOT)

PYTHON = sys.executable
FILES = ROOT / "bench" / "graph_files"
PEER_HOME = Path("/tmp/mcpgraph-peer")
PEER_VERSION = "0.1.23"
FILESYSTEM = "@modelcontextprotocol/server-filesystem"
# Where .ci/install-mcp-peers.sh puts the npm servers (as tests/peers reads it; that module
# imports pytest, which the start command's venv does not have).
PEERS_HOME = Path(os.environ.get("MCP_PEERS_HOME", "/tmp/mcp-peers"))
DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/switchyard_bench"
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
LOOP_SIZES = (25, 50, 100, 200)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "p50": statistics.median(samples),
        "p95": percentile(samples, 0.95),
        "n": len(samples),
    }


# ---------------------------------------------------------------------------- engine


def bench_engine() -> list[str]:
    from graphs.engine import compile_tool, execute, parse_definition

    definition = parse_definition((FILES / "loop.yaml").read_text())
    tools = {tool.name: compile_tool(tool) for tool in definition.tools}
    lines = [
        "| graph | nodes per run | µs per node (median of 5) | target |",
        "| --- | ---: | ---: | ---: |",
    ]
    # (tool, arguments, nodes per run, runs per sample): about 2,000 nodes per sample.
    cases = (("sum_to_n", {"n": 1000}, 2003, 1), ("chain10", {"x": 3}, 10, 200))
    for name, arguments, nodes, runs in cases:
        samples = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(runs):
                execute(tools[name], arguments, call_tool=_no_calls, limits=definition.limits)
            samples.append((time.perf_counter() - started) / (nodes * runs) * 1e6)
        lines.append(f"| {name} | {nodes} | {statistics.median(samples):.1f} | 200 |")
    return lines


def _no_calls(*args: Any) -> Any:
    raise AssertionError("these graphs call no server")


# ---------------------------------------------------------------------------- servers


MANAGE = [PYTHON, str(ROOT / "manage.py")]


# The same on every run: the providers' env stored under it is read again by the next run on
# the same database (a key of each run's own made a second run on it fail to import the graphs).
BENCH_SECRET_KEY = "bench-graphs-loopback-only-" + "k" * 40


def production_env(database_url: str) -> dict[str, str]:
    """The environment of a production start of ours on `database_url`."""
    env = {
        **os.environ,
        "DEBUG": "false",
        "SECRET_KEY": BENCH_SECRET_KEY,
        "DATABASE_URL": database_url,
        "ALLOWED_HOSTS": "127.0.0.1",
        # Plain HTTP on loopback: no redirect to HTTPS.
        "SECURE_SSL_REDIRECT": "false",
    }
    env.pop("REDIS_URL", None)
    return env


def prepare(env: dict[str, str], graph_files: list[Path]) -> None:
    """Migrate the database of `env` and import the graph files into it."""
    _checked([*MANAGE, "migrate", "--no-input"], env)
    for path in graph_files:
        _checked([*MANAGE, "import_graph", str(path)], env)


class Ours:
    """A production start of Switchyard under uvicorn on a prepared database (PostgreSQL)."""

    def __init__(self, workdir: Path, graph_files: list[Path], database_url: str):
        self.port = _free_port()
        self.env = production_env(database_url)
        prepare(self.env, graph_files)
        key = (
            _checked(
                [*MANAGE, "create_api_key", "--name", "bench-graphs", "--rate-limit", "1000000"],
                self.env,
            )
            .strip()
            .splitlines()[-1]
        )
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Authorization": f"Bearer {key}",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call",
        }
        self.log = workdir / "ours.log"
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [
                    str(Path(PYTHON).parent / "uvicorn"),
                    "config.asgi:application",
                    "--port",
                    str(self.port),
                    "--no-access-log",
                    # The client keeps one connection, idle while the peer takes its turn.
                    "--timeout-keep-alive",
                    "600",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.connection = _wait_http(self.port, self.process, self.log)

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments, "_meta": META},
            }
        )
        self.connection.request("POST", "/mcp", body, {**self.headers, "Mcp-Name": name})
        answer = json.loads(self.connection.getresponse().read())
        return _tool_value(answer, name)

    def stop(self) -> None:
        self.connection.close()
        self.process.terminate()
        self.process.wait(timeout=15)


class StdioServer:
    """A server started as `command`, spoken to in JSON-RPC lines on its stdin and stdout,
    initialized as a 2025-06-18 client."""

    def __init__(self, command: list[str], cwd: Path, env: dict[str, str]):
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        self._next_id = 0
        self._request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        self._send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise SystemExit(f"{' '.join(self.process.args)} exited: its stdout ended")
            message = json.loads(line)
            if message.get("id") == self._next_id:
                return message

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        return _tool_value(
            self._request("tools/call", {"name": name, "arguments": arguments}), name
        )

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=15)


def start_peer(graph_file: Path, env: dict[str, str] | None = None) -> StdioServer:
    """mcpGraph serving a graph file over stdio."""
    main = PEER_HOME / "node_modules" / "mcpgraph" / "dist" / "main.js"
    if not main.is_file():
        PEER_HOME.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(PEER_HOME),
                "--no-audit",
                "--no-fund",
                f"mcpgraph@{PEER_VERSION}",
            ],
            check=True,
            capture_output=True,
        )
    return StdioServer(
        ["node", str(main), "-g", str(graph_file)], graph_file.parent, {**os.environ, **(env or {})}
    )


def start_ours(
    transport: str, workdir: Path, graph_files: list[Path], database_url: str
) -> Ours | StdioServer:
    """Ours serving the graph files: a production start under uvicorn (`http`), or
    `manage.py mcp_stdio` with the same environment (`stdio`)."""
    if transport == "http":
        return Ours(workdir, graph_files, database_url)
    env = production_env(database_url)
    prepare(env, graph_files)
    return StdioServer([*MANAGE, "mcp_stdio"], ROOT, env)


def _tool_value(answer: dict[str, Any], name: str) -> Any:
    result = answer.get("result")
    if result is None or result.get("isError"):
        raise SystemExit(f"{name} failed: {json.dumps(answer)[:500]}")
    if "structuredContent" in result:
        return result["structuredContent"]
    return json.loads(result["content"][0]["text"])


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _checked(command: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[1:3])} failed:\n{done.stderr or done.stdout}")
    return done.stdout


def _ensure_database(url: str) -> None:
    """Create the PostgreSQL database if missing; say what to do when there is no server."""
    import psycopg

    # The database's name is the URL's path; its query (libpq options, say) is not part of it.
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    server = urlunsplit(parts._replace(path="/postgres", query=""))
    try:
        with psycopg.connect(server, autocommit=True, connect_timeout=5) as connection:
            exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
            if exists.fetchone() is None:
                connection.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as error:
        raise SystemExit(
            f"The endpoint and pool sections run ours on PostgreSQL, which did not answer at "
            f"{server}: {str(error).strip()}\nStart PostgreSQL and set DATABASE_URL, or pass "
            "--sqlite (a throwaway SQLite file), or --sections engine."
        ) from None


def _filesystem_server() -> list[str]:
    """`node` and the bin script of the server-filesystem that the install script put in
    PEERS_HOME, so the bench starts it without the network."""
    manifest = PEERS_HOME / "node_modules" / FILESYSTEM / "package.json"
    if not manifest.is_file():
        raise SystemExit(
            f"The pool section needs {FILESYSTEM} in {PEERS_HOME}: bash .ci/install-mcp-peers.sh"
        )
    bin_entry = json.loads(manifest.read_text(encoding="utf-8"))["bin"]
    script = bin_entry if isinstance(bin_entry, str) else next(iter(bin_entry.values()))
    return ["node", str(manifest.parent / script)]


def _npx_offline_env() -> dict[str, str]:
    """npx starts the copy of a bare package name the install script cached, offline."""
    return {"npm_config_cache": str(PEERS_HOME / "npm-cache"), "npm_config_offline": "true"}


def _wait_http(port: int, process: subprocess.Popen, log: Path) -> http.client.HTTPConnection:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"our server exited at start; see {log}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("GET", "/api/v1/public/health")
            connection.getresponse().read()
            return connection
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"our server did not answer within 60 s; see {log}")


# ---------------------------------------------------------------------------- measuring


def timed(
    server: Any, name: str, arguments: dict[str, Any], expected: Any, calls: int
) -> list[float]:
    """Milliseconds per call, after checking the answer once and warming up."""
    value = server.call(name, arguments)
    if value != expected:
        raise SystemExit(f"{name}{arguments} returned {value!r}, expected {expected!r}")
    for _ in range(3):
        server.call(name, arguments)
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        server.call(name, arguments)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def compare(
    cases: list[tuple[str, str, dict[str, Any], Any, int]], ours: Any, peer: Any, rounds: int = 2
) -> list[str]:
    """Each case on both servers, A B A B, so drift of the machine hits both alike."""
    lines = [
        "| case | ours p50 ms | ours p95 ms | mcpGraph p50 ms | mcpGraph p95 ms "
        "| ours / mcpGraph (p50) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, name, arguments, expected, calls in cases:
        samples: dict[str, list[float]] = {"ours": [], "peer": []}
        for _ in range(rounds):
            samples["ours"] += timed(ours, name, arguments, expected, calls // rounds)
            samples["peer"] += timed(peer, name, arguments, expected, calls // rounds)
        a, b = summary(samples["ours"]), summary(samples["peer"])
        lines.append(
            f"| {label} | {a['p50']:.2f} | {a['p95']:.2f} | {b['p50']:.2f} | {b['p95']:.2f} | "
            f"{a['p50'] / b['p50']:.2f} |"
        )
    return lines


def bench_endpoint(workdir: Path, calls: int, database_url: str, transport: str) -> list[str]:
    ours = start_ours(transport, workdir, [FILES / "loop.yaml"], database_url)
    peer = start_peer(FILES / "loop.yaml")
    try:
        cases = [("chain10", "chain10", {"x": 3}, {"x": 35}, calls)]
        cases += [
            (
                f"sum_to_n n={n}",
                "sum_to_n",
                {"n": n},
                {"sum": n * (n + 1) // 2},
                max(20, calls // 4),
            )
            for n in LOOP_SIZES
        ]
        return compare(cases, ours, peer)
    finally:
        ours.stop()
        peer.stop()


def bench_pool(workdir: Path, calls: int, database_url: str, transport: str) -> list[str]:
    filesystem = _filesystem_server()
    counting = workdir / "tests" / "counting"
    counting.mkdir(parents=True)
    for index in range(7):
        (counting / f"file{index}.txt").write_text("x")
    count_files = workdir / "count_files.yaml"
    count_files.write_text((ROOT / "tests" / "graphs" / "engine" / "count_files.yaml").read_text())
    os.environ.update(_npx_offline_env())
    ours = start_ours(transport, workdir, [count_files], database_url)
    peer = start_peer(count_files, _npx_offline_env())
    arguments = {"directory": str(counting)}
    try:
        lines = compare(
            [("count_files (7 files)", "count_files", arguments, {"count": 7}, calls)], ours, peer
        )
    finally:
        ours.stop()
        peer.stop()
    lines += ["", *bench_spawn(filesystem, counting, calls)]
    return lines


def bench_spawn(command: list[str], directory: Path, calls: int) -> list[str]:
    """A downstream call through our pool against starting the server for every call."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from nodespecs.downstream import client as mcp_client

    connection = mcp_client.Connection(
        name="filesystem",
        transport="stdio",
        command=command[0],
        args=(*command[1:], str(directory)),
    )
    arguments = {"path": str(directory)}
    mcp_client.call_tool(connection, "list_directory", arguments)
    pooled = []
    for _ in range(calls):
        started = time.perf_counter()
        mcp_client.call_tool(connection, "list_directory", arguments)
        pooled.append((time.perf_counter() - started) * 1000)
    mcp_client.close_all()

    async def fresh_call() -> None:
        parameters = StdioServerParameters(command=command[0], args=[*command[1:], str(directory)])
        async with stdio_client(parameters) as streams, ClientSession(*streams) as session:
            await session.initialize()
            await session.call_tool("list_directory", arguments)

    fresh = []
    for _ in range(5):
        started = time.perf_counter()
        anyio.run(fresh_call)
        fresh.append((time.perf_counter() - started) * 1000)
    a, b = summary(pooled), summary(fresh)
    return [
        "| downstream list_directory | p50 ms | p95 ms | calls |",
        "| --- | ---: | ---: | ---: |",
        f"| pooled connection | {a['p50']:.2f} | {a['p95']:.2f} | {a['n']} |",
        f"| fresh server per call | {b['p50']:.1f} | {b['p95']:.1f} | {b['n']} |",
        f"| fresh / pooled | {b['p50'] / a['p50']:.0f}x | | |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--calls", type=int, default=50, help="calls per case and server (steady figures: 200)"
    )
    parser.add_argument("--sections", default="engine,endpoint,pool")
    parser.add_argument(
        "--sqlite",
        action="store_true",
        help="ours on a throwaway SQLite file instead of PostgreSQL (DATABASE_URL)",
    )
    parser.add_argument(
        "--transport",
        choices=("http", "stdio"),
        default="http",
        help="how endpoint and pool reach ours: uvicorn over HTTP (the production figure) "
        "or manage.py mcp_stdio",
    )
    options = parser.parse_args()
    sections = options.sections.split(",")
    reached = "/mcp" if options.transport == "http" else "manage.py mcp_stdio"
    print(f"# bench/graphs.py, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores\n")
    with tempfile.TemporaryDirectory(prefix="bench-graphs-") as tmp:
        workdir = Path(tmp)
        database_url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
        if options.sqlite:
            database_url = f"sqlite:///{workdir / 'bench.sqlite3'}"
        # What the sections need is checked before any runs, not found missing minutes in.
        needs_database = "endpoint" in sections or "pool" in sections
        if needs_database and database_url.startswith("postgres"):
            _ensure_database(database_url)
        if "pool" in sections:
            _filesystem_server()
        if "engine" in sections:
            print("## Engine (in-process, no observer)\n", *bench_engine(), "", sep="\n")
        if "endpoint" in sections:
            print(
                f"## Ours through {reached}, history on {database_url.split(':')[0]}, "
                "against mcpGraph over stdio\n",
                *bench_endpoint(workdir, options.calls, database_url, options.transport),
                "",
                sep="\n",
            )
        if "pool" in sections:
            print(
                f"## count_files against server-filesystem, ours through {reached}\n",
                *bench_pool(workdir, options.calls, database_url, options.transport),
                "",
                sep="\n",
            )


if __name__ == "__main__":
    main()
