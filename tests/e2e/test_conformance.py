"""The official MCP conformance suite against the live server (docs/conformance.md).

The suite is installed by .ci/run (npm); tests never download anything. Without it the
tests are skipped locally and fail in CI.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from tests.e2e.conftest import ROOT, LiveServer, _database_url, start_together

# A whole run of 0.2.0 "all" takes about 15 s; the suite's own limit (below) comes first.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SCRIPT = ROOT / ".ci" / "run-conformance.sh"
ANONYMOUS = {"MCP_ANONYMOUS_SCOPES": "tools:read,tools:execute,resources:read"}
# The tools, resources and prompts the suite calls by name (tests/conformance_fixtures.py),
# installed at start-up as an extension module: the product never imports them.
FIXTURES = {"MCP_EXTENSION_MODULES": "tests.conformance_fixtures"}
# Scenarios that need no named fixture, with the default configuration.
NO_FIXTURE_SCENARIOS = [
    ("0.1.16", "server-initialize"),
    ("0.1.16", "ping"),
    ("0.1.16", "logging-set-level"),
    ("0.1.16", "tools-list"),
    ("0.1.16", "resources-list"),
    ("0.1.16", "prompts-list"),
    ("0.1.16", "server-sse-multiple-streams"),
    ("0.1.16", "dns-rebinding-protection"),
    ("0.2.0", "server-session-lifecycle"),
    ("0.2.0", "caching"),
    ("0.2.0", "sep-2164-resource-not-found"),
    # Pending in 0.2.0-alpha.12: header values with whitespace around them (SEP-2243).
    ("0.2.0", "http-header-validation"),
]


def conformance(url: str, version: str, selector: str, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "CONFORMANCE_NO_INSTALL": "1", "CONFORMANCE_OUT": str(tmp_path)}
    result = subprocess.run(
        ["bash", str(SCRIPT), f"{url}/mcp", version, selector],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    if result.returncode == 3:
        message = f"conformance suite not installed: {result.stderr.strip()}"
        if os.environ.get("CI"):
            pytest.fail(message + " (.ci/run installs it)")
        pytest.skip(message + "; run: bash .ci/run-conformance.sh --install 0.1.16 0.2.0")
    return result


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[tuple[LiveServer, LiveServer]]:
    """The default server and the one with the fixtures, started at the same time (on
    PostgreSQL), each on a database of its own."""
    folders = [tmp_path_factory.mktemp(f"conformance-{name}") for name in ("default", "fixtures")]
    with ExitStack() as stack:
        default, fixtures = start_together(
            stack,
            (folders[0], [], {"DATABASE_URL": _database_url(folders[0]), **ANONYMOUS}),
            (
                folders[1],
                [],
                {
                    "DATABASE_URL": _database_url(folders[1], "e2e_fixtures"),
                    **FIXTURES,
                    **ANONYMOUS,
                },
            ),
        )
        yield default, fixtures


@pytest.fixture(scope="module")
def default_server(servers) -> LiveServer:
    return servers[0]


@pytest.fixture(scope="module")
def fixture_server(servers) -> LiveServer:
    return servers[1]


@pytest.mark.parametrize(("version", "scenario"), NO_FIXTURE_SCENARIOS)
def test_every_scenario_without_fixtures_passes_by_default(
    default_server, tmp_path, version, scenario
):
    result = conformance(default_server.url, version, f"scenario:{scenario}", tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "conformance: 1 passed, 0 failed" in result.stdout


# Every scenario of both suites, pending and extension ones included (0.2.0's "all" holds
# every "active" one, run the same way, and the tasks extension's tasks-* scenarios); and
# 0.2.0's scored requirement set of the 2026-07-28 revision.
SUITES = [
    ("0.1.16", "all", 32),
    ("0.2.0", "all", 65),
    ("0.2.0", "req:2026-07-28", 37),
]


@pytest.mark.parametrize(("version", "selector", "scenarios"), SUITES)
def test_with_the_fixtures_the_whole_suite_passes(
    fixture_server, tmp_path, version, selector, scenarios
):
    result = conformance(fixture_server.url, version, selector, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    # Every scenario passed: none failed, and none went missing (a newer suite adding
    # scenarios changes the count, which is then updated here on purpose).
    last = result.stdout.strip().splitlines()[-1]
    assert last == f"conformance: {scenarios} passed, 0 failed", result.stdout[-3000:]
