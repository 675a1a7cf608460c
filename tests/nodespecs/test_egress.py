"""The egress policy (nodespecs/downstream/egress.py) for servers an agent names: every spelling of
an internal address refused after DNS, the operator's exemptions, enforcement on every connection (a
listener on 127.0.0.1 sees nothing), and errors that say only the class of a failure."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import pytest

from graphs.authoring.validation import validate_workflow
from nodespecs.callers import Caller, caller_command
from nodespecs.downstream import client as mcp_client
from nodespecs.downstream import egress
from nodespecs.downstream.client import Connection, DownstreamError, DownstreamTimeout
from nodespecs.downstream.egress import CheckedTransport, EgressPolicy, EgressRefused, address_class
from tests.graphs.validation.helpers import count_files
from tests.peers import echo_http_server, free_port
from tests.witnesses import Listener

pytestmark = [pytest.mark.timeout(60)]

OPEN = EgressPolicy()


@pytest.fixture(autouse=True)
def _fresh_pool():
    mcp_client.close_all()
    yield
    mcp_client.close_all()


@contextmanager
def listener(host: str = "127.0.0.1", port: int = 0) -> Iterator[socket.socket]:
    """A socket listening on host:port that never accepts: whether anything connected is
    whether `accept` finds a connection waiting."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.bind((host, port))
        sock.listen(8)
        sock.setblocking(False)
        yield sock


def connections_seen(sock: socket.socket) -> int:
    seen = 0
    while True:
        try:
            accepted, _ = sock.accept()
        except BlockingIOError:
            return seen
        accepted.close()
        seen += 1


@contextmanager
def http_server(host: str, answer) -> Iterator[tuple[int, list[str]]]:
    """A plain HTTP server on host (a free port); `answer(handler)` writes each response.
    Yields the port and the Host headers it was sent."""
    hosts: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hosts.append(self.headers["Host"])
            answer(self)

        do_POST = do_GET

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], hosts
    finally:
        server.shutdown()
        server.server_close()


# Every spelling of every class the policy refuses, as a URL's host.
REFUSED = [
    ("127.0.0.1", "a loopback address"),
    ("2130706433", "a loopback address"),  # 127.0.0.1 as a number
    ("0177.0.0.1", "a loopback address"),  # octal
    ("0x7f000001", "a loopback address"),  # hexadecimal
    ("0x7f.1", "a loopback address"),
    ("127.1", "a loopback address"),
    ("localhost", "a loopback address"),  # a name resolving to loopback
    ("[::1]", "a loopback address"),
    ("[::ffff:127.0.0.1]", "a loopback address"),  # IPv4-mapped IPv6
    ("[2002:7f00:1::1]", "a loopback address"),  # 6to4 around 127.0.0.1
    ("10.1.2.3", "a private address"),
    ("172.16.0.1", "a private address"),
    ("192.168.1.1", "a private address"),
    ("[fc00::1]", "a private address"),
    ("[fd12:3456::1]", "a private address"),
    ("[64:ff9b::a00:1]", "a private address"),  # NAT64 around 10.0.0.1
    ("100.64.0.1", "a carrier-grade NAT address"),
    ("169.254.169.254", "a cloud metadata address"),
    ("[fd00:ec2::254]", "a cloud metadata address"),
    ("[::ffff:169.254.169.254]", "a cloud metadata address"),
    ("168.63.129.16", "a cloud metadata address"),
    ("169.254.1.1", "a link-local address"),
    ("[fe80::1]", "a link-local address"),
    ("224.0.0.1", "a multicast address"),
    ("[ff02::1]", "a multicast address"),
    ("0.0.0.0", "an unspecified address (this host)"),
    ("0", "an unspecified address (this host)"),
    ("[::]", "an unspecified address (this host)"),
    ("255.255.255.255", "a reserved address (not publicly routable)"),
    ("240.0.0.1", "a reserved address (not publicly routable)"),
    ("192.0.2.1", "a reserved address (not publicly routable)"),  # documentation
]


@pytest.mark.parametrize(("host", "refused_as"), REFUSED)
def test_every_spelling_of_an_internal_address_is_refused_after_resolution(host, refused_as):
    refusal = egress.url_refusal(f"http://{host}:8080/mcp", OPEN)

    assert refusal is not None
    assert refusal.address_class == refused_as
    assert refusal.setting == "EGRESS_ALLOWED_NETWORKS"
    assert refused_as in str(refusal)
    assert "EGRESS_ALLOWED_NETWORKS" in str(refusal)
    assert "register the server as a provider" in str(refusal)


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1"]
)
def test_public_addresses_are_allowed(address):
    assert address_class(ipaddress.ip_address(address)) is None
    assert egress.url_refusal(f"https://[{address}]/mcp" if ":" in address else
                              f"https://{address}/mcp", OPEN) is None  # fmt: skip


def test_a_name_resolving_to_one_public_and_one_private_address_is_refused(monkeypatch):
    def resolver(host, port, *args, **kwargs):
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("8.8.8.8", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", resolver)

    refusal = egress.url_refusal("https://mixed.example/mcp", OPEN)

    assert refusal is not None
    assert refusal.address_class == "a private address"
    assert refusal.host == "mixed.example"
    assert "10.0.0.7" not in str(refusal)  # an internal name's address is for the log only
    assert "10.0.0.7" in refusal.for_log()


def test_the_allow_list_exempts_only_its_networks(settings):
    settings.EGRESS_ALLOWED_NETWORKS = ["127.0.0.2/32", "fd00:1::/64"]
    policy = EgressPolicy.from_settings()

    assert egress.url_refusal("http://127.0.0.2:9/mcp", policy) is None
    assert egress.url_refusal("http://[::ffff:127.0.0.2]:9/mcp", policy) is None
    assert egress.url_refusal("http://[fd00:1::5]:9/mcp", policy) is None
    assert egress.url_refusal("http://127.0.0.1:9/mcp", policy) is not None
    assert egress.url_refusal("http://[fd00:2::5]:9/mcp", policy) is not None


def test_plain_http_is_refused_when_https_is_required(settings):
    settings.EGRESS_REQUIRE_HTTPS = True
    policy = EgressPolicy.from_settings()

    refusal = egress.url_refusal("http://8.8.8.8/mcp", policy)

    assert refusal is not None
    assert refusal.setting == "EGRESS_REQUIRE_HTTPS"
    assert "use an https:// URL" in str(refusal)
    assert egress.url_refusal("https://8.8.8.8/mcp", policy) is None


def test_validation_does_not_wait_on_a_slow_resolver(monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: time.sleep(3) or [])
    started = time.monotonic()

    assert egress.url_refusal("https://slow.example/mcp", OPEN, timeout=0.3) is None
    assert time.monotonic() - started < 1.5


# Enforcement at connect time, on every connection.


@pytest.mark.parametrize(("transport", "path"), [("streamable_http", "/mcp"), ("sse", "/sse")])
@pytest.mark.parametrize("host", ["127.0.0.1", "2130706433", "localhost", "[::ffff:127.0.0.1]"])
def test_a_listener_on_loopback_sees_no_connection_from_an_egress_checked_server(
    transport, path, host
):
    with listener() as sock:
        port = sock.getsockname()[1]
        connection = Connection(
            name="probe",
            transport=transport,
            url=f"http://{host}:{port}{path}",
            timeout_seconds=5,
            egress_checked=True,
        )
        started = time.monotonic()
        with pytest.raises(DownstreamError) as failure:
            mcp_client.list_tools(connection)
        seconds = time.monotonic() - started
        assert connections_seen(sock) == 0

    message = str(failure.value)
    assert "refused by the egress policy" in message
    assert "a loopback address" in message
    assert "EGRESS_ALLOWED_NETWORKS" in message
    assert seconds < 2, f"refused after {seconds:.1f} s, not before any packet was sent"


def test_the_listener_sees_an_operators_connection_but_never_the_agents():
    """The same URL: the operator's provider connects (so the listener does see connections),
    the agent's server does not."""
    with listener() as sock:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        agents = Connection(name="agents", transport="streamable_http", url=url,
                            timeout_seconds=1, egress_checked=True)  # fmt: skip
        with pytest.raises(DownstreamError, match="refused by the egress policy"):
            mcp_client.list_tools(agents)
        assert connections_seen(sock) == 0

        operators = Connection(name="operators", transport="streamable_http", url=url,
                               timeout_seconds=1)  # fmt: skip
        with pytest.raises(DownstreamTimeout):
            mcp_client.list_tools(operators)
        assert connections_seen(sock) >= 1


def test_plain_http_is_refused_at_connect_time_when_https_is_required(settings):
    settings.EGRESS_ALLOWED_NETWORKS = ["127.0.0.0/8"]  # the address itself is allowed
    settings.EGRESS_REQUIRE_HTTPS = True
    with listener() as sock:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        connection = Connection(name="plain", transport="streamable_http", url=url,
                                timeout_seconds=5, egress_checked=True)  # fmt: skip
        with pytest.raises(DownstreamError) as failure:
            mcp_client.list_tools(connection)
        assert connections_seen(sock) == 0
    assert "refused by the egress policy" in str(failure.value)
    assert "EGRESS_REQUIRE_HTTPS" in str(failure.value)


def test_a_redirect_from_an_allowed_host_to_a_refused_address_is_not_followed():
    def redirect(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(302)
        handler.send_header("Location", f"http://127.0.0.1:{port_of_listener}/internal")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    allowed = EgressPolicy(allowed_networks=(ipaddress.ip_network("127.0.0.2/32"),))
    refusals: list[EgressRefused] = []

    async def fetch(url: str) -> None:
        transport = CheckedTransport(allowed, refusals.append)
        async with httpx2.AsyncClient(transport=transport, follow_redirects=True) as client:
            await client.get(url)

    with listener() as sock, http_server("127.0.0.2", redirect) as (port, hosts):
        port_of_listener = sock.getsockname()[1]
        with pytest.raises(EgressRefused, match=r"127\.0\.0\.1 is a loopback address"):
            asyncio.run(fetch(f"http://127.0.0.2:{port}/mcp"))
        assert hosts == [f"127.0.0.2:{port}"]  # the allowed hop was made
        assert connections_seen(sock) == 0
    assert [refusal.host for refusal in refusals] == ["127.0.0.1"]


def test_each_connection_is_judged_at_the_address_it_goes_to_so_dns_rebinding_fails(
    monkeypatch,
):
    """rebind.example answers 127.0.0.2 (allowed) the first time, 127.0.0.1 after: the
    second connection is judged again, and refused, before it is made. The allowed one went
    to the address judged, with the name in its Host header."""
    answers = iter(["127.0.0.2", "127.0.0.1"])
    real_getaddrinfo = socket.getaddrinfo

    def rebinding(host, port, *args, **kwargs):
        if host in ("rebind.example", b"rebind.example"):
            host = next(answers)
        return real_getaddrinfo(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)

    def close_after_answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "2")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(b"ok")

    allowed = EgressPolicy(allowed_networks=(ipaddress.ip_network("127.0.0.2/32"),))

    async def fetch_twice(url: str) -> str:
        transport = CheckedTransport(allowed)
        async with httpx2.AsyncClient(transport=transport) as client:
            first = (await client.get(url)).text
            with pytest.raises(EgressRefused, match=r"rebind\.example is a loopback address"):
                await client.get(url)
            return first

    with (
        http_server("127.0.0.2", close_after_answer) as (port, hosts),
        listener("127.0.0.1", port) as sock,
    ):
        assert asyncio.run(fetch_twice(f"http://rebind.example:{port}/mcp")) == "ok"
        assert connections_seen(sock) == 0
    assert hosts == [f"rebind.example:{port}"]


def test_a_unix_socket_is_never_connected_for_a_checked_connection():
    async def connect() -> None:
        backend = egress.CheckedNetworkBackend(OPEN)
        await backend.connect_unix_socket("/run/docker.sock")

    with pytest.raises(EgressRefused, match="a Unix socket"):
        asyncio.run(connect())


# What an egress-checked server's failure says: its class, never what the server said.


@pytest.fixture
def loopback_allowed(settings):
    """The echo peer and the test servers listen on loopback: allowed here, so that the
    failures past the policy can be seen."""
    settings.EGRESS_ALLOWED_NETWORKS = ["127.0.0.0/8"]


@pytest.mark.parametrize(
    ("transport", "server_args"), [("streamable_http", ()), ("sse", ("--sse",))]
)
def test_an_http_error_is_told_as_not_an_mcp_server_and_logged_in_full(
    loopback_allowed, caplog, transport, server_args
):
    caplog.set_level(logging.INFO, logger="nodespecs.downstream.client")
    with echo_http_server("--require-token", "s3cret", *server_args) as url:
        connection = Connection(name="agents", transport=transport, url=url, egress_checked=True)
        with pytest.raises(DownstreamError) as failure:
            mcp_client.list_tools(connection)

    # The server's URL is in the message, and its random port may hold the digits 401.
    message = str(failure.value).replace(url, "<url>")
    assert "not an MCP server" in message
    assert "401" not in message
    assert "Unauthorized" not in message
    assert "HTTP 401" in caplog.text  # the operators' log has it all


def test_a_body_and_reason_phrase_are_never_quoted(loopback_allowed, caplog):
    def leaky(handler: BaseHTTPRequestHandler) -> None:
        body = b'{"error": "redis-password-42 at 10.0.0.5"}'
        handler.send_response(500, "Internal secret-reason")
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.send_header("X-Backend", "internal-backend-7")
        handler.end_headers()
        handler.wfile.write(body)

    caplog.set_level(logging.INFO, logger="nodespecs.downstream.client")
    with http_server("127.0.0.1", leaky) as (port, _):
        connection = Connection(
            name="leaky", transport="streamable_http", url=f"http://127.0.0.1:{port}/mcp",
            timeout_seconds=5, egress_checked=True,
        )  # fmt: skip
        with pytest.raises(DownstreamError) as failure:
            mcp_client.list_tools(connection)

    message = str(failure.value)
    assert "not an MCP server" in message
    for leaked in ("redis-password-42", "secret-reason", "internal-backend-7", "500"):
        assert leaked not in message
    assert "secret-reason" in caplog.text


def test_a_closed_port_and_a_reset_connection_are_told_alike_as_unreachable(loopback_allowed):
    """Were they told apart, the service would tell an agent which ports are open."""

    def failure_at(port: int) -> str:
        url = f"http://127.0.0.1:{port}/mcp"
        connection = Connection(name="probe", transport="streamable_http", url=url,
                                timeout_seconds=5, egress_checked=True)  # fmt: skip
        with pytest.raises(DownstreamError) as failure:
            mcp_client.list_tools(connection)
        return str(failure.value).replace(url, "<url>")

    closed = failure_at(free_port())
    with Listener(reset=True) as resetting:
        reset = failure_at(resetting.port)

    assert closed == reset
    assert "unreachable" in closed
    assert "refused" not in closed.lower()
    assert "reset" not in closed.lower()


def test_a_real_server_is_called_where_the_allow_list_names_it_and_refused_where_not(settings):
    with echo_http_server() as url:
        connection = Connection(name="echo", transport="streamable_http", url=url,
                                egress_checked=True)  # fmt: skip
        settings.EGRESS_ALLOWED_NETWORKS = ["127.0.0.0/8"]
        result = mcp_client.call_tool(connection, "add", {"a": 1, "b": 2})
        assert result.structured_content == {"sum": 3}

        mcp_client.close_all()  # the next session connects again, under today's setting
        settings.EGRESS_ALLOWED_NETWORKS = []
        with pytest.raises(DownstreamError, match="refused by the egress policy"):
            mcp_client.call_tool(connection, "add", {"a": 1, "b": 2})


def test_an_egress_checked_and_an_unchecked_connection_do_not_share_a_session():
    url = "http://127.0.0.1:9/mcp"
    checked = Connection(name="a", transport="streamable_http", url=url, egress_checked=True)
    unchecked = Connection(name="a", transport="streamable_http", url=url)
    assert checked != unchecked
    assert hash(checked) != hash(unchecked)


# validate_workflow reports a refused address.

# An agent's key: its servers are declared servers, egress-checked.
API = Caller(actor="key:abc123", scopes=frozenset({"tools:read", "workflows:write"}))


def _with_server(url: str) -> dict:
    document = count_files()
    document["mcpServers"] = {"probe": {"type": "streamableHttp", "url": url}}
    return document


@pytest.mark.django_db
@pytest.mark.parametrize("host", ["127.0.0.1", "2130706433", "[::1]", "169.254.169.254"])
def test_validate_workflow_reports_a_refused_address_for_an_api_caller(host):
    report = validate_workflow(_with_server(f"http://{host}:6379/mcp"), caller=API)

    problem = next(p for p in report.problems if p.code == "server_address_refused")
    assert problem.severity == "error"
    assert problem.path == "/mcpServers/probe/url"
    assert "refused by the egress policy" in problem.message
    assert "EGRESS_ALLOWED_NETWORKS" in problem.message
    assert "register the server as a provider" in problem.message
    assert not report.valid


@pytest.mark.django_db
def test_validate_workflow_does_not_judge_an_operators_servers_or_allowed_addresses(settings):
    definition = _with_server("http://127.0.0.1:6379/mcp")
    operator = validate_workflow(definition, caller=caller_command("import_graph"))
    assert "server_address_refused" not in [p.code for p in operator.problems]

    public = validate_workflow(_with_server("https://8.8.8.8/mcp"), caller=API)
    assert "server_address_refused" not in [p.code for p in public.problems]

    settings.EGRESS_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    allowed = validate_workflow(definition, caller=API)
    assert "server_address_refused" not in [p.code for p in allowed.problems]
