"""The MCP endpoint over HTTP against the official SDK and a floor: `python bench/mcp_endpoint.py`.

    .venv/bin/python bench/mcp_endpoint.py            # a quick look: about 2 minutes
    .venv/bin/python bench/mcp_endpoint.py --long     # the figures' length: about 12 minutes
        [--duration S] [--warmup S] [--rounds N] [--workers 1] [--concurrency 1,16]
        [--eras modern,legacy]

Needs: the project's venv (the start command's is enough) and `wrk` (`apt-get install -y
wrk`); with `--workers` above 1, also `redis-server` (`apt-get install -y redis-server`) or
`REDIS_URL`. No PostgreSQL: ours runs on a throwaway SQLite database unless `DATABASE_URL`
is set.

Measures requests/s and p50/p99 latency of `tools/call get_node_details` (one node,
ACTION/HTTP_REQUEST) and `tools/list`, at each concurrency, in both protocol eras
(2026-07-28 without sessions; 2025-11-25 with a session opened by `initialize`), against:

- ours: a production start of Switchyard — a throwaway SQLite database (or `DATABASE_URL`)
  prepared with `migrate`, `load_node_specs` and `create_api_key`, `DEBUG=false`, a random
  `SECRET_KEY`, then `uvicorn config.asgi:application --workers W --no-access-log`. Several
  workers need a shared cache (docs/operations.md), so with W > 1 and no `REDIS_URL` a
  private `redis-server` is started on 127.0.0.1 (`--cache` overrides). Requests carry
  `Authorization: Bearer KEY`; the key's rate limit is set high enough never to refuse.
- the peers: `bench/sdk_peer_server.py`, the same tool and data on the SDK's `MCPServer`
  under the same uvicorn, stateless (`--peer-workers`, default as ours) and stateful (one
  worker: its sessions live in process memory), both with JSON responses.
- the floor: `bench/floor_server.py`, a bare ASGI app (no Django, no framework) under the same
  uvicorn, answering every request of a cell with the bytes ours answered to the cell's first
  request (captured at the start of the cell): what the machine allows, so ours/floor is the
  share of it that ours answers (issue 31, item 4: at least 0.5 at c16).
- the checked floor (`--peers floor-checked`): the floor doing, in as few Python steps as they
  take, what any server answering this call must (the Host, the key hashed and looked up, a
  rate count, the JSON parsed, the envelope and routing headers checked, the id put in the
  answer, the request counted in prometheus-client): its ratio to the floor is what those
  rules cost in Python alone.
- ours again with other settings, as `--peers metrics-off` (`METRICS_ENABLED=false`),
  `json-logs` (`LOG_FORMAT=json`) or `tracing-on` (a span per request exported by the SDK's
  BatchSpanProcessor over OTLP/HTTP to `bench/otlp_sink.py`, a stand-in collector): what the
  metrics, a JSON line or a trace per request cost; `tracing-sampled` keeps one trace in ten.
  The sink's span count is checked against the requests sent, so no span was dropped to look
  cheap.

The load comes from `wrk` (one thread, keep-alive connections = concurrency; install with
`apt-get install -y wrk`). Each (era, method, concurrency) cell runs every server in turn,
A B A B for `--rounds` rounds, each run `--warmup` s discarded then `--duration` s measured,
so drift of the shared machine hits all servers alike. Every response of ours must be 2xx
(wrk's non-2xx/3xx count and socket errors must be zero; a peer's are listed after the
table) and one request per server and cell is checked for the right content first.
`cpu ms/req` is the server processes' CPU time (Redis included where used) over requests: an
efficiency figure that does not depend on how much CPU the load generator took. Ratios are
ours / peer (above 1: we are faster).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
BIN = Path(PYTHON).parent
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
TOOL_ARGUMENTS = {"nodes": [{"node_type": "ACTION", "subtype": "HTTP_REQUEST"}]}
CLK_TCK = os.sysconf("SC_CLK_TCK")
TARGETS = {16: 2.0, 1: 2.0}  # concurrency → ours/peer throughput (issue 15: at least 2.0x)
# (method, concurrency) → ours/floor throughput (issue 31, item 4: knowledge calls)
FLOOR_TARGETS = {("tools/call", 16): 0.5}
FLOOR = "floor"
# The floor doing the steps any server answering this call must (bench/floor_server.py).
CHECKED_FLOOR = "floor-checked"
# Seconds per run and rounds per cell. The default is a quick look (8 cells, 5 servers, 2 s
# each, plus the start: about 2 minutes); steady figures need longer runs: --long, or the
# lengths docs/benchmarks.md names.
SHORT = {"duration": 1, "warmup": 1, "rounds": 1}
# `--peers` that are ours again with other settings: the metrics off (METRICS_ENABLED=false:
# the ratio is what recording them costs), or a JSON line written per request (to the
# server's log file; LOG_LEVEL=INFO, or they would not be).
OURS_VARIANTS = {
    "metrics-off": {"METRICS_ENABLED": "false"},
    "json-logs": {"LOG_FORMAT": "json", "LOG_LEVEL": "INFO"},
    # `{sink}`: the port of a bench/otlp_sink.py started for the variant.
    "tracing-on": {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:{sink}/v1/traces",
    },
    # The same, one trace in ten kept (docs/operations.md's advice for busy servers).
    "tracing-sampled": {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:{sink}/v1/traces",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.1",
    },
}
LONG = {"duration": 10, "warmup": 2, "rounds": 2}


# ---------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    """One HTTP server under test (its own process group) and how to talk to it."""

    label: str
    kind: str  # "ours", "sdk" or "floor"
    port: int
    command: list[str]
    env: dict[str, str]
    log: Path
    extra_cpu_pids: list[int] = field(default_factory=list)
    auth: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen | None = None
    sessions: dict[str, str] = field(default_factory=dict)  # era → session id ("" = none)
    # Requests wrk sent it, warm-ups included.
    requests_sent: int = 0

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.command,
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process and self.process.poll() is not None:
                raise SystemExit(f"{self.label} exited at start; see {self.log}:\n{tail(self.log)}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/mcp")
                conn.getresponse().read()
                conn.close()
                return
            except OSError:
                time.sleep(0.2)
        raise SystemExit(f"{self.label} did not answer within {timeout:.0f} s; see {self.log}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            stop_group(self.process)

    def cpu_seconds(self) -> float:
        """CPU time of every process in the server's group (workers included), plus extras."""
        if not self.process:
            return 0.0
        return group_cpu_seconds(self.process.pid) + sum(
            pid_cpu_seconds(pid) for pid in self.extra_cpu_pids
        )


def stop_group(process: subprocess.Popen) -> None:
    """End a process group this script started (by its id), politely then firmly."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)
    except ProcessLookupError:
        pass


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()


def pid_cpu_seconds(pid: int) -> float:
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK if fields else 0.0


def group_cpu_seconds(pgid: int) -> float:
    total = 0.0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and int(fields[2]) == pgid:  # field 5 of stat: process group
                total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def run_checked(command: list[str], env: dict[str, str], what: str) -> str:
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise SystemExit(f"{what} failed ({result.returncode}):\n{result.stderr or result.stdout}")
    return result.stdout


# ---------------------------------------------------------------------------- requests


def request_body(era: str, method: str, request_id: int = 1) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if method == "tools/call":
        params = {"name": "get_node_details", "arguments": TOOL_ARGUMENTS}
    if era == "modern":
        params["_meta"] = MODERN_META
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def request_headers(server: Server, era: str, method: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json", **server.auth}
    if era == "modern":
        headers["MCP-Protocol-Version"] = MODERN
        headers["Mcp-Method"] = method
        if method == "tools/call":
            headers["Mcp-Name"] = "get_node_details"
    else:
        headers["MCP-Protocol-Version"] = LEGACY
        if server.sessions.get(era):
            headers["Mcp-Session-Id"] = server.sessions[era]
    return headers


def post(server: Server, headers: dict[str, str], body: dict[str, Any]):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("POST", "/mcp", body=json.dumps(body).encode(), headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def open_legacy_session(server: Server) -> None:
    """initialize + notifications/initialized; remember the session id (none if stateless)."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        **server.auth,
    }
    status, response_headers, body = post(
        server,
        headers,
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        },
    )
    if status != 200:
        raise SystemExit(f"{server.label}: initialize answered {status}: {body[:300]!r}")
    lowered = {name.lower(): value for name, value in response_headers.items()}
    session = lowered.get("mcp-session-id", "")
    server.sessions["legacy"] = session
    headers["MCP-Protocol-Version"] = LEGACY
    if session:
        headers["Mcp-Session-Id"] = session
    status, _, body = post(
        server, headers, {"jsonrpc": "2.0", "method": "notifications/initialized"}
    )
    if status not in (200, 202):
        raise SystemExit(f"{server.label}: notifications/initialized answered {status}: {body!r}")


def verify(server: Server, era: str, method: str) -> bytes:
    """One request, checked for the right content; returns the answer's bytes."""
    status, _, raw = post(server, request_headers(server, era, method), request_body(era, method))
    problem = None
    try:
        message = json.loads(raw)
    except ValueError:
        message, problem = None, "not JSON"
    if problem is None and status != 200:
        problem = f"HTTP {status}"
    elif problem is None and ("error" in message or "result" not in message):
        problem = "a JSON-RPC error"
    elif problem is None and method == "tools/call":
        result = message["result"]
        structured = result.get("structuredContent") or {}
        nodes = structured.get("nodes") or []
        if (
            result.get("isError")
            or not nodes
            or nodes[0].get("subtype") != "HTTP_REQUEST"
            or "error" in nodes[0]
            or b"HTTP_REQUEST" not in raw
        ):
            problem = "no HTTP_REQUEST details"
    elif problem is None and method == "tools/list":
        names = [tool.get("name") for tool in message["result"].get("tools", [])]
        if "get_node_details" not in names:
            problem = f"get_node_details not listed ({names})"
    if problem:
        raise SystemExit(f"{server.label} {era} {method}: {problem}: {raw[:400]!r}")
    return raw


def floor_answer_set(server: Server, answer: bytes) -> None:
    """Have the floor answer `answer` to every request from now on."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("PUT", "/floor/answer", body=answer)
        status = conn.getresponse().status
    finally:
        conn.close()
    if status != 204:
        raise SystemExit(f"{server.label}: setting its answer answered {status}")


# ---------------------------------------------------------------------------- wrk

LUA_DONE = """
-- The first answer that was not 2xx, so an error report can say what it was.
response = function(status, headers, body)
  if status >= 300 and first_error == nil then
    first_error = status .. " " .. string.sub(body or "", 1, 200)
    io.stderr:write("WRK_FIRST_ERROR " .. first_error .. "\\n")
  end
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK_JSON {\\"requests\\":%d,\\"duration_us\\":%d,\\"status\\":%d,\\"connect\\":%d,"
    .. "\\"read\\":%d,\\"write\\":%d,\\"timeout\\":%d,\\"p50_us\\":%d,\\"p99_us\\":%d}\\n",
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


def lua_string(text: str) -> str:
    assert "]==]" not in text
    return f"[==[{text}]==]"


def wrk_script(directory: Path, server: Server, era: str, method: str) -> Path:
    lines = [
        'wrk.method = "POST"',
        f"wrk.body = {lua_string(json.dumps(request_body(era, method)))}",
    ]
    for name, value in request_headers(server, era, method).items():
        lines.append(f"wrk.headers[ {lua_string(name)} ] = {lua_string(value)}")
    path = directory / f"{server.label}-{era}-{method.replace('/', '_')}.lua"
    path.write_text("\n".join(lines) + "\n" + LUA_DONE)
    return path


@dataclass
class Run:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    cpu_seconds: float
    # Non-2xx answers and the first of them; only a peer may have any (ours must not).
    failed: int = 0
    first_error: str = ""

    @property
    def rps(self) -> float:
        return self.requests / self.seconds


def first_error(stderr: str) -> str:
    line = next((x for x in stderr.splitlines() if x.startswith("WRK_FIRST_ERROR ")), "")
    return line.removeprefix("WRK_FIRST_ERROR ") or "not recorded"


def wrk(server: Server, script: Path, connections: int, seconds: int, label: str) -> Run:
    command = [
        "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s",
        "-s", str(script), f"http://127.0.0.1:{server.port}/mcp",
    ]  # fmt: skip
    cpu_before = server.cpu_seconds()
    result = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
    cpu = server.cpu_seconds() - cpu_before
    line = next((x for x in result.stdout.splitlines() if x.startswith("WRK_JSON ")), None)
    if result.returncode != 0 or line is None:
        raise SystemExit(f"wrk failed for {label}:\n{result.stdout}\n{result.stderr}")
    data = json.loads(line.removeprefix("WRK_JSON "))
    errors = {k: data[k] for k in ("status", "connect", "read", "write", "timeout") if data[k]}
    # Our server must answer every request; a peer's errors are reported with its figures
    # (the SDK's stateful server answers an occasional 500 under load), not fatal.
    if data["requests"] == 0 or (errors and server.kind == "ours"):
        raise SystemExit(
            f"{label}: {data['requests']} requests with errors {errors} "
            f"(status = non-2xx/3xx responses; the first: {first_error(result.stderr)}); "
            f"server log {server.log}:\n{tail(server.log)}"
        )
    server.requests_sent += data["requests"]
    return Run(
        data["requests"],
        data["duration_us"] / 1e6,
        data["p50_us"] / 1e3,
        data["p99_us"] / 1e3,
        cpu,
        failed=sum(errors.values()),
        first_error=first_error(result.stderr) if errors else "",
    )


# ---------------------------------------------------------------------------- setup


def start_redis(workdir: Path) -> tuple[subprocess.Popen, str]:
    binary = shutil.which("redis-server")
    if not binary:
        raise SystemExit(
            "Several workers need a shared cache (REDIS_URL) but redis-server is not installed: "
            "apt-get install -y redis-server, set REDIS_URL, or pass --cache locmem."
        )
    port = free_port()
    process = subprocess.Popen(
        [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--dir", str(workdir), "--loglevel", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return process, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.1)
    raise SystemExit("redis-server did not start")


def base_env(workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSTARTUP",)}
    env.update(
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="127.0.0.1",
        # Plain HTTP on loopback: no redirect to HTTPS.
        SECURE_SSL_REDIRECT="false",
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
    )
    if not os.environ.get("DATABASE_URL"):
        env["DATABASE_URL"] = f"sqlite:///{workdir / 'bench.sqlite3'}"
    return env


def start_otlp_sink(workdir: Path, label: str) -> tuple[subprocess.Popen, int]:
    """bench/otlp_sink.py on a free port: the collector a traced variant exports to."""
    port = free_port()
    with open(workdir / f"{label}-otlp-sink.log", "ab") as log:
        process = subprocess.Popen(
            [PYTHON, str(ROOT / "bench" / "otlp_sink.py"), str(port)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    return process, port


def exported_spans_check(server: Server, port: int, ratio: float, wait: float = 15.0) -> str:
    """How many spans reached the sink against the requests wrk sent `server` (each has its
    span, `ratio` of them sampled; the checks and session openings add a few). The processor
    exports its last batch within its schedule delay (5 s by default): this waits up to
    `wait` seconds for it."""
    expected = server.requests_sent * ratio
    # A sampled count is a binomial draw: allow four standard deviations below its mean.
    floor = expected - 4 * (expected * (1 - ratio)) ** 0.5
    deadline = time.monotonic() + wait
    while True:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/spans")
        spans = int(conn.getresponse().read())
        conn.close()
        if spans >= floor or time.monotonic() > deadline:
            break
        time.sleep(1)
    verdict = "none dropped" if spans >= floor else "SPANS WERE DROPPED"
    return (
        f"{server.label}: {spans} spans exported for {server.requests_sent} requests sent, "
        f"{ratio:g} of them sampled: {verdict}"
    )


def prepare_database(env: dict[str, str]) -> str:
    manage = [PYTHON, "manage.py"]
    run_checked([*manage, "migrate", "--noinput"], env, "migrate")
    run_checked([*manage, "load_node_specs"], env, "load_node_specs")
    out = run_checked(
        [*manage, "create_api_key", "--name", "bench", "--rate-limit", "1000000000"],
        env,
        "create_api_key",
    )
    return out.strip().splitlines()[-1].strip()


# uvicorn >= 0.x binds the socket itself for --workers N > 1 (and gunicorn always does) with
# proto 0, so asyncio never sets TCP_NODELAY on accepted connections and each keep-alive
# response waits ~40 ms for the client's delayed ACK (Kludex/uvicorn#3149). `--nodelay-patch`
# measures what a fixed launcher would give: it rebinds the listener with IPPROTO_TCP.
NODELAY_PATCH = """
import socket, sys
import uvicorn.config, uvicorn.main
_bind = uvicorn.config.Config.bind_socket
def bind_socket(self):
    sock = _bind(self)
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, sock.detach())
    return sock
uvicorn.config.Config.bind_socket = bind_socket
sys.argv[0] = "uvicorn"
uvicorn.main.main()
"""


def uvicorn_command(
    app: str, port: int, workers: int, launcher: str, nodelay_patch: bool = False
) -> list[str]:
    if launcher == "gunicorn":
        return [
            str(BIN / "gunicorn"), app, "-k", "uvicorn.workers.UvicornWorker",
            "-b", f"127.0.0.1:{port}", "-w", str(workers), "--log-level", "warning",
        ]  # fmt: skip
    start = [PYTHON, "-c", NODELAY_PATCH] if nodelay_patch else [str(BIN / "uvicorn")]
    return [
        *start, app, "--host", "127.0.0.1", "--port", str(port),
        "--workers", str(workers), "--no-access-log", "--log-level", "warning",
    ]  # fmt: skip


# ---------------------------------------------------------------------------- report


@dataclass
class Cell:
    era: str
    method: str
    concurrency: int
    runs: dict[str, list[Run]] = field(default_factory=dict)
    size: dict[str, int] = field(default_factory=dict)

    def rps(self, label: str) -> float:
        return statistics.fmean(run.rps for run in self.runs[label])

    def ratio(self, ours: str, peer: str) -> float:
        return self.rps(ours) / self.rps(peer)


def report(cells: list[Cell], ours: list[str], peers: list[str], markdown: bool) -> str:
    out = []
    sep = " | "
    header = ["era", "method", "c", "server", "req/s", "p50 ms", "p99 ms", "cpu ms/req",
              "bytes", *[f"ours/{p}" for p in peers]]  # fmt: skip
    rows = []
    for cell in cells:
        for label in [*ours, *peers]:
            runs = cell.runs.get(label)
            if not runs:
                continue
            requests = sum(r.requests for r in runs)
            ratios = [
                f"{cell.ratio(label, peer):.2f}" if label in ours and peer in cell.runs else ""
                for peer in peers
            ]
            rows.append(
                [
                    cell.era,
                    cell.method,
                    str(cell.concurrency),
                    label,
                    f"{cell.rps(label):.0f} ({'/'.join(f'{r.rps:.0f}' for r in runs)})",
                    f"{statistics.median(r.p50_ms for r in runs):.2f}",
                    f"{statistics.median(r.p99_ms for r in runs):.2f}",
                    f"{1000 * sum(r.cpu_seconds for r in runs) / requests:.2f}",
                    str(cell.size.get(label, "")),
                    *ratios,
                ]
            )
    if markdown:
        out.append("| " + sep.join(header) + " |")
        out.append("| " + sep.join("---" if i < 4 else "---:" for i in range(len(header))) + " |")
        out.extend("| " + sep.join(row) + " |" for row in rows)
    else:
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            out.append("  ".join(value.ljust(widths[i]) for i, value in enumerate(row)))
    out.append("")
    out.append("Targets (ours / the faster peer in the cell, mean req/s over rounds):")
    for cell in cells:
        target = TARGETS.get(cell.concurrency)
        # The SDK's servers only: ours with other settings (OURS_VARIANTS) and the floor are
        # no peers to beat.
        present = [
            p
            for p in peers
            if p in cell.runs and not p.startswith("ours-") and p not in (FLOOR, CHECKED_FLOOR)
        ]
        if target is None or not present:
            continue
        best = max(present, key=cell.rps)
        for label in ours:
            if label in cell.runs:
                ratio = cell.ratio(label, best)
                verdict = "met" if ratio >= target else "MISSED"
                out.append(
                    f"  {cell.era:6} {cell.method:10} c{cell.concurrency:<3} {label}: "
                    f"{ratio:.2f}x {best} (target {target}x) {verdict}"
                )
    out.append("Ours / the floor (a bare ASGI app answering ours' bytes), mean req/s over rounds:")
    for cell in cells:
        if FLOOR not in cell.runs:
            continue
        target = FLOOR_TARGETS.get((cell.method, cell.concurrency))
        for label in ours:
            if label in cell.runs:
                ratio = cell.ratio(label, FLOOR)
                verdict = "" if target is None else (" met" if ratio >= target else " MISSED")
                goal = "" if target is None else f" (target {target}x)"
                out.append(
                    f"  {cell.era:6} {cell.method:10} c{cell.concurrency:<3} {label}: "
                    f"{ratio:.2f}x the floor{goal}{verdict}"
                )
        if CHECKED_FLOOR in cell.runs:
            out.append(
                f"  {cell.era:6} {cell.method:10} c{cell.concurrency:<3} {CHECKED_FLOOR}: "
                f"{cell.ratio(CHECKED_FLOOR, FLOOR):.2f}x the floor (what the rules cost alone)"
            )
    failures = [
        f"  {cell.era} {cell.method} c{cell.concurrency} {label}: {run.failed} of "
        f"{run.requests} answers not 2xx, the first: {run.first_error}"
        for cell in cells
        for label, runs in cell.runs.items()
        for run in runs
        if run.failed
    ]
    if failures:
        out += ["", "Peer errors (their runs still count):", *failures]
    return "\n".join(out)


# ---------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--long",
        action="store_true",
        help="runs long enough for steady figures: 2 s warm-up + 10 s, 2 rounds (about 10 min)",
    )
    parser.add_argument("--duration", type=int, help="measured seconds per run (default 1)")
    parser.add_argument("--warmup", type=int, help="discarded seconds per run, 0: none (default 1)")
    parser.add_argument("--rounds", type=int, help="A B A B rounds per cell (default 1)")
    parser.add_argument(
        "--workers",
        default="1",
        help="our uvicorn workers; a list runs each (above 1: needs redis-server or REDIS_URL)",
    )
    parser.add_argument("--peer-workers", type=int, help="SDK stateless workers (default: ours)")
    parser.add_argument("--concurrency", default="1,16")
    parser.add_argument("--eras", default="modern,legacy")
    parser.add_argument("--methods", default="tools/call,tools/list")
    parser.add_argument(
        "--peers",
        default=f"sdk-stateless,sdk-stateful,{FLOOR},{CHECKED_FLOOR}",
        help=f"sdk-stateless, sdk-stateful, {FLOOR} (a bare ASGI app answering ours' bytes), "
        f"{CHECKED_FLOOR} (the same doing the steps any server must), or ours with other "
        "settings: " + ", ".join(OURS_VARIANTS),
    )
    parser.add_argument(
        "--cache",
        choices=("auto", "redis", "locmem"),
        default="auto",
        help="our cache: auto = REDIS_URL if set, else a private redis-server when workers > 1",
    )
    parser.add_argument("--launcher", choices=("uvicorn", "gunicorn"), default="uvicorn")
    parser.add_argument(
        "--nodelay-patch",
        action="store_true",
        help="start every uvicorn with a listener that gets TCP_NODELAY (not the documented start)",
    )
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--keep-servers", type=float, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name, short in SHORT.items():  # what is not given comes from --long or the quick look
        if getattr(args, name) is None:
            setattr(args, name, LONG[name] if args.long else short)

    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed: apt-get install -y wrk")
    if args.launcher == "gunicorn" and not (BIN / "gunicorn").exists():
        raise SystemExit("gunicorn is not installed in the virtual environment")
    worker_counts = [int(w) for w in args.workers.split(",")]
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    eras = args.eras.split(",")
    methods = args.methods.split(",")
    peer_names = [p for p in args.peers.split(",") if p]
    peer_workers = args.peer_workers or max(worker_counts)

    workdir = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    redis: subprocess.Popen | None = None
    sinks: dict[str, tuple[subprocess.Popen, int]] = {}  # server label → its OTLP sink
    servers: list[Server] = []
    finished = False
    try:
        env = base_env(workdir)
        print(f"preparing the database ({env['DATABASE_URL'].split('://')[0]}) ...", flush=True)
        key = prepare_database(env)
        ours: list[str] = []
        for workers in worker_counts:
            cache = args.cache
            if cache == "auto":
                cache = "redis" if (workers > 1 or os.environ.get("REDIS_URL")) else "locmem"
            server_env = dict(env)
            extra: list[int] = []
            if cache == "redis":
                if not os.environ.get("REDIS_URL"):
                    if redis is None:
                        redis, redis_url = start_redis(workdir)
                    server_env["REDIS_URL"] = redis_url
                    extra = [redis.pid]
            else:
                server_env.pop("REDIS_URL", None)
            label = f"ours-w{workers}-{cache}"
            port = free_port()
            servers.append(
                Server(
                    label, "ours", port,
                    uvicorn_command(
                        "config.asgi:application", port, workers, args.launcher,
                        args.nodelay_patch,
                    ),
                    server_env, workdir / f"{label}.log", extra,
                    {"Authorization": f"Bearer {key}"},
                )
            )  # fmt: skip
            ours.append(label)
        peers: list[str] = []
        for name in peer_names:
            if name in OURS_VARIANTS:
                # The same start as ours with its instrumentation set otherwise (issue 18):
                # its ratio is what that instrumentation costs, measured in the same rounds.
                label, port = f"ours-{name}", free_port()
                settings = OURS_VARIANTS[name]
                if any("{sink}" in value for value in settings.values()):
                    sinks[label] = start_otlp_sink(workdir, label)
                    settings = {k: v.format(sink=sinks[label][1]) for k, v in settings.items()}
                variant_env = {**servers[0].env, **settings}
                servers.append(
                    Server(
                        label, "ours", port,
                        uvicorn_command(
                            "config.asgi:application", port, worker_counts[0], args.launcher,
                            args.nodelay_patch,
                        ),
                        variant_env, workdir / f"{label}.log", servers[0].extra_cpu_pids,
                        servers[0].auth,
                    )
                )  # fmt: skip
                peers.append(label)
                continue
            if name in (FLOOR, CHECKED_FLOOR):
                port = free_port()
                checks = {"FLOOR_CHECKS": "true", "FLOOR_KEY": key} if name == CHECKED_FLOOR else {}
                servers.append(
                    Server(
                        name, FLOOR, port,
                        uvicorn_command(
                            "bench.floor_server:app", port, 1, args.launcher, args.nodelay_patch
                        ),
                        dict(env, **checks), workdir / f"{name}.log",
                        auth=servers[0].auth if checks else {},
                    )
                )  # fmt: skip
                peers.append(name)
                continue
            stateless = name == "sdk-stateless"
            workers = peer_workers if stateless else 1
            label = f"{name}-w{workers}"
            port = free_port()
            peer_env = dict(env, SDK_PEER_STATELESS="true" if stateless else "false")
            servers.append(
                Server(
                    label, "sdk", port,
                    uvicorn_command(
                        "bench.sdk_peer_server:app", port, workers, args.launcher,
                        args.nodelay_patch,
                    ),
                    peer_env, workdir / f"{label}.log",
                )
            )  # fmt: skip
            peers.append(label)
        for server in servers:
            server.start()
        for server in servers:
            server.wait_ready()
            if "legacy" in eras:
                open_legacy_session(server)
        print(
            f"servers: {', '.join(s.label for s in servers)}; wrk -t1, "
            f"{args.warmup:g} s warm-up + {args.duration:g} s per run, {args.rounds} rounds "
            f"A B A B; logs in {workdir}",
            flush=True,
        )
        if args.keep_servers:
            for server in servers:
                print(f"  {server.label}: port {server.port} pid {server.process.pid}")
            print(f"  key: {key}", flush=True)
            time.sleep(args.keep_servers)

        cells: list[Cell] = []
        for era in eras:
            for method in methods:
                scripts = {s.label: wrk_script(workdir, s, era, method) for s in servers}
                for concurrency in concurrencies:
                    cell = Cell(era, method, concurrency)
                    cells.append(cell)
                    # Ours come first: the floor answers what the first of them answered.
                    captured = b""
                    for server in servers:
                        if server.kind == FLOOR:
                            floor_answer_set(server, captured)
                        answer = verify(server, era, method)
                        captured = captured or answer
                        cell.size[server.label] = len(answer)
                    for round_number in range(args.rounds):
                        for server in servers:
                            name = f"{server.label} {era} {method} c{concurrency}"
                            script = scripts[server.label]
                            if args.warmup > 0:
                                wrk(server, script, concurrency, args.warmup, name)
                            run = wrk(server, script, concurrency, args.duration, name)
                            cell.runs.setdefault(server.label, []).append(run)
                            print(
                                f"  round {round_number + 1} {name}: {run.rps:.0f} req/s, "
                                f"p50 {run.p50_ms:.2f} ms, p99 {run.p99_ms:.2f} ms",
                                flush=True,
                            )
        print()
        print(report(cells, ours, peers, args.markdown))
        for server in servers:
            if server.label in sinks:
                ratio = float(server.env.get("OTEL_TRACES_SAMPLER_ARG", "1"))
                print(exported_spans_check(server, sinks[server.label][1], ratio))
        finished = True
    finally:
        for server in servers:
            server.stop()
        if redis is not None:
            stop_group(redis)
        for process, _ in sinks.values():
            stop_group(process)
        if finished:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"servers stopped; logs kept in {workdir}", file=sys.stderr)


if __name__ == "__main__":
    main()
