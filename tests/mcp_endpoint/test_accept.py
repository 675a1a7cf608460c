"""Reading the Accept header: what a request takes, whatever the value's length."""

from __future__ import annotations

import pytest

from mcp_endpoint.transports import http_messages
from mcp_endpoint.transports.http_messages import JSON, SSE, accepts


@pytest.mark.parametrize(
    ("accept", "json", "sse"),
    [
        ("", True, True),
        ("application/json", True, False),
        ("Application/JSON; charset=utf-8, text/event-stream;q=0.5", True, True),
        ("application/*", True, False),
        ("*/*", True, True),
        ("text/html", False, False),
    ],
)
def test_what_a_request_takes(accept, json, sse):
    headers = {"accept": accept}
    assert accepts(headers, JSON) is json
    assert accepts(headers, SSE) is sse


def test_a_long_value_is_read_the_same_and_never_kept():
    padding = ", ".join(f"x-{index}/y" for index in range(100))
    accept = f"{padding}, text/event-stream"
    assert len(accept) > http_messages.KEPT_ACCEPT_CHARACTERS
    before = http_messages._kept_accepted_types.cache_info().currsize

    assert accepts({"accept": accept}, SSE)
    assert not accepts({"accept": accept}, JSON)
    assert http_messages._kept_accepted_types.cache_info().currsize == before
