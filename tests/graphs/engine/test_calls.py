"""mcp nodes: what a call's result becomes, tool errors, timeouts, retries and cancellation."""

from __future__ import annotations

import threading
import time

import pytest
from mcp.types import AudioContent, CallToolResult, ImageContent, ResourceLink, TextContent

from graphs.engine import CancelToken, GraphRunError, RunCancelled
from tests.graphs.engine.helpers import Calls, Recorder, chain, run, text_result, transform


def call_node(**extra):
    return {"id": "call", "type": "mcp", "server": "srv", "tool": "fetch", "args": {}, **extra}


def output_of(result: CallToolResult):
    return run(chain(call_node()), call_tool=Calls(lambda arguments: result))


IMAGE = ImageContent(type="image", data="aW1n", mime_type="image/png")
AUDIO = AudioContent(type="audio", data="c25k", mime_type="audio/wav")


@pytest.mark.parametrize(
    ("result", "output"),
    [
        (
            CallToolResult(
                content=[TextContent(type="text", text="{}")], structured_content={"n": 1}
            ),
            {"n": 1},
        ),
        (text_result('{"files": ["a"]}'), {"files": ["a"]}),
        (text_result("42"), 42),
        (text_result("plain words"), "plain words"),
        (text_result("NaN"), "NaN"),  # not JSON, though Python's parser takes it
        (CallToolResult(content=[IMAGE, TextContent(type="text", text="[1]")]), [1]),
        (
            CallToolResult(content=[IMAGE, AUDIO]),
            {
                "text": "",
                "images": [{"data": "aW1n", "mime_type": "image/png"}],
                "audio": [{"data": "c25k", "mime_type": "audio/wav"}],
            },
        ),
        (
            CallToolResult(content=[ResourceLink(type="resource_link", uri="file:///a", name="a")]),
            {"type": "resource_link", "uri": "file:///a", "name": "a"},
        ),
        (CallToolResult(content=[]), None),
    ],
)
def test_a_call_result_becomes_the_node_output(result, output):
    assert output_of(result) == output


def test_an_error_result_fails_the_node_with_the_tool_text_and_is_not_retried():
    calls = Calls(lambda arguments: text_result("no such file: /x", is_error=True))

    with pytest.raises(GraphRunError) as caught:
        run(chain(call_node(retry={"count": 3, "backoff": 0})), call_tool=calls)

    assert (caught.value.kind, caught.value.node_id) == ("tool", "call")
    assert str(caught.value) == (
        "node 'call': tool 'fetch' on server 'srv' returned an error: no such file: /x"
    )
    assert len(calls.calls) == 1


def test_the_node_timeout_is_given_to_the_call():
    calls = Calls()

    run(chain(call_node(timeout=2.5)), call_tool=calls)

    assert calls.calls[0][3] == 2.5


class ClockToken(CancelToken):
    """A cancel token whose waits return at once and are remembered: a fake clock."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        return self.cancelled


def failing(times: int, error: Exception):
    """An answer that raises `error` on the first `times` calls, then succeeds."""
    count = iter(range(10**6))
    return lambda arguments: error if next(count) < times else text_result('"done"')


def test_a_call_that_raises_is_retried_with_exponential_backoff():
    clock, recorder = ClockToken(), Recorder()
    calls = Calls(failing(3, TimeoutError("timed out after 2.5 s")))

    result = run(
        chain(call_node(retry={"count": 3, "backoff": 0.5})),
        call_tool=calls,
        cancel=clock,
        observer=recorder,
    )

    assert result == "done"
    assert len(calls.calls) == 4
    assert clock.waits == [0.5, 1.0, 2.0]
    [call_record] = [r for r in recorder.records("node_finished") if r.node_id == "call"]
    assert call_record.attempts == 4


def test_a_call_that_keeps_failing_fails_the_node_after_its_retries():
    calls = Calls(failing(99, ConnectionError("server closed the connection")))

    with pytest.raises(GraphRunError) as caught:
        run(chain(call_node(retry={"count": 2, "backoff": 0.001})), call_tool=calls)

    assert (caught.value.kind, caught.value.node_id) == ("tool", "call")
    assert str(caught.value).startswith(
        "node 'call': calling tool 'fetch' on server 'srv' failed 3 time(s); last error: "
        "ConnectionError: server closed the connection; check that the server is running"
    )
    assert isinstance(caught.value.__cause__, ConnectionError)
    assert len(calls.calls) == 3


def test_without_retry_a_raising_call_fails_at_once():
    calls = Calls(failing(1, TimeoutError("slow")))

    with pytest.raises(GraphRunError, match="failed 1 time"):
        run(chain(call_node()), call_tool=calls)


def test_a_run_error_raised_by_call_tool_is_passed_through():
    stop = RunCancelled("the client went away", "call")

    with pytest.raises(RunCancelled) as caught:
        run(chain(call_node(retry={"count": 5})), call_tool=Calls(lambda arguments: stop))

    assert caught.value is stop


def test_cancelling_stops_the_run_before_its_next_node():
    token, recorder = CancelToken(), Recorder()

    def cancel_during_call(arguments):
        token.cancel("user pressed stop")
        return text_result("{}")

    with pytest.raises(RunCancelled) as caught:
        run(
            chain(call_node(), transform("after", "1")),
            call_tool=Calls(cancel_during_call),
            cancel=token,
            observer=recorder,
        )

    assert (caught.value.kind, caught.value.node_id) == ("cancelled", "after")
    assert str(caught.value) == "run cancelled before node 'after' ran: user pressed stop"
    assert [r.node_id for r in recorder.records("node_finished")] == ["entry", "call"]
    assert recorder.events[-1] == ("run_finished", (None, caught.value))


def test_a_run_cancelled_before_it_starts_runs_no_node():
    token = CancelToken()
    token.cancel()

    with pytest.raises(RunCancelled, match="before node 'entry' ran: no reason given"):
        run(chain(), cancel=token)


def test_cancelling_during_a_backoff_wait_ends_the_wait_at_once():
    token = CancelToken()
    calls = Calls(failing(99, ConnectionError("down")))
    threading.Timer(0.02, token.cancel, args=("shutting down",)).start()
    started = time.perf_counter()

    with pytest.raises(RunCancelled) as caught:
        run(chain(call_node(retry={"count": 3, "backoff": 30})), call_tool=calls, cancel=token)

    assert time.perf_counter() - started < 1
    assert str(caught.value) == (
        "run cancelled while node 'call' waited to retry its call: shutting down"
    )
    assert len(calls.calls) == 1


def test_a_cancel_token_keeps_the_first_reason_and_wakes_waiters():
    token = CancelToken()
    assert (token.cancelled, token.reason, token.wait(0)) == (False, "", False)

    token.cancel("first")
    token.cancel("second")

    assert (token.cancelled, token.reason, token.wait(10)) == (True, "first", True)
