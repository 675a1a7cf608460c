"""The pool of downstream MCP connections, against real servers: the echo peer over stdio and
Streamable HTTP, and commands that fail in the ways servers fail."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import re
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2
import pytest
from mcp.shared._httpx_utils import sse_within_origin

from nodespecs.downstream import client
from nodespecs.downstream import pool as mcp_pool
from nodespecs.downstream.client import Connection, DownstreamError, DownstreamTimeout
from nodespecs.downstream.limits import (
    SDK_SSE_EVENT_BYTES,
    TOO_LARGE_MARK,
    BodyTooLarge,
    EventTooLarge,
    count_as_it_arrives,
)
from nodespecs.downstream.stdio import LineSplitter, MessageTooLarge
from tests.peers import echo_http_server, echo_server_command, free_port

# Each test waits on echo peers for a few seconds at most; a minute means one has hung.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


@pytest.fixture(autouse=True)
def _fresh_pool():
    """Each test starts its own servers and leaves none running."""
    client.close_all()
    yield
    client.close_all()


def echo(name: str = "echo", **env: str) -> Connection:
    """The echo peer over stdio; different `env` means a different server process."""
    command, *args = echo_server_command()
    return Connection(
        name=name, transport="stdio", command=command, args=tuple(args), env=tuple(env.items())
    )


def server_pid(connection: Connection) -> int:
    return client.call_tool(connection, "pid", {}).structured_content["result"]


def is_running(pid: int) -> bool:
    """Whether a process exists and is not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def wait_until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_calls_to_one_server_reuse_its_process():
    connection = echo()
    first = server_pid(connection)
    assert client.call_tool(connection, "echo", {"value": "hi"}).content[0].text == "hi"
    assert server_pid(connection) == first
    assert client.pool_size() == 1


def test_connections_with_the_same_settings_share_one_server_whatever_their_name():
    first = echo("from-graph-a")
    second = Connection(**{**first.__dict__, "name": "from-graph-b", "timeout_seconds": 5.0})
    assert server_pid(first) == server_pid(second)
    assert client.pool_size() == 1


def test_a_tool_error_is_returned_as_a_result_not_raised():
    result = client.call_tool(echo(), "fail", {"message": "the disk is full"})
    assert result.is_error
    assert "the disk is full" in result.content[0].text


def test_structured_output_comes_back_as_structured_content():
    result = client.call_tool(echo(), "add", {"a": 2, "b": 3})
    assert result.structured_content == {"sum": 5}


def test_a_crash_fails_the_call_in_flight_with_the_exit_code_and_stderr():
    connection = echo()
    server_pid(connection)
    with pytest.raises(DownstreamError) as failure:
        client.call_tool(connection, "crash", {})
    message = str(failure.value)
    assert "'echo'" in message
    assert "exited with code 3 while handling tools/call 'crash'" in message
    assert "crash() called" in message


def test_the_call_after_a_crash_runs_on_a_restarted_server():
    connection = echo()
    before = server_pid(connection)
    with pytest.raises(DownstreamError):
        client.call_tool(connection, "crash", {})
    after = server_pid(connection)
    assert after != before
    assert client.call_tool(connection, "add", {"a": 1, "b": 1}).structured_content == {"sum": 2}


def test_a_server_killed_while_idle_is_restarted_without_failing_the_next_call():
    connection = echo()
    before = server_pid(connection)
    os.kill(before, signal.SIGKILL)
    # The pool notices the server hung up and retires its session on its own.
    wait_until(lambda: client.pool_size() == 0)
    assert server_pid(connection) != before


def test_a_slow_call_times_out_without_holding_up_calls_to_another_server():
    slow, quick = echo("slow", ROLE="slow"), echo("quick", ROLE="quick")
    server_pid(slow), server_pid(quick)
    outcome: dict[str, object] = {}

    def call_slow() -> None:
        started = time.monotonic()
        try:
            client.call_tool(slow, "sleep", {"seconds": 30}, timeout=1.5)
        except DownstreamTimeout as exc:
            outcome["error"] = str(exc)
        outcome["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=call_slow)
    thread.start()
    time.sleep(0.3)
    started = time.monotonic()
    assert client.call_tool(quick, "echo", {"value": "still here"}).content[0].text
    quick_seconds = time.monotonic() - started
    assert thread.is_alive(), "the slow call should still be waiting"
    thread.join(10)

    assert quick_seconds < 0.5
    assert "'slow'" in outcome["error"]
    assert "did not answer tools/call 'sleep' within 1.5 s" in outcome["error"]
    assert 1.4 < outcome["seconds"] < 3
    # The session survives a timed-out call.
    assert client.call_tool(slow, "echo", {"value": "ok"}).content[0].text == "ok"


def test_twenty_threads_calling_one_server_at_once_each_get_their_own_answer():
    connection = echo()
    with ThreadPoolExecutor(max_workers=20) as executor:
        sums = list(
            executor.map(
                lambda n: client.call_tool(
                    connection, "add", {"a": n, "b": 1000}
                ).structured_content["sum"],
                range(20),
            )
        )
    assert sums == [n + 1000 for n in range(20)]
    assert client.pool_size() == 1


def test_list_tools_follows_the_pagination_cursors():
    tools = client.list_tools(echo(ECHO_SERVER_PAGE_SIZE="4"))
    assert [tool.name for tool in tools] == ["echo", "add", "sleep", "pid", "crash", "fail"]


def test_a_missing_command_is_named_with_what_to_do():
    connection = Connection(name="ghost", transport="stdio", command="no-such-mcp-server")
    with pytest.raises(DownstreamError) as failure:
        client.list_tools(connection)
    assert "'ghost'" in str(failure.value)
    assert "command 'no-such-mcp-server' was not found on PATH" in str(failure.value)
    assert "give its full path" in str(failure.value)


def test_a_server_that_exits_at_start_reports_its_exit_code_and_stderr():
    connection = Connection(
        name="broken",
        transport="stdio",
        command=sys.executable,
        args=("-c", "import sys; sys.stderr.write('missing API_TOKEN\\n'); sys.exit(4)"),
    )
    with pytest.raises(DownstreamError) as failure:
        client.list_tools(connection)
    message = str(failure.value)
    assert "'broken'" in message
    assert "exited with code 4 while starting" in message
    assert "missing API_TOKEN" in message
    assert client.pool_size() == 0


def test_a_server_that_never_answers_times_out_at_start():
    connection = Connection(
        name="mute",
        transport="stdio",
        command=sys.executable,
        args=("-c", "import time; time.sleep(60)"),
        timeout_seconds=1.0,
    )
    with pytest.raises(DownstreamTimeout) as failure:
        client.list_tools(connection, timeout=10)
    assert "did not finish starting within 1 s" in str(failure.value)


@pytest.mark.parametrize(("transport", "path"), [("streamable_http", "/mcp"), ("sse", "/sse")])
def test_a_refused_url_says_the_connection_was_refused(transport, path):
    url = f"http://127.0.0.1:{free_port()}{path}"
    connection = Connection(name="offline", transport=transport, url=url)
    with pytest.raises(DownstreamError) as failure:
        client.list_tools(connection)
    message = str(failure.value)
    assert f"'offline' ({transport} {url}) cannot be reached while starting" in message
    assert "Connection refused" in message
    assert "Check that the server is running" in message


def test_a_session_left_unused_is_closed_and_its_server_stopped(monkeypatch):
    monkeypatch.setattr(mcp_pool, "IDLE_SECONDS", 0.5)
    client.close_all()  # a new pool, checking idleness every 0.125 s
    connection = echo()
    pid = server_pid(connection)
    wait_until(lambda: client.pool_size() == 0, seconds=5)
    wait_until(lambda: not is_running(pid), seconds=5)
    assert server_pid(connection) != pid


def test_a_forked_child_starts_its_own_servers_and_leaves_the_parents_alone():
    connection = echo()
    parents = server_pid(connection)
    child = os.fork()
    if child == 0:  # the child: report through the exit status only
        status = 1
        try:
            if client.pool_size() == 0 and server_pid(connection) != parents:
                status = 0
            client.close_all()
        finally:
            os._exit(status)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert server_pid(connection) == parents


def test_close_all_stops_every_server_process():
    connections = [echo("one", ROLE="one"), echo("two", ROLE="two")]
    pids = [server_pid(connection) for connection in connections]
    assert client.pool_size() == 2
    client.close_all()
    assert client.pool_size() == 0
    wait_until(lambda: not any(is_running(pid) for pid in pids), seconds=5)


def test_the_pool_works_again_after_close_all():
    connection = echo()
    before = server_pid(connection)
    client.close_all()
    assert server_pid(connection) != before


def test_calls_over_streamable_http_share_one_session_and_send_the_headers():
    with echo_http_server("--require-token", "s3cret") as url:
        connection = Connection(
            name="web",
            transport="streamable_http",
            url=url,
            headers=(("Authorization", "Bearer s3cret"),),
        )
        assert client.call_tool(connection, "add", {"a": 1, "b": 2}).structured_content == {
            "sum": 3
        }
        assert server_pid(connection) == server_pid(connection)
        assert client.pool_size() == 1


def test_calls_over_sse_work_through_the_pool():
    with echo_http_server("--sse") as url:
        connection = Connection(name="old-web", transport="sse", url=url)
        assert client.call_tool(connection, "add", {"a": 2, "b": 2}).structured_content == {
            "sum": 4
        }
        assert [tool.name for tool in client.list_tools(connection)][:2] == ["echo", "add"]


@pytest.mark.parametrize(
    ("transport", "server_args"), [("streamable_http", ()), ("sse", ("--sse",))]
)
def test_a_rejected_token_is_reported_as_http_401_with_what_to_check(transport, server_args):
    with echo_http_server("--require-token", "s3cret", *server_args) as url:
        connection = Connection(
            name="web", transport=transport, url=url, headers=(("Authorization", "x"),)
        )
        with pytest.raises(DownstreamError) as failure:
            client.list_tools(connection)
    assert "answered HTTP 401 Unauthorized while starting" in str(failure.value)
    assert "check the credentials in the provider's headers" in str(failure.value)


def test_the_connection_repr_leaves_out_env_and_headers():
    connection = Connection(
        name="s",
        transport="streamable_http",
        url="http://127.0.0.1/mcp",
        env=(("TOKEN", "env-secret"),),
        headers=(("Authorization", "header-secret"),),
    )
    assert "secret" not in repr(connection)


def test_an_unknown_transport_is_refused_with_the_valid_ones():
    with pytest.raises(ValueError, match="'websocket' is not one of stdio, streamable_http, sse"):
        Connection(name="w", transport="websocket", url="ws://127.0.0.1")


# Answers over MCP_CLIENT_MAX_RESULT_BYTES, refused while they arrive
# (nodespecs/downstream/limits.py).


def test_the_stdio_line_splitter_is_linear_in_a_long_line_and_refuses_it_at_the_limit():
    splitter = LineSplitter(limit=60_000_000)
    piece = b"x" * 4096
    started = time.monotonic()
    for _ in range(50_000_000 // len(piece)):
        assert splitter.feed(piece) == []
    [line] = splitter.feed(b"\n")
    # The SDK's reader joins every chunk to the line as text: ~12,000 copies of up to 50 MB.
    assert time.monotonic() - started < 5
    assert len(line) == 50_000_000 // len(piece) * len(piece)

    splitter = LineSplitter(limit=10)
    assert splitter.feed(b'{"a": 1}\n{"b"') == [bytearray(b'{"a": 1}')]
    assert splitter.feed(b": 222}") == []  # 10 bytes pending: at the limit, not over it
    with pytest.raises(MessageTooLarge):
        splitter.feed(b"3")  # the 11th byte, before any newline
    with pytest.raises(MessageTooLarge):
        LineSplitter(limit=10).feed(b"12345678901\n")  # a whole line over it, in one chunk


async def _chunks(pieces: list[bytes], sent: list[int]):
    for piece in pieces:
        sent.append(len(piece))
        yield piece


@pytest.mark.parametrize(
    ("content_type", "pieces", "refused"),
    [
        # A body counts as a whole, however it is cut.
        ("application/json", [b"x" * 60] * 2, False),
        ("application/json", [b"x" * 60] * 3, True),
        # An event stream counts event by event, whatever line ends it uses.
        ("text/event-stream", [b"data: " + b"x" * 80 + b"\n\n"] * 5, False),
        ("text/event-stream", [b"data: " + b"x" * 80 + b"\r\n\r\n"] * 5, False),
        ("text/event-stream", [b"data: " + b"x" * 80 + b"\r\r"] * 5, False),
        ("text/event-stream", [b"data: " + b"x" * 80 + b"\n\r\n"] * 5, False),
        # An empty line cut between two chunks still ends its event.
        ("text/event-stream", [b"data: " + b"x" * 80 + b"\r", b"\n\r\ndata: " + b"y" * 80], False),
        # A CRLF is one line end: lines without an empty one between them are one event.
        ("text/event-stream", [b"data: " + b"x" * 40 + b"\r\n"] * 4, True),
        ("text/event-stream", [b"data: " + b"x" * 40 + b"\r\n"] * 2 + [b"\r\n"] * 20, False),
    ],
)
def test_an_http_answer_is_counted_as_it_arrives(content_type, pieces, refused):
    sent: list[int] = []
    response = httpx2.Response(
        200, headers={"content-type": content_type}, content=_chunks(pieces, sent)
    )
    noted: list[bool] = []
    count_as_it_arrives(response, 150, lambda: noted.append(True))
    if not refused:
        assert asyncio.run(response.aread()) == b"".join(pieces)
        assert noted == []
        return
    error = BodyTooLarge if content_type == "application/json" else EventTooLarge
    with pytest.raises(error, match=re.escape(TOO_LARGE_MARK)):
        asyncio.run(response.aread())
    assert noted == [True]
    assert len(sent) == len(pieces), "refused at the piece that passed the limit"


def test_a_slow_http_answer_is_refused_as_soon_as_it_passes_the_limit():
    sent: list[int] = []
    body = _chunks([b"x" * 100] * 1000, sent)
    response = httpx2.Response(200, headers={"content-type": "application/json"}, content=body)
    count_as_it_arrives(response, 1000, lambda: None)
    with pytest.raises(BodyTooLarge):
        asyncio.run(response.aread())
    assert len(sent) == 11


def test_the_sdk_still_caps_a_legacy_sse_event_where_we_think():
    """The SSE transport cannot carry an event over the SDK's cap; the error message names it
    (`SDK_SSE_EVENT_BYTES`), so it must be the SDK's."""
    default = inspect.signature(sse_within_origin).parameters["max_event_size"].default
    assert default == SDK_SSE_EVENT_BYTES


def test_a_12_mb_stdio_answer_fails_at_once_as_too_large_and_the_server_is_replaced():
    connection = echo(ECHO_SERVER_FAULTS="1")
    before = server_pid(connection)
    started = time.monotonic()
    with pytest.raises(DownstreamError) as failure:
        client.call_tool(connection, "huge", {"megabytes": 12}, timeout=30)
    seconds = time.monotonic() - started
    message = str(failure.value)
    assert seconds < 3, f"refused after {seconds:.1f} s"
    assert not isinstance(failure.value, DownstreamTimeout)
    assert "MCP server 'echo'" in message
    assert "sent an answer over the 10,000,000 bytes that MCP_CLIENT_MAX_RESULT_BYTES" in message
    assert "while handling tools/call 'huge'" in message
    assert "raise MCP_CLIENT_MAX_RESULT_BYTES" in message
    # The connection was given up: the next call gets a new server, and the old one is gone.
    assert server_pid(connection) != before
    wait_until(lambda: not is_running(before), seconds=10)


@pytest.mark.parametrize(
    ("transport", "server_args", "arguments"),
    [
        ("stdio", (), {}),
        ("streamable_http", (), {}),
        ("streamable_http", (), {"sse": True}),
    ],
)
def test_a_slow_answer_over_the_limit_fails_as_soon_as_it_passes_it(
    settings, monkeypatch, transport, server_args, arguments
):
    """3 MB at 1 MB/s with the limit at 1 MB: refused after about 1 s, not when the answer
    ends (3 s) or at the call's timeout."""
    settings.MCP_CLIENT_MAX_RESULT_BYTES = 1_000_000
    monkeypatch.setenv("ECHO_SERVER_FAULTS", "1")
    with contextlib.ExitStack() as stack:
        if transport == "stdio":
            connection = echo(ECHO_SERVER_FAULTS="1")
        else:
            url = stack.enter_context(echo_http_server(*server_args))
            connection = Connection(name="web", transport=transport, url=url)
        server_pid(connection)
        started = time.monotonic()
        with pytest.raises(DownstreamError) as failure:
            client.call_tool(
                connection, "trickle", {"megabytes": 3, "per_second": 1, **arguments}, timeout=20
            )
        seconds = time.monotonic() - started
        assert 0.9 < seconds < 2.5, f"refused after {seconds:.1f} s"
        assert "sent an answer over the 1,000,000 bytes that MCP_CLIENT_MAX_RESULT_BYTES" in str(
            failure.value
        )
        assert client.call_tool(connection, "add", {"a": 1, "b": 2}).structured_content


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (
            10_000_000,
            "sent an answer over the 1,048,576 bytes that the MCP SDK allows in one event of the "
            "legacy SSE transport while handling tools/call 'huge' (MCP_CLIENT_MAX_RESULT_BYTES "
            "allows 10,000,000); ask the tool for less (a page, a filter), or reach the server "
            "over Streamable HTTP.",
        ),
        (
            500_000,
            "sent an answer over the 500,000 bytes that MCP_CLIENT_MAX_RESULT_BYTES allows while "
            "handling tools/call 'huge'",
        ),
    ],
)
def test_an_answer_over_the_limit_of_legacy_sse_names_the_limit_that_applies(
    settings, monkeypatch, limit, expected
):
    settings.MCP_CLIENT_MAX_RESULT_BYTES = limit
    monkeypatch.setenv("ECHO_SERVER_FAULTS", "1")
    with echo_http_server("--sse") as url:
        connection = Connection(name="old-web", transport="sse", url=url)
        with pytest.raises(DownstreamError) as failure:
            client.call_tool(connection, "huge", {"megabytes": 2}, timeout=10)
        assert expected in str(failure.value)
        assert client.call_tool(connection, "add", {"a": 1, "b": 2}).structured_content
