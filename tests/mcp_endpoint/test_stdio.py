"""stdio through the protocol core, in process: a workflow call streams its progress, a call
may ask the client for input (its answer comes back as a line), requests are answered
concurrently, the connection's runs end with it, and its threads keep their database
connections from one request to the next."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
import threading
import time
from typing import Any

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from mcp import types

from graphs.models import Run
from mcp_endpoint.features import extensions
from mcp_endpoint.features.extensions import ExtraTool
from mcp_endpoint.jsonrpc.interaction import InputRequest
from mcp_endpoint.transports.stdio import serve
from tests.graph_files import import_file
from tests.mcp_endpoint.helpers import disable_workflow
from tests.test_settings import start

pytestmark = pytest.mark.timeout(60)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "tests", "version": "1"},
    },
}


class Client:
    """The other end of the pipe: lines go in as the test sends them, answers are kept."""

    def __init__(self) -> None:
        self.incoming: asyncio.Queue[str] = asyncio.Queue()
        self.received: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()

    def send(self, message: dict[str, Any]) -> None:
        self.incoming.put_nowait(json.dumps(message) + "\n")

    def close(self) -> None:
        self.incoming.put_nowait("")

    async def read_line(self) -> str:
        return await self.incoming.get()

    def write_line(self, line: str) -> None:
        self.received.append(json.loads(line))
        self.arrived.set()

    async def wait_for(self, found, timeout: float = 20) -> dict[str, Any]:
        """The first message received for which `found(message)` holds."""
        async with asyncio.timeout(timeout):
            while True:
                for message in self.received:
                    if found(message):
                        return message
                self.arrived.clear()
                await self.arrived.wait()


def answer_to(request_id: Any):
    return lambda message: message.get("id") == request_id and "method" not in message


@pytest.fixture
def committed(transactional_db):
    """The stdio server answers on threads of its own, which see committed rows only."""


def test_a_workflow_call_streams_its_progress_then_its_result(committed, loops):
    async def scenario() -> list[dict[str, Any]]:
        client = Client()
        serving = asyncio.create_task(serve(client.read_line, client.write_line))
        client.send(INITIALIZE)
        await client.wait_for(answer_to(0))
        client.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {
                    "name": "sum_to",
                    "arguments": {"n": 3},
                    "_meta": {"progressToken": "p"},
                },
            }
        )
        await client.wait_for(answer_to(1))
        client.close()
        await serving
        return client.received

    received = asyncio.run(scenario())

    progress = [m for m in received if m.get("method") == "notifications/progress"]
    response = next(m for m in received if m.get("id") == 1)
    assert [p["params"]["progress"] for p in progress] == list(range(1, len(progress) + 1))
    assert len(progress) >= 4  # entry, three steps, the switch and the exit report as they end
    assert received.index(progress[-1]) < received.index(response)
    assert response["result"]["structuredContent"] == {"sum": 6, "steps": 3}
    run = Run.objects.get()
    assert run.status == Run.Status.SUCCEEDED
    assert run.caller == "stdio"
    assert run.session_id.startswith("stdio:")


@pytest.fixture
def asks_for_a_name():
    """A tool that asks its client for a name midway (elicitation), then greets it."""

    def handler(arguments: dict[str, Any], context: Any):
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        answers = yield [
            InputRequest(
                "name", "elicitation/create", {"message": "Your name?", "requestedSchema": schema}
            )
        ]
        name = answers["name"]["content"]["name"]
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"Hi {name}")])

    tool = types.Tool(name="greet", input_schema={"type": "object"})
    extensions.installed().tools["greet"] = ExtraTool(tool, handler)
    yield
    del extensions.installed().tools["greet"]


def test_a_call_asks_the_client_over_stdio_while_other_requests_are_answered(
    transactional_db, asks_for_a_name
):
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], list[int]]:
        client = Client()
        serving = asyncio.create_task(serve(client.read_line, client.write_line))
        client.send(INITIALIZE)
        await client.wait_for(answer_to(0))
        client.send(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greet"}}
        )
        asked = await client.wait_for(lambda m: m.get("method") == "elicitation/create")
        # While the call waits for its answer, another request is answered.
        client.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        await client.wait_for(answer_to(2))
        order = [m.get("id") for m in client.received if "method" not in m]
        client.send(
            {
                "jsonrpc": "2.0",
                "id": asked["id"],
                "result": {"action": "accept", "content": {"name": "Ada"}},
            }
        )
        greeted = await client.wait_for(answer_to(1))
        client.close()
        await serving
        return asked, greeted, order

    asked, greeted, order = asyncio.run(scenario())

    assert asked["params"]["message"] == "Your name?"
    assert order == [0, 2]  # the ping was answered while the call waited
    assert greeted["result"]["content"][0]["text"] == "Hi Ada"


def test_requests_before_initialize_are_refused_saying_what_to_send(transactional_db):
    async def scenario() -> list[dict[str, Any]]:
        client = Client()
        client.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        client.send({"not": "json-rpc"})
        client.incoming.put_nowait("{oops\n")
        client.close()
        await serve(client.read_line, client.write_line)
        return client.received

    received = asyncio.run(scenario())

    messages = sorted(m["error"]["message"] for m in received)
    assert any(m.startswith("Send initialize first") for m in messages)
    assert any(m.startswith("Parse error") for m in messages)
    assert any(m.startswith("Invalid Request") for m in messages)


def test_one_groups_server_over_stdio_hears_that_its_tools_changed(committed, loops, monkeypatch):
    from mcp_endpoint.protocol import list_changes

    monkeypatch.setattr(list_changes, "LISTEN_POLL_SECONDS", 0.05)
    import_file("flat_form.yaml")

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        client = Client()
        serving = asyncio.create_task(serve(client.read_line, client.write_line, "loops"))
        client.send(INITIALIZE)
        initialized = await client.wait_for(answer_to(0))
        client.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        listed = await client.wait_for(answer_to(1))
        await asyncio.sleep(0.2)  # the watcher has taken the list as it is
        await asyncio.to_thread(disable_workflow, "sum_to")
        changed = await client.wait_for(
            lambda message: message.get("method") == "notifications/tools/list_changed"
        )
        client.close()
        await serving
        return initialized, listed, changed

    initialized, listed, changed = asyncio.run(scenario())
    assert initialized["result"]["serverInfo"]["name"] == "loops"
    assert [tool["name"] for tool in listed["result"]["tools"]] == ["classify", "is_zero", "sum_to"]
    assert changed == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


def test_the_stdio_command_serves_one_group_named_with_group(committed, loops, monkeypatch):
    """`--group`, not `--server`, which launchers such as the MCP Inspector take as theirs."""
    from mcp_endpoint.management.commands import mcp_stdio

    served: list[str | None] = []

    async def fake_serve(read_line, write_line, server=None) -> None:
        served.append(server)

    monkeypatch.setattr(mcp_stdio, "serve", fake_serve)
    monkeypatch.setattr(logging.getLogger(), "handlers", list(logging.getLogger().handlers))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO()))
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO()))
    call_command("mcp_stdio", "--group", "loops")
    assert served == ["loops"]
    with pytest.raises(CommandError, match="slugs: loops"):
        call_command("mcp_stdio", "--group", "no-such-group")
    with pytest.raises(CommandError, match="unrecognized arguments: --server"):
        call_command("mcp_stdio", "--server", "loops")


def call_sum_to(request_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "sum_to", "arguments": {"n": 2}},
    }


@pytest.fixture
def on_postgresql(committed):
    """SQLite's in-memory test database ignores closing (it would be lost), so what these
    tests count and break is PostgreSQL's."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL; set DATABASE_URL to run it")


@pytest.fixture
def pool_connections(settings):
    """The database connections opened on the stdio pools' threads (a connection reopened
    counts again), with two run threads: at most six threads in all."""
    settings.GRAPHS_DIRECT_RUN_THREADS = 2
    opened: list[BaseDatabaseWrapper] = []

    def note(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
        if threading.current_thread().name.startswith(("stdio_", "run_")):
            opened.append(connection)

    connection_created.connect(note)
    yield opened
    connection_created.disconnect(note)


def test_a_stdio_connection_keeps_its_database_connections_until_it_ends(
    on_postgresql, loops, pool_connections
):
    """Connecting to PostgreSQL costs milliseconds, more than the rest of a short call
    (docs/benchmarks.md, issue 31, item 3): a thread connects once, not per request."""
    calls = 20

    async def scenario() -> list[dict[str, Any]]:
        client = Client()
        serving = asyncio.create_task(serve(client.read_line, client.write_line))
        client.send(INITIALIZE)
        await client.wait_for(answer_to(0))
        answers = []
        for request_id in range(1, calls + 1):
            client.send(call_sum_to(request_id))
            answers.append(await client.wait_for(answer_to(request_id)))
        client.close()
        await serving
        return answers

    answers = asyncio.run(scenario())

    assert [answer["result"]["structuredContent"]["sum"] for answer in answers] == [3] * calls
    assert Run.objects.filter(status=Run.Status.SUCCEEDED).count() == calls
    # At most one per thread (4 short, 2 run), where it was one per request or more.
    assert 0 < len(pool_connections) <= 6
    assert all(opened.connection is None for opened in pool_connections), "left open"


def wait_ended(dsn: str, pids: list[int]) -> None:
    """End the database sessions `pids` as a restart would, and wait until they are gone."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [pids])
        deadline = time.monotonic() + 10
        while admin.execute(
            "SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", [pids]
        ).fetchone():
            assert time.monotonic() < deadline, "the sessions did not end"
            time.sleep(0.02)


def test_a_stdio_connection_answers_after_the_database_ended_its_sessions(
    on_postgresql, loops, pool_connections
):
    """A database restart under a long-lived stdio process: the next request works, on new
    connections (no restart of the process, no failing request)."""
    connection.ensure_connection()
    dsn = connection.connection.info.dsn

    async def scenario() -> tuple[list[int], list[dict[str, Any]]]:
        client = Client()
        serving = asyncio.create_task(serve(client.read_line, client.write_line))
        client.send(INITIALIZE)
        await client.wait_for(answer_to(0))
        client.send(call_sum_to(1))
        answers = [await client.wait_for(answer_to(1))]
        pids = [opened.connection.info.backend_pid for opened in pool_connections]
        wait_ended(dsn, pids)
        for request_id in (2, 3):
            client.send(call_sum_to(request_id))
            answers.append(await client.wait_for(answer_to(request_id)))
        client.close()
        await serving
        return pids, answers

    pids, answers = asyncio.run(scenario())

    assert pids, "no connection was opened on the pools' threads"
    assert [answer["result"]["structuredContent"]["sum"] for answer in answers] == [3, 3, 3]
    assert Run.objects.filter(status=Run.Status.SUCCEEDED).count() == 3


# Five jobs on one stdio thread, on a SQLite file: how many times the thread connected.
COUNT_SQLITE_CONNECTIONS = """
import asyncio
from concurrent.futures import ThreadPoolExecutor

import django

django.setup()
from django.db import connection
from django.db.backends.signals import connection_created

from mcp_endpoint.transports.stdio import _PoolConnections

opened = []
connection_created.connect(lambda sender, connection, **kwargs: opened.append(connection))


def query():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


async def five_jobs():
    kept = _PoolConnections()
    with ThreadPoolExecutor(1) as thread:
        on_thread = kept.on_thread(thread)
        for _ in range(5):
            await on_thread(query)
    await asyncio.to_thread(kept.close)


asyncio.run(five_jobs())
print(len(opened))
"""


def test_on_the_embedded_sqlite_database_a_stdio_thread_connects_once(tmp_path):
    """A desktop client's stdio server usually runs on the embedded default: reopening its
    SQLite file before every request cost 0.7 ms of CPU, a third of a short call
    (docs/benchmarks.md). The in-memory test database ignores closing, so this runs in a fresh
    interpreter on a file."""
    result = start("-c", COUNT_SQLITE_CONNECTIONS, DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3")

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"
