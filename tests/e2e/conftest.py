"""A real server: uvicorn running config.asgi on 127.0.0.1, with its own database."""

from __future__ import annotations

import functools
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class LiveServer:
    url: str
    key: str
    read_only_key: str
    env: dict[str, str]
    # What each of start_server's `commands` printed, in order.
    printed: tuple[str, ...] = ()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server_env(database_url: str, **settings: str) -> dict[str, str]:
    """The environment of a production start on `database_url`, with `settings` over it."""
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "DEBUG": "false",
        "SECRET_KEY": "e2e-test-secret-key-" + "x" * 40,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_COOKIES": "false",
        "SECURE_SSL_REDIRECT": "false",
        **settings,
    }


@dataclass(frozen=True)
class _Template:
    """A database migrated, with the catalog loaded and two keys made: each server's database
    starts as a copy of it (migrating and loading take 15 to 30 s a server on a busy machine,
    a copy a fraction of a second)."""

    location: str  # PostgreSQL: the database's name; SQLite: the file
    key: str
    read_only_key: str


# The commands of _prepare, in one process: each start of Django costs 1 to 3 s.
_PREPARE = """
import io, json
from django.core.management import call_command

def made_key(*options):
    printed = io.StringIO()
    call_command("create_api_key", *options, stdout=printed)
    return printed.getvalue().strip().splitlines()[-1]

call_command("migrate", verbosity=0)
call_command("load_node_specs", stdout=io.StringIO())
key = made_key("--name", "e2e")
print(json.dumps([key, made_key("--name", "e2e-read", "--scopes", "tools:read")]))
"""


def _prepare(env: dict[str, str]) -> tuple[str, str]:
    """Migrate the database of `env`, load the catalog, and make the two keys of a server."""
    key, read_only = json.loads(_manage(env, "shell", "-c", _PREPARE).strip().splitlines()[-1])
    return key, read_only


@functools.cache
def _template(base: str) -> _Template:
    """This session's template for the databases beside `base` (DATABASE_URL, or "" for
    SQLite), made on first use."""
    if not base.startswith("postgres"):
        path = Path(tempfile.mkdtemp(prefix="e2e-template-")) / "template.sqlite3"
        return _Template(str(path), *_prepare(_server_env(f"sqlite:///{path}")))
    import psycopg

    parts = urlsplit(base)
    name = parts.path.lstrip("/") + "_e2e_template"
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    return _Template(name, *_prepare(_server_env(urlunsplit(parts._replace(path=f"/{name}")))))


# The databases copied from a template, by URL, with it: a server on one needs no preparing.
_COPIES: dict[str, _Template] = {}


def _database_url(tmp: Path, suffix: str = "e2e") -> str:
    """A database of its own, migrated, with the catalog and the template's two keys: SQLite
    in a temporary folder, or a PostgreSQL database beside the test one (named with `suffix`,
    so that suites with servers of their own do not share one)."""
    base = os.environ.get("DATABASE_URL", "")
    template = _template(base if base.startswith("postgres") else "")
    if not base.startswith("postgres"):
        path = tmp / f"{suffix}.sqlite3"
        path.unlink(missing_ok=True)
        # The backup API, not a file copy: the template's last writes may be in its WAL file.
        with sqlite3.connect(template.location) as source, sqlite3.connect(path) as copy:
            source.backup(copy)
        url = f"sqlite:///{path}"
    else:
        import psycopg

        parts = urlsplit(base)
        name = parts.path.lstrip("/") + f"_{suffix}"
        admin = urlunsplit(parts._replace(path="/postgres"))
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template.location}"')
        url = urlunsplit(parts._replace(path=f"/{name}"))
    _COPIES[url] = template
    return url


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


# The commands of manage_all, in one process; what each printed, as JSON on the last line.
_MANAGE_ALL = """
import contextlib, io, json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.core.management import call_command
printed = []
for command in json.loads(sys.argv[1]):
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        call_command(*command, stdout=output)
    printed.append(output.getvalue())
print(json.dumps(printed))
"""


def manage_all(env: dict[str, str], commands: Sequence[Sequence[str]]) -> list[str]:
    """Run the manage.py `commands` in order, in one process (each start of Django costs 1 to
    3 s, more than most commands); what each printed."""
    if not commands:
        return []
    result = subprocess.run(
        [sys.executable, "-c", _MANAGE_ALL, json.dumps([list(command) for command in commands])],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def create_key(server: LiveServer, name: str, scopes: str, *options: str) -> str:
    """A new API key of the live server with `scopes` (comma-separated); `options` are more
    `create_api_key` options (e.g. "--rate-limit", "100000")."""
    return last_line(
        _manage(server.env, "create_api_key", "--name", name, "--scopes", scopes, *options)
    )


def last_line(printed: str) -> str:
    """The last line `printed` (create_api_key prints the new key last)."""
    return printed.strip().splitlines()[-1]


def start_server(
    tmp: Path, commands: Sequence[Sequence[str]] = (), **settings: str
) -> Iterator[LiveServer]:
    """Start uvicorn on a database of its own (or a given DATABASE_URL, as it is: several
    servers may share one), migrated, with the catalog and two keys; stop it afterwards.
    `commands` are manage.py commands (importing graphs, making keys) run in one process
    (manage_all) while uvicorn starts, or before it on SQLite (one writer at a time); the
    server is yielded once both are done, with what each command printed."""
    env = _server_env(settings.pop("DATABASE_URL", "") or _database_url(tmp), **settings)
    template = _COPIES.get(env["DATABASE_URL"])
    if template is not None:
        key, read_only = template.key, template.read_only_key
    else:
        key, read_only = _prepare(env)
    pool = ThreadPoolExecutor(max_workers=1)
    beside = env["DATABASE_URL"].startswith("postgres")
    running = pool.submit(manage_all, env, commands) if beside else None
    printed = [] if beside else manage_all(env, commands)
    port = _free_port()
    log = open(tmp / "uvicorn.log", "wb")  # noqa: SIM115 (closed after the server stops)
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v1/public/health", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(f"uvicorn did not start: {(tmp / 'uvicorn.log').read_text()}")
                time.sleep(0.2)
        if running is not None:
            printed = running.result()
        yield LiveServer(url, key, read_only, env, tuple(printed))
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()
        pool.shutdown()


def start_together(
    stack: ExitStack, *servers: tuple[Path, Sequence[Sequence[str]], dict[str, str]]
) -> list[LiveServer]:
    """Start `servers` (each a folder, commands and settings, as start_server takes them) on
    the databases their settings name, at the same time on PostgreSQL, one after the other on
    SQLite (one writer at a time); each is stopped when `stack` closes."""
    managers = [
        contextmanager(start_server)(tmp, commands, **settings)
        for tmp, commands, settings in servers
    ]
    if not all(settings["DATABASE_URL"].startswith("postgres") for _, _, settings in servers):
        return [stack.enter_context(manager) for manager in managers]
    with ThreadPoolExecutor(max_workers=len(managers)) as pool:
        futures = [pool.submit(manager.__enter__) for manager in managers]
    for manager, future in zip(managers, futures, strict=True):
        if future.exception() is None:  # stopped with the stack, even if another failed
            stack.push(manager.__exit__)
    return [future.result() for future in futures]


@pytest.fixture(scope="session")
def live_mcp(tmp_path_factory) -> Iterator[LiveServer]:
    # A database of its own: this server outlives modules whose servers start on `_e2e`,
    # which on PostgreSQL each drop and create again (its keys then were no longer valid).
    tmp = tmp_path_factory.mktemp("live")
    yield from start_server(tmp, DATABASE_URL=_database_url(tmp, "live"))


@pytest.fixture(scope="package")
def queued_stack(tmp_path_factory):
    """The web servers in queued mode (with a Celery worker and beat) and in direct mode of
    test_queued_runs.py, which test_long_calls.py uses too: started once for both, stopped
    with the last test of tests/e2e."""
    from tests.e2e.test_queued_runs import start_stack

    yield from start_stack(tmp_path_factory)


# The tests of several instances sharing Redis, and of Celery workers on a Redis broker: on
# the embedded default (no REDIS_URL) there may be no Redis to reach, so they skip, saying why.
needs_redis = pytest.mark.skipif(
    not os.environ.get("REDIS_URL"),
    reason="needs Redis: set REDIS_URL=redis://127.0.0.1:6379/15 (as .ci/run does)",
)
