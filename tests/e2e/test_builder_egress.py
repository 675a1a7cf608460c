"""The hostile builder of issue 24, part 3, against a live server with a real key and the
official client: the servers it names in `mcpServers` are reached only at addresses the egress
policy allows. Every spelling of loopback (and the metadata address) is reported by
validate_workflow and refused by create_workflow; a name the agent's DNS turns to 127.0.0.1
after validation (rebinding) is refused when the run connects; a listener on 127.0.0.1 shows
that nothing was reached. A server the operator allows fails with the class of its failure
only, never its status, reason phrase, headers or body.

The agent's DNS is played by the live server's resolver: a `sitecustomize` on its PYTHONPATH
answers names under `rebind.test` with the address written in a file the test changes.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import LiveServer, create_key, start_server
from tests.e2e.test_mcp_client import connect, run
from tests.witnesses import Listener

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

BUILDER_SCOPES = "tools:read,tools:execute,workflows:write"

RESOLVER = '''
"""The agent's DNS for tests/e2e/test_builder_egress.py: a name under rebind.test resolves to
the address written in the file SWITCHYARD_TEST_DNS names, read at each lookup."""
import os
import socket

_real_getaddrinfo = socket.getaddrinfo
_answer_file = os.environ.get("SWITCHYARD_TEST_DNS", "")


def getaddrinfo(host, port, *args, **kwargs):
    name = host.decode() if isinstance(host, bytes) else host
    if _answer_file and isinstance(name, str) and name.endswith(".rebind.test"):
        with open(_answer_file) as answer:
            host = answer.read().strip()
    return _real_getaddrinfo(host, port, *args, **kwargs)


socket.getaddrinfo = getaddrinfo
'''


@pytest.fixture(scope="module")
def egress_server(tmp_path_factory) -> Iterator[tuple[LiveServer, str, Path]]:
    """The live server, with the agent's DNS in its resolver and only 127.0.0.2 allowed."""
    tmp = tmp_path_factory.mktemp("egress")
    (tmp / "resolver").mkdir()
    (tmp / "resolver" / "sitecustomize.py").write_text(RESOLVER)
    answer = tmp / "dns-answer"
    answer.write_text("8.8.8.8")
    (tmp / "server").mkdir()
    for server in start_server(
        tmp / "server",
        PYTHONPATH=str(tmp / "resolver"),
        SWITCHYARD_TEST_DNS=str(answer),
        EGRESS_ALLOWED_NETWORKS="127.0.0.2/32",
    ):
        builder = create_key(server, "agent", BUILDER_SCOPES)
        yield server, builder, answer


def agent_draft(name: str, url: str) -> dict[str, Any]:
    """A workflow whose mcp node calls the agent's own server at `url`."""
    return {
        "version": "1.0",
        "server": {"name": "agents", "version": "1.0.0"},
        "mcpServers": {"probe": {"type": "http", "url": url, "timeout": 10}},
        "tools": [
            {
                "name": name,
                "description": "Calls the agent's server.",
                "inputSchema": {"type": "object"},
                "nodes": [
                    {"id": "entry", "type": "entry", "next": "call"},
                    {
                        "id": "call",
                        "type": "mcp",
                        "server": "probe",
                        "tool": "collect",
                        "args": {"data": "$string($.entry)"},
                        "next": "exit",
                    },
                    {"id": "exit", "type": "exit"},
                ],
            }
        ],
    }


# Every spelling of 127.0.0.1 (and the cloud metadata address), as the agent would write it.
SPELLINGS = [
    "127.0.0.1",
    "2130706433",
    "0x7f000001",
    "0177.0.0.1",
    "127.1",
    "localhost",
    "[::ffff:127.0.0.1]",
    "[::1]",
    "169.254.169.254",
]


def test_every_spelling_of_loopback_is_reported_and_refused_and_nothing_is_reached(
    egress_server,
):
    server, builder, _ = egress_server
    listener = Listener()
    reports: dict[str, dict] = {}
    created: dict[str, Any] = {}

    async def scenario():
        async with connect(server, "auto", key=builder, timeout=30) as agent:
            for number, host in enumerate(SPELLINGS):
                draft = agent_draft(f"probe_{number}", f"http://{host}:{listener.port}/mcp")
                checked = await agent.call_tool("validate_workflow", {"definition": draft})
                reports[host] = checked.structured_content
                created[host] = await agent.call_tool("create_workflow", {"definition": draft})

    try:
        run(scenario)
    finally:
        listener.close()

    for host in SPELLINGS:
        report = reports[host]
        assert report["valid"] is False, host
        refused = [p for p in report["problems"] if p["code"] == "server_address_refused"]
        assert len(refused) == 1, (host, report["problems"])
        assert refused[0]["severity"] == "error"
        assert refused[0]["path"] == "/mcpServers/probe/url"
        assert "refused by the egress policy" in refused[0]["message"]
        assert "EGRESS_ALLOWED_NETWORKS" in refused[0]["message"]
        assert created[host].is_error, host
        assert "server_address_refused" in str(created[host].content), host
    assert listener.connections == []


def test_a_name_rebound_to_loopback_after_validation_is_refused_when_the_run_connects(
    egress_server,
):
    server, builder, answer = egress_server
    listener = Listener()
    url = f"http://evil.rebind.test:{listener.port}/mcp"

    async def scenario():
        async with connect(server, "auto", key=builder, timeout=30) as agent:
            answer.write_text("8.8.8.8")  # a public address while validation looks
            draft = agent_draft("rebound", url)
            checked = await agent.call_tool("validate_workflow", {"definition": draft})
            codes = [p["code"] for p in checked.structured_content["problems"]]
            assert "server_address_refused" not in codes
            created = await agent.call_tool("create_workflow", {"definition": draft})
            assert not created.is_error, created.content

            answer.write_text("127.0.0.1")  # then the agent's DNS points at this host
            return await agent.call_tool(
                "test_workflow", {"name": "rebound", "arguments": {"to": "x"}}
            )

    try:
        tested = run(scenario)
    finally:
        listener.close()

    assert tested.is_error
    error = tested.structured_content["error"]
    assert "refused by the egress policy" in error
    assert "evil.rebind.test is a loopback address" in error
    assert "127.0.0.1" not in error  # what an internal name resolves to is not told
    assert listener.connections == []


@contextmanager
def leaky_http_server(host: str) -> Iterator[int]:
    """An HTTP server that answers everything 500 with secrets in its reason, header and
    body: what a port scanner through this service would have read."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = b'{"error": "redis-password-42", "host": "db.internal:5432"}'
            self.send_response(500, "Internal leaked-reason")
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Backend", "backend-secret-7")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_an_allowed_servers_failures_are_told_by_their_class_only(egress_server):
    server, builder, _ = egress_server
    with socket.socket() as closed:  # a port on 127.0.0.2 that nothing listens on
        closed.bind(("127.0.0.2", 0))
        closed_port = closed.getsockname()[1]

    async def test_run(agent, name: str, url: str) -> str:
        created = await agent.call_tool("create_workflow", {"definition": agent_draft(name, url)})
        assert not created.is_error, created.content
        tested = await agent.call_tool("test_workflow", {"name": name, "arguments": {}})
        assert tested.is_error
        # What is said of the server, after its name and URL (the run's number goes before).
        return tested.structured_content["error"].partition(f"{url})")[2]

    async def scenario():
        async with connect(server, "auto", key=builder, timeout=60) as agent:
            with (
                leaky_http_server("127.0.0.2") as leaky,
                Listener("127.0.0.2", reset=True) as reset,
            ):
                return (
                    await test_run(agent, "leaky", f"http://127.0.0.2:{leaky}/mcp"),
                    await test_run(agent, "closed", f"http://127.0.0.2:{closed_port}/mcp"),
                    await test_run(agent, "reset", f"http://127.0.0.2:{reset.port}/mcp"),
                )

    leaky, closed, reset = run(scenario)

    assert "not an MCP server" in leaky
    for leaked in ("500", "leaked-reason", "backend-secret-7", "redis-password-42", "db.internal"):
        assert leaked not in leaky
    assert "unreachable" in closed
    # A closed port and an open one that resets are told alike: no port scan through here.
    assert closed == reset
    assert "refused" not in closed.lower()
