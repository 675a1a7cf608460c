"""What the tracing instrumentation costs (issue 18): `python bench/tracing.py`.

    .venv/bin/python bench/tracing.py [--rounds 12] [--calls 400] [--n 10]

Needs: the project's venv only; ours runs on a throwaway SQLite database.

In one process, three variants of the same code, interleaved round by round (A B C A B C...),
so that drift of a shared machine hits them alike:

- `bare`: the instrumentation taken out: the protocol core's untraced body (`core._answer`)
  and, in `graphs.execution.runs`, `traced_run` and `current_trace_id` replaced by no-ops;
- `off`: the code as it ships with `OTEL_TRACES_EXPORTER=none` (no SDK TracerProvider);
- `on`: tracing on, the SDK's TracerProvider with a BatchSpanProcessor whose exporter drops
  the spans (what a process pays before the network).

Each measures µs per call of three requests through `mcp_endpoint.protocol.core.execute`
(2026-07-28): `tools/list` (a cached answer: the core's overhead shows most there), `tools/call
get_node_details`, and `tools/call sum_to_n` with n iterations (a direct run recorded in the
history, `bench/graph_files/loop.yaml`), followed to its answer. The table gives the median over
rounds of each round's mean, the spread (lowest and highest round), and each variant over `bare`
(1.000 = no cost; the issue asks `off` within 1.03 and `on` within 1.10).

    .venv/bin/python bench/tracing.py --http BASE [--head HEAD] [--duration 5] [--rounds 3]

Over HTTP instead, with `wrk` (the helpers of `bench/mcp_endpoint.py`): two production starts
(uvicorn, one worker, DEBUG=false, a SQLite database each), each from a `git archive` of its
commit: HEAD's (tracing off, as it ships) and BASE's, a commit without the instrumentation;
requests/s of `tools/call get_node_details` and `tools/list` in both eras at concurrency 16,
the servers taking turns (A B, B A, ...), and HEAD over BASE. With `--redis URL` (e.g.
redis://127.0.0.1:6379) each server's cache is a Redis database of its own (11 and 12), as in
production with several instances, instead of its process memory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # this folder has a graphs.py: keep it from shadowing the app


def setup_django(workdir: Path) -> None:
    os.environ.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=f"sqlite:///{workdir / 'bench.sqlite3'}",
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(50),
        LOG_LEVEL="WARNING",
        OTEL_TRACES_EXPORTER="none",
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("load_node_specs", verbosity=0)
    from graphs.authoring.files import graph_import
    from nodespecs.callers import caller_command

    text = (ROOT / "bench" / "graph_files" / "loop.yaml").read_text()
    graph_import(text=text, base_dir=ROOT / "bench", caller=caller_command("import_graph"))


@contextmanager
def bare_runs() -> Iterator[None]:
    """graphs.execution.runs without its tracing: what the code was before it."""
    import graphs.execution.runs as runs
    from graphs.execution.tracing import RunTrace

    @contextmanager
    def untraced(run: Any, recorder: Any) -> Iterator[RunTrace]:
        yield RunTrace(recorder)

    saved = runs.traced_run, runs.current_trace_id
    runs.traced_run, runs.current_trace_id = untraced, lambda: ""
    try:
        yield
    finally:
        runs.traced_run, runs.current_trace_id = saved


def install_sdk() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Dropping(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropping()))
    trace.set_tracer_provider(provider)


def requests(n: int) -> dict[str, tuple[str, dict[str, Any]]]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    node = {"node_type": "ACTION", "subtype": "HTTP_REQUEST"}
    return {
        "tools/list": ("tools/list", {"_meta": meta}),
        "get_node_details": (
            "tools/call",
            {"name": "get_node_details", "arguments": {"nodes": [node]}, "_meta": meta},
        ),
        f"sum_to_n n={n}": (
            "tools/call",
            {"name": "sum_to_n", "arguments": {"n": n}, "_meta": meta},
        ),
    }


def caller_and_threads() -> tuple[Any, Any]:
    from graphs.execution.follow import Threads
    from mcp_endpoint.models import Scope
    from nodespecs.callers import Caller

    # One thread for the blocking work, as under Django (core.REQUEST_THREADS).
    pool = ThreadPoolExecutor(max_workers=1)

    async def on_the_thread(function: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(pool, function)

    threads = Threads(short=on_the_thread, run=on_the_thread)
    return Caller(actor="key:bench", scopes=frozenset(Scope.values)), threads


def one_call(method: str, params: dict[str, Any], answer: Callable[..., Any]) -> None:
    from mcp_endpoint.protocol.core import MODERN_VERSION, Answered, Request, final

    caller, threads = CALLER_AND_THREADS
    reply = answer(Request(method, params, MODERN_VERSION, caller, request_id=1))
    if not isinstance(reply, Answered):
        final = asyncio.run(final(reply, threads))
        if "result" not in final or final["result"].get("isError"):
            raise SystemExit(f"{params.get('name')} failed: {final}")


CALLER_AND_THREADS: tuple[Any, Any] = (None, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--calls", type=int, default=400, help="calls per round and variant")
    parser.add_argument("--n", type=int, default=10, help="loop iterations of sum_to_n")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-tracing-"))
    setup_django(workdir)
    global CALLER_AND_THREADS
    CALLER_AND_THREADS = caller_and_threads()
    from graphs.execution import tracing
    from mcp_endpoint.protocol import core

    assert not tracing.enabled()
    install_sdk()

    def bare_execute(method: str, params: Any, *, version: str, caller: Any, context: Any) -> Any:
        # execute without its one test of the flag: the same calls, no tracing code.
        return core._answer(method, params, version, caller, context, None)

    @contextmanager
    def traced(on: bool) -> Iterator[Callable[..., Any]]:
        tracing.set_enabled(on)
        try:
            yield core.execute
        finally:
            tracing.set_enabled(False)

    @contextmanager
    def bare() -> Iterator[Callable[..., Any]]:
        with bare_runs():
            yield bare_execute

    # Each variant is set up for a whole round, so its calls pay for nothing else.
    variants = {"bare": bare, "off": lambda: traced(False), "on": lambda: traced(True)}
    table: dict[tuple[str, str], list[float]] = {}
    for label, (method, params) in requests(args.n).items():
        calls = args.calls if "sum_to_n" not in label else max(args.calls // 10, 20)
        for variant in variants.values():  # warm-up: caches, compiled versions, connections
            with variant() as answer:
                for _ in range(max(calls // 4, 5)):
                    one_call(method, params, answer)
        for _ in range(args.rounds):
            for name, variant in variants.items():
                with variant() as answer:
                    began = time.perf_counter()
                    for _ in range(calls):
                        one_call(method, params, answer)
                    elapsed = (time.perf_counter() - began) / calls * 1e6
                table.setdefault((label, name), []).append(elapsed)
        print(f"measured {label}", flush=True)

    print()
    print("| request | variant | µs per call (median of rounds) | spread (rounds) | / bare |")
    print("| --- | --- | ---: | ---: | ---: |")
    for label in requests(args.n):
        base = statistics.median(table[(label, "bare")])
        for name in variants:
            rounds = table[(label, name)]
            median = statistics.median(rounds)
            print(
                f"| {label} | {name} | {median:.1f} | {min(rounds):.1f} to {max(rounds):.1f} | "
                f"{median / base:.3f} |"
            )
    print(
        f"\n{args.rounds} rounds, interleaved; {args.calls} calls a round "
        f"({max(args.calls // 10, 20)} for sum_to_n); Python {sys.version.split()[0]}, SQLite."
    )


def load_endpoint_bench() -> Any:
    """bench/mcp_endpoint.py as a module (its name would clash with the app's)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_mcp_endpoint", ROOT / "bench" / "mcp_endpoint.py"
    )
    if spec is None or spec.loader is None:
        raise SystemExit("bench/mcp_endpoint.py is missing")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_mcp_endpoint"] = module
    spec.loader.exec_module(module)
    return module


def tree_server(bench: Any, tree: Path) -> Any:
    """bench/mcp_endpoint.py's Server, started in `tree` (it starts servers in this checkout,
    whose packages would then be imported instead of the tree's)."""
    import subprocess

    class TreeServer(bench.Server):  # type: ignore[misc, name-defined]
        def start(self) -> None:
            with open(self.log, "ab") as log:
                self.process = subprocess.Popen(
                    self.command, cwd=tree, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True,
                )  # fmt: skip

    return TreeServer


def http_main(
    base: str, duration: int, warmup: int, rounds: int, head: str = "HEAD", redis: str = ""
) -> None:
    """`head`'s code against `base`'s over HTTP (see the module docstring)."""
    import subprocess

    bench = load_endpoint_bench()
    workdir = Path(tempfile.mkdtemp(prefix="bench-tracing-http-"))
    servers = []
    try:
        for number, (label, commit) in enumerate((("head", head), ("base", base))):
            tree = workdir / label
            tree.mkdir()
            archive = subprocess.run(
                ["git", "archive", commit], cwd=ROOT, capture_output=True, check=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
            env = bench.base_env(tree)
            # The tree's packages first: the venv's editable install points at this checkout.
            env.update(
                DATABASE_URL=f"sqlite:///{tree / 'bench.sqlite3'}",
                OTEL_TRACES_EXPORTER="none",
                PYTHONPATH=str(tree),
            )
            if redis:
                env["REDIS_URL"] = f"{redis.rstrip('/')}/{11 + number}"
                subprocess.run(
                    ["redis-cli", "-u", env["REDIS_URL"], "flushdb"],
                    check=True,
                    capture_output=True,
                )
            manage = [sys.executable, "manage.py"]
            for step in (["migrate", "--noinput"], ["load_node_specs"]):
                subprocess.run([*manage, *step], cwd=tree, env=env, check=True, capture_output=True)
            made = subprocess.run(
                [*manage, "create_api_key", "--name", "bench", "--rate-limit", "1000000000"],
                cwd=tree, env=env, check=True, capture_output=True, text=True,
            )  # fmt: skip
            key = made.stdout.strip().splitlines()[-1].strip()
            port = bench.free_port()
            command = bench.uvicorn_command("config.asgi:application", port, 1, "uvicorn")
            server = tree_server(bench, tree)(
                f"{label}-{commit[:8]}", "ours", port, [*command, "--app-dir", str(tree)],
                env, workdir / f"{label}.log", auth={"Authorization": f"Bearer {key}"},
            )  # fmt: skip
            server.start()
            servers.append(server)
        for server in servers:
            server.wait_ready()
            bench.open_legacy_session(server)
        print("| era | method | HEAD req/s | BASE req/s | HEAD / BASE | rounds (HEAD/BASE) |")
        print("| --- | --- | ---: | ---: | ---: | --- |")
        for era in ("modern", "legacy"):
            for method in ("tools/call", "tools/list"):
                scripts = {}
                for server in servers:
                    bench.verify(server, era, method)
                    scripts[server.label] = bench.wrk_script(workdir, server, era, method)
                rps: dict[str, list[float]] = {server.label: [] for server in servers}
                for round_number in range(rounds):
                    # A B, then B A: neither server always has the first turn.
                    for server in servers if round_number % 2 == 0 else servers[::-1]:
                        script = scripts[server.label]
                        if warmup:
                            bench.wrk(server, script, 16, warmup, server.label)
                        run = bench.wrk(server, script, 16, duration, server.label)
                        rps[server.label].append(run.rps)
                head, base_rps = (statistics.median(rps[server.label]) for server in servers)
                spread = " ".join(f"{a:.0f}/{b:.0f}" for a, b in zip(*rps.values(), strict=True))
                print(
                    f"| {era} | {method} | {head:.0f} | {base_rps:.0f} | {head / base_rps:.3f} "
                    f"| {spread} |",
                    flush=True,
                )
        print(
            f"\nconcurrency 16, {rounds} rounds of {warmup} + {duration} s, one uvicorn worker "
            f"each, SQLite, cache {'on Redis' if redis else 'in process'}; HEAD tracing off "
            "(OTEL_TRACES_EXPORTER=none)."
        )
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    if "--http" in sys.argv:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--http", metavar="BASE", required=True)
        parser.add_argument("--duration", type=int, default=5)
        parser.add_argument("--warmup", type=int, default=1)
        parser.add_argument("--rounds", type=int, default=3)
        parser.add_argument("--head", default="HEAD", help="the instrumented commit")
        parser.add_argument("--redis", default="", metavar="URL", help="cache on this Redis")
        options = parser.parse_args()
        http_main(
            options.http, options.duration, options.warmup, options.rounds, options.head,
            options.redis,
        )  # fmt: skip
    else:
        main()
