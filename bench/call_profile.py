"""Where one workflow call's time goes, in process: `python bench/call_profile.py`.

    .venv/bin/python bench/call_profile.py                       # chain10, 400 calls
    .venv/bin/python bench/call_profile.py --workflow count_files --calls 200

Needs PostgreSQL (DATABASE_URL, default postgresql://postgres@127.0.0.1:5432/switchyard_profile,
created if missing) and, for count_files, the filesystem server the install script caches (`bash
.ci/install-mcp-peers.sh`). Runs `graphs.execution.runs.workflow_call` in this process, with the
history written as in production, and times each SQL statement (Django's `execute_wrapper`), the
engine (`graphs.execution.runs.execute`), the history's writes (`recorder.history_write`: the
run, its rows and its outcome, each write one commit), the run's id reserved
(`recorder.run_id_reserve`) and downstream calls (`client.call_tool`). Prints the call's p50 and
each part's median per call; what the parts do not cover is Python around them
(docs/benchmarks.md, "where a short call's time goes").

`--explain` prints PostgreSQL's plan and timing of one call's history write (EXPLAIN ANALYZE,
foreign keys checked at the statement's end) and stops.

`--instructions` counts instead of timing, repeatable on a loaded machine: run under
`valgrind --tool=callgrind --instr-atstart=no`, it counts the calls' instructions only (the
snapshots' timed checks held off, so every call does the same work), and callgrind prints the
total. `--without-database` leaves the history's writes and the run's id out (Python only):

    valgrind --tool=callgrind --instr-atstart=no .venv/bin/python bench/call_profile.py \
        --instructions --without-database --calls 100
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.graphs import BENCH_SECRET_KEY, _ensure_database, _npx_offline_env  # noqa: E402

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/switchyard_profile"
COUNTED_FILES = 7


def _graph_file(workflow: str, workdir: Path) -> tuple[Path, dict[str, Any]]:
    """The graph file holding `workflow`, and the arguments to call it with."""
    if workflow == "count_files":
        counting = workdir / "tests" / "counting"
        counting.mkdir(parents=True)
        for index in range(COUNTED_FILES):
            (counting / f"file{index}.txt").write_text("x")
        path = workdir / "count_files.yaml"
        path.write_text((ROOT / "tests/graphs/engine/count_files.yaml").read_text())
        return path, {"directory": str(counting)}
    return ROOT / "bench/graph_files/loop.yaml", {"x": 1} if workflow == "chain10" else {}


def use_bench_database(database_url: str, **settings: str) -> None:
    """Set this process up as a production start on `database_url` (created if missing), with
    the bench's fixed key and npx offline; `settings` are more environment variables."""
    _ensure_database(database_url)
    os.environ.update(
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="config.settings",
        DEBUG="false",
        SECRET_KEY=BENCH_SECRET_KEY,
        **_npx_offline_env(),
        **settings,
    )
    os.environ.pop("REDIS_URL", None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workflow", default="chain10")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--without-database", action="store_true")
    parser.add_argument(
        "--explain",
        action="store_true",
        help="print the plan and timing of one call's history write (EXPLAIN ANALYZE), then stop",
    )
    options = parser.parse_args()
    use_bench_database(os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from graphs.authoring.files import graph_import
    from graphs.execution import recorder
    from graphs.execution import runs as runs_module
    from graphs.execution.runs import RunRequest, workflow_call
    from graphs.execution.toolset import workflow_tools
    from nodespecs.callers import caller_command
    from nodespecs.downstream import client

    spent: dict[str, list[float]] = collections.defaultdict(list)

    def timed(module: Any, name: str, label: str) -> None:
        original: Callable[..., Any] = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[label].append((time.perf_counter() - started) * 1000)

        setattr(module, name, wrapper)

    def statement(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            spent[f"SQL {sql.split()[0]}"].append((time.perf_counter() - started) * 1000)

    call_command("migrate", verbosity=0)
    with tempfile.TemporaryDirectory(prefix="call-profile-") as tmp:
        path, arguments = _graph_file(options.workflow, Path(tmp))
        graph_import(text=path.read_text(), base_dir=path.parent, caller=caller_command("bench"))
        tool = workflow_tools()[options.workflow]
        request = RunRequest(
            name=options.workflow, arguments=arguments, version=(tool.version_id, tool.digest)
        )
        if options.without_database:
            ids = iter(range(10**12, 10**13))
            runs_module.run_id_reserve = lambda: next(ids)
            recorder.history_write = lambda run, rows, then: None
        if options.instructions:
            _count_instructions(lambda: workflow_call(request), options.calls)
            client.close_all()
            return
        timed(runs_module, "execute", "engine (its rows' writes and downstream calls included)")
        timed(recorder, "history_write", "one write of history (the run, rows, outcome)")
        timed(runs_module, "run_id_reserve", "the run's id reserved")
        timed(client, "call_tool", "downstream call")
        for _ in range(20):
            workflow_call(request)
        spent.clear()
        if options.explain:
            with connection.execute_wrapper(_explained):
                workflow_call(request)
        totals = []
        with connection.execute_wrapper(statement):
            for _ in range(options.calls):
                started = time.perf_counter()
                workflow_call(request)
                totals.append((time.perf_counter() - started) * 1000)
        client.close_all()
    print(f"{options.workflow}: workflow_call p50 {statistics.median(totals):.2f} ms")
    for label, samples in spent.items():
        per_call = len(samples) / options.calls
        print(f"  {label}: {per_call:g} per call, median {statistics.median(samples):.3f} ms")


def _explained(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    """An `execute_wrapper` that runs the history's write (the statement starting `WITH`)
    under EXPLAIN ANALYZE, its deferred foreign keys checked at its end so that their time
    shows, prints the plan, commits it and ends the process (the recorder gets no result)."""
    if not sql.startswith("WITH"):
        return execute(sql, params, many, context)
    cursor = context["cursor"]
    cursor.execute("BEGIN")  # SET CONSTRAINTS holds within a transaction only
    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    cursor.execute("EXPLAIN (ANALYZE, BUFFERS, SUMMARY) " + sql, params)
    print("\n".join(row[0] for row in cursor.fetchall()), flush=True)
    started = time.perf_counter()
    cursor.execute("COMMIT")
    print(f"COMMIT: {(time.perf_counter() - started) * 1000:.3f} ms", flush=True)
    os._exit(0)


def _count_instructions(call: Callable[[], Any], calls: int) -> None:
    """Make `calls` calls with callgrind counting (this process runs under valgrind's
    callgrind, started with --instr-atstart=no), after 20 not counted."""
    from nodespecs import snapshots

    snapshots.TABLE_CHECK_SECONDS = snapshots.GENERATION_READ_SECONDS = 10**9
    for _ in range(20):
        call()
    control = ["callgrind_control", "--instr={}", str(os.getpid())]
    subprocess.run([part.format("on") for part in control], check=True, capture_output=True)
    for _ in range(calls):
        call()
    subprocess.run([part.format("off") for part in control], check=True, capture_output=True)
    print(f"{calls} calls: callgrind's 'Collected' divided by {calls} is a call's instructions")


if __name__ == "__main__":
    main()
