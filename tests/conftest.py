"""Shared fixtures: a fixed cast of users, the built-in catalog and the loop workflows; the
hypothesis profiles; the npm MCP servers, installed before a run whose tests start them."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import threading
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.core.cache import cache, caches
from hypothesis import settings as hypothesis_settings

from mcp_endpoint.access.ratelimit import rate_limits_forget
from nodespecs import snapshots
from nodespecs.knowledge.catalog import read_builtin_catalog
from nodespecs.knowledge.registry import Registry
from nodespecs.knowledge.specformat import dump_spec_document
from tests.peers import INSTALL_SCRIPT, PEERS_HOME

ROOT = Path(__file__).resolve().parent.parent


def _worker_redis_url(url: str, worker: str) -> str:
    """The Redis database of pytest-xdist's worker `worker` ("gw0", "gw1", …) beside `url`:
    worker n takes the database n below url's (redis://host:6379/15 gives gw0 15, gw1 14),
    so the workers started by `-n` never flush each other's cache. gw0 keeps url's own."""
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    database = base - int(worker.removeprefix("gw"))
    if database < 0:
        raise pytest.UsageError(
            f"REDIS_URL={url} leaves no Redis database for xdist worker {worker}: "
            "name a database numbered at least the number of workers less one."
        )
    return urlunsplit(parts._replace(path=f"/{database}"))


def _redis_per_worker() -> None:
    """Under pytest-xdist every worker clears the cache before and after each of its tests
    (`_fresh_cache`, which flushes the Redis database): each worker uses a database of its own,
    for its tests and for the processes they start (os.environ). pytest-django has loaded the
    settings by now, but no cache is connected yet."""
    from django.conf import settings

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or not settings.REDIS_URL:
        return
    url = _worker_redis_url(settings.REDIS_URL, worker)
    os.environ["REDIS_URL"] = settings.REDIS_URL = url
    for alias in ("default", "sessions"):
        settings.CACHES[alias]["LOCATION"] = url


_redis_per_worker()


def _flush_by_delete() -> None:
    """On PostgreSQL, empty the tables after each transactional test (about 530 of the README's
    command's tests: async views, threads) with DELETE, not Django's TRUNCATE. Both leave every
    table empty; TRUNCATE makes and syncs new files for each of the 35 tables and their indexes
    and took 0.5 to 2 s a test, DELETE on a test's few rows takes milliseconds. The foreign keys
    are deferred (Django makes them so), so the order of the DELETEs does not matter; a flush
    that also resets sequences keeps TRUNCATE ... RESTART IDENTITY."""
    from django.conf import settings

    if "postgresql" not in settings.DATABASES["default"]["ENGINE"]:
        return
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences:
            return truncate(self, style, tables, reset_sequences=True, allow_cascade=allow_cascade)
        return [
            f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};"
            for table in tables
        ]

    DatabaseOperations.sql_flush = sql_flush


_flush_by_delete()

# CI runs the same examples every time, so a failure there is a failure of the change and the
# run's time does not vary with the seed; elsewhere examples vary, to find more. In both, an
# example that takes seconds is a bug (one once read a 300-second stream to its end).
hypothesis_settings.register_profile(
    "ci", derandomize=True, database=None, deadline=timedelta(seconds=5)
)
hypothesis_settings.register_profile("dev", deadline=timedelta(seconds=5))
hypothesis_settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)


# Every test in these folders starts real servers (uvicorn, Celery, Chromium, MCP peers made
# to fail) and waits on them: they are the `long` tests, which the README's test command
# leaves out and CI runs after it (`pytest -m long`). A folder, not a list, so that a new
# test there is long without anyone remembering to say so.
LONG_FOLDERS = {"e2e", "browser", "faults"}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items):
    tests = Path(__file__).parent
    for item in items:
        if item.path.relative_to(tests).parts[0] in LONG_FOLDERS:
            item.add_marker(pytest.mark.long)


# What a test module (or a conftest above it) calls to start an npm MCP server (tests/peers).
_NPM_HELPERS = ("npm_server_command", "require_npm_server", "npm_package_dir", "npx_offline_env")


def _starts_npm_servers(path: Path, seen: dict[Path, bool]) -> bool:
    """Whether the test file at `path`, or a conftest.py between it and tests/, starts an npm
    MCP server."""
    tests = Path(__file__).parent
    files = [path, *(folder / "conftest.py" for folder in path.parents if tests in folder.parents)]
    for file in files:
        if file not in seen:
            text = file.read_text(encoding="utf-8") if file.is_file() else ""
            seen[file] = any(helper in text for helper in _NPM_HELPERS)
        if seen[file]:
            return True
    return False


def pytest_collection_finish(session):
    """Install the npm MCP servers into PEERS_HOME before the first test, when a collected test
    starts one (a unit-only run installs nothing), once: a stamp named after the install
    script's content marks a finished install, so later sessions cost nothing and a change of
    the pinned versions installs again. A lock keeps two test runs started at once from
    installing over each other. Without npm, or offline, the tests that need the servers fail
    with the command that installs them (tests/peers)."""
    seen: dict[Path, bool] = {}
    if not any(_starts_npm_servers(Path(item.path), seen) for item in session.items):
        return
    script = ROOT / INSTALL_SCRIPT
    stamp = PEERS_HOME / f".installed-{hashlib.sha256(script.read_bytes()).hexdigest()[:16]}"
    if stamp.exists() or not shutil.which("npm"):
        return
    PEERS_HOME.mkdir(parents=True, exist_ok=True)
    with open(PEERS_HOME / ".install-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if stamp.exists():  # another run installed them while this one waited
            return
        result = subprocess.run(
            ["bash", str(script)],
            env={**os.environ, "MCP_PEERS_HOME": str(PEERS_HOME)},
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode == 0:
            stamp.touch()
        else:  # said at once: the tests that need the servers fail later, one by one
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            reporter.write_line(f"\n{INSTALL_SCRIPT} failed:\n{result.stderr}", red=True)


@pytest.fixture
def loops(db):
    """The workflows of tests/graphs/files/loops.yaml (sum_to loops until n and fails past
    maxNodeExecutions; classify and is_zero switch), which call no downstream server."""
    from tests.graph_files import import_file

    return import_file("loops.yaml")


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """The user fixtures set passwords; the production hasher would cost ~0.5 s per user."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _provider_refreshes_ended():
    """No refresh a provider's save started outlives its test: it holds a database connection
    while it waits on its server, and one still open when the run ends stops the test
    database from being dropped (seen on PostgreSQL); it could also write into the next test."""
    yield
    from nodespecs.providers.refreshing import THREAD_NAME_PREFIX

    for thread in threading.enumerate():
        if thread.name.startswith(THREAD_NAME_PREFIX):
            thread.join(timeout=60)
            if thread.is_alive():
                pytest.fail(f"{thread.name} still runs 60 s after its test ended")


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Each test starts with an empty cache, so no registry built by another test is reused,
    no session (kept in a cache of its own) either, and no caller's requests counted (in
    process memory without Redis, not in the cache)."""
    cache.clear()
    caches["sessions"].clear()
    snapshots.forget_generations()
    rate_limits_forget()
    yield
    cache.clear()
    caches["sessions"].clear()
    snapshots.forget_generations()
    rate_limits_forget()


@pytest.fixture(scope="session")
def builtin_documents() -> list[dict]:
    return [dump_spec_document(document) for document in read_builtin_catalog()]


@pytest.fixture(scope="session")
def registry(builtin_documents) -> Registry:
    """The built-in catalog as an in-memory registry (no database needed)."""
    return Registry(builtin_documents)


@pytest.fixture
def loaded_catalog(db):
    """The built-in catalog loaded into the test database."""
    from nodespecs.knowledge.catalog import load_builtin_catalog

    return load_builtin_catalog()


@pytest.fixture
def author(django_user_model):
    """A staff user who may edit specs."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user(
        "alice", password="correct-horse-battery", is_staff=True
    )
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="nodespecs"))
    return user


@pytest.fixture
def outsider(django_user_model):
    """A logged-in user who is not staff."""
    return django_user_model.objects.create_user("mallory", password="correct-horse-battery")
