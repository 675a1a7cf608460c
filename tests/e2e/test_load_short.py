"""The load benchmarks in their short form, for CI: bench/load.py's mixed traffic for 10 s at
concurrency 8, and bench/queued.py's 40 workflow calls per mode at concurrency 8, against the
documented production start (bench/cluster.py: two web instances in queued mode, two Celery
workers, beat) on a PostgreSQL database of its own (`<DATABASE_URL's name>_load`) and Redis
databases 9 (cache) and 14 (broker). The full runs are commands: docs/benchmarks.md."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import redis

from bench.cluster import Cluster, Services, prepare
from bench.load import KNOWLEDGE, report, run_load
from bench.queued import GRAPH_FILE, WORKFLOW, compare
from tests.e2e.conftest import _database_url

pytestmark = pytest.mark.slow

CACHE_DATABASE = 9
BROKER_DATABASE = 14


@dataclass(frozen=True)
class Production:
    services: Services
    key: str
    cluster: Cluster


def _redis_server() -> str:
    """The Redis server of REDIS_URL (or the local default), without a database number;
    skips when none is configured and the local one does not answer."""
    configured = os.environ.get("REDIS_URL", "")
    server = (configured or "redis://127.0.0.1:6379/0").rsplit("/", 1)[0]
    try:
        redis.Redis.from_url(f"{server}/{CACHE_DATABASE}", socket_timeout=2).ping()
    except redis.ConnectionError:
        if configured:
            raise  # a configured Redis that is down is a failure, not a reason to skip
        pytest.skip(f"The load test needs Redis: none answers at {server}; set REDIS_URL.")
    return server


@pytest.fixture(scope="module")
def production(tmp_path_factory) -> Iterator[Production]:
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        pytest.skip(
            "The load test runs the production start on PostgreSQL (four processes writing "
            "at once): set DATABASE_URL=postgresql://... as CI does."
        )
    server = _redis_server()
    for database in (CACHE_DATABASE, BROKER_DATABASE):
        redis.Redis.from_url(f"{server}/{database}").flushdb()  # nothing left from a last run
    tmp = tmp_path_factory.mktemp("load")
    services = Services(
        _database_url(tmp, "load"), f"{server}/{CACHE_DATABASE}", f"{server}/{BROKER_DATABASE}"
    )
    key = prepare(services, [GRAPH_FILE])
    with Cluster(
        services, tmp, webs=2, workers=2, beat=True, mode="queued", name="load"
    ) as cluster:
        yield Production(services, key, cluster)


def test_ten_seconds_of_mixed_traffic_have_no_error_and_lose_no_run(production):
    result = asyncio.run(
        run_load(
            production.cluster,
            production.key,
            production.services.database_url,
            duration=10,
            concurrency=8,
            warmup=2,
        )
    )

    summary = report(result, concurrency=8, markdown=False)
    assert result.errors == [], summary
    assert {sample.kind for sample in result.samples} == {*KNOWLEDGE, WORKFLOW}, summary
    assert result.history.calls > 0
    assert result.history.ok, summary
    assert result.history.complete == result.history.runs == result.history.calls
    processes = {"web-1", "web-2", "worker-1", "worker-2", "beat"}
    assert set(result.rss_start) == set(result.rss_end) == processes
    assert all(result.rss_start.values())
    assert all(result.rss_end.values())


def test_forty_calls_in_each_mode_leave_one_complete_run_each(production, tmp_path):
    services = production.services
    with Cluster(services, tmp_path, webs=2, workers=0, mode="direct", name="direct") as direct:
        results = compare(
            [production.cluster, direct],
            production.key,
            services.database_url,
            calls=40,
            concurrency=8,
            n=5,
            rounds=1,
        )

    for result in results:
        assert result.errors == [], result.mode
        assert result.history.ok, (result.mode, result.history.problems)
        assert result.history.complete == result.history.calls == 40
        assert result.throughput > 0
