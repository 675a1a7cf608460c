"""A provider's connection test against real local servers: the echo peer over each transport,
and servers that fail each way a person must be told plainly (refused, timed out, not an MCP
server, authentication failed, command not found, the process exited). Nothing beyond
127.0.0.1."""

from __future__ import annotations

import sys
import time

import pytest

from nodespecs.downstream import client
from nodespecs.models import Provider
from nodespecs.providers.connection_check import (
    MAX_TEST_SECONDS,
    check_timeout,
    provider_connection_test,
)
from tests.nodespecs.providers_helpers import echo_provider, http_provider, servers  # noqa: F401
from tests.peers import echo_http_server
from tests.peers.not_mcp import closed_port, silent_server, web_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60), pytest.mark.usefixtures("servers")]

ECHO_TOOLS = ["echo", "add", "sleep", "pid", "crash", "fail"]


def python_provider(code: str, **fields) -> Provider:
    """A stdio provider that runs a few lines of Python instead of an MCP server."""
    provider = Provider(name="script", command=sys.executable, args=["-c", code], **fields)
    provider.full_clean()
    provider.save()
    return provider


class TestAWorkingServer:
    def test_the_echo_peer_over_stdio_lists_its_tools_with_the_servers_name_and_the_latency(
        self, db
    ):
        report = provider_connection_test(provider=echo_provider())

        assert report.ok, report.problem
        assert [tool.name for tool in report.tools] == ECHO_TOOLS
        described = {tool.name: tool.description for tool in report.tools}
        assert described["add"] == "Add two numbers and return their sum as structured content."
        assert report.server_name == "echo"
        assert report.protocol_version
        # Starting the process and initializing take time; listing is one request.
        assert report.connect_ms > 0
        assert report.list_ms > 0
        assert report.elapsed_ms == report.connect_ms + report.list_ms
        assert (report.failure, report.problem) == ("", "")

    @pytest.mark.parametrize(("flag", "transport"), [((), "streamable_http"), (("--sse",), "sse")])
    def test_the_echo_peer_over_http_and_sse(self, db, flag, transport):
        with echo_http_server(*flag) as url:
            report = provider_connection_test(provider=http_provider(url, transport=transport))

        assert report.ok, report.problem
        assert [tool.name for tool in report.tools] == ECHO_TOOLS
        assert report.server_name == "echo"

    def test_the_test_leaves_the_pool_of_live_sessions_alone(self, db):
        provider_connection_test(provider=echo_provider())

        assert client.pool_size() == 0

    def test_the_test_waits_the_providers_timeout_but_never_more_than_ten_seconds(self, db):
        assert check_timeout(Provider(timeout_seconds=2)) == 2
        assert check_timeout(Provider(timeout_seconds=600)) == MAX_TEST_SECONDS == 10


class TestPlainWords:
    def test_a_closed_port_is_connection_refused(self, db):
        url = f"http://127.0.0.1:{closed_port()}/mcp"

        report = provider_connection_test(provider=http_provider(url))

        assert not report.ok
        assert report.failure == "Connection refused: nothing listens at that address"
        assert "Connection refused" in report.problem
        assert "Check that the server is running" in report.problem

    @pytest.mark.parametrize("transport", ["streamable_http", "sse"])
    def test_a_server_that_accepts_and_never_answers_is_cut_off_at_the_timeout(self, db, transport):
        with silent_server() as port:
            provider = http_provider(
                f"http://127.0.0.1:{port}/mcp", transport=transport, timeout_seconds=1
            )
            started = time.monotonic()
            report = provider_connection_test(provider=provider)
            took = time.monotonic() - started

        assert report.failure == "Timed out"
        assert "did not answer within 1 s while starting" in report.problem
        assert 1 <= took < 3, took

    def test_a_stdio_server_that_never_answers_is_cut_off_at_the_timeout_too(self, db):
        provider = python_provider("import time; time.sleep(60)", timeout_seconds=1)

        started = time.monotonic()
        report = provider_connection_test(provider=provider)

        assert report.failure == "Timed out"
        assert time.monotonic() - started < 3

    def test_an_html_page_is_not_an_mcp_server(self, db):
        with web_server() as base:
            report = provider_connection_test(provider=http_provider(f"{base}/html"))

        assert report.failure == "Not an MCP server: it answered, but not in MCP"
        assert "text/html" in report.problem

    def test_an_html_page_is_not_an_sse_endpoint_either(self, db):
        with web_server() as base:
            report = provider_connection_test(
                provider=http_provider(f"{base}/sse", transport="sse")
            )

        assert report.failure == "Not an MCP server: it answered, but not in MCP"
        assert "not with an event stream" in report.problem
        assert "SSE endpoint" in report.problem

    def test_json_that_is_not_json_rpc_is_not_an_mcp_server(self, db):
        with web_server() as base:
            report = provider_connection_test(provider=http_provider(f"{base}/json"))

        assert report.failure == "Not an MCP server: it answered, but not in MCP"
        assert len(report.problem) <= 1200

    def test_a_stdio_program_that_writes_no_json_rpc_is_not_an_mcp_server(self, db):
        code = "import time; print('Hello! Usage: server --port N', flush=True); time.sleep(60)"

        report = provider_connection_test(provider=python_provider(code, timeout_seconds=1))

        assert report.failure == "Not an MCP server: it answered, but not in MCP"
        assert "not valid JSON-RPC" in report.problem

    def test_a_401_is_authentication_failed(self, db):
        with echo_http_server("--require-token", "right") as url:
            provider = http_provider(url, headers={"Authorization": "Bearer wrong-token-123"})
            report = provider_connection_test(provider=provider)

        assert report.failure == "Authentication failed"
        assert "answered HTTP 401" in report.problem
        assert "check the credentials in the provider's headers" in report.problem
        assert "wrong-token-123" not in report.problem

    def test_the_right_token_passes(self, db):
        with echo_http_server("--require-token", "right") as url:
            provider = http_provider(url, headers={"Authorization": "Bearer right"})
            assert provider_connection_test(provider=provider).ok

    def test_a_command_that_is_not_installed_is_command_not_found(self, db):
        provider = Provider.objects.create(name="missing", command="no-such-mcp-server-x1")

        report = provider_connection_test(provider=provider)

        assert report.failure == "Command not found"
        assert "command 'no-such-mcp-server-x1' was not found on PATH" in report.problem

    def test_a_server_that_exits_at_once_is_the_process_exited_with_its_code_and_stderr(self, db):
        code = "import sys; print('config file missing', file=sys.stderr); sys.exit(3)"

        report = provider_connection_test(provider=python_provider(code))

        assert report.failure == "The process exited before it answered"
        assert "exited with code 3" in report.problem
        assert "config file missing" in report.problem

    def test_a_command_the_allow_list_refuses_is_command_not_allowed(self, db, settings):
        provider = echo_provider()
        settings.PROVIDER_ALLOWED_COMMANDS = ["/usr/bin/node"]

        report = provider_connection_test(provider=provider)

        assert report.failure == "Command not allowed"
        assert "PROVIDER_ALLOWED_COMMANDS" in report.problem


class TestADeclaredServer:
    def test_an_egress_checked_server_is_told_the_class_only(self, db):
        # A server a builder declared: loopback is refused before any connection.
        provider = http_provider(
            f"http://127.0.0.1:{closed_port()}/mcp", declared_by="key:abc12345"
        )

        report = provider_connection_test(provider=provider)

        assert report.failure == "Refused by the egress policy"
        assert "was not contacted" in report.problem
