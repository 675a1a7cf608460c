"""The documented production start (docs/operations.md, Procfile) on loopback, for benchmarks.

    services = Services(database_url, redis_url, broker_url)
    key = prepare(services, graph_files)      # the release step, the catalog, graphs, a key
    with Cluster(services, tmp, webs=2, workers=2, beat=True, mode="queued") as cluster:
        cluster.urls                          # one per web instance
        cluster.rss_kib()                     # {"web-1": ..., "worker-1": ..., "beat": ...}
        cluster.cpu_seconds()                 # the same labels, CPU time used so far

Each web instance is `uvicorn config.asgi:application --host 127.0.0.1 --port P
--no-access-log` (the Procfile's command on its own port), each worker `celery -A config
worker --loglevel INFO` (with a node name of its own), beat `celery -A config beat`, all with
`DEBUG=false`, a random `SECRET_KEY` and plain HTTP on loopback (`SECURE_SSL_REDIRECT=false`,
`SECURE_COOKIES=false`). Every process gets its own process group and is stopped when the
`with` block ends, however it ends; call `stop_on_sigterm()` in a script's main so that a
SIGTERM ends it through that path too, and a process whose parent dies is sent SIGTERM by
the kernel, so nothing outlives a killed benchmark.
"""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# One SECRET_KEY for every process of a benchmark, as in one deployment (sessions made by one
# instance are read by the other).
_SECRET_KEY = secrets.token_urlsafe(50)
_PR_SET_PDEATHSIG = 1
_START_SECONDS = 60.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Services:
    """The backing services a production start runs on."""

    database_url: str  # PostgreSQL (or an SQLite file, for a one-instance direct start)
    redis_url: str  # cache: sessions, rate limits, catalog change notices
    broker_url: str  # Celery broker (and result backend)


def production_env(services: Services, mode: str = "queued") -> dict[str, str]:
    """The environment of every process: the documented production settings on loopback."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONSTARTUP"}
    env.update(
        DEBUG="false",
        SECRET_KEY=_SECRET_KEY,
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_COOKIES="false",
        SECURE_SSL_REDIRECT="false",
        DATABASE_URL=services.database_url,
        REDIS_URL=services.redis_url,
        CELERY_BROKER_URL=services.broker_url,
        EXECUTION_MODE=mode,
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    return env


def database_create(database_url: str) -> None:
    """Create the PostgreSQL database of `database_url` if it does not exist."""
    import psycopg

    parts = urlsplit(database_url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        found = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        if found.fetchone() is None:
            connection.execute(f'CREATE DATABASE "{name}"')


def prepare(services: Services, graph_files: list[Path], mode: str = "queued") -> str:
    """The release step and the data a start needs: migrate, load the catalog, import the
    graph files; returns a new API key with every scope and a rate limit that never refuses."""
    if services.database_url.startswith("postgres"):
        database_create(services.database_url)
    commands = [
        ["migrate", "--noinput"],
        ["load_node_specs"],
        *([["import_graph", *map(str, graph_files)]] if graph_files else []),
        ["create_api_key", "--name", "bench", "--rate-limit", "1000000000"],
    ]
    # The four manage.py commands in one process: Django starts once, not four times.
    done = subprocess.run(
        [sys.executable, "-c", _MANAGE_ALL, json.dumps(commands)],
        cwd=ROOT, env=production_env(services, mode), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"preparing the database failed ({done.returncode}):\n{done.stderr}")
    return done.stdout.strip().splitlines()[-1].strip()


_MANAGE_ALL = """
import json, sys
import django
from django.core.management import call_command
django.setup()
for command in json.loads(sys.argv[1]):
    call_command(*command)
"""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    # Runs in the child before exec: the kernel sends SIGTERM when the benchmark dies, even
    # by SIGKILL, so no server outlives it.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Process:
    """One process of the start (in a process group of its own) and its log."""

    label: str
    popen: subprocess.Popen
    log: Path

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the group (a warm shutdown for Celery), then SIGKILL after 20 s."""
        if self.popen.poll() is not None:
            return
        try:
            os.killpg(self.popen.pid, signal.SIGTERM)
            self.popen.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)
        except ProcessLookupError:
            pass


@dataclass
class Cluster:
    """`webs` web instances and `workers` Celery workers (and beat if asked) in `mode`."""

    services: Services
    workdir: Path
    webs: int = 2
    workers: int = 2
    mode: str = "queued"
    beat: bool = False
    name: str = "bench"
    urls: list[str] = field(default_factory=list)
    processes: list[Process] = field(default_factory=list)

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start every process and wait until each is ready."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = production_env(self.services, self.mode)
        for index in range(1, self.webs + 1):
            port = free_port()
            self.urls.append(f"http://127.0.0.1:{port}")
            self._spawn(
                f"web-{index}", env,
                str(BIN / "uvicorn"), "config.asgi:application",
                "--host", "127.0.0.1", "--port", str(port), "--no-access-log",
            )  # fmt: skip
        for index in range(1, self.workers + 1):
            # The Procfile's worker: one pool process per core.
            self._spawn(
                f"worker-{index}", env,
                str(BIN / "celery"), "-A", "config", "worker", "--loglevel", "INFO",
                "--hostname", f"{self.name}-{index}@%h",
            )  # fmt: skip
        if self.beat:
            schedule = self.workdir / f"{self.name}-celerybeat-schedule"
            self._spawn(
                "beat", env,
                str(BIN / "celery"), "-A", "config", "beat", "--loglevel", "INFO",
                "--schedule", str(schedule),
            )  # fmt: skip
        deadline = time.monotonic() + _START_SECONDS
        for process, url in zip(self.processes, self.urls, strict=False):
            self._wait(process, deadline, lambda url=url: _healthy(url))
        for process in self.processes[self.webs :]:
            ready = "beat: Starting" if process.label == "beat" else " ready."
            self._wait(process, deadline, lambda p=process, r=ready: r in p.tail(200))

    def _spawn(self, label: str, env: dict[str, str], *command: str) -> None:
        log = self.workdir / f"{self.name}-{label}.log"
        with open(log, "wb") as output:
            popen = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent,
            )  # fmt: skip
        self.processes.append(Process(label, popen, log))

    def _wait(self, process: Process, deadline: float, ready: Callable[[], bool]) -> None:
        while not ready():
            if process.popen.poll() is not None:
                raise RuntimeError(
                    f"{self.name} {process.label} exited at start ({process.popen.returncode}); "
                    f"{process.log}:\n{process.tail()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.name} {process.label} was not ready within {_START_SECONDS:.0f} s; "
                    f"{process.log}:\n{process.tail()}"
                )
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop every process: web instances first, so no new run is queued to a worker gone;
        the web instances together, then the workers and beat together (a Celery warm
        shutdown takes a second or two, one after the other they added up)."""
        webs = [process for process in self.processes if process.label.startswith("web-")]
        others = [process for process in self.processes if process not in webs]
        for group in (webs, others):
            if group:
                with ThreadPoolExecutor(max_workers=len(group)) as pool:
                    list(pool.map(Process.stop, group))

    def rss_kib(self) -> dict[str, int]:
        """Resident memory of each process with all its descendants (a worker's pool
        processes, stdio servers it started), in KiB. Forked children share pages with their
        parent, so a sum counts those twice: compare a label with itself over time."""
        return self._per_family(_rss_kib)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time used so far by each process with all its descendants, ended ones included:
        a figure of work done that does not depend on what else the machine runs."""
        return self._per_family(_cpu_seconds)

    def _per_family(self, measure: Callable[[int], float]) -> dict[str, Any]:
        children = _children_by_parent()
        return {
            process.label: sum(measure(pid) for pid in _family(process.popen.pid, children))
            for process in self.processes
        }


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/public/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields:  # else it ended while we looked
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def _family(pid: int, children: dict[int, list[int]]) -> list[int]:
    family, pending = [], [pid]
    while pending:
        current = pending.pop()
        family.append(current)
        pending.extend(children.get(current, []))
    return family


def _stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (empty once the process ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return stat[stat.rindex(")") + 2 :].split()


def _cpu_seconds(pid: int) -> float:
    fields = _stat_fields(pid)
    # utime, stime, and cutime, cstime: the time of children it has reaped (pool processes
    # replaced, stdio servers restarted); live children are counted on their own.
    return sum(int(value) for value in fields[11:15]) / _CLOCK_TICKS if fields else 0.0


def _rss_kib(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    line = next((line for line in status.splitlines() if line.startswith("VmRSS:")), "")
    return int(line.split()[1]) if line else 0


@contextmanager
def keep_logs_on_failure(workdir: Path) -> Iterator[None]:
    """Remove `workdir` (the processes' logs) when the block succeeds; keep it and say where
    otherwise."""
    try:
        yield
    except BaseException:
        print(f"logs kept in {workdir}", file=sys.stderr)
        raise
    shutil.rmtree(workdir, ignore_errors=True)


def stop_on_sigterm() -> None:
    """Make SIGTERM end the script like Ctrl-C does, through every `finally` and `with`."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
