"""How close to its time an approval's timeout fires: `python bench/approval_timeouts.py`.

    .venv/bin/python bench/approval_timeouts.py [--runs 40]
        [--database-url postgresql://postgres@127.0.0.1:5432/switchyard_timeouts]
        [--redis-url redis://127.0.0.1:6379/0] [--broker-url redis://127.0.0.1:6379/1]

Starts the production start (bench/cluster.py) twice on one PostgreSQL database: direct (one
web instance, no Celery) and queued (two web instances and a worker). In each it imports ten
variants of the refund workflow of tests/graphs/files/approvals.yaml whose approval node times
out after 1.0, 1.4, ... 4.6 s, starts `--runs` calls of them through the REST API (each answers
that its run waits, after GRAPHS_RUN_WAIT_SECONDS=0.3) and decides none: every run must end on
its `timeout` route. Then it reads each run's approval over REST and prints, per mode, how late
the timeout fired (decided_at - timeout_at): p50, p95 and max, and how many runs ended on the
timeout route (all of them, or it exits non-zero). Each process's timer sleeps until the
earliest due time it has read, reading again at least every APPROVAL_TIMER_POLL_SECONDS (1 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from cluster import Cluster, Services, prepare, stop_on_sigterm  # noqa: E402

VARIANTS = [1000 + 400 * step for step in range(10)]


def _graph_files(directory: Path) -> list[Path]:
    source = (ROOT / "tests" / "graphs" / "files" / "approvals.yaml").read_text()
    source = source[: source.index("  - name: ask_caller")]
    files = []
    for timeout in VARIANTS:
        text = (
            source.replace("name: approvals", f"name: timeouts_{timeout}")
            .replace("name: refund\n", f"name: refund_{timeout}\n")
            .replace("timeoutMs: 60000", f"timeoutMs: {timeout}")
        )
        path = directory / f"timeouts_{timeout}.yaml"
        path.write_text(text)
        files.append(path)
    return files


def _rest(url: str, key: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        f"{url}/api/v1{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def measure(cluster: Cluster, key: str, runs: int) -> dict[str, Any]:
    """Start `runs` calls spread over the variants and the web instances; how late each
    timeout fired."""
    run_ids = []
    for index in range(runs):
        timeout = VARIANTS[index % len(VARIANTS)]
        url = cluster.urls[index % len(cluster.urls)]
        arguments = {"amount": index, "customer": f"c{index}"}
        answer = _rest(
            url, key, "/mcp/invoke", {"name": f"refund_{timeout}", "arguments": arguments}
        )
        run_ids.append(answer["result"]["_run_id"])
    deadline = time.monotonic() + max(VARIANTS) / 1000 + 15
    late_ms, on_route = [], 0
    for run_id in run_ids:
        while True:
            detail = _rest(cluster.urls[0], key, f"/runs/{run_id}")
            if detail["run"]["status"] not in ("queued", "running", "waiting"):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"run {run_id} did not end: {detail['run']['status']}")
            time.sleep(0.1)
        (approval,) = detail["approvals"]
        late_ms.append(
            (_moment(approval["until"]) - _moment(approval["timeout_at"])).total_seconds() * 1000
        )
        on_route += detail["run"]["result"] == {"refunded": 0, "decision": "timeout"}
    late_ms.sort()
    return {
        "runs": runs,
        "timeout_route": on_route,
        "p50_ms": statistics.median(late_ms),
        "p95_ms": late_ms[max(int(len(late_ms) * 0.95) - 1, 0)],
        "max_ms": late_ms[-1],
        "min_ms": late_ms[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument(
        "--database-url", default="postgresql://postgres@127.0.0.1:5432/switchyard_timeouts"
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--broker-url", default="redis://127.0.0.1:6379/1")
    options = parser.parse_args()
    stop_on_sigterm()
    os.environ["GRAPHS_RUN_WAIT_SECONDS"] = "0.3"
    services = Services(options.database_url, options.redis_url, options.broker_url)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        files = _graph_files(workdir)
        for mode, webs, workers in (("direct", 1, 0), ("queued", 2, 1)):
            key = prepare(services, files, mode)
            with Cluster(services, workdir / mode, webs=webs, workers=workers, mode=mode) as c:
                results[mode] = measure(c, key, options.runs)
    print("| mode | runs | on the timeout route | late p50 | late p95 | late max |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    failed = False
    for mode, figures in results.items():
        late = " | ".join(f"{figures[name]:.1f} ms" for name in ("p50_ms", "p95_ms", "max_ms"))
        print(f"| {mode} | {figures['runs']} | {figures['timeout_route']} | {late} |")
        failed |= figures["timeout_route"] != figures["runs"] or figures["min_ms"] < 0
    if failed:
        raise SystemExit("a run did not end on its timeout route, or one fired early")


if __name__ == "__main__":
    main()
